"""Gradient rules of the NCHW neural ops, written against the agreed namespace
functions (``conv2d_backward_input``, ``conv2d_backward_kernel``,
``max_pool2d_backward``, ``avg_pool2d_backward``, ``lrn_backward``).

The convolution backward ops are linear in each operand, so their own
gradients are convolutions again (second derivatives of a convolution work);
``avg_pool2d_backward`` is the transpose of ``avg_pool2d``. The second
derivatives of max pooling and LRN are not implemented and say so. The
optimiser's ``im2col`` and ``col2im`` are each other's transposes.

The rules are given to their kinds by :mod:`graphc.ops.neural`.

Example: the rule of ``conv2d`` emits ``ns.conv2d_backward_input(g, w, x.shape, ...)``
and ``ns.conv2d_backward_kernel(x, g, w.shape, ...)``.
"""
from __future__ import annotations

from ..type.errors import GraphError
from .common import wants


def _conv_params(op):
    return dict(stride=op["stride"], padding=op["padding"], dilation=op["dilation"],
                groups=op["groups"])


def conv2d_grad(ns, op, inputs, output, g, needs=None):
    x, w = inputs
    p = _conv_params(op)
    return [ns.conv2d_backward_input(g, w, x.shape, **p) if wants(needs, 0) else None,
            ns.conv2d_backward_kernel(x, g, w.shape, **p) if wants(needs, 1) else None]


def conv2d_backward_input_grad(ns, op, inputs, output, g, needs=None):
    # y = conv^T(d, w): <y, h> = <d, conv(h, w)>
    d, w = inputs
    p = _conv_params(op)
    return [ns.conv2d(g, w, **p) if wants(needs, 0) else None,
            ns.conv2d_backward_kernel(g, d, w.shape, **p) if wants(needs, 1) else None]


def conv2d_backward_kernel_grad(ns, op, inputs, output, g, needs=None):
    # y = dW(x, d): <y, h> = <conv(x, h), d>
    x, d = inputs
    p = _conv_params(op)
    return [ns.conv2d_backward_input(d, g, x.shape, **p) if wants(needs, 0) else None,
            ns.conv2d(x, g, **p) if wants(needs, 1) else None]


def _pool_params(op):
    return dict(kernel=op["kernel"], stride=op["stride"], padding=op["padding"],
                ceil_mode=op["ceil_mode"])


def max_pool2d_grad(ns, op, inputs, output, g, needs=None):
    (x,) = inputs
    return [ns.max_pool2d_backward(x, output, g, **_pool_params(op))]


def avg_pool2d_grad(ns, op, inputs, output, g, needs=None):
    (x,) = inputs
    return [ns.avg_pool2d_backward(g, x.shape, count_include_pad=op["count_include_pad"],
                                   **_pool_params(op))]


def avg_pool2d_backward_grad(ns, op, inputs, output, g, needs=None):
    return [ns.avg_pool2d(g, count_include_pad=op["count_include_pad"], **_pool_params(op))]


def lrn_grad(ns, op, inputs, output, g, needs=None):
    (x,) = inputs
    return [ns.lrn_backward(x, g, size=op["size"], alpha=op["alpha"], beta=op["beta"],
                            k=op["k"])]


def _window(op):
    return dict(kernel=op["kernel"], stride=op["stride"], padding=op["padding"],
                dilation=op["dilation"])


def im2col_grad(ns, op, inputs, output, g, needs=None):
    # the optimiser's lowering only; col2im (summing overlapping windows) is its transpose
    (x,) = inputs
    if op.get("layout") == "flat":  # (K, N*L) -> the batch layout (N, K, L)
        k, n = g.shape[0], x.shape[0]
        g = ns.transpose(ns.reshape(g, (k, n, g.shape[1] // max(n, 1))), (1, 0, 2))
    return [ns.col2im(g, x.shape, **_window(op))]


def col2im_grad(ns, op, inputs, output, g, needs=None):
    return [ns.im2col(g, layout="batch", **_window(op))]


def second_derivative_not_implemented(ns, op, inputs, output, g, needs=None):
    raise GraphError(f"grad: the second derivative through {op.kind} is not implemented "
                     f"(differentiate the model once, or write the gradient of its "
                     f"backward pass by hand)")


def max_pool2d_backward_grad(ns, op, inputs, output, g, needs=None):
    # which element wins a window is locally constant in x and y: only the
    # incoming gradient (parent 2) has a derivative, and it is not implemented
    if wants(needs, 2):
        second_derivative_not_implemented(ns, op, inputs, output, g, needs)
    return [None, None, None]
