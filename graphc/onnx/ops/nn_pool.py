"""Converters of ONNX's pooling operators: MaxPool (with its optional Indices),
AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool.

A 2-D pooling without dilations maps onto ``max_pool2d`` / ``avg_pool2d``
(ONNX's windows, ``ceil_mode`` and ``count_include_pad`` are PyTorch's, which is
what those ops implement). Every other case (1-D, 3-D, dilations, integer
inputs, Indices) is composed: the input is padded once, each kernel tap is a
strided slice of it, and the taps are combined with ``maximum`` or ``add``; an
average divides by a constant array counting the cells of each window (LpPool
sums ``|x| ** p`` the same way).

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["MaxPool"]
>>> ctx = NodeContext(NodeContext.for_test("MaxPool", []).node, 12,
...                   [np.arange(5.0).reshape(1, 1, 5)], {"kernel_shape": [2]}, spec)
>>> spec.fn(ctx)
array([[[1., 2., 3., 4.]]])
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..registry import REQUIRED, converter
from .nn_window import kernel_of, pool_length, window

_POOL_ATTRS = {"auto_pad": "NOTSET", "ceil_mode": 0, "kernel_shape": REQUIRED, "pads": None,
               "strides": None, "dilations": None}


def _geometry(ctx):
    """``(x, kernel, strides, dilations, pads, out)`` of a pooling node."""
    x = ctx.input(0)
    shape = ctx.shape(0)
    if len(shape) < 3:
        raise ctx.invalid(f"the input must be (N, C, D1, ...) with at least one spatial axis, "
                          f"got shape {shape}")
    spatial = shape[2:]
    kernel = kernel_of(ctx, len(spatial))
    strides, dilations, pads = window(ctx, spatial, kernel, clamp=False)
    ceil_mode = bool(ctx.attr("ceil_mode"))
    out = tuple(pool_length(n, k, s, d, p, ceil_mode)
                for n, k, s, d, p in zip(spatial, kernel, strides, dilations, pads))
    if min(out) < 1:
        raise ctx.invalid(f"the window {kernel} (dilations {dilations}) is larger than the "
                          f"padded input: input shape {shape}, pads {pads}")
    # the output's size (and that of the index grids as large) before any is made
    ctx.reserve(shape[:2] + out, np.int64, "the pooled output")
    return x, kernel, strides, dilations, pads, out


def _native(ctx, kernel, strides, dilations, pads, out) -> bool:
    """Whether graphc's own 2-D pooling computes exactly this window geometry."""
    spatial = ctx.shape(0)[2:]
    return (len(kernel) == 2 and dilations == (1, 1) and ctx.dtype(0).kind == "f"
            and all(0 <= p[0] < k and p[1] >= 0 for p, k in zip(pads, kernel))
            and all((o - 1) * s < n + p[0] for o, s, n, p in zip(out, strides, spatial, pads)))


def _taps(ns, x, kernel, strides, dilations, pads, out, fill):
    """``(tap, slice)`` for each kernel tap: the input cell each output window reads
    at that tap, from ``x`` padded with ``fill`` (as far as the last window reaches)."""
    widths = [(0, 0), (0, 0)]
    spatial = tuple(x.shape[2:])
    for n, k, s, d, (begin, _), o in zip(spatial, kernel, strides, dilations, pads, out):
        reach = (o - 1) * s + (k - 1) * d + 1
        widths.append((max(begin, 0), max(reach - n - begin, 0)))
    padded = ns.pad(x, widths, constant_values=fill)
    # a negative begin pad (SAME with a stride longer than the window) skips cells
    skip = [max(-begin, 0) for begin, _ in pads]
    for tap in itertools.product(*(range(k) for k in kernel)):
        key = (slice(None),) * 2 + tuple(
            slice(t * d + j, t * d + j + (o - 1) * s + 1, s)
            for t, d, s, o, j in zip(tap, dilations, strides, out, skip))
        yield tap, ns.getitem(padded, key)


def _positions(tap, strides, dilations, pads, out):
    """Per spatial axis, the input coordinate each output reads at ``tap``."""
    return [np.arange(o) * s + t * d - p[0]
            for t, s, d, p, o in zip(tap, strides, dilations, pads, out)]


def _lowest(dtype):
    dtype = np.dtype(dtype)
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min if dtype.kind in "iu" else False


