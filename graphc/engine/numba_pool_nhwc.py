"""The generated kernels of poolings of images stored channels last (``max_pool2d_nhwc``,
``avg_pool2d_nhwc``: images ``(N, H, W, C)``).

Channels last, a result cell's ``C`` channels are one contiguous vector and so is each
input cell its window reads: a cell is one vector loop per real tap (the taps on
padding are skipped: a padded cell never wins a max, and an average divides by the
count the NCHW kernels use). Between channels-last convolutions this spares the two
transposes an NCHW pooling needs (GoogLeNet's pools and their transposes took 4.1 of
its 19 ms).

Each cell takes its taps in row-major order, from ``-inf`` (max) or ``+0`` (average), as
:mod:`graphc.ops.pool_nhwc`'s NumPy kernel does: the same bits. A window holding a NaN
gives NaN, as ``np.maximum`` does (oneDNN's pooling drops NaNs, which is why it is not
used here).

>>> import numpy as np
>>> x = np.arange(16.0).reshape(1, 4, 4, 1)
>>> out, counts = np.empty((1, 2, 2, 1)), np.ones((2, 2))
>>> pool_nhwc(x, out, counts, (4, 4, 2, 2, 2, 2, 0, 0), True, 1)
>>> out[0, :, :, 0]
array([[ 5.,  7.],
       [13., 15.]])
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy")


@njit(**_OPTIONS)
def _fill(cell, value):
    for k in range(cell.shape[0]):
        cell[k] = value


@njit(**_OPTIONS)
def _max_into(cell, source):
    """``cell = maximum(cell, source)``, NaN winning as in ``np.maximum``."""
    for k in range(cell.shape[0]):
        a, b = cell[k], source[k]
        cell[k] = a if (a >= b or a != a) else b


@njit(**_OPTIONS)
def _add_into(cell, source):
    for k in range(cell.shape[0]):
        cell[k] = cell[k] + source[k]


@njit(**_OPTIONS)
def _divide(cell, divisor):
    for k in range(cell.shape[0]):
        cell[k] = cell[k] / divisor


@njit(**_OPTIONS)
def _span(position, stride, pad, taps, size):
    """``[lo, hi)``: the taps of a result ``position`` that read inside ``size`` cells."""
    start = position * stride - pad
    return max(0, -start), min(taps, size - start)


@njit(**_OPTIONS)
def _result_row(x, out, counts, n, oh, geometry, is_max):
    height, width, kh, kw, sh, sw, ph, pw = geometry
    i_lo, i_hi = _span(oh, sh, ph, kh, height)
    for q in range(out.shape[2]):
        j_lo, j_hi = _span(q, sw, pw, kw, width)
        cell = out[n, oh, q]
        if is_max:
            _fill(cell, -np.inf)
        else:
            _fill(cell, 0.0)
        for i in range(i_lo, i_hi):
            r = oh * sh + i - ph
            for j in range(j_lo, j_hi):
                source = x[n, r, q * sw + j - pw]
                if is_max:
                    _max_into(cell, source)
                else:
                    _add_into(cell, source)
        if not is_max:
            _divide(cell, counts[oh, q])


@njit(parallel=True, **_OPTIONS)
def pool_nhwc(x, out, counts, geometry, is_max, chunks):
    """``out[n, oh, ow, c]``: the maximum (``is_max``) or the sum over ``counts[oh, ow]``
    of ``x[n, oh*sh + i - ph, ow*sw + j - pw, c]`` over the window's real taps (``geometry``:
    the image's height and width, the window, stride, top/left padding), result rows
    dealt in ``chunks`` across the threads (1: on the calling thread)."""
    out_h = out.shape[1]
    rows = out.shape[0] * out_h
    if chunks > 1:
        for k in prange(chunks):
            for r in range(k * rows // chunks, (k + 1) * rows // chunks):
                _result_row(x, out, counts, r // out_h, r % out_h, geometry, is_max)
    else:
        for r in range(rows):
            _result_row(x, out, counts, r // out_h, r % out_h, geometry, is_max)


__all__ = ["pool_nhwc"]
