"""Converters of ONNX's gathering and value-dependent selection operators:
GatherND, ReverseSequence, CenterCropPad, and NonZero, Compress and Unique.

graphc's graphs have static shapes, so the operators whose output shape depends
on values (NonZero, Compress's condition, Unique) need that value while
importing: a constant is computed at once; a value computed from a graph input
makes the model compile for each value of that input
(:class:`~graphc.onnx.loaded.OnnxGraph`); any other is refused with an
``OnnxUnsupported`` error saying so.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["GatherND"]
>>> node = NodeContext.for_test("GatherND", []).node
>>> data = np.arange(4).reshape(2, 2)
>>> spec.fn(NodeContext(node, 13, [data, np.array([[0, 1], [1, 0]])], {}, spec))
array([1, 2])
"""
from __future__ import annotations

import numpy as np

from ..registry import converter
from .shape import _axis, _ints


def _along(axis: int, size: int, rank: int) -> np.ndarray:
    """``arange(size)`` shaped to vary along ``axis`` of a rank-``rank`` index."""
    return np.arange(size).reshape((1,) * axis + (size,) + (1,) * (rank - axis - 1))


def _wrapped(ns, index, size):
    """Negative indices counted from the end (ONNX allows them; a static check
    already refused constants out of range)."""
    if isinstance(index, np.ndarray):
        return np.where(index < 0, index + size, index)
    return ns.where(ns.less(index, 0), ns.add(index, size), index)


@converter("GatherND", attrs={"batch_dims": 0})
def gather_nd(ctx):
    data, indices = ctx.input(0), ctx.input(1)
    dims, index_shape = ctx.shape(0), ctx.shape(1)
    b = int(ctx.attr("batch_dims"))
    if indices.dtype.kind not in "iu":
        raise ctx.invalid(f"indices must be integers, got {indices.dtype}")
    if not index_shape:
        raise ctx.invalid("indices must have rank 1 or more")
    k = index_shape[-1]
    if not 0 <= b < min(len(dims), len(index_shape)) or b + k > len(dims):
        raise ctx.invalid(f"batch_dims {b} and an index depth {k} do not fit data of shape "
                          f"{dims} and indices of shape {index_shape}")
    if dims[:b] != index_shape[:b]:
        raise ctx.invalid(f"the batch dimensions of data {dims[:b]} and indices "
                          f"{index_shape[:b]} differ")
    if isinstance(indices, np.ndarray) and indices.size:
        bounds = np.array(dims[b:b + k])
        if ((indices < -bounds) | (indices >= bounds)).any():
            raise ctx.invalid(f"indices must lie within the data's dimensions {dims[b:b + k]}")
    ns = ctx.ns
    rank = len(index_shape) - 1  # of each index tuple's position
    key = [_along(i, dims[i], rank) for i in range(b)]
    for i in range(k):
        component = ns.getitem(indices, (slice(None),) * rank + (i,))
        key.append(_wrapped(ns, component, dims[b + i]))
    if not key:
        return ns.broadcast_to(data, index_shape[:-1] + dims)
    return ns.getitem(data, tuple(key))


