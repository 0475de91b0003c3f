"""Converters of ONNX's pieces of sequence models around attention:
``RotaryEmbedding`` (opset 23, rotary position embedding), ``TensorScatter``
(opset 24, a key/value cache written at per-batch positions) and
``CausalConvWithState`` (opset 27, the stateful causal depthwise 1-D convolution
of Mamba and Gated DeltaNet).

Each is composed of graphc's slices, ``take``, ``where`` and arithmetic, so the
graph gets gradients, fusion and memory planning:

- RotaryEmbedding rotates pairs of features (halves, or even/odd when
  ``interleaved``) by the cached cosines and sines, gathered by ``position_ids``.
- TensorScatter writes no element twice, so rather than a scatter it *gathers*:
  cache position ``p`` of batch ``b`` takes update row ``p - write_indices[b]``
  (modulo the cache's length in ``circular`` mode) where that row exists, else
  keeps the past value; without ``write_indices`` it is one concatenation.
- CausalConvWithState is a sum of ``k`` shifted slices of the padded sequence
  times the kernel's taps (depthwise kernels are short: 2 to 4 taps), accumulated
  in float32 for float16 inputs as the fused SiLU is.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["CausalConvWithState"]
>>> x, w = np.ones((1, 2, 3), np.float32), np.ones((2, 1, 2), np.float32)
>>> ctx = NodeContext(NodeContext.for_test("CausalConvWithState", []).node, 27, [x, w], {}, spec)
>>> [a.tolist() for a in spec.fn(ctx)]
[[[[1.0, 2.0, 2.0], [1.0, 2.0, 2.0]]], [[[1.0], [1.0]]]]
"""
from __future__ import annotations

import numpy as np

from ..registry import converter


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


# -- RotaryEmbedding --------------------------------------------------------------------------
def _rotary_caches(ctx, head_size):
    """The cosines and sines per (batch, position): ``(batch, sequence, rotary_dim / 2)``,
    gathered by ``position_ids`` when given, and the rotary dimension."""
    ns = ctx.ns
    rotary_dim = int(ctx.attr("rotary_embedding_dim")) or head_size
    if rotary_dim % 2 or not 0 < rotary_dim <= head_size:
        raise ctx.invalid(f"rotary_embedding_dim must be even and at most the head size "
                          f"{head_size}, got {rotary_dim}")
    cos, sin, positions = ctx.input(1), ctx.input(2), ctx.input(3, optional=True)
    if ctx.shape(1) != ctx.shape(2):
        raise ctx.invalid(f"cos_cache {ctx.shape(1)} and sin_cache {ctx.shape(2)} must have "
                          "the same shape")
    want_rank = 2 if positions is not None else 3
    if len(ctx.shape(1)) != want_rank or ctx.shape(1)[-1] != rotary_dim // 2:
        raise ctx.invalid(f"the caches must be {want_rank}-D ending in rotary_dim / 2 = "
                          f"{rotary_dim // 2} ({'with' if positions is not None else 'without'}"
                          f" position_ids), got {ctx.shape(1)}")
    if positions is not None:
        if ctx.dtype(3).kind not in "iu" or len(ctx.shape(3)) != 2:
            raise ctx.invalid(f"position_ids must be 2-D integers, got {ctx.shape(3)} "
                              f"{ctx.dtype(3)}")
        cos, sin = ns.take(cos, positions, axis=0), ns.take(sin, positions, axis=0)
    return cos, sin, rotary_dim


def _rotated(ns, x, cos, sin, interleaved):
    """``x`` (features last) rotated pairwise by ``cos``/``sin`` (broadcasting)."""
    half = np.shape(x)[-1] // 2
    rank = len(np.shape(x))
    if interleaved:
        first = ns.getitem(x, (Ellipsis, slice(0, None, 2)))
        second = ns.getitem(x, (Ellipsis, slice(1, None, 2)))
    else:
        first = ns.getitem(x, (Ellipsis, slice(0, half)))
        second = ns.getitem(x, (Ellipsis, slice(half, None)))
    real = ns.subtract(ns.multiply(cos, first), ns.multiply(sin, second))
    imaginary = ns.add(ns.multiply(sin, first), ns.multiply(cos, second))
    if interleaved:
        return ns.reshape(ns.stack([real, imaginary], axis=rank), np.shape(x))
    return ns.concatenate([real, imaginary], axis=rank - 1)


