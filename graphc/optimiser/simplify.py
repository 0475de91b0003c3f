"""Useless-op removal that keeps NumPy's results exactly, and the
``fast_math`` rewrites that do not (``x * 0`` is NaN, not 0, when x is inf).

Every rule checks that the replacement has the node's shape and dtype, so
``int_array + 0.0`` (which is float64) is never replaced by the int array.
One inexactness is accepted, as Owl and NumPy users expect: ``x + 0`` turns
``-0.0`` into ``+0.0`` while ``x`` keeps ``-0.0``; the two compare equal.

>>> import graphc.ndarray as N
>>> from graphc.optimiser.rewriter import rewrite
>>> x = N.var("x", (3,))
>>> rewrite([(x * 1.0 + 0.0).T], SIMPLIFY.rewrite_node)[0][0] is x
True
"""
from __future__ import annotations

from ..shape.broadcast import broadcast_shapes
from ..type.kinds import KINDS
from ..type.op import Op
from .build import make, make_fill
from .pattern import Const, Pat
from .rewriter import Pass, Rule

X = Pat(name="x")


def _keep_x(b, node):
    x = b["x"]
    return x if x.shape == node.shape and x.dtype == node.dtype else None


def _compose_transposes(b, node):
    inner = b["inner"].op["axes"]
    axes = tuple(inner[a] for a in node.op["axes"])
    x = b["x"]
    return x if axes == tuple(range(len(axes))) else make(node, Op.make("transpose", axes=axes), [x])


def _reshape_once(b, node):
    x = b["x"]
    return x if x.shape == node.shape else make(node, Op.make("reshape", shape=node.shape), [x])


def _identity_transpose(b, node):
    return b["x"] if node.op["axes"] == tuple(range(node.ndim)) else None


_BROADCASTING = tuple(k for k, v in KINDS.items() if v.family in ("binary", "ternary"))


def _expands_size_one_axes_only(n) -> bool:
    """broadcast_to, or tile/repeat that only repeat axes of size 1: the same
    values NumPy broadcasting would produce."""
    if n.op.kind == "broadcast_to":
        return True
    x = n.parents[0]
    if n.op.kind == "tile":
        return all(r == 1 or d == 1 for r, d in zip(n.op["reps"], x.shape))
    if n.op.kind == "repeat":
        return x.shape[n.op["axis"]] == 1
    return False


def _drop_expansion(node, ctx):
    """An operand expanded only to be broadcast again: use the unexpanded one."""
    if node.op.kind not in _BROADCASTING:
        return None
    parents = list(node.parents)
    changed = False
    for i, p in enumerate(parents):
        if p.op.kind in ("broadcast_to", "tile", "repeat") and _expands_size_one_axes_only(p):
            trial = parents[:i] + [p.parents[0]] + parents[i + 1:]
            try:
                shape = broadcast_shapes(node.op.kind, *[q.shape for q in trial])
            except ValueError:
                continue
            if shape == node.shape:
                parents, changed = trial, True
    return make(node, node.op, parents) if changed else None


RULES = [
    Rule("add_zero", Pat("add", (X, Const(0)), commutative=True), _keep_x),
    Rule("subtract_zero", Pat("subtract", (X, Const(0))), _keep_x),
    Rule("multiply_one", Pat("multiply", (X, Const(1)), commutative=True), _keep_x),
    Rule("divide_one", Pat("divide", (X, Const(1))), _keep_x),
    Rule("power_one", Pat("power", (X, Const(1))), _keep_x),
    Rule("double_negation", Pat("negative", (Pat("negative", (X,)),)), _keep_x),
    Rule("transpose_transpose", Pat("transpose", (Pat("transpose", (X,), name="inner"),)),
         _compose_transposes),
    Rule("identity_transpose", Pat("transpose", (X,)), _identity_transpose),
    Rule("reshape_reshape", Pat("reshape", (Pat("reshape", (X,)),)), _reshape_once),
    Rule("identity_reshape", Pat("reshape", (X,)), _keep_x),
    Rule("copy", Pat("copy", (X,)), _keep_x),
    Rule("identity_cast", Pat("astype", (X,)), _keep_x),
    Rule("identity_broadcast", Pat("broadcast_to", (X,)), _keep_x),
]

SIMPLIFY = Pass("simplify", RULES, doc="useless ops that leave NumPy's results unchanged")
EXPANSIONS = Pass("drop_expansions", function=_drop_expansion,
                  doc="broadcast_to/tile/repeat feeding an op that broadcasts anyway")


def _zeros(b, node):
    return make_fill(node, 0)


FAST_MATH = Pass("fast_math", [
    Rule("multiply_zero", Pat("multiply", (X, Const(0)), commutative=True), _zeros),
    Rule("zero_divide", Pat("divide", (Const(0), X)), _zeros),
    Rule("subtract_self", Pat("subtract", (X, X)), _zeros),
], doc="value-changing rewrites (x*0 -> 0 is wrong for inf and NaN): only with fast_math=True")