@converter("ReverseSequence", attrs={"batch_axis": 1, "time_axis": 0})
def reverse_sequence(ctx):
    x, dims = ctx.input(0), ctx.shape(0)
    rank = len(dims)
    batch_axis, time_axis = int(ctx.attr("batch_axis")), int(ctx.attr("time_axis"))
    if rank < 2 or {batch_axis, time_axis} not in ({0, 1},):
        raise ctx.invalid(f"batch_axis and time_axis must be 0 and 1 (in either order) of an "
                          f"input of rank 2 or more, got {batch_axis}, {time_axis}")
    lengths = ctx.input(1)
    if tuple(np.shape(lengths)) != (dims[batch_axis],):
        raise ctx.invalid(f"sequence_lens must have shape ({dims[batch_axis]},), got "
                          f"{tuple(np.shape(lengths))}")
    if isinstance(lengths, np.ndarray) and ((lengths < 0) | (lengths > dims[time_axis])).any():
        raise ctx.invalid(f"sequence_lens {lengths.tolist()} must lie in "
                          f"[0, {dims[time_axis]}]")
    ns = ctx.ns
    time = _along(time_axis, dims[time_axis], rank)
    length = ns.reshape(ns.astype(lengths, np.int64),
                        tuple(dims[batch_axis] if i == batch_axis else 1 for i in range(rank)))
    # position t of a sequence of length L reads L-1-t; those past L stay in place
    source = ns.where(ns.less(time, length), ns.subtract(ns.subtract(length, 1), time), time)
    key = [source if i == time_axis else _along(i, dims[i], rank) for i in range(rank)]
    return ns.getitem(x, tuple(key))


@converter("CenterCropPad", attrs={"axes": None})
def center_crop_pad(ctx):
    x, dims = ctx.input(0), ctx.shape(0)
    rank = len(dims)
    axes = ctx.attr("axes")
    axes = list(range(rank)) if axes is None else [_axis(ctx, a, rank) for a in axes]
    shape = _ints(ctx, 1)
    if len(shape) != len(axes) or any(s < 0 for s in shape):
        raise ctx.invalid(f"shape {shape} must hold one non-negative size per axis {axes}")
    crop, widths = [slice(None)] * rank, [(0, 0)] * rank
    for a, target in zip(axes, shape):
        diff = abs(target - dims[a])
        begin = diff // 2
        if target < dims[a]:
            crop[a] = slice(begin, begin + target)
        elif target > dims[a]:
            widths[a] = (begin, diff - begin)
    ns = ctx.ns
    y = ns.getitem(x, tuple(crop))
    return ns.pad(y, widths) if any(w != (0, 0) for w in widths) else y


# -- value-dependent shapes -----------------------------------------------------------------
@converter("NonZero")
def non_zero(ctx):
    value = ctx.constant(0)
    ctx.reserve_import_only((value.ndim, int(np.count_nonzero(value))), np.int64,
                            "NonZero's indices")
    return np.array(np.nonzero(value), dtype=np.int64).reshape(value.ndim, -1)


@converter("Compress", attrs={"axis": None})
def compress(ctx):
    x, dims = ctx.input(0), ctx.shape(0)
    condition = ctx.constant(1)
    if condition.ndim != 1:
        raise ctx.invalid(f"condition must be 1-D, got shape {condition.shape}")
    axis = ctx.attr("axis")
    ns = ctx.ns
    if axis is None:
        x, size, axis = ns.reshape(x, (-1,)), int(np.prod(dims)), 0
    else:
        axis = _axis(ctx, axis, len(dims))
        size = dims[axis]
    if len(condition) > size:
        raise ctx.invalid(f"condition has {len(condition)} entries, more than the "
                          f"{size} of the axis it selects along")
    chosen = np.flatnonzero(condition.astype(bool))
    return ns.take(x, chosen.astype(np.int64), axis=axis)


@converter("Unique", attrs={"axis": None, "sorted": 1})
def unique(ctx):
    value = ctx.constant(0)
    axis = ctx.attr("axis")
    if axis is not None:
        axis = _axis(ctx, axis, value.ndim)
    ctx.reserve_import_only((4, value.size), np.int64, "Unique's outputs")
    values, first, inverse, counts = np.unique(value, return_index=True, return_inverse=True,
                                               return_counts=True, axis=axis)
    if not ctx.attr("sorted"):  # in the order each value first occurs
        order = np.argsort(first, kind="stable")
        values = np.take(values, order, axis=0 if axis is None else axis)
        first, counts = first[order], counts[order]
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        inverse = rank[np.reshape(inverse, -1)]
    as_index = [np.asarray(v, np.int64).reshape(-1) for v in (first, inverse, counts)]
    return (values, *as_index)

