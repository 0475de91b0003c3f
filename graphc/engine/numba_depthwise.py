"""The padded-phase layout of a depthwise convolution (:data:`~.conv_builders.PADDED`):
one plane at a time, the image is copied once into zero-padded *phase planes* (for
stride ``s``, every ``s``-th row and column of the padded image from each offset; one
plane for stride 1), ``Wq`` cells wide. Every tap then reads one phase plane at a fixed
flat offset, so a result plane is a single loop over ``OH * Wq`` cells: nine reads
and one write per cell for a 3x3 kernel, with no edge cases and no wraparound tests
(the loops run on slices indexed from 0, so LLVM vectorises them). The ``Wq - OW``
cells past each result row are computed and dropped when the rows are copied out.

:func:`depthwise2d` runs it plane by plane: for stride 1, and for strides whose
phase rows are wider than the result's (where :mod:`.numba_conv` falls back to tap
rows: TF-style "same" padding as an explicit pad); a plane's scratch is
:func:`padded_cells` long. Each cell sums its taps in row-major order from
zero, as the other layouts do.

>>> import numpy as np
>>> geometry = (4, 4, 4, 4, 1, 1, 1, 1, 1, 1)     # 4x4 images and results, padding 1
>>> x, w = np.ones((1, 1, 16)), np.ones((1, 1, 3, 3))
>>> out, scratch = np.empty((1, 1, 16)), np.empty(padded_cells(geometry, 3, 3))
>>> padded_plane(x, w, out, 0, 0, scratch, geometry)
>>> out[0, 0, :4]
array([4., 6., 6., 4.])
"""
from __future__ import annotations

from numba import njit, prange

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy")


