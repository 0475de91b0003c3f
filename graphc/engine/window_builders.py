"""Generated CPU kernels of the window kinds (``im2col``, ``col2im``, the max and
average poolings and their backward ops): :func:`generated_window` is their
``OpDef.generated`` builder, binding :mod:`.numba_window`'s kernel for the node's
kind to its arrays once, at compile time. Numba is imported only when a builder
runs (and then only through :mod:`.numba_kernels`, which picks a thread-safe
threading layer first).

The kernels give the NumPy kernels' results bit for bit (see :mod:`.numba_window`)
on C-contiguous float32 and float64 arrays; for anything else the builder returns
``None`` and the NumPy kernel runs.

>>> import numpy as np
>>> from graphc.type import Op
>>> op = Op.make("max_pool2d", kernel=(2, 2), stride=(2, 2), padding=((0, 0), (0, 0)),
...              ceil_mode=False)
>>> x, out = np.arange(16.0).reshape(1, 1, 4, 4), np.empty((1, 1, 2, 2))
>>> run = window_kernel(op, [x], out, threaded=False)
>>> run(); out[0, 0]
array([[ 5.,  7.],
       [13., 15.]])
"""
from __future__ import annotations

import math

from functools import partial

import numpy as np

from ..shape.neural import conv_output_size, first_full_tap
from ..shape.rules import infer
# the NumPy kernel's own divisors: the same quotients, bit for bit
from .neural_kernels import pool_counts
from .strategy import PARALLEL_MIN

#: the kinds :func:`generated_window` builds kernels for
KINDS = ("im2col", "col2im", "max_pool2d", "max_pool2d_backward", "avg_pool2d",
         "avg_pool2d_backward")
#: kinds whose image is their output (the others read it as their first input)
_IMAGE_OUT = frozenset({"col2im", "max_pool2d_backward", "avg_pool2d_backward"})
#: kinds whose kernel also takes the divisors of the windows, after the first input
_DIVIDED = frozenset({"avg_pool2d", "avg_pool2d_backward"})
#: the convolutions' window kinds (with dilation; the others are poolings)
_COLUMNS = frozenset({"im2col", "col2im"})
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def geometry(op, image, out_hw) -> tuple:
    """The ``geometry`` tuple :mod:`.numba_window`'s kernels take, for the window node
    ``op`` on the NCHW ``image`` shape with a grid of ``out_hw`` windows.

    >>> from graphc.type import Op
    >>> op = Op.make("im2col", kernel=(3, 3), stride=(1, 1), padding=((1, 1), (1, 1)),
    ...              dilation=(1, 1), layout="flat")
    >>> geometry(op, (8, 64, 56, 56), (56, 56))
    (8, 64, 56, 56, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, -1, 1)
    """
    n, c, h, w = image
    (kh, kw), (sh, sw) = op["kernel"], op["stride"]
    ((top, _), (left, _)), (dh, dw) = op["padding"], op.get("dilation", (1, 1))
    # only the poolings start from a full tap (they have no dilation)
    first = -1 if op.kind in _COLUMNS else first_full_tap(op, (h, w), out_hw)
    flat = int(op.get("layout") == "flat")
    return tuple(int(v) for v in (n, c, h, w, *out_hw, kh, kw, sh, sw, top, left, dh, dw,
                                  first, flat))


def _grid(op, ins, out) -> tuple:
    """The ``(OH, OW)`` of the node's windows."""
    if op.kind in _COLUMNS:
        image = ins[0].shape if op.kind == "im2col" else out.shape
        return tuple(conv_output_size(s, k, st, p, d) for s, k, st, p, d in zip(
            image[2:], op["kernel"], op["stride"], op["padding"], op["dilation"]))
    pooled = ins[-1] if op.kind in _IMAGE_OUT else out
    return tuple(pooled.shape[2:])


def _read_only_flat(a):
    """``a`` (C-contiguous) as a flat read-only view: every input has one Numba type,
    a graph's constants (read-only) and its computed values alike."""
    view = a.reshape(-1).view()
    view.flags.writeable = False
    return view


def _check(op, ins, out):
    """A :class:`ValueError` unless ``out`` has the shape and dtype graphc infers for
    ``op`` on ``ins``: the kernels index the flat arrays by that geometry."""
    shape, dtype = infer(op, ins)   # the rule's own ShapeError/DTypeError, if any
    if tuple(shape) != out.shape or np.dtype(dtype) != out.dtype:
        raise ValueError(f"{op.kind}: inputs of shapes {[a.shape for a in ins]} give an "
                         f"output of shape {tuple(shape)} and dtype {np.dtype(dtype)}, got "
                         f"{out.shape} {out.dtype}")


def _takes(op, ins, out) -> bool:
    """Whether the generated kernels take these arrays (see :func:`window_kernel`);
    shapes that do not match ``op`` raise an error naming it."""
    from .numba_kernels import available
    if op.kind not in KINDS:
        raise ValueError(f"window_kernel: {op.kind} is not a window kind ({', '.join(KINDS)})")
    _check(op, ins, out)
    arrays = list(ins) + [out]
    return not (out.dtype not in _DTYPES or any(a.dtype != out.dtype for a in ins)
                or not all(a.flags.c_contiguous for a in arrays)
                or any(a.size == 0 for a in arrays) or available() is not None)


