"""Lowering of convolutions to GEMMs, so that their workspaces are graph values.

A direct ``conv2d`` kernel needs a column buffer of ``N * C*kh*kw * OH*OW``
elements that the memory planner cannot see. Lowered, the buffer is an
``im2col`` node: planned like any value, and its memory reused by the next
layer once the GEMM has read it.

- ``conv2d(x, w)`` -> ``reshape(matmul(reshape(w, (O, K)), im2col(x)))``: the
  columns are ``(N, K, OH*OW)`` and the GEMM, batched over ``N``, leaves
  ``(N, O, OH*OW)``, which already is NCHW.
- ``conv2d_backward_input(g, w)`` -> ``col2im(matmul(w, g, trans_a=True))``, the
  direct kernel's own sums. With stride 1 it is also a forward ``conv2d`` of ``g``
  with the kernel flipped and its channels swapped (lowered in turn), which avoids
  col2im's strided adds but sums the taps in another order: the last bits of the
  gradient change, so that form is a ``fast_math`` rule (:data:`FORWARD_CONV_RULES`).
- ``conv2d_backward_kernel(x, g)`` -> ``matmul(g_t, im2col(x), trans_b=True)``
  with the columns channel-major, ``(K, N*OH*OW)``, and ``g`` as ``(O, N*OH*OW)``:
  the batch is summed inside the GEMM. The layout differs from the forward
  columns on purpose: were they the same node, hash-consing would keep the
  forward's columns alive until the backward pass; recomputing them is cheaper
  than holding every layer's columns through a training step.
- With ``groups > 1`` the same GEMMs run per group through matmul's batch axes.
- A 1x1, stride 1, unpadded convolution needs no columns: the GEMM reads
  ``x`` as ``(N, C, H*W)``. Its lowering is a GEMM on reshapes, done only where
  the reshape of ``x`` is free (a computed value used once, overwritten in
  place); otherwise the reshape would copy ``x`` every run, and the direct
  kernel, which is already that GEMM on views, is kept.

>>> import graphc.ndarray as N
>>> from graphc.optimiser.rewriter import rewrite
>>> x, w = N.var("x", (1, 3, 8, 8)), N.var("w", (4, 3, 3, 3))
>>> y = rewrite([N.conv2d(x, w, padding=1)], LOWERING.rewrite_node)[0][0]
>>> y.op.kind, y.parents[0].op.kind, [p.op.kind for p in y.parents[0].parents]
('reshape', 'matmul', ['reshape', 'im2col'])
"""
from __future__ import annotations

from ..operator.lazy import _const_op
from ..type.op import Op
from .build import make
from .pattern import Pat
from .rewriter import Pass, Rule

_UNPLANNED = ("var", "const")


def _reshape(like, node, shape):
    shape = tuple(shape)
    if node.shape == shape:
        return node
    if node.op.kind == "const":
        # a view of the constant: folding a reshape node would copy the weights
        view = node.value.reshape(shape)
        view.flags.writeable = False
        return type(like).leaf(_const_op(view), value=view)
    return make(like, Op.make("reshape", shape=shape), [node])


def _matmul(like, a, b, trans_a=False, trans_b=False):
    flags = {k: True for k, v in (("trans_a", trans_a), ("trans_b", trans_b)) if v}
    return make(like, Op.make("matmul", **flags), [a, b])


def _im2col(like, x, op, kernel, layout):
    return make(like, Op.make("im2col", kernel=tuple(kernel), stride=op["stride"],
                              padding=op["padding"], dilation=op["dilation"], layout=layout), [x])


def _pointwise(op, kernel) -> bool:
    return (tuple(kernel) == (1, 1) and op["stride"] == (1, 1)
            and op["padding"] == ((0, 0), (0, 0)))


def _free_reshape(node, ctx) -> bool:
    """Whether a reshape of ``node`` can take its memory (no copy at run time)."""
    return node.op.kind not in _UNPLANNED and ctx.uses(node) == 1


