"""Sampling an image at computed (run-time) coordinates, as ONNX's GridSample and
DeformConv read their inputs: nearest, linear or cubic interpolation with
``zeros``, ``border`` or ``reflection`` padding, in any number of spatial axes.

Everything is composed of graphc functions, so gradients (to the image and to
the coordinates, through the interpolation weights) come free: each axis gives a
few integer taps and their weights, the taps of all axes are combined by
broadcasting into flat indices, one ``take_along_axis`` gathers every tap of
every point, and a weighted sum over the taps interpolates.

>>> import numpy as np
>>> import graphc.eager as E
>>> image = np.arange(4.0).reshape(1, 1, 2, 2)
>>> rows, cols = np.array([[0.5]]), np.array([[0.0]])
>>> sample(E, image, [rows, cols], "linear", "zeros", [(0.0, 1.0), (0.0, 1.0)])
array([[[1.]]])
"""
from __future__ import annotations

import numpy as np

#: Keys' cubic convolution constant, as GridSample (and PyTorch) use it
CUBIC_A = -0.75

MODES = ("nearest", "linear", "cubic")
PADDINGS = ("zeros", "border", "reflection")


def reflect(ns, v, low: float, high: float):
    """``v`` folded back into ``[low, high]`` by reflecting at the bounds as often as
    needed (values inside stay as they are).

    Example: ``reflect(E, np.array([-1.5, 0.5, 4.0]), 0.0, 3.0)`` is ``[1.5, 0.5, 2.0]``
    """
    span = high - low
    below, above = ns.less(v, low), ns.greater(v, high)
    if span <= 0:  # a single cell (align_corners with one pixel): everything is on it
        return ns.where(ns.logical_or(below, above), low, v)
    distance = ns.where(below, ns.subtract(low, v), ns.subtract(v, high))
    turns = ns.floor(ns.divide(distance, span))
    rest = ns.subtract(distance, ns.multiply(turns, span))
    even = ns.equal(ns.mod(turns, 2), 0)
    # an even number of whole turns leaves v on its own side's bound, an odd one on the other
    from_low = ns.equal(below, even)
    folded = ns.where(from_low, ns.add(rest, low), ns.subtract(high, rest))
    return ns.where(ns.logical_or(below, above), folded, v)


def _cubic_weights(ns, t):
    """Keys' four weights of taps ``-1, 0, 1, 2`` at fraction ``t`` past tap 0."""
    a = CUBIC_A

    def near(d):  # |d| <= 1
        return ns.add(ns.multiply(ns.multiply(ns.subtract(ns.multiply(a + 2, d), a + 3), d),
                                  d), 1)

    def far(d):  # 1 < |d| < 2
        inner = ns.add(ns.multiply(ns.subtract(ns.multiply(a, d), 5 * a), d), 8 * a)
        return ns.subtract(ns.multiply(inner, d), 4 * a)

    return [far(ns.add(t, 1)), near(t), near(ns.subtract(1, t)), far(ns.subtract(2, t))]


def _axis_taps(ns, v, size: int, bounds, mode: str, padding: str):
    """``(indices, weights, valid)`` of one axis, each a list with one array per tap:
    the cell each tap reads (always within ``[0, size)``), its weight (``None`` for
    nearest) and, for zeros padding, whether it lies inside the image."""
    low, high = bounds
    if mode == "nearest":
        v = ns.rint(v)  # half to even, as PyTorch
    if padding == "border":
        outside = ns.logical_or(ns.less(v, low), ns.greater(v, high))
        v = ns.where(outside, ns.clip(v, 0, size - 1), v)
    elif padding == "reflection":
        v = reflect(ns, v, low, high)
    # far outside, every tap is padding: bounding v keeps the integer casts defined
    v = ns.clip(v, -4, size + 3)
    if mode == "nearest":
        base, offsets, weights = v, (0,), None
    else:
        base = ns.floor(v)
        t = ns.subtract(v, base)
        if mode == "linear":
            offsets, weights = (0, 1), [ns.subtract(1, t), t]
        else:
            offsets, weights = (-1, 0, 1, 2), _cubic_weights(ns, t)
    base = ns.astype(base, np.int64)  # truncates, as the reference's int()
    indices, valid = [], []
    for offset in offsets:
        index = ns.add(base, offset) if offset else base
        if padding == "zeros":
            valid.append(ns.logical_and(ns.greater_equal(index, 0), ns.less(index, size)))
        elif padding == "reflection":
            index = ns.astype(reflect(ns, ns.astype(index, v.dtype), low, high), np.int64)
        indices.append(ns.clip(index, 0, size - 1))
    return indices, weights, valid or None


def _outer(ns, per_axis, combine):
    """The per-axis tap arrays (each ``(B, P)``, a list per axis) combined over every
    tap of every axis: ``(B, P, T0, T1, ...)`` by ``combine`` of broadcast parts."""
    rank = len(per_axis)
    total = None
    for axis, taps in enumerate(per_axis):
        stacked = ns.stack(taps, axis=-1)
        b, p, t = stacked.shape
        part = ns.reshape(stacked, (b, p) + (1,) * axis + (t,) + (1,) * (rank - axis - 1))
        total = part if total is None else combine(total, part)
    return total


def sample(ns, x, coords, mode: str, padding: str, bounds):
    """``x`` (B, C, *S) read at the points ``coords`` (one ``(B, P)`` array of cell
    coordinates per spatial axis, in ``S``'s order), giving ``(B, C, P)``. ``bounds``
    holds each axis's ``(low, high)``: the range beyond which ``border`` clamps and
    ``reflection`` reflects. Float ``x`` is interpolated in its own dtype (float16 in
    float32); nearest sampling reads cells exactly, for any dtype.

    Example: ``sample(E, image, [rows, cols], "cubic", "border", [(0, 3), (0, 5)])``
    """
    spatial = tuple(x.shape[2:])
    b, c = x.shape[:2]
    p = coords[0].shape[1]
    axes = [_axis_taps(ns, v, size, bound, mode, padding)
            for v, size, bound in zip(coords, spatial, bounds)]
    strides = [int(np.prod(spatial[i + 1:], dtype=np.int64)) for i in range(len(spatial))]
    flat = _outer(ns, [[ns.multiply(i, s) if s != 1 else i for i in indices]
                       for (indices, _, _), s in zip(axes, strides)], ns.add)
    n_taps = int(np.prod(flat.shape[2:], dtype=np.int64))
    flat = ns.reshape(flat, (b, 1, p * n_taps))
    image = ns.reshape(x, (b, c, int(np.prod(spatial, dtype=np.int64))))
    cells = ns.reshape(ns.take_along_axis(image, flat, axis=2), (b, c, p, n_taps))
    valid = None
    if padding == "zeros":
        valid = ns.reshape(_outer(ns, [v for _, _, v in axes], ns.logical_and),
                           (b, 1, p, n_taps))
    if mode == "nearest":
        if valid is not None:
            cells = ns.where(valid, cells, np.zeros((), x.dtype))
        return ns.reshape(cells, (b, c, p))
    work = x.dtype if x.dtype in (np.float32, np.float64) else np.dtype(np.float32)
    weights = ns.reshape(_outer(ns, [w for _, w, _ in axes], ns.multiply), (b, 1, p, n_taps))
    if valid is not None:
        weights = ns.where(valid, weights, 0)
    if weights.dtype != work:
        weights = ns.astype(weights, work)
    if cells.dtype != work:
        cells = ns.astype(cells, work)
    out = ns.sum(ns.multiply(cells, weights), axis=-1)
    return out if out.dtype == x.dtype else ns.astype(out, x.dtype)
