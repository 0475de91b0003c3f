"""Convolutions as GEMMs, written once against the array namespace (as gradient
rules are): the optimiser's lowering runs these functions with a namespace that
makes graph nodes, the engine's convolution kernels (eager mode, unoptimised
graphs) with one that binds each step to a buffer once. So both make the same
BLAS calls on the same shapes, and their results have the same bits.

- ``conv2d(x, w)`` is ``reshape(w, (O, K)) @ im2col(x)``: the columns are
  ``(N, K, OH*OW)`` and the GEMM, batched over ``N``, leaves ``(N, O, OH*OW)``,
  which already is NCHW.
- ``conv2d_backward_input(g, w)`` is ``col2im(w^T @ g)``: the columns of the
  image's gradient, each window's sum added back into its cells.
- ``conv2d_backward_kernel(x, g)`` is ``g @ im2col(x)^T`` with the columns
  channel-major, ``(K, N*OH*OW)``, and ``g`` as ``(O, N*OH*OW)``: the batch is
  summed inside the GEMM. (The layout differs from the forward's on purpose:
  were they the same node, hash-consing would keep the forward's columns alive
  until the backward pass.) With ``N == 1``, ``g`` already is ``(O, OH*OW)``.
- With ``groups > 1`` the same GEMMs run per group through matmul's batch axes.
- A 1x1, stride 1, unpadded convolution (:func:`~graphc.shape.neural.pointwise`)
  needs no columns: its GEMM reads the image as ``(N, C, H*W)``.

``K`` is ``C/groups * kh * kw``. Every function takes the values and the op of
the convolution and returns its value.

>>> import graphc.ndarray as N, graphc.eager as E, numpy as np
>>> from graphc.operator import NS
>>> x, w = N.var("x", (1, 2, 4, 4)), N.var("w", (3, 2, 3, 3))
>>> op = N.conv2d(x, w, padding=1).op
>>> y = conv2d_as_gemm(NS, x, w, op)
>>> y.shape, y.op.kind, y.parents[0].op.kind, [p.op.kind for p in y.parents[0].parents]
((1, 3, 4, 4), 'reshape', 'matmul', ['reshape', 'im2col'])
>>> X, W = np.ones(x.shape), np.ones(w.shape)
>>> conv2d_as_gemm(E.EagerNamespace(), X, W, op)[0, 0, 0]
array([ 8., 12., 12.,  8.])
"""
from __future__ import annotations

from ..shape.neural import conv_output_shape, pointwise


def _grouped(shape, groups, axis):
    """``shape`` with axis ``axis`` split into ``(groups, size // groups)``; unchanged
    for one group (matmul then needs no batch axis for it)."""
    if groups == 1:
        return tuple(shape)
    return tuple(shape[:axis]) + (groups, shape[axis] // groups) + tuple(shape[axis + 1:])


def _gemm(ns, a, b, trans_a=False, trans_b=False):
    """``a @ b`` with either operand read transposed (a strided view for BLAS, not a copy)."""
    flags = {k: True for k, v in (("trans_a", trans_a), ("trans_b", trans_b)) if v}
    return ns._op("matmul", [a, b], **flags)


def _window(op):
    return dict(stride=op["stride"], padding=op["padding"], dilation=op["dilation"])


def conv2d_as_gemm(ns, x, w, op):
    """``conv2d(x, w)`` (``op`` its op) as a GEMM of the kernel and ``x``'s columns.

    Example: ``conv2d_as_gemm(E, x, w, node.op)`` equals ``E.conv2d(x, w, ...)``
    """
    groups = op["groups"]
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    if pointwise(op, (kh, kw)):
        cols = ns.reshape(x, _grouped((n, c, h * wd), groups, 1))
    else:
        cols = ns.im2col(x, (kh, kw), layout="batch", **_window(op))
        cols = ns.reshape(cols, _grouped(cols.shape, groups, 1))
    kernel = ns.reshape(w, _grouped((o, cg * kh * kw), groups, 0))
    return ns.reshape(_gemm(ns, kernel, cols), conv_output_shape("conv2d", x.shape, w.shape, op))


def conv2d_backward_input_as_gemm(ns, g, w, op):
    """``conv2d_backward_input(g, w)``: the columns ``w^T @ g``, summed into the image
    of ``op["shape"]`` by col2im (a 1x1 convolution's columns are the image).

    Example: ``conv2d_backward_input_as_gemm(E, g, w, node.op)``
    """
    groups, shape = op["groups"], op["shape"]
    n, c = shape[:2]
    o, cg, kh, kw = w.shape
    span = g.shape[2] * g.shape[3]
    kernel = ns.reshape(w, _grouped((o, cg * kh * kw), groups, 0))
    grads = ns.reshape(g, _grouped((n, o, span), groups, 1))
    cols = ns.reshape(_gemm(ns, kernel, grads, trans_a=True), (n, c * kh * kw, span))
    if pointwise(op, (kh, kw)):
        return ns.reshape(cols, shape)
    return ns.col2im(cols, shape, (kh, kw), **_window(op))


def conv2d_backward_kernel_as_gemm(ns, x, g, op):
    """``conv2d_backward_kernel(x, g)``: ``g`` channel-major times the channel-major
    columns of ``x``, transposed, so the GEMM sums over the batch.

    Example: ``conv2d_backward_kernel_as_gemm(E, x, g, node.op)``
    """
    groups, shape = op["groups"], op["shape"]
    o, cg, kh, kw = shape
    n, c = x.shape[:2]
    span = n * g.shape[2] * g.shape[3]
    if n > 1:  # (O, N, OH, OW): with one image g already is (O, OH*OW)
        g = ns.transpose(g, (1, 0, 2, 3))
    grads = ns.reshape(g, _grouped((o, span), groups, 0))
    if n == 1 and pointwise(op, (kh, kw)):
        cols = x
    else:
        cols = ns.im2col(x, (kh, kw), layout="flat", **_window(op))
    cols = ns.reshape(cols, _grouped((c * kh * kw, span), groups, 0))
    return ns.reshape(_gemm(ns, grads, cols, trans_b=True), shape)


#: convolution kind -> its decomposition ``(ns, a, b, op) -> value``; the lowering
#: pass and the engine's kernels look it up here
DECOMPOSITIONS = {"conv2d": conv2d_as_gemm,
                  "conv2d_backward_input": conv2d_backward_input_as_gemm,
                  "conv2d_backward_kernel": conv2d_backward_kernel_as_gemm}

__all__ = ["conv2d_as_gemm", "conv2d_backward_input_as_gemm", "conv2d_backward_kernel_as_gemm",
           "DECOMPOSITIONS"]
