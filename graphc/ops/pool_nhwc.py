"""``max_pool2d_nhwc`` and ``avg_pool2d_nhwc``: poolings of images stored channels last.
Small enough that every fact is here: shape rule, NumPy kernel, generated kernel's
builder, gradient, export.

The optimiser makes them (:mod:`graphc.optimiser.channels_last`) from a ``max_pool2d``
or ``avg_pool2d`` whose input a channels-last convolution wrote: the images ``(N, H, W,
C)``, the result ``(N, OH, OW, C)``, the attributes of the NCHW pooling (kernel, stride,
padding, ceil_mode; count_include_pad for the average). The two transposes around an
NCHW pooling then vanish. A user's graph never holds them (no public name; ONNX export
and saved graphs take the graph as written).

>>> import numpy as np
>>> from graphc.type import Op
>>> op = Op.make("max_pool2d_nhwc", kernel=(2, 2), stride=(2, 2),
...              padding=((0, 0), (0, 0)), ceil_mode=False)
>>> x, out = np.arange(16.0).reshape(1, 4, 4, 1), np.empty((1, 2, 2, 1))
>>> _kernel(op, [x], out, None)(); out[0, :, :, 0]
array([[ 5.,  7.],
       [13., 15.]])
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..algodiff.neural import _pool_params
from ..engine.cpu_kernels import run_all
from ..engine.neural_kernels import _pool_taps, pool_counts
from ..optimiser.channels_last import NHWC_OF, TO_NCHW, TO_NHWC
from ..shape.neural import float_input, pool_output_shape
from ..type.errors import ShapeError
from .definition import OpDef, Refused, define



def _is_max(op) -> bool:
    return op.kind == "max_pool2d_nhwc"


def _rule(op, parents):
    (x,) = parents
    dtype = float_input(op.kind, parents)
    if len(x.shape) != 4:
        raise ShapeError(f"{op.kind}: the input must be 4-D (N, H, W, C), got shape {x.shape}")
    n, h, w, c = x.shape
    _, _, oh, ow = pool_output_shape(op.kind, (n, c, h, w), op)
    return (n, oh, ow, c), dtype


def _counts(op, x_shape, out_shape, dtype):
    """Each result cell's divisor (the NCHW kernels'), ``(OH, OW)``; ones for a max."""
    if _is_max(op):
        return np.ones(out_shape[1:3], dtype)
    return pool_counts(op, x_shape[1:3], out_shape[1:3], dtype)


def _kernel(op, ins, out, ctx):
    """From ``-inf`` or ``+0``, each real tap in row-major order combined into the result
    cells it serves, then (average) divided by the counts: the generated kernel's bits."""
    x_nchw, out_nchw = ins[0].transpose(TO_NCHW), out.transpose(TO_NCHW)
    combine = np.maximum if _is_max(op) else np.add
    steps = [partial(out.fill, -np.inf if _is_max(op) else 0)]
    for _, _, region, rows, cols in _pool_taps(op, x_nchw.shape, out_nchw.shape):
        target = out_nchw[region]
        steps.append(partial(combine, target, x_nchw[..., rows, cols], out=target))
    if not _is_max(op):
        counts = _counts(op, ins[0].shape, out.shape, out.dtype)[:, :, None]
        steps.append(partial(np.divide, out, counts, out=out))
    return run_all(steps)


def geometry(op, x_shape) -> tuple:
    """The geometry tuple of :mod:`graphc.engine.numba_pool_nhwc`'s kernel.

    >>> from graphc.type import Op
    >>> geometry(Op.make("max_pool2d_nhwc", kernel=(3, 3), stride=(2, 2),
    ...                  padding=((1, 1), (1, 1)), ceil_mode=False), (1, 9, 9, 8))
    (9, 9, 3, 3, 2, 2, 1, 1)
    """
    (kh, kw), (sh, sw), ((top, _), (left, _)) = op["kernel"], op["stride"], op["padding"]
    return tuple(int(v) for v in (*x_shape[1:3], kh, kw, sh, sw, top, left))


def _generated(op, ins, out, ctx, parallel: bool):
    """:mod:`graphc.engine.numba_pool_nhwc`'s kernel bound to the node's arrays, rows split
    across the cores when ``parallel`` and the node is large, or ``None`` where the NumPy
    kernel serves: a dtype other than float32/float64, arrays that are not C-contiguous
    or are empty, no Numba."""
    from ..engine.numba_kernels import available, load_compiled, threading_layer
    from ..engine.strategy import PARALLEL_MIN
    (x,) = ins
    if (out.dtype not in (np.float32, np.float64) or x.dtype != out.dtype
            or not (x.flags.c_contiguous and out.flags.c_contiguous)
            or x.size == 0 or out.size == 0 or available() is not None):
        return None
    kh, kw = op["kernel"]
    work = max(x.size, out.size * kh * kw // 4)
    threaded = parallel and work >= PARALLEL_MIN and bool(threading_layer())
    import numba

    from ..engine.numba_pool_nhwc import pool_nhwc
    chunks = min(numba.get_num_threads(), out.shape[0] * out.shape[1]) if threaded else 1
    x = x.view()
    x.flags.writeable = False        # one Numba type for constants and computed values
    counts = _counts(op, x.shape, out.shape, out.dtype)
    args = (x, out, counts, geometry(op, x.shape), _is_max(op), max(chunks, 1))
    load_compiled(pool_nhwc, tuple(numba.typeof(a) for a in args))   # now, not in a run
    return partial(pool_nhwc, *args)


def _grad(ns, op, inputs, output, g, needs=None):
    """The NCHW pooling's gradient, read channels last."""
    (x,) = inputs
    params = _pool_params(op)
    g_nchw = ns.transpose(g, TO_NCHW)
    if _is_max(op):
        gx = ns.max_pool2d_backward(ns.transpose(x, TO_NCHW), ns.transpose(output, TO_NCHW),
                                    g_nchw, **params)
    else:
        n, h, w, c = x.shape
        gx = ns.avg_pool2d_backward(g_nchw, (n, c, h, w),
                                    count_include_pad=op["count_include_pad"], **params)
    return [ns.transpose(gx, TO_NHWC)]


_MADE_ONLY = Refused("made by the optimiser's channels-last rewrite; export the graph as "
                     "written (Executable.source)")
define(*(OpDef(name, "neural", 1, None, shape=_rule, kernel=_kernel, generated=_generated,
               grad=_grad, names=(), onnx=_MADE_ONLY) for name in NHWC_OF.values()))

__all__ = ["geometry"]