def window_kernel(op, ins, out, threaded: bool):
    """A callable of no arguments computing the window node ``op`` from the arrays
    ``ins`` into ``out`` with :mod:`.numba_window`'s kernel, its work items split
    across the cores when ``threaded`` (and a thread-safe threading layer loads);
    ``None`` where the NumPy kernel must serve: Numba missing, a dtype other than
    float32/float64, an array that is not C-contiguous, or an empty one. Shapes that
    do not match ``op`` raise an error naming it.

    Example: ``window_kernel(op, [x], out, threaded=True)()`` fills ``out``.
    """
    from .numba_kernels import load_compiled, threading_layer
    if not _takes(op, ins, out):
        return None
    threaded = bool(threaded) and bool(threading_layer())   # before compiling parallel code
    from numba import typeof

    from . import numba_window
    image = out.shape if op.kind in _IMAGE_OUT else ins[0].shape
    out_hw = _grid(op, ins, out)
    args = [_read_only_flat(a) for a in ins]
    if op.kind in _DIVIDED:
        args.insert(1, _read_only_flat(pool_counts(op, image[2:], out_hw, out.dtype)))
    args += [out.reshape(-1), geometry(op, image, out_hw), threaded]
    function = getattr(numba_window, op.kind)
    load_compiled(function, tuple(typeof(a) for a in args))   # now, not in a run
    return partial(function, *args)


#: output cells per plane below which im2col stays on NumPy's strided copies: one
#: generated work item per column row costs more than it saves on small planes
#: (ResNet50 batch 1, 14x14 to 28x28 planes: 0.15 ms in NumPy, 0.4 ms generated;
#: batch 8 at 56x56: 6.4 ms in NumPy, 2.8 ms generated)
IM2COL_MIN_PLANE = 2048


def whole_blocks(op, image) -> bool:
    """Whether :mod:`.numba_window`'s ``im2col`` copies each tap's block of ``op`` whole
    (stride 1, result rows as wide as the image's): then small planes gain too (ResNet's
    256x14x14 3x3: 149 us in NumPy, 55 us generated; 512x7x7: 141 and 78 us).

    >>> from graphc.type import Op
    >>> op = Op.make("im2col", kernel=(3, 3), stride=(1, 1), padding=((1, 1), (1, 1)),
    ...              dilation=(1, 1), layout="batch")
    >>> whole_blocks(op, (1, 8, 7, 7))
    True
    """
    ow = conv_output_size(image[3], op["kernel"][1], op["stride"][1], op["padding"][1],
                          op["dilation"][1])
    return tuple(op["stride"]) == (1, 1) and ow == image[3]


def generated_window(op, ins, out, ctx, parallel: bool):
    """``OpDef.generated`` of the window kinds: :func:`window_kernel`, threaded when
    ``parallel`` and the node touches :data:`~.strategy.PARALLEL_MIN` elements or more
    (below that, starting the threads costs more than they save); ``None`` (NumPy's
    kernel) for an im2col of small planes (:data:`IM2COL_MIN_PLANE`) copied row by row
    (:func:`whole_blocks`).

    Example: ``generated_window(op, [x], out, None, parallel=True)()`` fills ``out``.
    """
    if op.kind == "im2col" and math.prod(_grid(op, ins, out)) < IM2COL_MIN_PLANE \
            and not whole_blocks(op, ins[0].shape):
        return None
    work = max(a.size for a in list(ins) + [out])
    threaded = parallel and work >= PARALLEL_MIN
    if op.kind == "max_pool2d":
        kernel = separable_max_pool(op, ins, out, ctx, threaded)
        if kernel is not None:
            return kernel
    return window_kernel(op, ins, out, threaded=threaded)


def separable_max_pool(op, ins, out, ctx, threaded: bool):
    """A callable filling ``out`` with the ``max_pool2d`` of ``ins[0]`` as
    :mod:`.numba_pool`'s separable passes: with stride 1, two flat passes per plane
    (GoogLeNet's 3x3 pools of 14x14 planes: 0.65 -> 0.18 ms); with a stride, per output
    row the maxima down its windows' rows, then across each window (SqueezeNet's 3x3
    stride-2 pool of 64x111x111: 0.70 -> 0.14 ms). The same values and NaN windows as
    :mod:`.numba_window`'s rows (see :mod:`.numba_pool` for a tie of +0 and -0); ``None``
    where :func:`window_kernel` declines the arrays.

    Example: ``separable_max_pool(op, [x], out, None, threaded=False)()`` fills ``out``.
    """
    if not _takes(op, ins, out):
        return None
    from numba import get_num_threads, typeof

    from .conv_builders import scratch_array
    from .numba_kernels import load_compiled, threading_layer
    from .numba_pool import max_pool2d_planes, pool_cells
    threaded = bool(threaded) and bool(threading_layer())
    shape = geometry(op, ins[0].shape, _grid(op, ins, out))
    chunks = get_num_threads() if threaded else 1
    args = [_read_only_flat(ins[0]), out.reshape(-1),
            scratch_array(ctx, chunks, int(pool_cells(shape)), out.dtype, apart=True), shape,
            threaded]
    load_compiled(max_pool2d_planes, tuple(typeof(a) for a in args))
    return partial(max_pool2d_planes, *args)
