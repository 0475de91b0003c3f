"""Direct Numba kernels of grouped and depthwise convolutions (NCHW): ``conv2d``,
``conv2d_backward_input`` and ``conv2d_backward_kernel`` with ``groups > 1``.

Imported only by :mod:`.conv_builders` (which plans each node: its layout, tap table
and scratch), once a graph asks for generated kernels; Numba is imported here at the
top. Lowered to GEMMs, a depthwise convolution is ``C`` tiny products
``(1 x 9) @ (9 x HW)`` over a column buffer nine times the image; here each result
plane is summed tap by tap from shifted source planes, with no padded copy and
nothing allocated per run.

Arrays arrive with their planes flattened, ``(N, C, H*W)``, C-contiguous (the kernel
``(O, C/groups, kh, kw)``), with the geometry tuple, a tap table and a layout
(:func:`~.conv_builders.layout`):

- *shifted planes*: a source plane whose rows are as wide as the result's is read
  shifted, ``tap * source[q + shift]`` over a block of whole rows in one loop; the
  edge columns, where a shift wraps from one row into the next, are then summed
  again down the column. With stride 1 the images themselves are those planes; with
  stride ``s`` each image is first split into ``s*s`` *phases* (every ``s``-th row and
  column from an offset) in a scratch buffer, and a tap reads one phase.
- *channels last* (depthwise, small results): a block of channels transposed into
  scratch, each result cell summed as vectors along the channels, transposed back.
- *rows* (what is left: narrower results, as without padding): a tap row adds one
  result row from one image row.

Each kind is one function, compiled once per dtype, never per size: with ``threaded``
a ``prange`` over chunks of its units (image and group, block of channels, or output
channel of the kernel gradient), each chunk in its own scratch; else a plain loop.
Every cell sums its terms in one order in every layout (input channel, tap row, tap
column; the kernel gradient per cell of a block of rows, then over those cells), not
BLAS's: the results agree with the NumPy kernels to rounding, not bit for bit.

>>> import numpy as np
>>> from graphc.engine.conv_builders import SHIFTED, tap_table
>>> geometry = (4, 4, 4, 4, 1, 1, 1, 1, 1, 1)     # 4x4 images and results, padding 1
>>> x, w, taps = np.ones((1, 2, 16)), np.ones((2, 1, 3, 3)), tap_table(geometry, (3, 3), SHIFTED)
>>> out, scratch = np.empty((1, 2, 16)), np.empty((1, 1))
>>> seen = scratch.view()
>>> for a in (x, w, taps, seen):     # read-only, as conv_builders passes them
...     a.flags.writeable = False
>>> conv2d(x, w, out, scratch, seen, taps, SHIFTED, geometry, False)
>>> out[0, 0, :4]
array([4., 6., 6., 4.])
"""
from __future__ import annotations

from numba import njit, prange

from .conv_builders import BLOCK, CHANNELS_LAST, PHASES, ROWS, SHIFTED

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy")

#: cells per tile of a transposition to channels last and back
_TILE = 16


# -- vector loops: on slices indexed from 0 (no wraparound test per element: they vectorise)
@njit(**_OPTIONS)
def _add_scaled(target, tap, source, start, step):
    """``target[k] += tap * source[start + k * step]`` for every ``k`` of ``target``."""
    count = target.shape[0]
    if step == 1:
        line = source[start:start + count]
        for k in range(count):
            target[k] += tap * line[k]
    else:
        strided = source[start:start + (count - 1) * step + 1:step]
        for k in range(count):
            target[k] += tap * strided[k]


@njit(**_OPTIONS)
def _add3(target, t0, s0, t1, s1, t2, s2):
    """``target += t0 * s0 + t1 * s1 + t2 * s2``, term after term per cell (the order of
    three separate passes) in one pass over memory."""
    for k in range(target.shape[0]):
        target[k] = target[k] + t0 * s0[k] + t1 * s1[k] + t2 * s2[k]


