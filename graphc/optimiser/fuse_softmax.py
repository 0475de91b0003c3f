"""The written-out softmax made one ``softmax`` node (``kernels="generated"``).

``N.softmax`` (and ONNX's ``Softmax``) builds ``e / sum(e)`` with
``e = exp(x - max(x))``, all along one axis with ``keepdims``. After elementwise
fusion that is four nodes: ``max``, the fused ``exp(x - m)`` (written to memory,
since both the sum and the division read it), ``sum`` and ``divide``.
:data:`FUSE_SOFTMAX` matches the division, checks the rest of the shape, and makes one
``softmax`` node of ``x`` (:mod:`graphc.ops.softmax`), whose generated kernel passes
over each row while it is in cache. It takes the pattern only where nothing else reads
the exponentials or their sums (a training graph's backward pass that reads them
keeps the nodes, as they hold what it needs). The NumPy engine's graphs never get it.

>>> import graphc.ndarray as N
>>> from graphc.optimiser.fusion import FUSE_ELEMENTWISE
>>> from graphc.optimiser.passes import run_stages
>>> x = N.var("x", (4, 8))
>>> out = run_stages([N.softmax(x)], [FUSE_ELEMENTWISE, FUSE_SOFTMAX]).roots[0]
>>> out.op.kind, out.op["axis"], [p.op.kind for p in out.parents]
('softmax', 1, ['var'])
"""
from __future__ import annotations

import numpy as np

from ..type.op import Op
from .build import make
from .rewriter import Pass

_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
#: the program of ``exp(x - m)`` after elementwise fusion
_SHIFTED_EXP = ((Op.make("subtract"), (("in", 0), ("in", 1))), (Op.make("exp"), (("acc",),)))


def _along_one_axis(node, kind, x):
    """The axis of ``node``, a ``kind`` reduction of ``x`` along one axis with
    ``keepdims``; else ``None``."""
    if node.op.kind != kind or node.parents[0] is not x or not node.op["keepdims"]:
        return None
    axis = node.op["axis"]
    return axis[0] if axis is not None and len(axis) == 1 else None


def _fuse_softmax(node, ctx):
    if node.op.kind != "divide":
        return None
    exps, total = node.parents
    if (node.dtype not in _FLOATS or exps.op.kind != "fused"
            or tuple(exps.op["program"]) != _SHIFTED_EXP or exps.shape != node.shape
            or ctx.uses(exps) != 2 or ctx.uses(total) != 1):
        return None
    x, shift = exps.parents
    axis = _along_one_axis(total, "sum", exps)
    if (axis is None or x.shape != node.shape or x.dtype != node.dtype
            or _along_one_axis(shift, "max", x) != axis):
        return None
    return make(node, Op.make("softmax", axis=axis), [x])


FUSE_SOFTMAX = Pass("fuse_softmax", function=_fuse_softmax, stage="fuse",
                    matches=frozenset({"divide"}), produces=frozenset({"softmax"}),
                    doc="exp(x - max(x)) / sum(exp(x - max(x))) along one axis -> one "
                        "softmax node (generated kernels only)")
