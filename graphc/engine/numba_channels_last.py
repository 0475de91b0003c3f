"""The generated kernel of a channels-last depthwise convolution
(``depthwise_conv2d_nhwc``: images ``(N, H, W, C)``, taps ``(kh, kw, C)``).

Channels last, a result cell's ``C`` channels are one contiguous vector, and so is
each input cell a tap reads: a cell is a few loops along the channels (three taps of
a tap row per loop), with nothing to pad, transpose or copy back. In the NCHW layouts
(:mod:`.numba_depthwise`, :mod:`.numba_conv`) a plane of a MobileNet's 7x7 or 14x14
layers is too short for vectors, and copying it into padded scratch and back costs
more than its arithmetic (576 channels at 14x14: 120 us there, 45 us here on two
cores). With few channels the per-cell loops are too short instead, which is why the
optimiser takes this layout only from
:data:`~graphc.optimiser.channels_last.MIN_CHANNELS` channels.

Each cell sums its taps in row-major order from zero, as the NCHW kernels do, but
skips the taps that fall on padding (their terms are zeros: the sums are the NCHW kernels',
bit for bit, for finite weights; :mod:`graphc.ops.channels_last`'s NumPy kernel sums
the same terms in the same order).

>>> import numpy as np
>>> x, w = np.ones((1, 4, 4, 2)), np.ones((3, 3, 2))
>>> out = np.empty((1, 4, 4, 2))
>>> depthwise_nhwc(x, w, out, (4, 4, 4, 4, 1, 1, 1, 1, 1, 1), 0.0, 1)
>>> out[0, 0, :, 0]
array([4., 6., 6., 4.])
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy")
#: result elements summed tap by tap as one block: 8 KiB of float32, which stays in L1
#: while every tap adds to it (a whole row of 56 cells of 144 channels did not: 30% slower)
BLOCK_ELEMENTS = 2048

# -- vector loops along the channels (slices indexed from 0: they vectorise) -----------------
@njit(**_OPTIONS)
def _span3(t, channels, q0, q1, first, zero, w0, w1, w2, source, start, step, apart):
    """Cells ``q0 <= q < q1`` of a result row ``t`` (flat, ``channels`` per cell): from
    ``zero`` when ``first``, else added to, the terms of three taps ``w0``, ``w1``, ``w2``,
    which read ``source`` (an input row, flat) at ``start + q * step``, ``apart`` further
    and twice that. One call per tap row and span: a call per cell costs more than its
    arithmetic."""
    for q in range(q0, q1):
        cell = t[q * channels:(q + 1) * channels]
        at = start + q * step
        s0 = source[at:at + channels]
        s1 = source[at + apart:at + apart + channels]
        s2 = source[at + 2 * apart:at + 2 * apart + channels]
        if first:
            for k in range(channels):
                cell[k] = zero + w0[k] * s0[k] + w1[k] * s1[k] + w2[k] * s2[k]
        else:
            for k in range(channels):
                cell[k] = cell[k] + w0[k] * s0[k] + w1[k] * s1[k] + w2[k] * s2[k]


@njit(**_OPTIONS)
def _span2(t, channels, q0, q1, first, zero, w0, w1, source, start, step, apart):
    """:func:`_span3` for two taps (a 5x5 window's last two columns)."""
    for q in range(q0, q1):
        cell = t[q * channels:(q + 1) * channels]
        at = start + q * step
        s0 = source[at:at + channels]
        s1 = source[at + apart:at + apart + channels]
        if first:
            for k in range(channels):
                cell[k] = zero + w0[k] * s0[k] + w1[k] * s1[k]
        else:
            for k in range(channels):
                cell[k] = cell[k] + w0[k] * s0[k] + w1[k] * s1[k]


@njit(**_OPTIONS)
def _span1(t, channels, q0, q1, first, zero, w0, source, start, step):
    """:func:`_span3` for one tap."""
    for q in range(q0, q1):
        cell = t[q * channels:(q + 1) * channels]
        at = start + q * step
        s0 = source[at:at + channels]
        if first:
            for k in range(channels):
                cell[k] = zero + w0[k] * s0[k]
        else:
            for k in range(channels):
                cell[k] = cell[k] + w0[k] * s0[k]


@njit(**_OPTIONS)
def _valid_taps(position, stride, pad, dilation, taps, size):
    """``[lo, hi)``: the taps of a result ``position`` that read inside ``size`` cells."""
    lo = 0
    while lo < taps and position * stride + lo * dilation - pad < 0:
        lo += 1
    hi = taps
    while hi > lo and position * stride + (hi - 1) * dilation - pad >= size:
        hi -= 1
    return lo, hi


@njit(**_OPTIONS)
def _cells(x, w, t, n, q0, q1, rows, columns, geometry, zero):
    """Cells ``q0 <= q < q1`` of result row ``t`` (flat) of image ``n``, whose valid taps
    are the same: tap rows ``rows`` (input row of each, or -1 on padding) and tap
    columns ``[columns[0], columns[1])``. Each cell sums them in row-major order from
    ``zero``, three taps of a tap row per pass (two, one for what is left)."""
    width, sw, pw, dw = geometry[1], geometry[5], geometry[7], geometry[9]
    channels = w.shape[2]
    block = max(1, BLOCK_ELEMENTS // channels)
    for b0 in range(q0, q1, block):       # the cells of a block stay in L1 across the taps
        b1 = min(q1, b0 + block)
        first = True
        for i in range(rows.shape[0]):
            if rows[i] < 0:
                continue
            source = x[n, rows[i]].reshape(width * channels)
            j = columns[0]
            while j < columns[1]:
                start = (j * dw - pw) * channels
                if j + 3 <= columns[1]:
                    _span3(t, channels, b0, b1, first, zero, w[i, j], w[i, j + 1],
                           w[i, j + 2], source, start, sw * channels, dw * channels)
                    j += 3
                elif j + 2 <= columns[1]:
                    _span2(t, channels, b0, b1, first, zero, w[i, j], w[i, j + 1], source,
                           start, sw * channels, dw * channels)
                    j += 2
                else:
                    _span1(t, channels, b0, b1, first, zero, w[i, j], source, start,
                           sw * channels)
                    j += 1
                first = False
        if first:            # every tap on padding
            t[b0 * channels:b1 * channels] = 0


@njit(**_OPTIONS)
def _result_row(x, w, out, n, oh, geometry, zero, rows, columns):
    """Row ``oh`` of image ``n``'s result: the columns whose taps all read the image in
    one span per tap row, the others (by the padding) cell by cell. ``rows`` and
    ``columns`` are scratch of ``kh`` and 2 cells."""
    height, width, out_h, out_w, sh, sw, ph, pw, dh, dw = geometry
    kh, kw, channels = w.shape
    for i in range(kh):
        r = oh * sh + i * dh - ph
        rows[i] = r if 0 <= r < height else -1
    t = out[n, oh].reshape(out_w * channels)
    q_lo, q_hi = out_w, out_w          # the columns whose every tap column is inside
    for q in range(out_w):
        j_lo, j_hi = _valid_taps(q, sw, pw, dw, kw, width)
        if j_lo == 0 and j_hi == kw:
            q_lo = min(q_lo, q)
            q_hi = q + 1
    for q in range(out_w):
        if q == q_lo and q_lo < q_hi:
            columns[0], columns[1] = 0, kw
            _cells(x, w, t, n, q_lo, q_hi, rows, columns, geometry, zero)
        if q_lo <= q < q_hi:
            continue
        columns[0], columns[1] = _valid_taps(q, sw, pw, dw, kw, width)
        _cells(x, w, t, n, q, q + 1, rows, columns, geometry, zero)


@njit(parallel=True, **_OPTIONS)
def depthwise_nhwc(x, w, out, geometry, zero, chunks):
    """``out[n, oh, ow, c] = zero + the sum over taps (i, j) of w[i, j, c] * x[n, oh*sh +
    i*dh - ph, ow*sw + j*dw - pw, c]`` (``geometry``: the image's and result's sizes,
    stride, top/left padding, dilation; ``zero``: the dtype's zero, so a sum starts
    from +0 as NumPy's does), result rows dealt in ``chunks`` across the threads (1: on
    the calling thread)."""
    out_h, kh = out.shape[1], w.shape[0]
    rows = out.shape[0] * out_h
    if chunks > 1:
        for k in prange(chunks):
            taps, columns = np.empty(kh, np.int64), np.empty(2, np.int64)
            for r in range(k * rows // chunks, (k + 1) * rows // chunks):
                _result_row(x, w, out, r // out_h, r % out_h, geometry, zero, taps, columns)
    else:
        taps, columns = np.empty(kh, np.int64), np.empty(2, np.int64)
        for r in range(rows):
            _result_row(x, w, out, r // out_h, r % out_h, geometry, zero, taps, columns)


__all__ = ["depthwise_nhwc"]
