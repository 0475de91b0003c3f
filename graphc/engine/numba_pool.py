"""Max pooling in separable passes (no dilation): the generated kernel of
``max_pool2d`` where :mod:`.numba_window`'s row-by-row kernel would spend its time in
short loops (GoogLeNet's 14x14 and 7x7 planes: nine strided runs of 14 cells per
output row).

With stride 1, per plane, in a scratch of its own: the image copied into a
``-inf``-padded plane; a horizontal pass ``R[k] = max_j P[k + j]``, one flat loop over
every row at once, so ``R`` is the row maxima; a vertical pass, ``V[k] = max_i R[k + i *
Wp]`` in one flat loop; then the ``OW`` real cells of each of the ``OH`` rows copied
out. The cells past a row's end are computed and never read.

With a stride the row maxima would be read with gaps; instead, per output row
(:func:`_strided_plane`), the maxima down its windows' rows are taken along contiguous
image rows into a ``-inf``-padded row, then each window's maximum across that row (a
step of 2 with 2 or 3 taps in one pass: an interleaved load).

The values are :mod:`.numba_window`'s and the NumPy kernel's, NaN where a window
holds one: a maximum is a maximum in any order. Only which zero a window of tied
``+0`` and ``-0`` keeps may differ (the row kernel starts from a full tap, then takes
the others in row-major order; here the last in row-major order wins, the first
NaN), as it already differs between NumPy's own vector and scalar ``maximum`` loops.

>>> import numpy as np
>>> x, out = np.arange(16.0), np.empty(4)
>>> geometry = (1, 1, 4, 4, 2, 2, 2, 2, 2, 2, 0, 0, 1, 1, 0, 0)   # 2x2 windows, stride 2
>>> scratch = np.empty((1, pool_cells(geometry)))
>>> max_pool2d_planes(x, out, scratch, geometry, False); out
array([ 5.,  7., 13., 15.])
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

_OPTIONS = dict(cache=True, nogil=True)


@njit(**_OPTIONS)
def pool_shape(geometry):
    """``(rows, wq)``: the padded plane's rows and its width over the column stride (a
    whole number of strides wide, covering every window, plus one stride of slack)."""
    H, W, OH, OW, KH, KW, SH, SW = geometry[2:10]
    rows = (OH - 1) * SH + KH
    wq = -(-((OW - 1) * SW + KW) // SW) + 1
    return rows, wq


@njit(**_OPTIONS)
def pool_cells(geometry):
    """Scratch cells one plane needs: the padded plane, its row maxima, the vertical
    maxima (with a stride, :func:`strided_row_cells`)."""
    if geometry[8] != 1 or geometry[9] != 1:
        return strided_row_cells(geometry)
    rows, wq = pool_shape(geometry)
    SW = geometry[9]
    return rows * wq * SW + rows * wq + geometry[4] * wq


@njit(**_OPTIONS)
def _larger(a, v):
    """``np.maximum(a, v)``: NaN wins (the first one stays), a tie takes ``v``."""
    return a if (a > v) | (a != a) else v


@njit(**_OPTIONS)
def _pad(image, padded, H, W, PT, PL, rows, width):
    """``image`` (``H x W``, flat) in ``padded`` (``rows x width``) at ``(PT, PL)``,
    every other cell ``-inf``."""
    lo, hi = max(0, -PT), min(H, rows - PT)          # the image rows that land
    first = max(0, -PL)
    left = max(PL, 0)
    count = max(0, min(W - first, width - left))
    padded[:max(0, min(rows, PT + lo)) * width] = -np.inf
    for h in range(lo, hi):
        # unsigned indices: no test for a negative index to wrap around, so the short
        # row loops stay cheap (slices would cost more than a 14-cell copy)
        row, source = np.uint64((h + PT) * width), np.uint64(h * W + first)
        for q in range(left):
            padded[row + np.uint64(q)] = -np.inf
        for q in range(count):
            padded[row + np.uint64(left + q)] = image[source + np.uint64(q)]
        for q in range(left + count, width):
            padded[row + np.uint64(q)] = -np.inf
    padded[max(0, hi + PT) * width:] = -np.inf


@njit(**_OPTIONS)
def _row_maxima(padded, maxima, KW):
    """``maxima[k] = max_j padded[k + j]``, taps in order."""
    n = maxima.shape[0]
    maxima[:] = padded[:n]
    for j in range(1, KW):
        shifted = padded[j:j + n]
        for k in range(n):
            maxima[k] = _larger(maxima[k], shifted[k])


@njit(**_OPTIONS)
def _column_maxima(maxima, target, start, wq, KH):
    """``target[k] = max_i maxima[start + k + i * wq]``, taps in order."""
    n = target.shape[0]
    target[:] = maxima[start:start + n]
    for i in range(1, KH):
        below = maxima[start + i * wq:start + i * wq + n]
        for k in range(n):
            target[k] = _larger(target[k], below[k])


@njit(**_OPTIONS)
def _plane(x, out, p, scratch, geometry):
    """Output plane ``p`` (image and channel) of a stride-1 pool in ``scratch``
    (:func:`pool_cells`)."""
    H, W, OH, OW, KH, KW, SH, SW, PT, PL = geometry[2:12]
    rows, wq = pool_shape(geometry)
    width = wq * SW
    padded = scratch[:rows * width]
    maxima = scratch[rows * width:rows * width + rows * wq]
    vertical = scratch[rows * width + rows * wq:rows * width + rows * wq + OH * wq]
    _pad(x[p * H * W:(p + 1) * H * W], padded, H, W, PT, PL, rows, width)
    needed = (rows - 1) * wq + OW        # through the last row's last real window
    _row_maxima(padded, maxima[:needed], KW)
    maxima[needed:] = -np.inf
    _column_maxima(maxima, vertical, 0, wq, KH)
    for oh in range(OH):
        row, source = np.uint64((p * OH + oh) * OW), np.uint64(oh * wq)
        for q in range(OW):
            out[row + np.uint64(q)] = vertical[source + np.uint64(q)]


@njit(parallel=True, **_OPTIONS)
def max_pool2d_planes(x, out, scratch, geometry, threaded):
    """The maximum of each window of ``x`` (flat NCHW planes; padding never wins),
    plane by plane (with a stride, row by row: :func:`_strided_plane`); when
    ``threaded`` the planes are dealt in ``scratch.shape[0]`` chunks across threads,
    each in its own ``scratch[k]`` (:func:`pool_cells` long).

    Example: ``window_kernel(op, [x], out, ctx, threaded)`` binds it to a node's arrays
    (:func:`~.window_builders.window_kernel`)."""
    planes = geometry[0] * geometry[1]
    if threaded:
        chunks = scratch.shape[0]
        for k in prange(chunks):
            for p in range(k * planes // chunks, (k + 1) * planes // chunks):
                _any_plane(x, out, p, scratch[k], geometry)
    else:
        for p in range(planes):
            _any_plane(x, out, p, scratch[0], geometry)


@njit(**_OPTIONS)
def _any_plane(x, out, p, scratch, geometry):
    if geometry[8] == 1 and geometry[9] == 1:
        _plane(x, out, p, scratch, geometry)
    else:
        _strided_plane(x, out, p, scratch, geometry)


# -- strided windows: columns first, then the row's windows -------------------------------------
@njit(**_OPTIONS)
def strided_row_cells(geometry):
    """Scratch cells one plane of a strided pool needs: a padded row of
    column maxima (every window's reach, ``-inf`` around the image) and an output row."""
    W, OW, KW, SW, PL = geometry[3], geometry[5], geometry[7], geometry[9], geometry[11]
    return max((OW - 1) * SW + KW, PL + W) + OW


@njit(**_OPTIONS)
def _windows_of_row(columns, row, KW, SW):
    """``row[k] = max_j columns[SW * k + j]``, a pass per tap (a step of 2 is its own
    loop: with a constant step LLVM vectorises the strided reads)."""
    n = row.shape[0]
    if SW == 2 and KW == 3:    # the common window in one pass: an interleaved load
        for k in range(n):
            at = np.uint64(2 * k)
            row[k] = _larger(_larger(columns[at], columns[at + np.uint64(1)]),
                             columns[at + np.uint64(2)])
    elif SW == 2 and KW == 2:
        for k in range(n):
            at = np.uint64(2 * k)
            row[k] = _larger(columns[at], columns[at + np.uint64(1)])
    elif SW == 2:
        for k in range(n):
            row[k] = columns[np.uint64(2 * k)]
        for j in range(1, KW):
            for k in range(n):
                row[k] = _larger(row[k], columns[np.uint64(2 * k + j)])
    else:
        for k in range(n):
            row[k] = columns[np.uint64(SW * k)]
        for j in range(1, KW):
            for k in range(n):
                row[k] = _larger(row[k], columns[np.uint64(SW * k + j)])


@njit(**_OPTIONS)
def _strided_plane(x, out, p, scratch, geometry):
    """Output plane ``p`` of a strided pool, row by row."""
    H, W, OH, OW, KH, KW, SH, SW, PT, PL = geometry[2:12]
    reach = max((OW - 1) * SW + KW, PL + W)
    columns, row = scratch[:reach], scratch[reach:reach + OW]
    columns[:PL] = -np.inf
    columns[PL + W:] = -np.inf
    plane = np.uint64(p * H * W)
    for oh in range(OH):
        top = oh * SH - PT
        lo, hi = max(top, 0), min(top + KH, H)
        if lo >= hi:                     # every row of the windows is padding
            columns[PL:PL + W] = -np.inf
        else:
            first = plane + np.uint64(lo * W)
            if hi - lo == 3:         # the common window: three rows in one pass
                second, third = first + np.uint64(W), first + np.uint64(2 * W)
                for q in range(W):
                    at = np.uint64(q)
                    columns[np.uint64(PL + q)] = _larger(_larger(
                        x[first + at], x[second + at]), x[third + at])
                lo = hi - 1
            else:
                for q in range(W):
                    columns[np.uint64(PL + q)] = x[first + np.uint64(q)]
            for h in range(lo + 1, hi):
                start = plane + np.uint64(h * W)
                for q in range(W):
                    at = np.uint64(PL + q)
                    columns[at] = _larger(columns[at], x[start + np.uint64(q)])
        _windows_of_row(columns, row, KW, SW)
        target = np.uint64((p * OH + oh) * OW)
        for q in range(OW):
            out[target + np.uint64(q)] = row[q]


__all__ = ["max_pool2d_planes", "pool_cells", "pool_shape"]