@njit(**_OPTIONS)
def _add3_products(target, a0, b0, a1, b1, a2, b2):
    """``target += a0 * b0 + a1 * b1 + a2 * b2``, term after term per cell."""
    for k in range(target.shape[0]):
        target[k] = target[k] + a0[k] * b0[k] + a1[k] * b1[k] + a2[k] * b2[k]


@njit(**_OPTIONS)
def _add_products(target, first, second):
    """``target += first * second``, cell by cell."""
    for k in range(target.shape[0]):
        target[k] += first[k] * second[k]


# -- the shifted layouts ----------------------------------------------------------------------
@njit(**_OPTIONS)
def _inner_columns(taps, kh):
    """The result columns where every tap column reads inside the image."""
    inner_lo, inner_hi = 0, 1 << 62
    for j in range(kh, taps.shape[0]):
        inner_lo, inner_hi = max(inner_lo, taps[j, 2]), min(inner_hi, taps[j, 3])
    return inner_lo, max(inner_lo, inner_hi)


@njit(**_OPTIONS)
def _shifted_plane(target, out_h, out_w, planes, taps, w, a0, a_step, b0, b_step):
    """``target`` (``out_h`` rows of ``out_w``, flat): the sum over ``m, i, j`` of
    ``w[a0 + m * a_step, b0 + m * b_step, i, j]`` times the cells of image ``m`` that tap
    reads (``planes[m]``: its phases, rows of ``out_w``; ``taps``: see
    :func:`~.conv_builders.tap_table`).
    Per block of rows: one pass per tap row (three taps a pass); then the edge columns,
    where a shift wraps across rows, zeroed and summed again down the column."""
    kh, kw = w.shape[2], w.shape[3]
    inner_lo, inner_hi = _inner_columns(taps, kh)
    rows = max(1, BLOCK // out_w)
    for r0 in range(0, out_h, rows):
        r1 = min(out_h, r0 + rows)
        target[r0 * out_w:r1 * out_w] = 0
        for m in range(planes.shape[0] if inner_lo < inner_hi else 0):
            a, b, image = a0 + m * a_step, b0 + m * b_step, planes[m]
            for i in range(kh):
                row_phase, shift = taps[i, 0], taps[i, 1]
                lo, hi = max(taps[i, 2], r0), min(taps[i, 3], r1)
                if lo >= hi:
                    continue
                start = lo * out_w + inner_lo
                block = target[start:(hi - 1) * out_w + inner_hi]
                first, count, j = start + shift * out_w, block.shape[0], 0
                while j < kw:
                    at = first + taps[kh + j, 1]
                    s0 = image[row_phase + taps[kh + j, 0], at:at + count]
                    if j + 3 <= kw:
                        at1, at2 = first + taps[kh + j + 1, 1], first + taps[kh + j + 2, 1]
                        _add3(block, w[a, b, i, j], s0,
                              w[a, b, i, j + 1], image[row_phase + taps[kh + j + 1, 0],
                                                       at1:at1 + count],
                              w[a, b, i, j + 2], image[row_phase + taps[kh + j + 2, 0],
                                                       at2:at2 + count])
                        j += 3
                    else:
                        _add_scaled(block, w[a, b, i, j], s0, 0, 1)
                        j += 1
        for c in range(out_w):
            if inner_lo <= c < inner_hi:
                continue
            column = target[r0 * out_w + c:(r1 - 1) * out_w + c + 1:out_w]
            column[:] = 0
            for m in range(planes.shape[0]):
                a, b = a0 + m * a_step, b0 + m * b_step
                for i in range(kh):
                    lo, hi = max(taps[i, 2], r0), min(taps[i, 3], r1)
                    for j in range(kw if lo < hi else 0):
                        if taps[kh + j, 2] <= c < taps[kh + j, 3]:
                            _add_scaled(column[lo - r0:hi - r0], w[a, b, i, j],
                                        planes[m, taps[i, 0] + taps[kh + j, 0]],
                                        (lo + taps[i, 1]) * out_w + c + taps[kh + j, 1], out_w)


@njit(**_OPTIONS)
def _split_phases(image, scratch, geometry):
    """``image`` (a flat plane) split into its ``sh * sw`` phases in ``scratch``, rows of
    ``out_w`` (the cells past a phase's width are never read as terms)."""
    height, width, out_h, out_w, sh, sw = geometry[:6]
    rows = -(-height // sh)
    planes = scratch[:sh * sw * rows * out_w].reshape((sh * sw, rows * out_w))
    for pi in range(sh):
        for t in range((height - pi + sh - 1) // sh):
            source = image[(pi + t * sh) * width:(pi + t * sh + 1) * width]
            if sw == 2:     # both phases in one loop of constant stride: it vectorises
                even = planes[pi * 2, t * out_w:(t + 1) * out_w]
                odd = planes[pi * 2 + 1, t * out_w:(t + 1) * out_w]
                for k in range(width // 2):
                    even[k] = source[2 * k]
                    odd[k] = source[2 * k + 1]
                if width % 2:
                    even[width // 2] = source[width - 1]
                continue
            for pj in range(sw):
                phase = planes[pi * sw + pj, t * out_w:(t + 1) * out_w]
                for k in range((width - pj + sw - 1) // sw):
                    phase[k] = source[pj + k * sw]


# -- rows: what no shifted layout covers ---------------------------------------------------------
@njit(**_OPTIONS)
def _conv2d_rows(x, w, out, n, o, c0, taps, geometry):
    """Result plane ``out[n, o]`` row by row: each row zeroed, then tap after tap of each
    input channel ``c0 + ci`` added from one image row (strided for stride > 1)."""
    height, width, out_h, out_w, sh, sw = geometry[:6]
    cg, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    for oh in range(out_h):
        row = out[n, o, oh * out_w:(oh + 1) * out_w]
        row[:] = 0
        for ci in range(cg):
            for i in range(kh):
                if not taps[i, 2] <= oh < taps[i, 3]:
                    continue
                ih = oh * sh + taps[i, 1]
                source = x[n, c0 + ci, ih * width:(ih + 1) * width]
                for j in range(kw):
                    lo, hi = taps[kh + j, 2], taps[kh + j, 3]
                    if lo < hi:
                        _add_scaled(row[lo:hi], w[o, ci, i, j], source,
                                    lo * sw + taps[kh + j, 1], sw)


@njit(**_OPTIONS)
def _backward_input_rows(g, w, out, n, c, o0, per_group, taps, geometry):
    """Input-gradient plane ``out[n, c]`` row by row: each row zeroed, then the gradient
    rows whose windows reach it (one per tap row at most) scattered in, tap by tap
    (``taps``: the forward convolution's, in :data:`ROWS`)."""
    height, width, out_h, out_w, sh, sw = geometry[:6]
    cg, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    ci = c % cg
    for ih in range(height):
        row = out[n, c, ih * width:(ih + 1) * width]
        row[:] = 0
        for o in range(o0, o0 + per_group):
            for i in range(kh):
                reach = ih - taps[i, 1]
                if reach < 0 or reach % sh != 0 or reach // sh >= out_h:
                    continue
                source = g[n, o, (reach // sh) * out_w:(reach // sh + 1) * out_w]
                for j in range(kw):
                    lo, hi = taps[kh + j, 2], taps[kh + j, 3]
                    if lo < hi:
                        at = lo * sw + taps[kh + j, 1]
                        _add_scaled(row[at:at + (hi - lo - 1) * sw + 1:sw], w[o, ci, i, j],
                                    source, lo, 1)


# -- channels last: small depthwise images ---------------------------------------------------
@njit(**_OPTIONS)
def _channels_last(x, w, out, n, c_lo, c_hi, scratch, taps, geometry):
    """Depthwise planes ``c_lo:c_hi`` of image ``n``: the images and taps transposed into
    ``scratch`` (channels last), each result cell summed tap by tap as vectors along
    the channels (``taps``: :data:`ROWS`' table), transposed back into ``out``."""
    height, width, out_h, out_w, sh, sw = geometry[:6]
    kh, kw = w.shape[2], w.shape[3]
    block, cells, out_cells = c_hi - c_lo, height * width, out_h * out_w
    image = scratch[:cells * block].reshape((cells, block))
    result = scratch[cells * block:(cells + out_cells) * block].reshape((out_cells, block))
    weights = scratch[(cells + out_cells) * block:
                      (cells + out_cells + kh * kw) * block].reshape((kh * kw, block))
    for q0 in range(0, cells, _TILE):    # in tiles of cells: the rows written stay in L1
        for c in range(block):
            plane = x[n, c_lo + c]
            for q in range(q0, min(cells, q0 + _TILE)):
                image[q, c] = plane[q]
    for c in range(block):
        for i in range(kh):
            for j in range(kw):
                weights[i * kw + j, c] = w[c_lo + c, 0, i, j]
    inner_lo, inner_hi = _inner_columns(taps, kh)
    for oh in range(out_h):
        for ow in range(out_w):
            cell = result[oh * out_w + ow]
            cell[:] = 0
            inner = inner_lo <= ow < inner_hi       # every tap column reads the image
            for i in range(kh):
                if not taps[i, 2] <= oh < taps[i, 3]:
                    continue
                at, t, j = (oh * sh + taps[i, 1]) * width + ow * sw, i * kw, 0
                while j < kw:
                    if inner and j + 3 <= kw:
                        _add3_products(cell, weights[t + j], image[at + taps[kh + j, 1]],
                                       weights[t + j + 1], image[at + taps[kh + j + 1, 1]],
                                       weights[t + j + 2], image[at + taps[kh + j + 2, 1]])
                        j += 3
                        continue
                    if taps[kh + j, 2] <= ow < taps[kh + j, 3]:
                        _add_products(cell, weights[t + j], image[at + taps[kh + j, 1]])
                    j += 1
    for q0 in range(0, out_cells, _TILE):
        for c in range(block):
            plane = out[n, c_lo + c]
            for q in range(q0, min(out_cells, q0 + _TILE)):
                plane[q] = result[q, c]


@njit(**_OPTIONS)
def _channel_blocks(channels, scratch, geometry, kernel_cells):
    """(channels per block, blocks per image) of :data:`CHANNELS_LAST` in ``scratch``."""
    height, width, out_h, out_w = geometry[:4]
    block = max(1, scratch.shape[1] // (height * width + out_h * out_w + kernel_cells))
    return block, (channels + block - 1) // block


# -- the three kinds, one unit (image and group, or block of channels) at a time -----------------
@njit(**_OPTIONS)
def _conv2d_unit(x, w, out, unit, scratch, seen, taps, mode, geometry, block):
    height, width, out_h, out_w, sh, sw = geometry[:6]
    cg = w.shape[1]
    groups = x.shape[1] // cg
    per_group = out.shape[1] // groups
    n, c0, o0 = unit // groups, (unit % groups) * cg, (unit % groups) * per_group
    if mode == CHANNELS_LAST:
        blocks = (out.shape[1] + block - 1) // block
        n, c0 = unit // blocks, (unit % blocks) * block
        _channels_last(x, w, out, n, c0, min(out.shape[1], c0 + block), scratch, taps,
                       geometry)
    elif mode == SHIFTED:
        planes = x[n, c0:c0 + cg].reshape((cg, 1, height * width))
        for o in range(o0, o0 + per_group):
            _shifted_plane(out[n, o], out_h, out_w, planes, taps, w, o, 0, 0, 1)
    elif mode == PHASES:
        cells = sh * sw * -(-height // sh) * out_w
        for ci in range(cg):
            _split_phases(x[n, c0 + ci], scratch[ci * cells:(ci + 1) * cells], geometry)
        phases = seen[:cg * cells].reshape((cg, sh * sw, cells // (sh * sw)))
        for o in range(o0, o0 + per_group):
            _shifted_plane(out[n, o], out_h, out_w, phases, taps, w, o, 0, 0, 1)
    else:
        for o in range(o0, o0 + per_group):
            _conv2d_rows(x, w, out, n, o, c0, taps, geometry)


@njit(**_OPTIONS)
def _mirrored(geometry):
    """The geometry of the input gradient (stride 1) read as a convolution of the
    gradient: the gradient is the image, the input's shape the result's."""
    height, width, out_h, out_w, sh, sw, ph, pw, dh, dw = geometry
    return (out_h, out_w, height, width, 1, 1, ph, pw, dh, dw)


@njit(**_OPTIONS)
def _backward_input_unit(g, w, out, unit, scratch, taps, mode, geometry, block):
    height, width, out_h, out_w = geometry[:4]
    cg = w.shape[1]
    groups = out.shape[1] // cg
    per_group = g.shape[1] // groups
    n, c0, o0 = unit // groups, (unit % groups) * cg, (unit % groups) * per_group
    if mode == CHANNELS_LAST:
        blocks = (out.shape[1] + block - 1) // block
        n, c0 = unit // blocks, (unit % blocks) * block
        _channels_last(g, w, out, n, c0, min(out.shape[1], c0 + block), scratch, taps,
                       _mirrored(geometry))
    elif mode == SHIFTED:
        planes = g[n, o0:o0 + per_group].reshape((per_group, 1, out_h * out_w))
        for ci in range(cg):
            _shifted_plane(out[n, c0 + ci], height, width, planes, taps, w, o0, 1, ci, 0)
    else:
        for c in range(c0, c0 + cg):
            _backward_input_rows(g, w, out, n, c, o0, per_group, taps, geometry)


@njit(parallel=True, **_OPTIONS)
def conv2d(x, w, out, scratch, seen, taps, mode, geometry, threaded):
    """``out = conv2d(x, w)``, grouped (``C // w.shape[1]`` groups), unit by unit (image
    and group, or block of channels); when ``threaded`` the units are dealt in
    ``scratch.shape[0]`` chunks across threads, each working in its own ``scratch[k]``
    (:func:`~.conv_builders.scratch_cells`), else they run in a plain loop in
    ``scratch[0]``. ``seen`` is ``scratch`` read-only: phases written through ``scratch``
    are read through it, typed as the images are (one compilation of the loops for both).
    The module's example calls it; :func:`~.conv_builders.conv_kernel` binds it to a node."""
    block, blocks = _channel_blocks(out.shape[1], scratch, geometry, w.shape[2] * w.shape[3])
    units = out.shape[0] * (blocks if mode == CHANNELS_LAST else x.shape[1] // w.shape[1])
    if threaded:
        chunks = scratch.shape[0]
        for k in prange(chunks):
            for unit in range(k * units // chunks, (k + 1) * units // chunks):
                _conv2d_unit(x, w, out, unit, scratch[k], seen[k], taps, mode, geometry, block)
    else:
        for unit in range(units):
            _conv2d_unit(x, w, out, unit, scratch[0], seen[0], taps, mode, geometry, block)


@njit(parallel=True, **_OPTIONS)
def conv2d_backward_input(g, w, out, scratch, taps, mode, geometry, threaded):
    """``out = conv2d_backward_input(g, w)`` (``out``: the input's shape), unit by unit
    as :func:`conv2d` (``taps``: mirrored in the shifted layouts).

    Example: ``conv_kernel(op, [g, w], out, ctx, threaded)`` binds it to a node's arrays
    (:func:`~.conv_builders.conv_kernel`)."""
    block, blocks = _channel_blocks(out.shape[1], scratch, _mirrored(geometry),
                                    w.shape[2] * w.shape[3])
    units = out.shape[0] * (blocks if mode == CHANNELS_LAST else out.shape[1] // w.shape[1])
    if threaded:
        chunks = scratch.shape[0]
        for k in prange(chunks):
            for unit in range(k * units // chunks, (k + 1) * units // chunks):
                _backward_input_unit(g, w, out, unit, scratch[k], taps, mode, geometry, block)
    else:
        for unit in range(units):
            _backward_input_unit(g, w, out, unit, scratch[0], taps, mode, geometry, block)


# -- the kernel gradient --------------------------------------------------------------------------
@njit(**_OPTIONS)
def _backward_kernel_channel(x, g, out, o, lanes, scratch, seen, taps, mode, geometry):
    """Kernel-gradient taps ``out[o]``. Per input channel, each tap's products are summed
    per cell of a block of result rows into its lane (independent sums: the loops
    vectorise), over every image and block; then each lane is summed in order over the
    cells where the tap reads the image (in a shifted layout a tap's loop runs over
    whole rows, and where its shift wraps the products are not terms)."""
    height, width, out_h, out_w, sh, sw = geometry[:6]
    cg, kh, kw = out.shape[1], out.shape[2], out.shape[3]
    c0 = (o // (g.shape[1] // (x.shape[1] // cg))) * cg
    rows = lanes.shape[1] // out_w
    for ci in range(cg):
        lanes[:, :rows * out_w] = 0
        for n in range(x.shape[0]):
            grads = g[n, o]
            if mode == PHASES:
                _split_phases(x[n, c0 + ci], scratch, geometry)
                cells = -(-height // sh) * out_w
                planes = seen[:sh * sw * cells].reshape((sh * sw, cells))
            else:
                planes = x[n, c0 + ci:c0 + ci + 1]
            for r0 in range(0, out_h, rows):
                r1 = min(out_h, r0 + rows)
                for i in range(kh):
                    lo, hi = max(taps[i, 2], r0), min(taps[i, 3], r1)
                    for j in range(kw if lo < hi else 0):
                        c_lo, c_hi = taps[kh + j, 2], taps[kh + j, 3]
                        lane = lanes[i * kw + j]
                        source = planes[taps[i, 0] + taps[kh + j, 0]]
                        if mode != ROWS:
                            start, stop = lo * out_w + c_lo, (hi - 1) * out_w + c_hi
                            at = start + taps[i, 1] * out_w + taps[kh + j, 1]
                            _add_products(lane[start - r0 * out_w:stop - r0 * out_w],
                                          grads[start:stop], source[at:at + stop - start])
                        elif c_lo < c_hi:
                            for oh in range(lo, hi):
                                at = (oh * sh + taps[i, 1]) * width + c_lo * sw + taps[kh + j, 1]
                                cells = (oh - r0) * out_w
                                _add_products(lane[cells + c_lo:cells + c_hi],
                                              grads[oh * out_w + c_lo:oh * out_w + c_hi],
                                              source[at:at + (c_hi - c_lo - 1) * sw + 1:sw])
        for i in range(kh):
            for j in range(kw):
                lane = lanes[i * kw + j]
                out[o, ci, i, j] = 0
                for r in range(min(rows, out_h)):
                    for c in range(taps[kh + j, 2], taps[kh + j, 3]):
                        out[o, ci, i, j] += lane[r * out_w + c]


@njit(parallel=True, **_OPTIONS)
def conv2d_backward_kernel(x, g, out, lanes, scratch, seen, taps, mode, geometry, threaded):
    """``out = conv2d_backward_kernel(x, g)`` (``out``: the kernel's shape), output channel
    by output channel; when ``threaded`` they are dealt in ``lanes.shape[0]`` chunks
    across threads, each summing in its own ``lanes[k]`` (``(kh*kw, a multiple of
    OW)``) and splitting phases into ``scratch[k]`` (read through ``seen[k]``, as in
    :func:`conv2d`).

    Example: ``conv_kernel(op, [x, g], out, ctx, threaded)`` binds it to a node's arrays
    (:func:`~.conv_builders.conv_kernel`)."""
    channels = out.shape[0]
    if threaded:
        chunks = lanes.shape[0]
        for k in prange(chunks):
            for o in range(k * channels // chunks, (k + 1) * channels // chunks):
                _backward_kernel_channel(x, g, out, o, lanes[k], scratch[k], seen[k], taps,
                                         mode, geometry)
    else:
        for o in range(channels):
            _backward_kernel_channel(x, g, out, o, lanes[0], scratch[0], seen[0], taps, mode,
                                     geometry)


__all__ = ["conv2d", "conv2d_backward_input", "conv2d_backward_kernel"]
