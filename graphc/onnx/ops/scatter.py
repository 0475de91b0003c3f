"""Converters of ONNX's scattering operators: ScatterND, ScatterElements and the
older Scatter, onto graphc's ``scatter`` (``x.at[key].set/add/...``: NumPy's
``ufunc.at``), so a model's cell updates are planned in place like any update.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["ScatterND"]
>>> node = NodeContext.for_test("ScatterND", []).node
>>> data, indices = np.zeros(4), np.array([[1], [3]])
>>> spec.fn(NodeContext(node, 16, [data, indices, np.array([5.0, 6.0])], {}, spec))
array([0., 5., 0., 6.])
"""
from __future__ import annotations

import numpy as np

from ..registry import converter
from .indexing import _along

#: ONNX's reduction attribute -> the mode of graphc's scatter
_MODES = {"none": "set", "add": "add", "mul": "multiply", "max": "max", "min": "min"}


def _mode(ctx) -> str:
    reduction = ctx.attr("reduction")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    if reduction not in _MODES:
        raise ctx.invalid(f"reduction must be one of {sorted(_MODES)}, got {reduction!r}")
    return _MODES[reduction]


def _check_indices(ctx, indices, bounds):
    if indices.dtype.kind not in "iu":
        raise ctx.invalid(f"indices must be integers, got {indices.dtype}")
    if isinstance(indices, np.ndarray) and indices.size:
        if ((indices < -bounds) | (indices >= bounds)).any():
            raise ctx.invalid(f"indices must lie within the data's dimensions "
                              f"{np.broadcast_to(bounds, (np.size(bounds),)).tolist()}")


@converter("ScatterND", attrs={"reduction": "none"})
def scatter_nd(ctx):
    data, indices, updates = ctx.input(0), ctx.input(1), ctx.input(2)
    dims, index_shape = ctx.shape(0), ctx.shape(1)
    if not index_shape or not 1 <= index_shape[-1] <= len(dims):
        raise ctx.invalid(f"indices of shape {index_shape} must end in a depth from 1 to the "
                          f"data's rank {len(dims)}")
    k = index_shape[-1]
    want = tuple(index_shape[:-1]) + tuple(dims[k:])
    if tuple(ctx.shape(2)) != want:
        raise ctx.invalid(f"updates of shape {ctx.shape(2)} must have shape {want} (indices "
                          f"{index_shape}, data {dims})")
    _check_indices(ctx, indices, np.array(dims[:k]))
    ns = ctx.ns
    rank = len(index_shape) - 1
    key = tuple(ns.getitem(indices, (slice(None),) * rank + (i,)) for i in range(k))
    return ns._updated(data, key, updates, _mode(ctx), "ScatterND")


def _scatter_elements(ctx, mode):
    data, indices, updates = ctx.input(0), ctx.input(1), ctx.input(2)
    dims, index_shape = ctx.shape(0), ctx.shape(1)
    rank = len(dims)
    axis = int(ctx.attr("axis"))
    if not -rank <= axis < rank:
        raise ctx.invalid(f"axis {axis} is out of range for data of rank {rank}")
    axis %= rank
    if len(index_shape) != rank or tuple(ctx.shape(2)) != tuple(index_shape) or any(
            i > d for j, (i, d) in enumerate(zip(index_shape, dims)) if j != axis):
        raise ctx.invalid(f"indices {index_shape} and updates {ctx.shape(2)} must have one "
                          f"shape, of the data's rank and within its dimensions {dims}")
    _check_indices(ctx, indices, dims[axis])
    key = tuple(indices if j == axis else _along(j, index_shape[j], rank) for j in range(rank))
    return ctx.ns._updated(data, key, updates, mode, "ScatterElements")


@converter("ScatterElements", attrs={"axis": 0, "reduction": "none"})
def scatter_elements(ctx):
    return _scatter_elements(ctx, _mode(ctx))


@converter("Scatter", attrs={"axis": 0})
def scatter(ctx):
    return _scatter_elements(ctx, "set")
