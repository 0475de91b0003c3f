"""ONNX exporters of the sorting, cumulative and counting kinds
(:mod:`graphc.ops.sorting`): ``TopK`` (a full, stable sort; and top-k), ``CumSum``,
``GatherElements`` and ``ScatterElements`` (``reduction="add"``).

>>> callable(sort_export) and callable(bincount_export)
True
"""
from __future__ import annotations

import numpy as np

from .export import Value


def _top_k(ctx, op, x):
    """Values and indices (int64) of the ascending sort of ``x`` along the op's axis
    (ONNX's TopK keeps equal elements in their order: a stable sort)."""
    axis = op["axis"]
    count = ctx.ints([x.shape[axis]])
    return ctx.op("TopK", [x.name, count], outputs=2, axis=axis, largest=0, sorted=1)


def sort_export(ctx, op, ins, out):
    values, _ = _top_k(ctx, op, ins[0])
    return ctx.op("Identity", [values], out=out.name)


def argsort_export(ctx, op, ins, out):
    _, indices = _top_k(ctx, op, ins[0])
    return ctx.cast(Value(indices, out.shape, np.dtype(np.int64)), out.dtype)


def top_k_export(ctx, op, ins, out):
    """ONNX's ``TopK`` (sorted; equal values in index order, as graphc's), its indices."""
    _, indices = ctx.op("TopK", [ins[0].name, ctx.ints([op["k"]])], outputs=2,
                        axis=op["axis"], largest=int(op["largest"]), sorted=1)
    return ctx.cast(Value(indices, out.shape, np.dtype(np.int64)), out.dtype)


def cumsum_export(ctx, op, ins, out):
    x = ctx.cast(ins[0], out.dtype)
    return ctx.op("CumSum", [x, ctx.scalar(op["axis"], np.int64)], out=out.name)


def take_along_axis_export(ctx, op, ins, out):
    """``GatherElements`` after both operands are expanded to the result's shape
    (NumPy broadcasts the other axes; ONNX does not)."""
    x, indices = ins
    axis = op["axis"]
    wide = list(out.shape)
    wide[axis] = x.shape[axis]
    data = x.name if tuple(wide) == x.shape else ctx.op("Expand", [x.name, ctx.ints(wide)])
    positions = ctx.cast(indices, np.int64)
    if indices.shape != out.shape:
        positions = ctx.op("Expand", [positions, ctx.ints(out.shape)])
    return ctx.op("GatherElements", [data, positions], out=out.name, axis=axis)


def bincount_export(ctx, op, ins, out):
    """``ScatterElements`` adding into zeros; values outside ``[0, length)`` add 0 at 0."""
    length = op["length"]
    zeros = ctx.const(np.zeros(length, out.dtype))
    if length == 0:
        return ctx.op("Identity", [zeros], out=out.name)
    x = ctx.cast(ins[0], np.int64)
    inside = ctx.op("And", [ctx.op("GreaterOrEqual", [x, ctx.scalar(0, np.int64)]),
                            ctx.op("Less", [x, ctx.scalar(length, np.int64)])])
    bins = ctx.op("Where", [inside, x, ctx.scalar(0, np.int64)])
    if len(ins) > 1:
        weights = ctx.cast(ins[1], out.dtype)
    else:
        weights = ctx.op("Expand", [ctx.scalar(1, out.dtype), ctx.ints(ins[0].shape)])
    weights = ctx.op("Where", [inside, weights, ctx.scalar(0, out.dtype)])
    return ctx.op("ScatterElements", [zeros, bins, weights], out=out.name, axis=0,
                  reduction="add")
