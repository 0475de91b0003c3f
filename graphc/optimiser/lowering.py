"""Lowering of convolutions to GEMMs, so that their workspaces are graph values.

A direct ``conv2d`` kernel needs a column buffer of ``N * C*kh*kw * OH*OW``
elements that the memory planner cannot see. Lowered, the buffer is an
``im2col`` node: planned like any value, and its memory reused by the next
layer once the GEMM has read it.

The decomposition is :mod:`graphc.operator.conv_gemm`'s, the one the engine's
convolution kernels run on arrays (so lowering changes no bits): each rule runs
it with a namespace that makes nodes like the convolution it replaces. What is
decided here is where it pays:

- A 1x1, stride 1, unpadded convolution needs no columns, and its GEMM reads an
  operand reshaped. That reshape is free only for a computed value used once
  (overwritten in place); for any other it would copy the operand every run, so
  such a convolution is lowered only where the reshape is free, and the direct
  kernel, already that GEMM on views, is kept elsewhere.
- A reshaped constant (the weights) is a read-only view of it, not a node that
  folding would turn into a copy.
- With stride 1 the input gradient is also a forward ``conv2d`` of ``g`` with the
  kernel flipped and its channels swapped (lowered in turn), which avoids
  col2im's strided adds but sums the taps in another order: the last bits of the
  gradient change, so that form is a ``fast_math`` rule (:data:`FORWARD_CONV_RULES`).

>>> import graphc.ndarray as N
>>> from graphc.optimiser.rewriter import rewrite
>>> x, w = N.var("x", (1, 3, 8, 8)), N.var("w", (4, 3, 3, 3))
>>> y = rewrite([N.conv2d(x, w, padding=1)], LOWERING.rewrite_node)[0][0]
>>> y.op.kind, y.parents[0].op.kind, [p.op.kind for p in y.parents[0].parents]
('reshape', 'matmul', ['reshape', 'im2col'])
"""
from __future__ import annotations

import numpy as np

from ..operator import Namespace
from ..operator.conv_gemm import DECOMPOSITIONS
from ..shape.neural import pointwise
from ..symbol.node import Node
from ..type.kinds import is_leaf
from .build import constant_like, make, make_const
from .pattern import Pat
from .rewriter import Pass, Rule


class NodeNamespace(Namespace):
    """The array functions, making nodes like ``like`` (its class and source line):
    how a rule builds a replacement of several ops.

    >>> import graphc.ndarray as N
    >>> x = N.var("x", (2, 3))
    >>> NodeNamespace(x).reshape(x, (3, 2)).op
    Op('reshape', shape=(3, 2))
    """

    def __init__(self, like: Node):
        # no super().__init__(): its ``random`` would refer back to this namespace, a
        # cycle that would keep ``like`` (and the graph under it) until the cyclic
        # collector ran; a lowering draws nothing at random
        self._like = like

    def _apply(self, op, parents):
        if op.kind == "reshape" and parents[0].op.kind == "const":
            return self._constant_view(parents[0], op["shape"])
        return make(self._like, op, parents)

    def _constant_view(self, node, shape):
        # folding a reshape node would copy the weights into a new constant
        view = node.value.reshape(shape)
        view.flags.writeable = False
        return constant_like(self._like, view)

    def _constant(self, array, name=None):
        return make_const(self._like, array)

    def _is_value(self, x):
        return isinstance(x, Node)

    def _known(self, x):
        return x.value if isinstance(x, Node) else None


def _lower(node) -> Node:
    a, b = node.parents
    return DECOMPOSITIONS[node.op.kind](NodeNamespace(node), a, b, node.op)


def _kernel_shape(node):
    """The (O, C/groups, kh, kw) kernel of a convolution node of any of the three kinds."""
    return node.shape if node.op.kind == "conv2d_backward_kernel" else node.parents[1].shape


def _kernel_hw(node):
    """The (kh, kw) window of a convolution node of any of the three kinds."""
    return _kernel_shape(node)[2:]