def _grouped(shape, groups, axis):
    """``shape`` with axis ``axis`` split into ``(groups, size // groups)``; unchanged
    for one group (matmul then needs no batch axis for it)."""
    if groups == 1:
        return tuple(shape)
    return tuple(shape[:axis]) + (groups, shape[axis] // groups) + tuple(shape[axis + 1:])


def _lower_conv2d(node, ctx):
    x, w = node.parents
    op, groups = node.op, node.op["groups"]
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    span = node.shape[2] * node.shape[3]
    k = cg * kh * kw
    if _pointwise(op, (kh, kw)):
        if not _free_reshape(x, ctx):
            return None
        cols = _reshape(node, x, _grouped((n, c, h * wd), groups, 1))
    else:
        cols = _reshape(node, _im2col(node, x, op, (kh, kw), "batch"),
                        _grouped((n, c * kh * kw, span), groups, 1))
    kernel = _reshape(node, w, _grouped((o, k), groups, 0))
    return _reshape(node, _matmul(node, kernel, cols), node.shape)


def _lower_backward_input(node, ctx):
    g, w = node.parents
    op, groups = node.op, node.op["groups"]
    n, c, h, wd = node.shape
    o, cg, kh, kw = w.shape
    span = g.shape[2] * g.shape[3]
    pointwise = _pointwise(op, (kh, kw))
    if pointwise and not _free_reshape(g, ctx):
        return None
    kernel = _reshape(node, w, _grouped((o, cg * kh * kw), groups, 0))
    grads = _reshape(node, g, _grouped((n, o, span), groups, 1))
    cols = _reshape(node, _matmul(node, kernel, grads, trans_a=True), (n, c * kh * kw, span))
    if pointwise:
        return _reshape(node, cols, node.shape)
    return make(node, Op.make("col2im", shape=node.shape, kernel=(kh, kw), stride=op["stride"],
                              padding=op["padding"], dilation=op["dilation"]), [cols])


def _as_forward_conv(node):
    """With stride 1, the input gradient is a forward convolution of ``g`` with the
    kernel's channels swapped and its taps flipped, padded by ``(k - 1) * d - p``:
    im2col of ``g`` plus one GEMM, where col2im's strided adds cost 1.2-2x an im2col
    (single-threaded, ResNet's 3x3 layers at batch 8: 1-8% of the whole op)."""
    if node.op["stride"] != (1, 1) or _pointwise(node.op, node.parents[1].shape[2:]):
        return None
    g, w = node.parents
    op, groups = node.op, node.op["groups"]
    o, cg, kh, kw = w.shape
    padding = tuple(((k - 1) * d - lo, (k - 1) * d - hi) for k, d, (lo, hi) in
                    zip((kh, kw), op["dilation"], op["padding"]))
    if min(min(p) for p in padding) < 0:
        return None
    if groups == 1:
        swapped = make(node, Op.make("transpose", axes=(1, 0, 2, 3)), [w])
    else:
        split = _reshape(node, w, (groups, o // groups, cg, kh, kw))
        swapped = _reshape(node, make(node, Op.make("transpose", axes=(0, 2, 1, 3, 4)), [split]),
                           (groups * cg, o // groups, kh, kw))
    flipped = make(node, Op.make("flip", axis=(2, 3)), [swapped])
    conv = make(node, Op.make("conv2d", stride=(1, 1), padding=padding,
                              dilation=op["dilation"], groups=groups), [g, flipped])
    assert conv.shape == node.shape, (conv.shape, node.shape)
    return conv


def _lower_backward_kernel(node, ctx):
    x, g = node.parents
    op, groups = node.op, node.op["groups"]
    o, cg, kh, kw = node.shape
    n, c, h, wd = x.shape
    span = n * g.shape[2] * g.shape[3]
    if n > 1:  # channel-major: (O, N, OH, OW), so the GEMM sums over the batch
        g = make(node, Op.make("transpose", axes=(1, 0, 2, 3)), [g])
    grads = _reshape(node, g, _grouped((o, span), groups, 0))
    if n == 1 and _pointwise(op, (kh, kw)):
        if not _free_reshape(x, ctx):
            return None
        cols = x
    else:
        cols = _im2col(node, x, op, (kh, kw), "flat")
    cols = _reshape(node, cols, _grouped((c * kh * kw, span), groups, 0))
    return _reshape(node, _matmul(node, grads, cols, trans_b=True), node.shape)


#: the stride-1 input gradient as a forward convolution: faster where col2im is slow,
#: but its sums run in another order than the direct kernel's (the last bits of the
#: gradient differ), so it belongs to the ``fast_math`` pass
FORWARD_CONV_RULES = [
    Rule("backward_input_as_forward_conv", Pat("conv2d_backward_input"),
         lambda b, node: _as_forward_conv(node)),
]

_LOWER = {"conv2d": _lower_conv2d, "conv2d_backward_input": _lower_backward_input,
          "conv2d_backward_kernel": _lower_backward_kernel}


def _lower(node, ctx):
    lower = _LOWER.get(node.op.kind)
    return None if lower is None else lower(node, ctx)


LOWERING = Pass("lowering", function=_lower,
                doc="convolutions -> im2col/col2im + GEMM: the column workspace becomes a "
                    "planned value")
