"""Numba kernels of the NCHW window ops: ``im2col``, ``col2im``, the max and average
poolings and their backward ops. Imported only when a graph asks for generated
kernels (it imports Numba); :mod:`.window_builders` binds them to a node's arrays.

Every array is passed flat (1-D, C-contiguous) with the node's ``geometry``, a tuple
``(N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, FIRST, FLAT)``: the image,
the windows' grid, kernel, stride, top/left padding, dilation, the first tap that
reads a real cell for every window (``-1`` if none) and the columns' layout. One
compilation per kind and dtype serves every shape; ``threaded`` picks, at run time,
a ``prange`` over the work items or a plain loop (no threads at all).

Results are those of :mod:`.neural_kernels`, bit for bit, because each output cell
sees the same operations in the same order. The NumPy kernels make one pass over
the whole array per kernel tap; these make the same passes over one output row or
image plane at a time, while it is in cache, and split the rows or planes across
the cores:

- ``im2col`` with stride 1 and rows as wide as the image's: one work item per tap of
  a plane, a flat copy of the shifted image and zeros on the padding.
- ``im2col`` otherwise, and the forward poolings: one work item per output row. For each tap,
  row-major, the row takes the tap's cells: copied (``im2col``, zeros on the
  padding), or combined into it as ``np.maximum(row, cells)`` (NaN wins, a tie keeps
  the cell) or ``row + cells``, after starting from the tap ``FIRST`` (else ``-inf``
  or ``0``); average pooling then divides by the NumPy kernel's own counts.
- ``col2im`` and the backward poolings: one work item per image plane (no two threads
  write a cell), zeroed, then for each tap, row-major, its windows' values added to
  the cells under it, so each cell's sum runs in tap order. Max pooling's gradient
  goes to each window's first cell, row-major, equal to its maximum (its first NaN
  when the maximum is NaN), found per window: no masks. There the windows are visited
  in *reverse* row-major order, since a later window reaches a cell through an
  earlier tap: each cell still sums in tap order.

>>> import numpy as np
>>> x, out = np.arange(16.0), np.empty(4)
>>> geometry = (1, 1, 4, 4, 2, 2, 2, 2, 2, 2, 0, 0, 1, 1, 0, 0)   # 2x2 windows, stride 2
>>> max_pool2d(x, out, geometry, False); out
array([ 5.,  7., 13., 15.])
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(nogil=True, cache=True)
def _valid(out_size, size, stride, offset):
    """Output indices ``[lo, hi)`` whose input index ``o * stride + offset`` lies in
    ``[0, size)`` (:func:`graphc.shape.neural.valid_range`, ``lo`` kept <= ``out_size``)."""
    lo = -(offset // stride) if offset < 0 else 0
    hi = (size - 1 - offset) // stride + 1 if size - 1 - offset >= 0 else 0
    lo = min(lo, out_size)
    return lo, max(lo, min(out_size, hi))


#: cells of whole planes one work item of a stride-1 average pooling covers
POOL_PLANE_CELLS = 2048


# -- runs of cells: ``count`` cells from position ``d`` of ``dst`` (and ``s`` of ``src``) ------
# Indices go through ``_at``: an unsigned index, which Numba does not test for a negative
# value to wrap around, so LLVM vectorises these loops (a signed one keeps them scalar).
@njit(nogil=True, cache=True)
def _at(position):
    return np.uint64(position)


@njit(nogil=True, cache=True)
def _fill(dst, d, count, value):
    for k in range(count):
        dst[_at(d + k)] = value


@njit(nogil=True, cache=True)
def _copy(dst, d, src, s, step, count):
    """``dst[d + k] = src[s + k * step]``."""
    for k in range(count):
        dst[_at(d + k)] = src[_at(s + k * step)]


@njit(nogil=True, cache=True)
def _maximum(dst, d, src, s, step, count):
    """``dst[d + k] = np.maximum(dst[d + k], src[s + k * step])``: NaN wins, a tie
    takes the ``src`` cell (the sign of a zero shows it)."""
    for k in range(count):
        a, v = dst[_at(d + k)], src[_at(s + k * step)]
        dst[_at(d + k)] = a if (a > v) | (a != a) else v


@njit(nogil=True, cache=True)
def _add(dst, d, dst_step, src, s, src_step, count):
    """``dst[d + k * dst_step] += src[s + k * src_step]``."""
    for k in range(count):
        dst[_at(d + k * dst_step)] += src[_at(s + k * src_step)]


# -- one work item each ----------------------------------------------------------------------
@njit(nogil=True, cache=True)
def _block_start(geometry, p, t):
    """Where tap ``t``'s block of plane ``p`` starts in the columns, and how far apart
    the taps' blocks are: ``(N, C, KH, KW, OH, OW)``, or ``(C, KH, KW, N, OH, OW)`` when
    ``FLAT``."""
    N, C, H, W, OH, OW, KH, KW = geometry[:8]
    if geometry[15]:
        return ((p % C * KH * KW + t) * N + p // C) * OH * OW, N * OH * OW
    return (p * KH * KW + t) * OH * OW, OH * OW


@njit(nogil=True, cache=True)
def _im2col_row(x, cols, geometry, r):
    """Output row ``oh`` of plane ``p`` (``r = p * OH + oh``) of every tap's block."""
    N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, FIRST, FLAT = geometry
    p, oh = r // OH, r % OH
    base, tap_stride = _block_start(geometry, p, 0)
    base += oh * OW
    for i in range(KH):
        h = oh * SH - PT + i * DH
        for j in range(KW):
            o = base + (i * KW + j) * tap_stride
            if h < 0 or h >= H:
                _fill(cols, o, OW, 0)
                continue
            offset = j * DW - PL
            lo, hi = _valid(OW, W, SW, offset)
            _fill(cols, o, lo, 0)
            _copy(cols, o + lo, x, (p * H + h) * W + lo * SW + offset, SW, hi - lo)
            _fill(cols, o + hi, OW - hi, 0)


