"""A reduction merged with the elementwise node that feeds it (``kernels="generated"``).

``sum(exp(x - m), axis=-1)``: the fused ``exp(x - m)`` would be written to memory,
then read back by the sum. Where that elementwise value (a ``fused`` program or one
elementwise op) has no other consumer, :data:`FUSE_REDUCE` makes one
``fused_reduce`` node of both: the program, the reduction, its axes and keepdims
(:mod:`graphc.engine.fused_reduce`). Its generated kernel accumulates the program
over the reduced cells of each output element, reading broadcast inputs (``m``)
where they are; its NumPy kernel computes the value block by block in a small
scratch. The NumPy engine's graphs never get it (their bits stay NumPy's).

Where it pays: a float32/float64 ``sum``, ``mean`` or ``prod`` (of the program's
own dtype) whose reduced cells include the innermost non-trivial axis, so each output
element's cells lie in runs the kernel walks in memory order (a softmax's rows, a
batch norm's ``(0, 2, 3)``, a loss's whole batch). A reduction over outer axes only,
keeping the innermost (a bias gradient's columns), stays a separate node: its kernel
would walk the columns one output at a time. ``max`` and ``min`` stay separate too:
the kernels compute them (exactly), but the NaN-propagating comparison does not
vectorise, and NumPy's own SIMD maximum of the value written out is faster.

>>> import graphc.ndarray as N
>>> from graphc.optimiser.fusion import FUSE_ELEMENTWISE
>>> from graphc.optimiser.passes import run_stages
>>> x = N.var("x", (4, 8))
>>> m = N.max(x, axis=1, keepdims=True)
>>> out = run_stages([N.sum(N.exp(x - m), axis=1)], [FUSE_ELEMENTWISE, FUSE_REDUCE]).roots[0]
>>> out.op.kind, out.op["reduce"], len(out.op["program"]), [p.op.kind for p in out.parents]
('fused_reduce', 'sum', 2, ['var', 'max'])
"""
from __future__ import annotations

import numpy as np

from ..type.kinds import is_elementwise
from ..type.op import Op
from .build import make
from .fusion import _program_of
from .rewriter import Pass

#: the reductions absorbed (the kernels also compute ``max`` and ``min``; see above)
REDUCTIONS = frozenset({"sum", "mean", "prod"})
_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def reduces_innermost(shape, axis) -> bool:
    """Whether a reduction over ``axis`` (``None``: all) of ``shape`` reduces its last
    axis of more than one element.

    >>> reduces_innermost((8, 64, 7, 7), (0, 2, 3)), reduces_innermost((32, 10), (0,))
    (True, False)
    >>> reduces_innermost((32, 10, 1), (1,))
    True
    """
    last = max((d for d, n in enumerate(shape) if n > 1), default=None)
    return last is not None and (axis is None or last in axis)


def _fuse_reduce(node, ctx):
    if node.op.kind not in REDUCTIONS:
        return None
    (value,) = node.parents
    if (not is_elementwise(value.op.kind) or ctx.uses(value) != 1
            or value.dtype not in _FLOATS or node.dtype != value.dtype
            or not reduces_innermost(value.shape, node.op["axis"])):
        return None
    program, inputs = _program_of(value)
    op = Op.make("fused_reduce", program=tuple(program), reduce=node.op.kind,
                 axis=node.op["axis"], keepdims=node.op["keepdims"], full=value.shape,
                 shape=node.shape, dtype=node.dtype)
    return make(node, op, inputs)


FUSE_REDUCE = Pass("fuse_reduce", function=_fuse_reduce, stage="fuse", matches=REDUCTIONS,
                   produces=frozenset({"fused_reduce"}),
                   doc="a reduction of an elementwise value used once -> one node: the "
                       "value is never written to memory (generated kernels only)")
