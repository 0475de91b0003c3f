"""Generated CPU kernels of grouped and depthwise convolutions: :func:`generated_conv` is
the ``OpDef.generated`` builder of ``conv2d``, ``conv2d_backward_input`` and
``conv2d_backward_kernel``, binding :mod:`.numba_conv`'s direct kernel for the node's
kind to its arrays once, at compile time. Numba is imported only when a builder runs
(through :mod:`.numba_kernels`, which picks a thread-safe threading layer first).

A node is taken where it has more than one group, float32 or float64 arrays, all
C-contiguous and none empty; for anything else the builder returns ``None`` and the
NumPy kernel (the GEMM decomposition) runs. With ``kernels="generated"`` the
optimiser keeps such convolutions whole instead of lowering them to GEMMs
(:data:`graphc.optimiser.lowering.LOWERING_FOR_KERNELS`). The sums run in another
order than BLAS's: results agree with the NumPy kernels to rounding.

>>> import numpy as np
>>> from graphc.type import Op
>>> op = Op.make("conv2d", stride=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1),
...              groups=2)
>>> x, w, out = np.ones((1, 2, 4, 4)), np.ones((2, 1, 3, 3)), np.empty((1, 2, 4, 4))
>>> run = conv_kernel(op, [x, w], out, None, threaded=False)
>>> run(); out[0, 0, 0]
array([4., 6., 6., 4.])
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..shape.neural import valid_range
from ..shape.rules import infer
from .strategy import PARALLEL_MIN, SCRATCH_BYTES

#: the kinds :func:`generated_conv` builds kernels for
KINDS = ("conv2d", "conv2d_backward_input", "conv2d_backward_kernel")
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


# -- the plan of a node: layout, tap table, scratch -------------------------------------
#: the layouts: tap rows from image rows; shifted image planes; shifted phase planes;
#: channels last (depthwise, small images: vectors along the channels); zero-padded
#: phase planes (depthwise forward: :mod:`.numba_depthwise`)
ROWS, SHIFTED, PHASES, CHANNELS_LAST, PADDED = 0, 1, 2, 3, 4

#: the most result cells per image of a depthwise convolution that runs channels last:
#: a plane that small costs more in loop set-up than in arithmetic (MobileNet's 7x7
#: results; at 14x14 the planes are as fast)
CHANNELS_LAST_CELLS = 100
#: channels per block in :data:`CHANNELS_LAST` (at most): the transposed images of a
#: block stay in L2
CHANNEL_BLOCK = 128

#: cells of one block of whole rows (at least one row) that a tap's loop covers at once:
#: the block of the result stays in L1 across the taps
BLOCK = 2048


def layout(geometry, depthwise: bool = False, gradient: bool = False) -> int:
    """How the kernels walk a convolution of this geometry: :data:`CHANNELS_LAST` for a
    ``depthwise`` one (one input and one output channel per group) with a small result
    (the input gradient: with stride 1); :data:`PADDED` for a larger depthwise one
    (not the input ``gradient``) with stride 1, or whose phase rows are wider than its
    result rows (an explicit "same" pad before a strided convolution); else
    :data:`SHIFTED` with stride 1 and rows as wide as the result's; :data:`PHASES` (not
    the input ``gradient``) where a phase row fits a result row; else :data:`ROWS`.

    >>> layout((8, 8, 8, 8, 1, 1, 1, 1, 1, 1)), layout((8, 8, 4, 4, 2, 2, 1, 1, 1, 1))
    (1, 2)
    >>> layout((8, 8, 4, 4, 2, 2, 1, 1, 1, 1), depthwise=True)
    3
    >>> layout((14, 14, 14, 14, 1, 1, 1, 1, 1, 1), depthwise=True)
    4
    """
    height, width, out_h, out_w, sh, sw = geometry[:6]
    stride_one = sh == 1 and sw == 1
    small = (height * width if gradient else out_h * out_w) <= CHANNELS_LAST_CELLS
    if depthwise and small and (stride_one or not gradient):
        return CHANNELS_LAST
    phases_fit = -(-width // sw) <= out_w         # a phase row fits a result row
    if depthwise and not gradient and (stride_one or not phases_fit):
        return PADDED
    if stride_one and width == out_w:
        return SHIFTED
    if not gradient and phases_fit:
        return PHASES
    return ROWS


def scratch_cells(geometry, kernel_shape, mode: int, channels: int, chunks: int) -> int:
    """Cells of scratch one chunk (thread) needs: the phase planes of one group's input
    channels (:data:`PHASES`), or a block of transposed images, results and taps
    (:data:`CHANNELS_LAST`, :func:`channel_block` of the result's ``channels``); else 1.

    >>> scratch_cells((8, 8, 4, 4, 2, 2, 1, 1, 1, 1), (6, 3, 3, 3), PHASES, 6, 2)
    192
    """
    height, width, out_h, out_w, sh, sw = geometry[:6]
    o, cg, kh, kw = kernel_shape
    if mode == PHASES:
        return cg * sh * sw * -(-height // sh) * out_w
    if mode == CHANNELS_LAST:
        return (height * width + out_h * out_w + kh * kw) * channel_block(channels, chunks)
    if mode == PADDED:
        from .numba_depthwise import padded_cells
        return int(padded_cells(geometry, kh, kw))
    return 1


def channel_block(channels: int, chunks: int) -> int:
    """Channels per block in :data:`CHANNELS_LAST`: at most :data:`CHANNEL_BLOCK`, and
    at least one block per chunk where there are enough channels.

    >>> channel_block(960, 2), channel_block(96, 2), channel_block(8, 2)
    (128, 48, 8)
    """
    return max(1, min(CHANNEL_BLOCK, max(16, -(-channels // chunks)), channels))


def tap_table(geometry, kernel_hw, mode: int, mirrored: bool = False) -> np.ndarray:
    """Where each tap reads, computed once per node: one row ``(phase, shift, lo, hi)``
    per tap row, then one per tap column. Result cell ``(r, c)`` takes the term of tap
    ``(i, j)`` where ``lo <= r < hi`` and ``lo <= c < hi`` (of row ``i``, of column ``j``),
    from phase plane ``phase_i + phase_j`` at row ``r + shift_i``, column ``c + shift_j``
    (:data:`ROWS`: from image row ``r * sh + shift_i``, column ``c * sw + shift_j``).
    ``mirrored``: the input gradient read from the gradient (stride 1, the result has
    the input's shape).

    >>> tap_table((4, 4, 4, 4, 1, 1, 1, 1, 1, 1), (3, 1), SHIFTED)
    array([[ 0, -1,  1,  4],
           [ 0,  0,  0,  4],
           [ 0,  1,  0,  3],
           [ 0, -1,  1,  4]])
    """
    height, width, out_h, out_w, sh, sw, ph, pw, dh, dw = geometry
    if mirrored:
        result, image, sign, strides = (height, width), (out_h, out_w), -1, (1, 1)
    else:
        result, image, sign, strides = (out_h, out_w), (height, width), 1, (sh, sw)
    table = []
    for axis, (k, d, p) in enumerate(zip(kernel_hw, (dh, dw), (ph, pw))):
        stride = strides[axis]
        for t in range(k):
            offset = sign * (t * d - p)
            if mode == PHASES:
                phase, shift = offset % stride, offset // stride
                lo, hi = valid_range(result[axis], -(-(image[axis] - phase) // stride), 1,
                                     shift)
                phase *= sw if axis == 0 else 1     # phase planes are row phase major
            else:
                phase, shift = 0, offset
                lo, hi = valid_range(result[axis], image[axis], stride, offset)
            table.append((phase, shift, lo, hi))
    return np.array(table, np.int64)


def geometry(op, ins, out) -> tuple:
    """The ``geometry`` tuple :mod:`.numba_conv`'s kernels take: the image's and the
    forward result's spatial sizes (``height, width, out_h, out_w``), stride, top/left
    padding and dilation (the bottom/right padding only sets the result's size).

    >>> from graphc.type import Op
    >>> op = Op.make("conv2d", stride=(2, 2), padding=((1, 1), (1, 1)), dilation=(1, 1),
    ...              groups=8)
    >>> geometry(op, [np.empty((1, 8, 9, 9)), np.empty((8, 1, 3, 3))], np.empty((1, 8, 5, 5)))
    (9, 9, 5, 5, 2, 2, 1, 1, 1, 1)
    """
    if op.kind == "conv2d_backward_input":
        image, result = out.shape, ins[0].shape
    else:
        image, result = ins[0].shape, out.shape if op.kind == "conv2d" else ins[1].shape
    (sh, sw), ((top, _), (left, _)), (dh, dw) = op["stride"], op["padding"], op["dilation"]
    return tuple(int(v) for v in (*image[2:], *result[2:], sh, sw, top, left, dh, dw))


def _kernel_shape(op, ins, out) -> tuple:
    return out.shape if op.kind == "conv2d_backward_kernel" else ins[1].shape


def _read_only(a, flat_planes: bool):
    """``a`` (C-contiguous) as a read-only view, its planes flattened when ``flat_planes``:
    every input has one Numba type, a graph's constants and its computed values alike."""
    view = a.reshape(a.shape[0], a.shape[1], -1) if flat_planes else a.view()
    view.flags.writeable = False
    return view


def _check(op, ins, out):
    """A :class:`ValueError` unless ``out`` has the shape and dtype graphc infers for
    ``op`` on ``ins``: the kernels index the arrays by that geometry."""
    shape, dtype = infer(op, ins)   # the rule's own ShapeError/DTypeError, if any
    if tuple(shape) != out.shape or np.dtype(dtype) != out.dtype:
        raise ValueError(f"{op.kind}: inputs of shapes {[a.shape for a in ins]} give an "
                         f"output of shape {tuple(shape)} and dtype {np.dtype(dtype)}, got "
                         f"{out.shape} {out.dtype}")


#: bytes of a cache line (64 on x86-64; two of them on some cores' prefetchers)
CACHE_LINE = 128


def scratch_array(ctx, chunks: int, cells: int, dtype, apart: bool = False) -> np.ndarray:
    """``(chunks, cells)`` of scratch: the run context's shared slot where it fits (the
    kernels that share one never run at once), else an array of its own. ``apart``
    widens the rows (their first ``cells`` are the chunk's) so that no two chunks share
    a cache line: threads writing near a row's end and the next row's start would
    otherwise pass the line back and forth."""
    if apart and chunks > 1:
        line = max(1, CACHE_LINE // dtype.itemsize)
        cells = -(-cells // line) * line + line
    nbytes = chunks * cells * dtype.itemsize
    if cells > 1 and ctx is not None and hasattr(ctx, "scratch") and nbytes <= SCRATCH_BYTES:
        return ctx.scratch(nbytes).view(dtype).reshape(chunks, cells)
    return np.zeros((chunks, cells), dtype)


def _workspace(op, shape, kernel_shape, mode, chunks, ctx, dtype) -> list:
    """The scratch arrays the kernel of ``op`` takes after its output: the kernel
    gradient's lanes (``(chunks, kh*kw, whole result rows)``), then every kind's scratch
    (``(chunks, cells)``), then (but the input gradient's) that scratch read-only: the
    phases split into it are read through that view, typed as the images are (see
    :mod:`.numba_conv`), so one compilation of the loops serves both."""
    o, cg, kh, kw = kernel_shape
    if op.kind == "conv2d_backward_kernel":
        lane = max(1, BLOCK // shape[3]) * shape[3]
        lanes = chunks * kh * kw * lane
        cells = lanes + chunks * scratch_cells(shape, (1, 1, kh, kw), mode, 1, chunks)
        buffer = scratch_array(ctx, 1, cells, dtype)[0]
        arrays = [buffer[:lanes].reshape(chunks, kh * kw, lane),
                  buffer[lanes:].reshape(chunks, -1)]
    else:
        channels = o if op.kind == "conv2d" else op["groups"] * cg     # the result's
        cells = scratch_cells(shape, kernel_shape, mode, channels, chunks)
        arrays = [scratch_array(ctx, chunks, cells, dtype)]
    if op.kind != "conv2d_backward_input":
        arrays.append(_read_only(arrays[-1], False))
    return arrays


def conv_kernel(op, ins, out, ctx, threaded: bool):
    """A callable of no arguments computing the convolution node ``op`` (one of
    :data:`KINDS`) from the arrays ``ins`` into ``out`` with :mod:`.numba_conv`'s direct
    kernel, its units split across the cores when ``threaded`` (and a thread-safe
    threading layer loads); ``None`` where the NumPy kernel must serve: one group, Numba
    missing, a dtype other than float32/float64, an array that is not C-contiguous, or
    an empty one. Shapes that do not match ``op`` raise an error naming it.

    Example: ``conv_kernel(op, [x, w], out, ctx, threaded=True)()`` fills ``out``.
    """
    from .numba_kernels import available, load_compiled, threading_layer
    if op.kind not in KINDS:
        raise ValueError(f"conv_kernel: {op.kind} is not a convolution kind "
                         f"({', '.join(KINDS)})")
    _check(op, ins, out)
    arrays = list(ins) + [out]
    if (op["groups"] == 1 or out.dtype not in _DTYPES
            or not all(a.flags.c_contiguous for a in arrays) or any(a.size == 0 for a in arrays)
            or available() is not None):
        return None
    threaded = bool(threaded) and bool(threading_layer())   # before compiling parallel code
    import numba

    from . import numba_conv
    chunks = numba.get_num_threads() if threaded else 1
    shape, kernel_shape = geometry(op, ins, out), _kernel_shape(op, ins, out)
    gradient = op.kind == "conv2d_backward_input"
    # the kernel gradient sums over every image: it has no channels-last layout
    depthwise = op.kind != "conv2d_backward_kernel" and kernel_shape[1] == 1 \
        and kernel_shape[0] == op["groups"]
    mode = layout(shape, depthwise, gradient)
    if mode == PADDED:
        from .numba_depthwise import depthwise2d
        cells = scratch_cells(shape, kernel_shape, mode, 1, chunks)
        args = [_read_only(ins[0], True), _read_only(ins[1], False),
                out.reshape(out.shape[0], out.shape[1], -1),
                scratch_array(ctx, chunks, cells, out.dtype, apart=True), shape, threaded]
        load_compiled(depthwise2d, tuple(numba.typeof(a) for a in args))
        return partial(depthwise2d, *args)
    taps = tap_table(shape, kernel_shape[2:], mode,
                     mirrored=gradient and mode in (SHIFTED, CHANNELS_LAST))
    taps.flags.writeable = False
    images = (True, op.kind == "conv2d_backward_kernel")   # the weights keep their rank
    args = [_read_only(a, image) for a, image in zip(ins, images)]
    args.append(out if op.kind == "conv2d_backward_kernel" else
                out.reshape(out.shape[0], out.shape[1], -1))
    args += _workspace(op, shape, kernel_shape, mode, chunks, ctx, out.dtype)
    args += [taps, int(mode), shape, threaded]
    function = getattr(numba_conv, op.kind)
    load_compiled(function, tuple(numba.typeof(a) for a in args))   # now, not in a run
    return partial(function, *args)


def generated_conv(op, ins, out, ctx, parallel: bool):
    """``OpDef.generated`` of the convolution kinds: :func:`conv_kernel`, threaded when
    ``parallel`` and the node touches :data:`~.strategy.PARALLEL_MIN` elements or more.

    Example: ``generated_conv(op, [x, w], out, ctx, parallel=True)()`` fills ``out``.
    """
    work = max(a.size for a in list(ins) + [out])
    return conv_kernel(op, ins, out, ctx, threaded=parallel and work >= PARALLEL_MIN)
