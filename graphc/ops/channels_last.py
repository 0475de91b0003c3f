"""``depthwise_conv2d_nhwc``: a depthwise convolution of images stored channels last.
Small enough that every fact is here: shape rule, NumPy kernel, generated kernel's
builder, gradient, export.

The optimiser makes it (:mod:`graphc.optimiser.channels_last`) from a ``conv2d`` with
one input and one output channel per group, where the generated kernels run: the
images ``(N, H, W, C)``, the taps ``(kh, kw, C)``, the result ``(N, OH, OW, C)``, and
the window attributes of the ``conv2d`` (stride, padding, dilation). A user's graph
never holds it (no public name; ONNX export and saved graphs take the graph as
written).

>>> import numpy as np
>>> from graphc.type import Op
>>> op = Op.make("depthwise_conv2d_nhwc", stride=(1, 1), padding=((1, 1), (1, 1)),
...              dilation=(1, 1))
>>> x, w, out = np.ones((1, 4, 4, 2)), np.ones((3, 3, 2)), np.empty((1, 4, 4, 2))
>>> _kernel(op, [x, w], out, None)(); out[0, 0, :, 0]
array([4., 6., 6., 4.])
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..algodiff.common import wants
from ..engine.cpu_kernels import work_array
from ..engine.neural_kernels import _real_taps
from ..shape.neural import conv_output_shape, float_input
from ..type.errors import ShapeError
from ..type.op import Op
from .definition import OpDef, Refused, define

NAME = "depthwise_conv2d_nhwc"


def as_conv2d(op, channels: int) -> Op:
    """The NCHW ``conv2d`` op this one computes, channels last.

    >>> as_conv2d(Op.make(NAME, stride=(1, 1), padding=((0, 0), (0, 0)),
    ...                   dilation=(1, 1)), 8)["groups"]
    8
    """
    return Op.make("conv2d", stride=op["stride"], padding=op["padding"],
                   dilation=op["dilation"], groups=channels)


def _rule(op, parents):
    x, w = parents
    dtype = float_input(NAME, parents)
    if len(x.shape) != 4:
        raise ShapeError(f"{NAME}: the input must be 4-D (N, H, W, C), got shape {x.shape}")
    if len(w.shape) != 3 or w.shape[2] != x.shape[3]:
        raise ShapeError(f"{NAME}: the kernel must be (kh, kw, C) with the input's {x.shape[3]} "
                         f"channels; input shape {x.shape}, kernel shape {w.shape}")
    n, h, width, c = x.shape
    kh, kw, _ = w.shape
    _, _, oh, ow = conv_output_shape(NAME, (n, c, h, width), (c, 1, kh, kw), as_conv2d(op, c))
    return (n, oh, ow, c), dtype


def _kernel(op, ins, out, ctx):
    """Tap by tap in row-major order, each adding its products to the result cells whose
    window it reads outside the padding: the sums (from zero) of the generated kernel."""
    x, w = ins
    kh, kw, _ = w.shape
    taps = _real_taps(x.shape[1:3], out.shape[1:3], (kh, kw), op["stride"], op["padding"],
                      op["dilation"])
    steps = [partial(out.fill, 0)]
    for i, j, region, rows, cols in taps:
        target = out[:, region[1], region[2], :]
        product = work_array(ctx, target.shape, out.dtype)
        steps += [partial(np.multiply, w[i, j], x[:, rows, cols, :], out=product),
                  partial(np.add, target, product, out=target)]

    def run():
        for step in steps:
            step()
    return run


def _generated(op, ins, out, ctx, parallel: bool):
    """:mod:`graphc.engine.numba_channels_last`'s kernel bound to the node's arrays (or,
    float32 with a 3x3 or 5x5 window, :mod:`graphc.engine.numba_depthwise_vectors`'s: the
    same bits), rows split across the cores when ``parallel`` and the node is large, or
    ``None`` where the NumPy kernel serves: a dtype other than float32/float64, arrays
    that are not C-contiguous or are empty, no Numba."""
    from ..engine.numba_kernels import available, load_compiled, threading_layer
    from ..engine.strategy import PARALLEL_MIN
    arrays = list(ins) + [out]
    if (out.dtype not in (np.float32, np.float64) or any(a.dtype != out.dtype for a in ins)
            or not all(a.flags.c_contiguous for a in arrays)
            or any(a.size == 0 for a in arrays) or available() is not None):
        return None
    # by the work too: a 5x5 window over 7x7x576 is 28k results but 0.7M products,
    # which take 41 us on one core and 25 on two
    work = max(max(a.size for a in arrays), out.size * ins[1].shape[0] * ins[1].shape[1] // 16)
    threaded = (parallel and work >= PARALLEL_MIN
                and bool(threading_layer()))     # before compiling parallel code
    import numba

    from ..engine.numba_channels_last import depthwise_nhwc
    from ..engine.numba_depthwise_vectors import kernel as vector_kernel
    chunks = min(numba.get_num_threads(), out.shape[0] * out.shape[1]) if threaded else 1
    x, w = (a.view() for a in ins)
    for a in (x, w):       # one Numba type for constants and computed values alike
        a.flags.writeable = False
    shape = geometry(op, x.shape, out.shape)
    # float32 windows with a kernel of their own hold their taps in vector registers
    function = vector_kernel(*w.shape[:2]) if out.dtype == np.float32 else None
    if function is not None:
        args = (x, w, out, shape, max(chunks, 1))
    else:
        function = depthwise_nhwc
        args = (x, w, out, shape, out.dtype.type(0), max(chunks, 1))
    load_compiled(function, tuple(numba.typeof(a) for a in args))   # now, not in a run
    return partial(function, *args)


def geometry(op, x_shape, out_shape) -> tuple:
    """The geometry tuple of :mod:`graphc.engine.numba_channels_last`'s kernel.

    >>> op = Op.make(NAME, stride=(2, 2), padding=((1, 1), (1, 1)), dilation=(1, 1))
    >>> geometry(op, (1, 9, 9, 8), (1, 5, 5, 8))
    (9, 9, 5, 5, 2, 2, 1, 1, 1, 1)
    """
    (sh, sw), ((top, _), (left, _)), (dh, dw) = op["stride"], op["padding"], op["dilation"]
    return tuple(int(v) for v in (*x_shape[1:3], *out_shape[1:3], sh, sw, top, left, dh, dw))


def _grad(ns, op, inputs, output, g, needs=None):
    """The NCHW convolution's gradients, read channels last."""
    x, w = inputs
    n, h, width, c = x.shape
    kh, kw, _ = w.shape
    conv = dict(stride=op["stride"], padding=op["padding"], dilation=op["dilation"], groups=c)
    to_nchw, to_nhwc = (0, 3, 1, 2), (0, 2, 3, 1)
    g_nchw = ns.transpose(g, to_nchw)
    taps = ns.reshape(ns.transpose(w, (2, 0, 1)), (c, 1, kh, kw))
    gx = gw = None
    if wants(needs, 0):
        gx = ns.transpose(ns.conv2d_backward_input(g_nchw, taps, (n, c, h, width), **conv),
                          to_nhwc)
    if wants(needs, 1):
        gw = ns.conv2d_backward_kernel(ns.transpose(x, to_nchw), g_nchw, (c, 1, kh, kw), **conv)
        gw = ns.transpose(ns.reshape(gw, (c, kh, kw)), (1, 2, 0))
    return [gx, gw]


define(OpDef(NAME, "neural", 2, None, shape=_rule, kernel=_kernel, generated=_generated,
             grad=_grad, names=(),
             onnx=Refused("made by the optimiser's channels-last rewrite; export the graph "
                          "as written (Executable.source)")))

__all__ = ["NAME", "as_conv2d", "geometry"]
