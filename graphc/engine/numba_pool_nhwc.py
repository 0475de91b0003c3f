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
def _span(position, stride, pad, taps, size):
    """``[lo, hi)``: the taps of a result ``position`` that read inside ``size`` cells."""
    start = position * stride - pad
    return max(0, -start), min(taps, size - start)


@njit(**_OPTIONS)
def _larger(a, b):
    """``np.maximum(a, b)`` of two scalars: NaN wins."""
    return a if (a >= b or a != a) else b


# Offsets are unsigned: a signed index is checked for wrapping around, and that check
# keeps the loops from vectorising (3x the time). Each combines a cell ``out[at:at + c]``
# with three taps (or one) of a tap row, ``c`` apart from ``source``, in one pass, from
# ``-inf`` or ``+0`` when ``start``.
@njit(**_OPTIONS)
def _max3(x, out, at, source, c, start):
    for k in range(c):
        a = -np.inf if start else out[at + k]
        out[at + k] = _larger(_larger(_larger(a, x[source + k]), x[source + c + k]),
                              x[source + c + c + k])


@njit(**_OPTIONS)
def _max1(x, out, at, source, c, start):
    for k in range(c):
        a = -np.inf if start else out[at + k]
        out[at + k] = _larger(a, x[source + k])


@njit(**_OPTIONS)
def _add3(x, out, at, source, c, start):
    for k in range(c):
        a = 0.0 if start else out[at + k]
        out[at + k] = a + x[source + k] + x[source + c + k] + x[source + c + c + k]


@njit(**_OPTIONS)
def _add1(x, out, at, source, c, start):
    for k in range(c):
        a = 0.0 if start else out[at + k]
        out[at + k] = a + x[source + k]


@njit(**_OPTIONS)
def _result_row(x, out, counts, n, oh, geometry, channels, is_max):
    """Row ``oh`` of image ``n`` (``x``, ``out``: flat): each cell from ``-inf`` (max) or
    ``+0``, its real taps in row-major order, up to three of a tap row per pass over its
    channels (a pass per tap took 2.6x the time of a 3x3 window)."""
    height, width, kh, kw, sh, sw, ph, pw = geometry
    out_h, out_w = counts.shape
    c = np.uint64(channels)
    i_lo, i_hi = _span(oh, sh, ph, kh, height)
    for q in range(out_w):
        j_lo, j_hi = _span(q, sw, pw, kw, width)
        at = np.uint64(((n * out_h + oh) * out_w + q) * channels)
        start = True
        for i in range(i_lo, i_hi):
            r = oh * sh + i - ph
            j = j_lo
            while j < j_hi:
                source = np.uint64(((n * height + r) * width + q * sw + j - pw) * channels)
                if j + 3 <= j_hi:
                    if is_max:
                        _max3(x, out, at, source, c, start)
                    else:
                        _add3(x, out, at, source, c, start)
                    j += 3
                else:
                    if is_max:
                        _max1(x, out, at, source, c, start)
                    else:
                        _add1(x, out, at, source, c, start)
                    j += 1
                start = False
        if not is_max:
            divisor = counts[oh, q]
            for k in range(c):
                out[at + k] = out[at + k] / divisor


@njit(parallel=True, **_OPTIONS)
def pool_nhwc(x, out, counts, geometry, is_max, chunks):
    """``out[n, oh, ow, c]``: the maximum (``is_max``) or the sum over ``counts[oh, ow]``
    of ``x[n, oh*sh + i - ph, ow*sw + j - pw, c]`` over the window's real taps (``geometry``:
    the image's height and width, the window, stride, top/left padding), result rows
    dealt in ``chunks`` across the threads (1: on the calling thread)."""
    out_h = out.shape[1]
    rows = out.shape[0] * out_h
    flat_x, flat_out, channels = x.reshape(x.size), out.reshape(out.size), out.shape[3]
    if chunks > 1:
        for k in prange(chunks):
            for r in range(k * rows // chunks, (k + 1) * rows // chunks):
                _result_row(flat_x, flat_out, counts, r // out_h, r % out_h, geometry,
                            channels, is_max)
    else:
        for r in range(rows):
            _result_row(flat_x, flat_out, counts, r // out_h, r % out_h, geometry, channels,
                        is_max)


__all__ = ["pool_nhwc"]
