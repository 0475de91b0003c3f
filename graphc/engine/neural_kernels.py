"""CPU kernels of the NCHW neural ops: poolings, local response normalisation,
and the ``im2col``/``col2im`` steps convolutions are computed with (the
convolutions themselves are GEMMs on those: :mod:`graphc.ops.conv_kernels`).

Every window op is a loop over the kernel's *taps* ``(i, j)``: for one tap,
the output cells whose input cell is not padding form a rectangle
(``valid_range``), and the input cells they read are a strided slice. So
im2col is ``kh * kw`` strided copies (zeros only on the padding strips),
col2im ``kh * kw`` strided adds, max pooling ``kh * kw`` ``np.maximum`` with
``out=``, and no padded copy of the input is ever made. Builders bind the
views (and any scratch array) once, so a compiled step allocates nothing per run.

>>> import numpy as np
>>> from graphc.type import Op
>>> op = Op.make("max_pool2d", kernel=(2, 2), stride=(2, 2), padding=((0, 0), (0, 0)),
...              ceil_mode=False)
>>> x, out = np.arange(16.0).reshape(1, 1, 4, 4), np.empty((1, 1, 2, 2))
>>> max_pool2d(op, [x], out, None)(); out[0, 0]
array([[ 5.,  7.],
       [13., 15.]])
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..shape.neural import conv_output_size, valid_range
from .cpu_kernels import run_all
from .cpu_kernels import work_array


# -- geometry ------------------------------------------------------------------------------
def _axis_taps(out_size, size, kernel, stride, pad_before, dilation):
    """Per tap along one axis: ``(lo, hi, input slice)``; the slice is ``None`` when
    every output cell of the tap falls on padding."""
    taps = []
    for i in range(kernel):
        offset = i * dilation - pad_before
        lo, hi = valid_range(out_size, size, stride, offset)
        start = lo * stride + offset
        rows = slice(start, start + (hi - lo - 1) * stride + 1, stride) if hi > lo else None
        taps.append((lo, hi, rows))
    return taps


def _taps(in_hw, out_hw, kernel, stride, padding, dilation=(1, 1)):
    """Row-major list of ``(i, j, (lo_h, hi_h, rows), (lo_w, hi_w, cols))``."""
    rows = _axis_taps(out_hw[0], in_hw[0], kernel[0], stride[0], padding[0][0], dilation[0])
    cols = _axis_taps(out_hw[1], in_hw[1], kernel[1], stride[1], padding[1][0], dilation[1])
    return [(i, j, r, c) for i, r in enumerate(rows) for j, c in enumerate(cols)]


def _real_taps(in_hw, out_hw, kernel, stride, padding, dilation=(1, 1)):
    """The taps with at least one real cell, as ``(i, j, out region, in rows, in cols)``
    where ``out region`` indexes the ``(.., OH, OW)`` cells the tap reads input for."""
    result = []
    for i, j, (lo_h, hi_h, rows), (lo_w, hi_w, cols) in _taps(in_hw, out_hw, kernel, stride,
                                                               padding, dilation):
        if rows is not None and cols is not None:
            region = (Ellipsis, slice(lo_h, hi_h), slice(lo_w, hi_w))
            result.append((i, j, region, rows, cols))
    return result


def _conv_hw(in_hw, kernel, op):
    (sh, sw), (ph, pw), (dh, dw) = op["stride"], op["padding"], op["dilation"]
    return (conv_output_size(in_hw[0], kernel[0], sh, ph, dh),
            conv_output_size(in_hw[1], kernel[1], sw, pw, dw))


def _contiguous(a, prelude, ctx=None):
    """``a`` when C-contiguous (so its reshapes are views), else a scratch copy
    refreshed by a step appended to ``prelude``."""
    if a.flags.c_contiguous:
        return a
    copy = work_array(ctx, a.shape, a.dtype)
    prelude.append(partial(np.copyto, copy, a))
    return copy


def _shaped(a, shape):
    """A view of the C-contiguous array ``a`` (an output or a scratch buffer) with ``shape``;
    a kernel writing through a reshaped copy would silently lose its result."""
    if not a.flags.c_contiguous:
        raise ValueError(f"neural kernel: expected a C-contiguous buffer, got strides {a.strides}")
    return a.reshape(shape)


# -- im2col / col2im -------------------------------------------------------------------------
def im2col_steps(x, cols, kernel, op, out_hw, layout="batch", ctx=None):
    """Steps filling ``cols`` with the windows of ``x`` (N, C, H, W): rows ordered
    ``(C, kh, kw)``; ``layout="batch"`` gives ``(N, C*kh*kw, OH*OW)``, ``"flat"``
    ``(C*kh*kw, N*OH*OW)``. One strided copy per tap plus zeros on its padding.
    Example: ``for step in im2col_steps(x, cols, (3, 3), op, (oh, ow)): step()``"""
    n, c, h, w = x.shape
    kh, kw = kernel
    # view[i, j] is the (A, B, OH, OW) block of tap (i, j); src the image as (A, B, H, W)
    if layout == "flat":
        view = _shaped(cols, (c, kh, kw, n, *out_hw)).transpose(1, 2, 0, 3, 4, 5)
        src = x.transpose(1, 0, 2, 3)
    else:
        view = _shaped(cols, (n, c, kh, kw, *out_hw)).transpose(2, 3, 0, 1, 4, 5)
        src = x
    (sh, sw), ((top, _), (left, _)), (dh, dw) = op["stride"], op["padding"], op["dilation"]
    row_taps = _axis_taps(out_hw[0], h, kh, sh, top, dh)
    col_taps = _axis_taps(out_hw[1], w, kw, sw, left, dw)
    taps = [(i, j, r, c) for i, r in enumerate(row_taps) for j, c in enumerate(col_taps)]
    axis = 1 if layout == "flat" else 0           # the images' axis of src and view[i, j]
    steps = []
    for images, split, read in _phases(src, taps, (sh, sw), kh * kw, axis, ctx):
        steps += split
        for i, j, (lo_h, hi_h, rows), (lo_w, hi_w, cs) in taps:
            if rows is not None and cs is not None:
                block = view[i, j][(slice(None),) * axis + (images,)]
                steps.append(partial(np.copyto, block[..., lo_h:hi_h, lo_w:hi_w],
                                     read(rows, cs)))
    # a padding row of tap row i is padding for every j (and a column for every i):
    # 2 * (kh + kw) fills, not up to 4 per tap
    for i, (lo, hi, _) in enumerate(row_taps):
        steps.extend(partial(p.fill, 0) for p in (view[i][..., :lo, :], view[i][..., hi:, :])
                     if p.size)
    for j, (lo, hi, _) in enumerate(col_taps):
        steps.extend(partial(p.fill, 0) for p in (view[:, j][..., :lo], view[:, j][..., hi:])
                     if p.size)
    return steps


#: bytes of phase scratch an im2col splits at once: a batch's phases are split a few
#: images at a time into one buffer (ResNet50's stride-2 3x3 at batch 8: 12 MiB of
#: phases that sat outside the plan, now at most this)
PHASE_BYTES = 2 << 20


def _phases(src, taps, stride, n_taps, axis, ctx=None):
    """``(images, steps, read)`` per block of images (a slice of ``src``'s ``axis``):
    the steps that prepare the block, and ``read(rows, cols)``, one tap's cells of that
    block. With a stride, a tap reads every ``s``-th cell, a copy NumPy runs 3-4x
    slower than a unit-stride one; when there are more taps than stride phases, each
    block of images is first split into its ``sh * sw`` phases (``src[..., p::sh,
    q::sw]``) in scratch shared by the blocks (:data:`PHASE_BYTES` at most, one image
    at least) and every tap reads one phase at unit stride."""
    sh, sw = stride
    images = src.shape[axis]
    if sh * sw == 1 or n_taps <= sh * sw:
        return [(slice(0, images), [], lambda rows, cols: src[..., rows, cols])]
    keys = sorted({(rows.start % sh, cols.start % sw) for _, _, (_, _, rows), (_, _, cols)
                   in taps if rows is not None and cols is not None})
    per_image = sum(src[..., a::sh, b::sw][(slice(None),) * axis + (0,)].nbytes
                    for a, b in keys)
    block = max(1, min(images, PHASE_BYTES // max(1, per_image)))
    buffers = {}
    for a, b in keys:
        shape = list(src[..., a::sh, b::sw].shape)
        shape[axis] = block
        buffers[a, b] = work_array(ctx, tuple(shape), src.dtype)
    blocks = []
    for first in range(0, images, block):
        part = slice(first, min(images, first + block))
        cut = (slice(None),) * axis + (slice(0, part.stop - part.start),)
        phases = {key: buffers[key][cut] for key in keys}
        split = [partial(np.copyto, phase, src[(slice(None),) * axis + (part,)][..., a::sh, b::sw])
                 for (a, b), phase in phases.items()]
        blocks.append((part, split, _phase_reader(phases, sh, sw)))
    return blocks


def _phase_reader(phases, sh, sw):
    """``read(rows, cols)``: a tap's cells of one block, from the phase it falls in."""
    def read(rows, cols):
        start_h, start_w = rows.start // sh, cols.start // sw
        count_h = len(range(rows.start, rows.stop, sh))
        count_w = len(range(cols.start, cols.stop, sw))
        phase = phases[rows.start % sh, cols.start % sw]
        return phase[..., start_h:start_h + count_h, start_w:start_w + count_w]
    return read


def col2im_steps(cols, out, kernel, op, out_hw, ctx=None):
    """Steps writing into ``out`` (N, C, H, W) the sum of the windows held in ``cols``
    (``batch`` layout): zero it, then one strided add per tap.
    Example: ``for step in col2im_steps(cols, dx, (3, 3), op, (oh, ow)): step()``"""
    n, c, h, w = out.shape
    steps = []
    view = _contiguous(cols, steps, ctx).reshape(n, c, kernel[0], kernel[1], *out_hw)
    steps.append(partial(out.fill, 0))
    for i, j, region, rows, cs in _real_taps((h, w), out_hw, kernel, op["stride"],
                                             op["padding"], op["dilation"]):
        dst = out[..., rows, cs]
        steps.append(partial(np.add, dst, view[:, :, i, j][region], dst))
    return steps


def im2col(op, ins, out, ctx):
    x = ins[0]
    kernel = op["kernel"]
    return run_all(im2col_steps(x, out, kernel, op, _conv_hw(x.shape[2:], kernel, op),
                                 op["layout"], ctx))


def col2im(op, ins, out, ctx):
    kernel = op["kernel"]
    return run_all(col2im_steps(ins[0], out, kernel, op,
                                 _conv_hw(out.shape[2:], kernel, op), ctx))


# -- pooling --------------------------------------------------------------------------------
def _pool_taps(op, x_shape, out_shape):
    return _real_taps(x_shape[2:], out_shape[2:], op["kernel"], op["stride"], op["padding"])


def pool_counts(op, in_hw, out_hw, dtype):
    """The divisor of each output cell of an average pooling, as PyTorch: the window
    clipped to the padded input, or to the input without ``count_include_pad``.

    Example: a 2x2 window, stride 2, padding 1 on a 2x2 image counts 1 real cell per
    window without ``count_include_pad``: ``pool_counts(op, (2, 2), (2, 2), np.float32)``.
    """
    sizes = []
    for size, out_size, k, s, pad in zip(in_hw, out_hw, op["kernel"], op["stride"],
                                         op["padding"]):
        start = np.arange(out_size) * s - pad[0]
        end = np.minimum(start + k, size + pad[1])
        if not op["count_include_pad"]:
            start, end = np.maximum(start, 0), np.minimum(end, size)
        sizes.append(end - start)
    return np.multiply.outer(*sizes).astype(dtype)


def _accumulate(out, taps, combine, first_value):
    """Steps combining each tap's slice into ``out``: the first tap that covers all
    of ``out`` is copied instead of combined, else ``out`` starts at ``first_value``."""
    steps, start = [], None
    for region, src in taps:
        dst = out[region]
        if start is None and dst.shape == out.shape:
            start = partial(np.copyto, out, src)
            continue
        steps.append(combine(dst, src))
    return [start if start is not None else partial(out.fill, first_value)] + steps


def max_pool2d(op, ins, out, ctx):
    x = ins[0]
    taps = [(region, x[..., rows, cs]) for _, _, region, rows, cs in
            _pool_taps(op, x.shape, out.shape)]
    return run_all(_accumulate(out, taps, lambda d, s: partial(np.maximum, d, s, out=d),
                                -np.inf))


def max_pool2d_backward(op, ins, out, ctx):
    """Per tap in row-major order: cells equal to their window's maximum and not yet
    claimed by an earlier tap take the window's gradient. A window whose maximum is
    NaN (NaN wins max pooling, as in ``np.max``) sends it to its first NaN; that
    needs two more calls per tap, so they run only when ``y`` holds a NaN.

    NaN is tested as ``v != v``: NumPy 2.4's ``np.isnan`` (and ``isinf``, ``isfinite``,
    ``signbit``) writes wrong values into a strided ``out=`` of 16 or more elements,
    which each tap's region of the match mask is; comparisons are not affected."""
    x, y, g = ins
    claimed, match, y_nan, x_nan = (work_array(ctx, y.shape, np.bool_) for _ in range(4))
    plain = [partial(out.fill, 0), partial(claimed.fill, False)]
    with_nan = list(plain)
    for _, _, region, rows, cs in _pool_taps(op, x.shape, y.shape):
        m, done, dst, cells = match[region], claimed[region], out[..., rows, cs], x[..., rows, cs]
        equal = partial(np.equal, cells, y[region], m)
        claim = [partial(np.greater, m, done, m),       # equal and not claimed
                 partial(np.logical_or, done, m, done),
                 partial(np.add, dst, g[region], dst, where=m)]
        plain += [equal] + claim
        nan = x_nan[region]
        with_nan += [equal, partial(np.not_equal, cells, cells, nan),
                     partial(np.logical_and, nan, y_nan[region], nan),
                     partial(np.logical_or, m, nan, m)] + claim
    plain, with_nan = run_all(plain), run_all(with_nan)

    def max_pool2d_backward():
        np.not_equal(y, y, out=y_nan)
        (with_nan if y_nan.any() else plain)()
    return max_pool2d_backward


def avg_pool2d(op, ins, out, ctx):
    x = ins[0]
    counts = pool_counts(op, x.shape[2:], out.shape[2:], out.dtype)
    taps = [(region, x[..., rows, cs]) for _, _, region, rows, cs in
            _pool_taps(op, x.shape, out.shape)]
    steps = _accumulate(out, taps, lambda d, s: partial(np.add, d, s, d), 0)
    return run_all(steps + [partial(np.divide, out, counts, out)])


def avg_pool2d_backward(op, ins, out, ctx):
    g = ins[0]
    counts = pool_counts(op, out.shape[2:], g.shape[2:], out.dtype)
    share = work_array(ctx, g.shape, g.dtype)
    steps = [partial(np.divide, g, counts, share), partial(out.fill, 0)]
    for _, _, region, rows, cs in _pool_taps(op, out.shape, g.shape):
        dst = out[..., rows, cs]
        steps.append(partial(np.add, dst, share[region], dst))
    return run_all(steps)


# -- local response normalisation ----------------------------------------------------------
def _window_sum(src, dst, offsets: range):
    """Steps setting ``dst[:, c] = sum(src[:, c + d] for d in offsets)`` over the
    channels that exist (``offsets``, a range of step 1, contains 0)."""
    channels = src.shape[1]
    steps = [partial(np.copyto, dst, src)]
    # an offset of a channel count or more reaches no channel: a window of 2**62
    # channels costs what one of 2 * channels does
    offsets = range(max(offsets.start, 1 - channels), min(offsets.stop, channels))
    for d in offsets:
        lo, hi = max(0, -d), min(channels, channels - d)
        if d and hi > lo:
            steps.append(partial(np.add, dst[:, lo:hi], src[:, lo + d:hi + d], dst[:, lo:hi]))
    return steps


def _lrn_window(size):
    """Channel offsets of PyTorch's window: ``size // 2`` before, ``(size - 1) // 2`` after."""
    return range(-(size // 2), (size - 1) // 2 + 1)


def lrn(op, ins, out, ctx):
    """``x / (k + alpha / size * sum of x^2 over the window) ** beta``."""
    x = ins[0]
    size, alpha, beta, k = op["size"], op["alpha"], op["beta"], op["k"]
    squares = work_array(ctx, x.shape, x.dtype)
    steps = [partial(np.multiply, x, x, squares)]
    steps += _window_sum(squares, out, _lrn_window(size))
    steps += [partial(np.multiply, out, alpha / size, out), partial(np.add, out, k, out),
              partial(np.power, out, -beta, out), partial(np.multiply, out, x, out)]
    return run_all(steps)


def lrn_backward(op, ins, out, ctx):
    """With ``D = k + alpha / size * S`` (``S`` the window sums of squares):
    ``dx_j = g_j D_j^-beta - 2 alpha beta / size * x_j * sum over the windows c that
    hold j of g_c x_c D_c^(-beta-1)``."""
    x, g = ins
    size, alpha, beta, k = op["size"], op["alpha"], op["beta"], op["k"]
    a, b = work_array(ctx, x.shape, x.dtype), work_array(ctx, x.shape, x.dtype)
    steps = [partial(np.multiply, x, x, a)]
    steps += _window_sum(a, b, _lrn_window(size))
    steps += [partial(np.multiply, b, alpha / size, b), partial(np.add, b, k, b),   # D
              partial(np.power, b, -beta, out), partial(np.multiply, out, g, out),
              partial(np.power, b, -beta - 1.0, b),
              partial(np.multiply, x, b, a), partial(np.multiply, a, g, a)]
    # the windows holding channel j are those centred from j - (size-1)//2 to j + size//2
    steps += _window_sum(a, b, range(-((size - 1) // 2), size // 2 + 1))
    steps += [partial(np.multiply, b, x, b), partial(np.multiply, b, 2.0 * alpha * beta / size, b),
              partial(np.subtract, out, b, out)]
    return run_all(steps)