@converter("RotaryEmbedding", attrs={"interleaved": 0, "num_heads": 0,
                                     "rotary_embedding_dim": 0}, min_opset=23)
def rotary_embedding(ctx):
    ns, x, shape = ctx.ns, ctx.input(0), ctx.shape(0)
    if len(shape) == 4:  # (batch, heads, sequence, head_size)
        batch, heads, length, head_size = shape
        work = x
    elif len(shape) == 3:  # (batch, sequence, hidden): heads from the attribute
        batch, length, hidden = shape
        heads = int(ctx.attr("num_heads"))
        if heads <= 0 or hidden % heads:
            raise ctx.invalid(f"a 3-D input {shape} needs num_heads, a positive divisor of "
                              f"its hidden size {hidden}, got {heads}")
        head_size = hidden // heads
        work = ns.reshape(x, (batch, length, heads, head_size))
    else:
        raise ctx.invalid(f"input must be 3-D or 4-D, got shape {shape}")
    cos, sin, rotary_dim = _rotary_caches(ctx, head_size)
    if tuple(np.shape(cos)[:2]) != (batch, length):
        raise ctx.invalid(f"the caches (gathered by position_ids) have shape {np.shape(cos)}; "
                          f"expected ({batch}, {length}, {rotary_dim // 2})")
    # the caches broadcast over the heads' axis of the working layout
    heads_axis = 1 if len(shape) == 4 else 2
    cos, sin = ns.expand_dims(cos, heads_axis), ns.expand_dims(sin, heads_axis)
    turned = ns.getitem(work, (Ellipsis, slice(0, rotary_dim)))
    result = _rotated(ns, turned, cos, sin, bool(ctx.attr("interleaved")))
    if rotary_dim < head_size:
        kept = ns.getitem(work, (Ellipsis, slice(rotary_dim, None)))
        result = ns.concatenate([result, kept], axis=3)
    if result.dtype != x.dtype:
        result = ns.astype(result, x.dtype)
    return ns.reshape(result, shape)


# -- TensorScatter ----------------------------------------------------------------------------
_SCATTER_MODES = ("linear", "circular")


@converter("TensorScatter", attrs={"mode": "linear", "axis": -2}, min_opset=24)
def tensor_scatter(ctx):
    ns, cache, update = ctx.ns, ctx.input(0), ctx.input(1)
    mode = _text(ctx.attr("mode"))
    if mode not in _SCATTER_MODES:
        raise ctx.invalid(f"mode must be one of {list(_SCATTER_MODES)}, got {mode!r}")
    dims, rows = ctx.shape(0), ctx.shape(1)
    axis = int(ctx.attr("axis"))
    if not -len(dims) <= axis < len(dims) or axis % max(len(dims), 1) == 0:
        raise ctx.invalid(f"axis must name a non-batch axis of the cache's {len(dims)} axes, "
                          f"got {axis}")
    axis %= len(dims)
    if (len(rows) != len(dims) or rows[axis] > dims[axis]
            or any(a != b for i, (a, b) in enumerate(zip(dims, rows)) if i != axis)):
        raise ctx.invalid(f"update {rows} must match past_cache {dims} except along axis "
                          f"{axis}, where it may be at most {dims[axis]} long")
    if ctx.dtype(1) != ctx.dtype(0):
        raise ctx.invalid(f"update ({ctx.dtype(1)}) and past_cache ({ctx.dtype(0)}) must "
                          "have one element type")
    indices = ctx.input(2, optional=True)
    capacity, count = dims[axis], rows[axis]
    if indices is None:  # every batch writes at 0: the update, then the rest of the cache
        rest = ns.getitem(cache, (slice(None),) * axis + (slice(count, None),))
        return ns.concatenate([update, rest], axis=axis)
    if ctx.shape(2) != (dims[0],) or ctx.dtype(2).kind not in "iu":
        raise ctx.invalid(f"write_indices must be {dims[0]} integers (one per batch), got "
                          f"{ctx.shape(2)} {ctx.dtype(2)}")
    if isinstance(indices, np.ndarray) and mode == "linear" and (
            (indices < 0).any() or (indices + count > capacity).any()):
        raise ctx.invalid(f"linear mode needs 0 <= write_indices and write_indices + "
                          f"{count} <= {capacity}, got {indices.tolist()}")
    # row[b, p]: the update row that cache position p of batch b takes
    positions = np.arange(capacity, dtype=np.int64).reshape(1, capacity)
    row = ns.subtract(positions, ns.reshape(ns.astype(indices, np.int64), (dims[0], 1)))
    if mode == "circular":
        row = ns.mod(row, capacity)
    written = ns.logical_and(ns.greater_equal(row, 0), ns.less(row, count))
    index_shape = [1] * len(dims)
    index_shape[0], index_shape[axis] = dims[0], capacity
    row = ns.reshape(ns.clip(row, 0, max(count - 1, 0)), index_shape)
    written = ns.broadcast_to(ns.reshape(written, index_shape), dims)
    gathered = ns.take_along_axis(update, ns.broadcast_to(row, dims), axis=axis)
    return ns.where(written, gathered, cache)