@converter("MaxPool", attrs={**_POOL_ATTRS, "storage_order": 0})
def max_pool(ctx):
    x, kernel, strides, dilations, pads, out = _geometry(ctx)
    ns = ctx.ns
    storage_order = int(ctx.attr("storage_order"))
    if storage_order not in (0, 1):
        raise ctx.invalid(f"storage_order must be 0 or 1, got {storage_order}")
    want_indices = ctx.n_outputs > 1
    if not want_indices and _native(ctx, kernel, strides, dilations, pads, out):
        return ns.max_pool2d(x, kernel, strides, pads, bool(ctx.attr("ceil_mode")))
    spatial = ctx.shape(0)[2:]
    best = index = None
    for tap, value in _taps(ns, x, kernel, strides, dilations, pads, out, _lowest(x.dtype)):
        if not want_indices:
            best = value if best is None else ns.maximum(best, value)
            continue
        where = _flat_index(_positions(tap, strides, dilations, pads, out), spatial,
                            storage_order)
        if best is None:
            best, index = value, where
        else:
            # the first maximal cell in tap order wins ties, as onnxruntime
            better = ns.greater(value, best)
            best, index = ns.where(better, value, best), ns.where(better, where, index)
    if not want_indices:
        return best
    n, c = ctx.shape(0)[:2]
    base = (np.arange(n * c, dtype=np.int64) * math.prod(spatial)).reshape(
        (n, c) + (1,) * len(spatial))
    return best, ns.add(index, base)


def _flat_index(positions, spatial, storage_order):
    """The flat spatial index (row-major, or column-major for storage_order 1) of
    the cell at ``positions``, shaped (1, 1, *out)."""
    grids = np.meshgrid(*positions, indexing="ij")
    order = range(len(spatial)) if storage_order == 0 else reversed(range(len(spatial)))
    flat = np.zeros(grids[0].shape, np.int64)
    for axis in order:
        flat = flat * spatial[axis] + grids[axis]
    return flat.reshape((1, 1) + flat.shape)


@converter("AveragePool", attrs={**_POOL_ATTRS, "count_include_pad": 0})
def average_pool(ctx):
    x, kernel, strides, dilations, pads, out = _geometry(ctx)
    ns = ctx.ns
    include_pad = bool(ctx.attr("count_include_pad"))
    if ctx.dtype(0).kind != "f":
        raise ctx.invalid(f"AveragePool takes floating-point input, got {ctx.dtype(0)}")
    if _native(ctx, kernel, strides, dilations, pads, out):
        return ns.avg_pool2d(x, kernel, strides, pads, bool(ctx.attr("ceil_mode")),
                             include_pad)
    total = None
    for _, value in _taps(ns, x, kernel, strides, dilations, pads, out, 0):
        total = value if total is None else ns.add(total, value)
    divisor = _window_counts(ctx.shape(0)[2:], kernel, strides, dilations, pads, out,
                             include_pad)
    return ns.divide(total, divisor.astype(x.dtype))


def _window_counts(spatial, kernel, strides, dilations, pads, out, include_pad):
    """How many cells each window averages: those inside the input, or inside the
    padded input when ``include_pad`` (cells past the end padding, reached only by
    ``ceil_mode``, never count)."""
    counts = []
    for n, k, s, d, (begin, end), o in zip(spatial, kernel, strides, dilations, pads, out):
        lo, hi = (-begin, n + end) if include_pad else (0, n)
        cells = np.arange(o)[:, None] * s + np.arange(k)[None, :] * d - begin
        counts.append(((cells >= lo) & (cells < hi)).sum(axis=1))
    grid = counts[0]
    for c in counts[1:]:
        grid = np.multiply.outer(grid, c)
    # a window of padding alone (dilations can skip every input cell) averages to 0,
    # as onnxruntime's
    grid = np.maximum(grid, 1)
    return np.asarray(grid, np.float64).reshape((1, 1) + tuple(out))


# global pooling: the reduction over every spatial axis, keeping them as size 1
_GLOBAL_REDUCTIONS = {"GlobalAveragePool": "mean", "GlobalMaxPool": "max"}


@converter(*_GLOBAL_REDUCTIONS)
def global_pool(ctx):
    rank = len(ctx.shape(0))
    if rank < 3:
        raise ctx.invalid(f"the input must be (N, C, D1, ...), got shape {ctx.shape(0)}")
    reduce = getattr(ctx.ns, _GLOBAL_REDUCTIONS[ctx.node.op_type])
    return reduce(ctx.input(0), axis=tuple(range(2, rank)), keepdims=True)


@converter("LpPool", attrs={**_POOL_ATTRS, "p": 2})
def lp_pool(ctx):
    x, kernel, strides, dilations, pads, out = _geometry(ctx)
    ns, p = ctx.ns, ctx.attr("p")
    if ctx.dtype(0).kind != "f":
        raise ctx.invalid(f"LpPool takes floating-point input, got {ctx.dtype(0)}")
    powered = _abs_power(ns, x, p)
    total = None
    for _, value in _taps(ns, powered, kernel, strides, dilations, pads, out, 0):
        total = value if total is None else ns.add(total, value)
    return _root(ns, total, p)


def _abs_power(ns, x, p):
    # p is an int from opset 2 (a float before); 2 is by far the common case
    return ns.square(x) if p == 2 else ns.power(ns.abs(x), float(p))


def _root(ns, total, p):
    return ns.sqrt(total) if p == 2 else ns.power(total, 1.0 / float(p))