def _needs_no_columns(node) -> bool:
    """Whether the decomposition of ``node`` is a GEMM on a reshape of its first operand
    (a 1x1 convolution; for the kernel gradient, of a batch of one image)."""
    if node.op.kind == "conv2d_backward_kernel" and node.parents[0].shape[0] != 1:
        return False
    return pointwise(node.op, _kernel_hw(node))


def _planned(node) -> bool:
    """A planned buffer (not a variable or constant): a reshape of it can take its memory."""
    return not is_leaf(node.op.kind)


#: the most input channels per group of a grouped convolution that the engine's direct
#: kernel takes with ``kernels="generated"`` (:mod:`graphc.engine.numba_conv`): past
#: that, the GEMMs of the lowered form are faster
DIRECT_GROUP_CHANNELS = 8
_DIRECT_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def direct_conv(node) -> bool:
    """Whether ``node``, a convolution of any of the three kinds, runs on the engine's
    direct kernel with ``kernels="generated"`` (so lowering keeps it whole): more than
    one group, at most :data:`DIRECT_GROUP_CHANNELS` input channels per group (a
    depthwise convolution has one), float32 or float64.

    >>> import graphc.ndarray as N
    >>> x = N.var("x", (1, 32, 8, 8))
    >>> direct_conv(N.conv2d(x, N.var("w", (32, 1, 3, 3)), padding=1, groups=32))
    True
    >>> direct_conv(N.conv2d(x, N.var("w", (32, 32, 3, 3)), padding=1))
    False
    """
    return (node.op["groups"] > 1 and _kernel_shape(node)[1] <= DIRECT_GROUP_CHANNELS
            and node.dtype in _DIRECT_DTYPES)


#: tests ``conv2d node -> bool`` of the convolutions a native kernel computes whole with
#: ``kernels="generated"`` (so lowering keeps them): filled by the op definitions that
#: take them (``graphc.ops.conv_nhwc``: oneDNN's primitive, channels last)
NATIVE_CONVOLUTIONS: list = []
#: tests ``matmul node -> bool`` of the products by a constant matrix a native kernel
#: computes as a 1x1 convolution (``graphc.ops.conv_nhwc``: oneDNN's, kernel packed)
NATIVE_PRODUCTS: list = []


def native_product(node) -> bool:
    """Whether a test of :data:`NATIVE_PRODUCTS` takes the ``matmul`` ``node``.

    >>> import graphc.ndarray as N
    >>> native_product(N.matmul(N.var("x", (16, 8)), N.var("w", (8, 4))))
    False
    """
    return node.op.kind == "matmul" and any(test(node) for test in NATIVE_PRODUCTS)


def native_conv(node) -> bool:
    """Whether a test of :data:`NATIVE_CONVOLUTIONS` takes the ``conv2d`` ``node``.

    >>> import graphc.ndarray as N
    >>> native_conv(N.conv2d(N.var("x", (1, 4, 8, 8)), N.var("w", (4, 4, 3, 3))))
    False
    """
    return node.op.kind == "conv2d" and any(test(node) for test in NATIVE_CONVOLUTIONS)


def _lowering_rules(kind, keep=None):
    """Lower ``kind`` where it needs columns, and where it needs none only if the
    reshape of its first operand is free (a planned value used once); never a node
    ``keep`` accepts."""
    free = Pat(single_use=True, test=_planned)

    def lowered(test):
        return test if keep is None else (lambda n: test(n) and not keep(n))
    return [Rule(f"lower_{kind}", Pat(kind, test=lowered(lambda n: not _needs_no_columns(n))),
                 lambda b, node: _lower(node)),
            Rule(f"lower_pointwise_{kind}",
                 Pat(kind, (free, Pat()), test=lowered(_needs_no_columns)),
                 lambda b, node: _lower(node))]