@njit(nogil=True, cache=True)
def _im2col_row_pairs(x, cols, geometry, r, phases):
    """:func:`_im2col_row` for a column stride of 2: each input row the window reads is
    first split into its even and odd cells (``phases``, one row's worth), so every
    tap copies a contiguous run of one phase (a strided read per tap ran the stem's
    7x7 im2col at 2.5 GB/s)."""
    N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, FIRST, FLAT = geometry
    p, oh = r // OH, r % OH
    base, tap_stride = _block_start(geometry, p, 0)
    base += oh * OW
    half = (W + 1) // 2
    for i in range(KH):
        h = oh * SH - PT + i * DH
        if h < 0 or h >= H:
            for j in range(KW):
                _fill(cols, base + (i * KW + j) * tap_stride, OW, 0)
            continue
        row = x[(p * H + h) * W:(p * H + h + 1) * W]
        for q in range(W // 2):
            phases[q] = row[2 * q]
            phases[half + q] = row[2 * q + 1]
        if W % 2:
            phases[half - 1] = row[W - 1]
        for j in range(KW):
            o = base + (i * KW + j) * tap_stride
            offset = j * DW - PL
            lo, hi = _valid(OW, W, 2, offset)
            first = lo * 2 + offset                 # the input column of cell lo
            _fill(cols, o, lo, 0)
            _copy(cols, o + lo, phases, (first % 2) * half + first // 2, 1, hi - lo)
            _fill(cols, o + hi, OW - hi, 0)


@njit(nogil=True, cache=True)
def _im2col_block(x, cols, geometry, item):
    """The whole block of tap ``t`` of plane ``p`` (``item = p * KH * KW + t``) when the
    result rows are the image's (stride 1, ``OW == W``): one flat copy of the image
    shifted by the tap's offset, then zeros on the rows and the edge columns the
    padding covers (where the flat copy read a neighbouring row's cells)."""
    N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, FIRST, FLAT = geometry
    p, t = item // (KH * KW), item % (KH * KW)
    i, j = t // KW, t % KW
    o = _block_start(geometry, p, t)[0]
    r_lo, r_hi = _valid(OH, H, 1, i * DH - PT)
    q_lo, q_hi = _valid(OW, W, 1, j * DW - PL)
    if r_lo >= r_hi or q_lo >= q_hi:
        _fill(cols, o, OH * OW, 0)
        return
    _fill(cols, o, r_lo * OW, 0)
    start, stop = r_lo * OW + q_lo, (r_hi - 1) * OW + q_hi
    _copy(cols, o + start, x, p * H * W + start + (i * DH - PT) * W + j * DW - PL, 1,
          stop - start)
    _fill(cols, o + r_hi * OW, (OH - r_hi) * OW, 0)
    for r in range(r_lo, r_hi):
        _fill(cols, o + r * OW, q_lo, 0)
        _fill(cols, o + r * OW + q_hi, OW - q_hi, 0)


@njit(nogil=True, cache=True)
def _col2im_plane(cols, out, geometry, p):
    """Plane ``p`` of the image: zero, then each tap's column block added, row-major."""
    N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, FIRST, FLAT = geometry
    image = p * H * W
    _fill(out, image, H * W, 0)
    for i in range(KH):
        lo_h, hi_h = _valid(OH, H, SH, i * DH - PT)
        for j in range(KW):
            lo_w, hi_w = _valid(OW, W, SW, j * DW - PL)
            block = (p * KH * KW + i * KW + j) * OH * OW
            for oh in range(lo_h, hi_h):
                dst = image + (oh * SH + i * DH - PT) * W + lo_w * SW + j * DW - PL
                _add(out, dst, SW, cols, block + oh * OW + lo_w, 1, hi_w - lo_w)


@njit(nogil=True, cache=True)
def _max_pool_row(x, out, geometry, r):
    """As :func:`.neural_kernels.max_pool2d`, one output row: the full tap copied (or
    ``-inf``), then ``np.maximum`` with each other tap's cells, row-major."""
    N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, FIRST, FLAT = geometry
    p, oh = r // OH, r % OH
    h0, o, plane = oh * SH - PT, r * OW, p * H * W
    if FIRST >= 0:
        i, j = FIRST // KW, FIRST % KW
        _copy(out, o, x, plane + (h0 + i) * W + j - PL, SW, OW)
    else:
        _fill(out, o, OW, -np.inf)
    for i in range(max(0, -h0), min(KH, H - h0)):
        for j in range(KW):
            if i * KW + j != FIRST:
                lo, hi = _valid(OW, W, SW, j - PL)
                _maximum(out, o + lo, x, plane + (h0 + i) * W + lo * SW + j - PL, SW, hi - lo)


@njit(nogil=True, cache=True, error_model="numpy")
def _avg_pool_row(x, counts, out, geometry, r):
    """As :func:`.neural_kernels.avg_pool2d`, one output row: the full tap copied (or
    ``0``), each other tap's cells added, row-major, then the row divided by its counts."""
    N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, FIRST, FLAT = geometry
    p, oh = r // OH, r % OH
    h0, o, plane = oh * SH - PT, r * OW, p * H * W
    if FIRST >= 0:
        i, j = FIRST // KW, FIRST % KW
        _copy(out, o, x, plane + (h0 + i) * W + j - PL, SW, OW)
    else:
        _fill(out, o, OW, 0)
    for i in range(max(0, -h0), min(KH, H - h0)):
        for j in range(KW):
            if i * KW + j != FIRST:
                lo, hi = _valid(OW, W, SW, j - PL)
                _add(out, o + lo, 1, x, plane + (h0 + i) * W + lo * SW + j - PL, SW, hi - lo)
    for k in range(OW):
        out[_at(o + k)] = out[_at(o + k)] / counts[_at(oh * OW + k)]


@njit(nogil=True, cache=True)
def _tap_masks(geometry, planes):
    """``(KH * KW, planes * H * W)``: whether a tap's shifted cell lies in its window
    (the same plane and row), over ``planes`` whole planes."""
    N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL = geometry[:12]
    size = H * W
    masks = np.zeros((KH * KW, planes * size), np.bool_)
    for t in range(KH * KW):
        (r_lo, r_hi), (c_lo, c_hi) = _valid(H, H, 1, t // KW - PT), _valid(W, W, 1, t % KW - PL)
        for r in range(r_lo, r_hi):
            masks[t, r * W + c_lo:r * W + c_hi] = True
        for p in range(1, planes):
            masks[t, p * size:(p + 1) * size] = masks[t, :size]
    return masks


@njit(nogil=True, cache=True)
def _avg_pool_planes(x, counts, out, geometry, item, per, masks):
    """As :func:`_avg_pool_row`, for stride-1 windows that keep the image's size
    (Inception's 3x3 pools), on work item ``item``'s ``per`` whole planes: each tap
    added over them all at once, in one flat run LLVM vectorises with masked stores
    (rows of 17 cells kept the row kernel to its loop overhead: 768x17x17 0.61 ->
    0.12 ms; 2048x8x8 0.82 -> 0.08 ms), taps in the rows' order, so each cell sums as
    there. A cell whose shifted read leaves its window (``masks``) is skipped."""
    N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, FIRST, FLAT = geometry
    size, total = H * W, N * C * H * W
    start = item * per * size
    end = min(total, start + per * size)
    _copy(out, start, x, start, 1, end - start)       # the full tap: the centre, unshifted
    for t in range(KH * KW):
        if t == FIRST:
            continue
        shift = (t // KW - PT) * W + t % KW - PL
        mask = masks[t]
        # cells whose read would leave the array are outside their windows too
        for o in range(max(start, -shift), min(end, total - shift)):
            if mask[_at(o - start)]:
                out[_at(o)] += x[_at(o + shift)]
    for plane in range(start, end, size):
        for o in range(size):
            out[_at(plane + o)] = out[_at(plane + o)] / counts[_at(o)]


@njit(nogil=True, cache=True)
def _window_span(o, stride, pad, kernel, size):
    """``(first input cell, first and end tap not on padding)`` of window ``o``."""
    start = o * stride - pad
    return start, max(0, -start), min(kernel, size - start)


@njit(nogil=True, cache=True)
def _max_pool_backward_plane(x, y, g, out, geometry, p):
    """Plane ``p``: each window's gradient added to its first cell, row-major, equal to
    its maximum (its first NaN if that is NaN); windows in reverse row-major order."""
    N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, FIRST, FLAT = geometry
    image = p * H * W
    _fill(out, image, H * W, 0)
    for oh in range(OH - 1, -1, -1):
        h0, i_lo, i_hi = _window_span(oh, SH, PT, KH, H)
        for ow in range(OW - 1, -1, -1):
            w0, j_lo, j_hi = _window_span(ow, SW, PL, KW, W)
            window = (p * OH + oh) * OW + ow
            m = y[_at(window)]
            found = -1
            for i in range(i_lo, i_hi):
                row = image + (h0 + i) * W + w0
                for j in range(j_lo, j_hi):
                    v = x[_at(row + j)]
                    if v == m or (v != v and m != m):
                        found = row + j
                        break
                if found >= 0:
                    break
            if found >= 0:
                out[_at(found)] += g[_at(window)]


@njit(nogil=True, cache=True, error_model="numpy")
def _avg_pool_backward_plane(g, counts, out, geometry, p):
    """Plane ``p``: zero, then for each tap, row-major, every window's ``g / count``
    added to the window's cell under that tap."""
    N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, FIRST, FLAT = geometry
    image = p * H * W
    _fill(out, image, H * W, 0)
    for i in range(KH):
        lo_h, hi_h = _valid(OH, H, SH, i - PT)
        for j in range(KW):
            lo_w, hi_w = _valid(OW, W, SW, j - PL)
            for oh in range(lo_h, hi_h):
                dst = image + (oh * SH + i - PT) * W + lo_w * SW + j - PL
                window = oh * OW + lo_w
                for k in range(hi_w - lo_w):
                    share = g[_at(p * OH * OW + window + k)] / counts[_at(window + k)]
                    out[_at(dst + k * SW)] += share


# -- the kernels: every work item of a node, on every core when threaded -----------------------
# One function per kind, not one for all: a kernel costs one to two seconds to compile cold
# per dtype, and a graph pays only for the kinds it holds.


@njit(parallel=True, nogil=True, cache=True)
def im2col(x, cols, geometry, threaded):
    """``cols`` (flat ``(N, C*KH*KW, OH*OW)``, or ``(C*KH*KW, N*OH*OW)`` when ``FLAT``)
    from the image ``x``, zeros on the padding: a tap's whole block at once where the
    result rows are the image's (stride 1, "same" width), else row by row (each input
    row split into its even and odd cells first for a column stride of 2)."""
    N, C, H, W, OH, OW, KH, KW, SH, SW = geometry[:10]
    # a loop per kind of work item, not one loop over an item that branches: that
    # dispatch cost small planes a third more (512x7x7: 80 -> 113 us)
    if SH == 1 and SW == 1 and OW == W:
        items = N * C * KH * KW
        if threaded:
            for k in prange(items):
                _im2col_block(x, cols, geometry, k)
        else:
            for k in range(items):
                _im2col_block(x, cols, geometry, k)
        return
    items = N * C * OH
    if SW == 2:
        if threaded:
            for k in prange(items):
                _im2col_row_pairs(x, cols, geometry, k, np.empty(W + 1, x.dtype))
        else:
            phases = np.empty(W + 1, x.dtype)
            for k in range(items):
                _im2col_row_pairs(x, cols, geometry, k, phases)
        return
    if threaded:
        for k in prange(items):
            _im2col_row(x, cols, geometry, k)
    else:
        for k in range(items):
            _im2col_row(x, cols, geometry, k)


@njit(parallel=True, nogil=True, cache=True)
def col2im(cols, out, geometry, threaded):
    """The image ``out`` summing the windows held in ``cols`` (``(N, C*KH*KW, OH*OW)``)."""
    items = geometry[0] * geometry[1]
    if threaded:
        for k in prange(items):
            _col2im_plane(cols, out, geometry, k)
    else:
        for k in range(items):
            _col2im_plane(cols, out, geometry, k)


@njit(parallel=True, nogil=True, cache=True)
def max_pool2d(x, out, geometry, threaded):
    """The maximum of each window of ``x`` (padding never wins)."""
    items = geometry[0] * geometry[1] * geometry[4]
    if threaded:
        for k in prange(items):
            _max_pool_row(x, out, geometry, k)
    else:
        for k in range(items):
            _max_pool_row(x, out, geometry, k)


@njit(parallel=True, nogil=True, cache=True, error_model="numpy")
def avg_pool2d(x, counts, out, geometry, threaded):
    """The sum of each window of ``x`` divided by its count (``counts``: ``(OH, OW)``, as
    :mod:`.neural_kernels` computes them)."""
    N, C, H, W, OH, OW, KH, KW, SH, SW = geometry[:10]
    if SH == 1 and SW == 1 and OH == H and OW == W and geometry[14] >= 0:
        per = max(1, POOL_PLANE_CELLS // (H * W))
        items = -(-(N * C) // per)
        masks = _tap_masks(geometry, per)
        if threaded:
            for k in prange(items):
                _avg_pool_planes(x, counts, out, geometry, k, per, masks)
        else:
            for k in range(items):
                _avg_pool_planes(x, counts, out, geometry, k, per, masks)
        return
    items = N * C * OH
    if threaded:
        for k in prange(items):
            _avg_pool_row(x, counts, out, geometry, k)
    else:
        for k in range(items):
            _avg_pool_row(x, counts, out, geometry, k)


@njit(parallel=True, nogil=True, cache=True)
def max_pool2d_backward(x, y, g, out, geometry, threaded):
    """Each window's gradient ``g`` sent to its first cell of ``x`` matching ``y``."""
    items = geometry[0] * geometry[1]
    if threaded:
        for k in prange(items):
            _max_pool_backward_plane(x, y, g, out, geometry, k)
    else:
        for k in range(items):
            _max_pool_backward_plane(x, y, g, out, geometry, k)


@njit(parallel=True, nogil=True, cache=True, error_model="numpy")
def avg_pool2d_backward(g, counts, out, geometry, threaded):
    """Each window's ``g / counts`` added to its every real cell."""
    items = geometry[0] * geometry[1]
    if threaded:
        for k in prange(items):
            _avg_pool_backward_plane(g, counts, out, geometry, k)
    else:
        for k in range(items):
            _avg_pool_backward_plane(g, counts, out, geometry, k)