# -- CausalConvWithState ----------------------------------------------------------------------
_ACTIVATIONS = ("none", "silu", "swish")


def _check_conv(ctx):
    """The kernel size ``k``, after checking every input's shape against the input's."""
    shape, kernel = ctx.shape(0), ctx.shape(1)
    if len(shape) != 3:
        raise ctx.invalid(f"input must be 3-D (batch, channels, length), got {shape}")
    batch, channels, _ = shape
    if len(kernel) != 3 or kernel[:2] != (channels, 1) or kernel[2] < 1:
        raise ctx.invalid(f"weight must have shape ({channels}, 1, k) with k >= 1 for "
                          f"{channels} channels, got {kernel}")
    k = kernel[2]
    if ctx.has_input(2) and ctx.shape(2) != (channels,):
        raise ctx.invalid(f"bias must have shape ({channels},), got {ctx.shape(2)}")
    if ctx.has_input(3) and ctx.shape(3) != (batch, channels, k - 1):
        raise ctx.invalid(f"past_state must have shape {(batch, channels, k - 1)}, got "
                          f"{ctx.shape(3)}")
    if ctx.dtype(0).kind != "f":
        raise ctx.invalid(f"input must be floating-point, got {ctx.dtype(0)}")
    return k


@converter("CausalConvWithState", attrs={"activation": "none"}, min_opset=27)
def causal_conv_with_state(ctx):
    ns, x = ctx.ns, ctx.input(0)
    activation = _text(ctx.attr("activation"))
    if activation not in _ACTIVATIONS:
        raise ctx.invalid(f"activation must be one of {list(_ACTIVATIONS)}, got "
                          f"{activation!r}")
    k = _check_conv(ctx)
    batch, channels, length = ctx.shape(0)
    dtype = np.dtype(ctx.dtype(0))
    past = ctx.input(3, optional=True)
    if past is None:
        past = np.zeros((batch, channels, k - 1), dtype)
    padded = ns.concatenate([ctx.lift(past), x], axis=2) if k > 1 else x
    # narrow inputs accumulate in float32, as a fused kernel does
    wide = np.promote_types(dtype, np.float32)
    taps = ns.astype(ns.reshape(ctx.input(1), (1, channels, k)), wide)
    total = None
    for j in range(k):
        window = ns.astype(ns.getitem(padded, (Ellipsis, slice(j, j + length))), wide)
        term = ns.multiply(window, ns.getitem(taps, (Ellipsis, slice(j, j + 1))))
        total = term if total is None else ns.add(total, term)
    if ctx.has_input(2):
        total = ns.add(total, ns.reshape(ns.astype(ctx.input(2), wide), (1, channels, 1)))
    if activation != "none":  # silu and swish are the same function: x * sigmoid(x)
        total = ns.multiply(total, ns.sigmoid(total))
    output = ns.astype(total, dtype) if total.dtype != dtype else total
    present = ns.getitem(padded, (Ellipsis, slice(length, None)))
    return output, present