LOWERING_RULES = [rule for kind in DECOMPOSITIONS for rule in _lowering_rules(kind)]
#: the rules for the device: every convolution, a 1x1 one too, since a reshape of a
#: computed value is a view there (``engine.devices.DEVICE_VIEWS``) and its GEMM then a
#: product a CUDA graph can hold (``engine.cuda_blas``)
DEVICE_LOWERING_RULES = [Rule(f"lower_{kind}", Pat(kind), lambda b, node: _lower(node))
                         for kind in DECOMPOSITIONS]
#: the rules with ``kernels="generated"``: the convolutions the direct kernel takes stay;
#: every other one is lowered, a 1x1 one too whatever reads its input (the reshape is a
#: view of any contiguous value on the CPU, ``compile(views=True)``), so its GEMM can take
#: the bias and activation after it (:mod:`.fuse_epilogue`)
LOWERING_RULES_KEEPING_DIRECT = [
    Rule(f"lower_{kind}", Pat(kind, test=lambda n: not (direct_conv(n) or native_conv(n))),
         lambda b, node: _lower(node)) for kind in DECOMPOSITIONS]


def _as_forward_conv(node):
    """With stride 1, the input gradient is a forward convolution of ``g`` with the
    kernel's channels swapped and its taps flipped, padded by ``(k - 1) * d - p``:
    im2col of ``g`` plus one GEMM, where col2im's strided adds cost 1.2-2x an im2col
    (single-threaded, ResNet's 3x3 layers at batch 8: 1-8% of the whole op)."""
    if node.op["stride"] != (1, 1) or pointwise(node.op, _kernel_hw(node)):
        return None
    g, w = node.parents
    op, groups = node.op, node.op["groups"]
    o, cg, kh, kw = w.shape
    padding = tuple(((k - 1) * d - lo, (k - 1) * d - hi) for k, d, (lo, hi) in
                    zip((kh, kw), op["dilation"], op["padding"]))
    if min(min(p) for p in padding) < 0:
        return None
    ns = NodeNamespace(node)
    if groups == 1:
        swapped = ns.transpose(w, (1, 0, 2, 3))
    else:
        split = ns.reshape(w, (groups, o // groups, cg, kh, kw))
        swapped = ns.reshape(ns.transpose(split, (0, 2, 1, 3, 4)),
                             (groups * cg, o // groups, kh, kw))
    return ns.conv2d(g, ns.flip(swapped, (2, 3)), stride=1, padding=padding,
                     dilation=op["dilation"], groups=groups)


#: the stride-1 input gradient as a forward convolution: faster where col2im is slow,
#: but its sums run in another order than the direct kernel's (the last bits of the
#: gradient differ), so it belongs to the ``fast_math`` pass
FORWARD_CONV_RULES = [
    Rule("backward_input_as_forward_conv", Pat("conv2d_backward_input"),
         lambda b, node: _as_forward_conv(node)),
]

#: what the decompositions make (a reshaped constant is a ``const`` viewing it)
LOWERING_PRODUCES = frozenset({"im2col", "col2im", "matmul", "reshape", "transpose", "const"})

LOWERING = Pass("lowering", LOWERING_RULES, produces=LOWERING_PRODUCES,
                doc="convolutions -> im2col/col2im + GEMM: the column workspace becomes a "
                    "planned value")

#: the lowering pass for each ``kernels=`` choice: with generated kernels the grouped
#: convolutions that the direct kernel takes (:func:`direct_conv`) are kept whole
LOWERING_FOR_KERNELS = {
    "numpy": LOWERING,
    # the device (graphc.engine.device) has no direct convolution: all are lowered
    "device": Pass("lowering", DEVICE_LOWERING_RULES, produces=LOWERING_PRODUCES,
                   doc="convolutions -> im2col/col2im + GEMM, the 1x1 ones -> a GEMM on a "
                       "reshape (a view on the device)"),
    "generated": Pass("lowering", LOWERING_RULES_KEEPING_DIRECT, produces=LOWERING_PRODUCES,
                      doc="convolutions -> im2col/col2im + GEMM, but the grouped ones the "
                          "engine's direct kernel takes"),
}