@njit(**_OPTIONS)
def phase_shape(geometry, kh, kw):
    """``(rows, width)`` of one phase plane: the padded cells the taps read, split by
    the stride, plus one row, so the flat reads past a row's last result cell (the
    dropped cells) stay inside the plane."""
    height, width, out_h, out_w, sh, sw, ph, pw, dh, dw = geometry
    need_h = (out_h - 1) * sh + (kh - 1) * dh + 1
    need_w = (out_w - 1) * sw + (kw - 1) * dw + 1
    return -(-need_h // sh) + 1, -(-need_w // sw)


@njit(**_OPTIONS)
def padded_cells(geometry, kh, kw):
    """Scratch cells :func:`padded_plane` needs: the phase planes and one result plane
    of ``OH`` rows of the phases' width."""
    rows, wq = phase_shape(geometry, kh, kw)
    return geometry[4] * geometry[5] * rows * wq + geometry[2] * wq


@njit(**_OPTIONS)
def _copy(target, source, start, step):
    """``target[k] = source[start + k * step]`` for every ``k`` of ``target`` (a step of 2
    is its own loop: with a constant step LLVM vectorises the gather as shuffles)."""
    count = target.shape[0]
    line = source[start:start + (count - 1) * step + 1]
    if step == 1:
        for k in range(count):
            target[k] = line[k]
    elif step == 2:
        for k in range(count):
            target[k] = line[2 * k]
    else:
        for k in range(count):
            target[k] = line[k * step]


@njit(**_OPTIONS)
def _pad(image, padded, height, width, ph, pw, rows, wq):
    """Stride 1: ``image`` copied into the middle of ``padded`` (``rows`` rows of ``wq``
    cells), only the cells around it zeroed."""
    top = min(max(ph, 0), rows)
    padded[:top * wq] = 0
    lo, hi = max(0, -ph), min(height, rows - ph)          # the image rows that land
    left = min(max(pw, 0), wq)
    first = max(0, -pw)                                    # the first image column kept
    count = max(0, min(width - first, wq - left))
    for r in range(lo, hi):
        row = padded[(r + ph) * wq:(r + ph + 1) * wq]
        source = image[r * width + first:r * width + first + count]
        row[:left] = 0
        line = row[left:left + count]
        for q in range(count):
            line[q] = source[q]
        row[left + count:] = 0
    padded[max(top, hi + ph) * wq:] = 0


@njit(**_OPTIONS)
def _split(image, phases, geometry, rows, wq):
    """The zero-padded ``image`` (a flat plane) split into its ``sh * sw`` phase planes
    (``phases``: ``sh * sw * rows * wq`` cells, phase ``a * sw + b`` holding padded
    cell ``(a + sh * r, b + sw * q)`` at ``r * wq + q``). Row by row of each phase: the
    image's cells copied, only the padding around them zeroed."""
    height, width, out_h, out_w, sh, sw, ph, pw = geometry[:8]
    plane = rows * wq
    if sh == 1 and sw == 1:
        _pad(image, phases[:plane], height, width, ph, pw, rows, wq)
        return
    for a in range(sh):
        for b in range(sw):
            base = (a * sw + b) * plane
            first = (b - pw) % sw                 # the first image column of phase b
            at = (first + pw) // sw               # where it lands in a phase row
            count = 0
            if first < width:
                count = max(0, min((width - 1 - first) // sw + 1, wq - at))
            for pr in range(rows):
                r = pr * sh + a - ph              # the image row of phase row pr
                row = phases[base + pr * wq:base + (pr + 1) * wq]
                if 0 <= r < height and count > 0:
                    row[:at] = 0
                    _copy(row[at:at + count], image, r * width + first, sw)
                    row[at + count:] = 0
                else:
                    row[:] = 0


@njit(**_OPTIONS)
def _start(i, j, geometry, rows, wq):
    """Where tap ``(i, j)`` reads in the phase planes for result cell 0."""
    sh, sw, dh, dw = geometry[4], geometry[5], geometry[8], geometry[9]
    a, b = (i * dh) % sh, (j * dw) % sw
    return ((a * sw + b) * rows + (i * dh) // sh) * wq + (j * dw) // sw


@njit(**_OPTIONS)
def _tap(phases, i, j, geometry, rows, wq, cells):
    """The ``cells`` cells tap ``(i, j)`` reads, a slice starting at 0 (it vectorises)."""
    at = _start(i, j, geometry, rows, wq)
    return phases[at:at + cells]


@njit(**_OPTIONS)
def _nine(result, phases, w, geometry, rows, wq):
    """``result[k] = sum over the 3x3 taps (i, j) of w[i, j] times the cell k of what
    tap reads``, in row-major tap order from zero: one pass over the result."""
    n = result.shape[0]
    s0, s1, s2 = (_tap(phases, 0, 0, geometry, rows, wq, n),
                  _tap(phases, 0, 1, geometry, rows, wq, n),
                  _tap(phases, 0, 2, geometry, rows, wq, n))
    s3, s4, s5 = (_tap(phases, 1, 0, geometry, rows, wq, n),
                  _tap(phases, 1, 1, geometry, rows, wq, n),
                  _tap(phases, 1, 2, geometry, rows, wq, n))
    s6, s7, s8 = (_tap(phases, 2, 0, geometry, rows, wq, n),
                  _tap(phases, 2, 1, geometry, rows, wq, n),
                  _tap(phases, 2, 2, geometry, rows, wq, n))
    w0, w1, w2 = w[0, 0], w[0, 1], w[0, 2]
    w3, w4, w5 = w[1, 0], w[1, 1], w[1, 2]
    w6, w7, w8 = w[2, 0], w[2, 1], w[2, 2]
    zero = w0 - w0
    for k in range(n):
        result[k] = (zero + w0 * s0[k] + w1 * s1[k] + w2 * s2[k] + w3 * s3[k] + w4 * s4[k]
                     + w5 * s5[k] + w6 * s6[k] + w7 * s7[k] + w8 * s8[k])


@njit(**_OPTIONS)
def _add_tap(result, tap, source):
    """``result += tap * source`` cell by cell."""
    for k in range(result.shape[0]):
        result[k] += tap * source[k]


@njit(**_OPTIONS)
def _add_three(result, t0, s0, t1, s1, t2, s2):
    """``result += t0 * s0 + t1 * s1 + t2 * s2``, term after term per cell."""
    for k in range(result.shape[0]):
        result[k] = result[k] + t0 * s0[k] + t1 * s1[k] + t2 * s2[k]


@njit(**_OPTIONS)
def padded_plane(x, w, out, n, c, scratch, geometry):
    """Result plane ``out[n, c]`` of the depthwise convolution of ``x[n, c]`` with
    ``w[c, 0]`` (planes flattened), in ``scratch`` (:func:`padded_cells`)."""
    height, width, out_h, out_w, sh, sw, ph, pw, dh, dw = geometry
    kh, kw = w.shape[2], w.shape[3]
    rows, wq = phase_shape(geometry, kh, kw)
    planes = sh * sw * rows * wq
    phases, result = scratch[:planes], scratch[planes:planes + out_h * wq]
    _split(x[n, c], phases, geometry, rows, wq)
    cells, plane = out_h * wq, w[c, 0]
    if kh == 3 and kw == 3:
        _nine(result, phases, plane, geometry, rows, wq)
    else:
        result[:] = 0
        t, taps = 0, kh * kw
        while t < taps:
            i, j = t // kw, t % kw
            if t + 3 <= taps:
                i1, j1, i2, j2 = (t + 1) // kw, (t + 1) % kw, (t + 2) // kw, (t + 2) % kw
                _add_three(result, plane[i, j], _tap(phases, i, j, geometry, rows, wq, cells),
                           plane[i1, j1], _tap(phases, i1, j1, geometry, rows, wq, cells),
                           plane[i2, j2], _tap(phases, i2, j2, geometry, rows, wq, cells))
                t += 3
            else:
                _add_tap(result, plane[i, j], _tap(phases, i, j, geometry, rows, wq, cells))
                t += 1
    target = out[n, c]
    for r in range(out_h):
        _copy(target[r * out_w:(r + 1) * out_w], result, r * wq, 1)


@njit(parallel=True, **_OPTIONS)
def depthwise2d(x, w, out, scratch, geometry, threaded):
    """``out = conv2d(x, w)`` of a depthwise convolution (planes flattened: ``x`` and
    ``out`` ``(N, C, H*W)``, ``w`` ``(C, 1, kh, kw)``), plane by plane; when
    ``threaded`` the planes are dealt in ``scratch.shape[0]`` chunks across threads,
    each in its own ``scratch[k]`` (:func:`padded_cells` long).

    Example: ``conv_kernel(op, [x, w], out, ctx, threaded)`` binds it to a node's
    arrays (:func:`~.conv_builders.conv_kernel`)."""
    channels = x.shape[1]
    units = x.shape[0] * channels
    if threaded:
        chunks = scratch.shape[0]
        for k in prange(chunks):
            for unit in range(k * units // chunks, (k + 1) * units // chunks):
                padded_plane(x, w, out, unit // channels, unit % channels, scratch[k],
                             geometry)
    else:
        for unit in range(units):
            padded_plane(x, w, out, unit // channels, unit % channels, scratch[0], geometry)


__all__ = ["depthwise2d", "padded_plane", "padded_cells", "phase_shape"]
