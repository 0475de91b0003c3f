"""Useless-op removal that keeps NumPy's results bit for bit, and the
``fast_math`` rewrites that do not (``x * 0`` is NaN, not 0, when x is inf).

Every rule checks that the replacement has the node's shape and dtype, so
``int_array + 0.0`` (which is float64) is never replaced by the int array.

An arithmetic identity is applied by default only where NumPy returns ``x``'s
own bits (NaN where NumPy gives NaN; a NaN's sign and payload are not part of
a result: IEEE 754 leaves them open, and NumPy's own float16 and float32 loops
propagate different ones). That is a property of the identity element *and*
of the dtype, so :data:`IDENTITIES` lists both: ``x + (-0.0)`` is ``x`` but
``x + 0.0`` turns ``-0.0`` into ``+0.0``; ``x - 0.0`` is ``x`` but
``x - (-0.0)`` is not; a complex ``x * 1`` turns ``0+infj`` into ``nan+infj``.
The inexact variants (either zero, complex operands) are ``fast_math`` rules.

>>> import graphc.ndarray as N
>>> from graphc.optimiser.rewriter import rewrite
>>> x = N.var("x", (3,))
>>> rewrite([(x * 1.0 - 0.0).T], SIMPLIFY.rewrite_node)[0][0] is x
True
>>> rewrite([x + 0.0], SIMPLIFY.rewrite_node)[0][0] is x     # -0.0 + 0.0 is +0.0
False
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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


@dataclass(frozen=True)
class Identity:
    """``kind(x, c)`` is ``x`` when every element of the constant ``c`` is ``element``
    (``kind(c, x)`` too when ``commutative``). ``exact_kinds`` holds the dtype kinds
    (``numpy.dtype.kind`` of the result) where NumPy returns ``x`` bit for bit when
    ``c`` has the bits of :meth:`element_in` (so ``-0.0`` is not ``+0.0``); anywhere
    else the rewrite changes results and is a ``fast_math`` rule.

    >>> IDENTITIES[0].element_in(np.dtype(np.complex64))
    array(-0.-0.j, dtype=complex64)
    """

    name: str
    kind: str
    element: float
    exact_kinds: str
    commutative: bool = False

    def element_in(self, dtype) -> np.ndarray:
        """The identity element as a 0-d array of ``dtype``; a complex zero carries its
        sign in both parts (``x + (-0.0 + 0j)`` turns an imaginary ``-0.0`` into ``+0.0``)."""
        dtype = np.dtype(dtype)
        if dtype.kind == "c":
            return np.asarray(complex(self.element, self.element if self.element == 0 else 0.0),
                              dtype)
        return np.asarray(self.element).astype(dtype)


#: checked against NumPy on every dtype with signed zeros, infs, NaNs and subnormals
#: (tests/test_numpy_exact.py): complex multiply/divide/power by one are not exact
#: (``(0+infj) * 1`` is ``nan+infj``); NumPy has no bool subtract, and an integer
#: divided by one is a float, which the dtype check already refuses
IDENTITIES = (
    Identity("add_zero", "add", -0.0, "biufc", commutative=True),
    Identity("subtract_zero", "subtract", 0.0, "iufc"),
    Identity("multiply_one", "multiply", 1.0, "biuf", commutative=True),
    Identity("divide_one", "divide", 1.0, "f"),
    Identity("power_one", "power", 1.0, "iuf"),
)


def _has_bits(array, element) -> bool:
    """Whether every element of ``array``, cast to ``element``'s dtype as a ufunc
    casts its operand, has the bits of ``element``."""
    with np.errstate(all="ignore"):
        cast = np.ascontiguousarray(np.asarray(array).astype(element.dtype))
    return cast.size > 0 and bool(np.all(cast.reshape(-1).view(np.uint8).reshape(cast.size, -1)
                                          == element.reshape(1).view(np.uint8)))


def _exact_identity(identity: Identity):
    def build(b, node):
        if node.dtype.kind not in identity.exact_kinds:
            return None
        if not _has_bits(b["c"].value, identity.element_in(node.dtype)):
            return None
        return _keep_x(b, node)
    return build


def _identity_rule(identity: Identity, build, suffix: str = "") -> Rule:
    return Rule(identity.name + suffix, Pat(identity.kind, (X, Const(identity.element, name="c")),
                                            commutative=identity.commutative), build)


def _pad_into_conv(b, node):
    """``conv2d(pad(x), w)``, zeros padded on the image axes only, is ``conv2d(x, w)``
    with that much more padding: the convolution's padding is zeros too, so its columns
    (and every direct kernel's sums) are the same cells; no padded copy is made
    (TF-style "same" padding, exported as an explicit Pad: EfficientNet-Lite's strided
    depthwise convolutions)."""
    pad = b["pad"]
    widths = pad.op["pad_width"]
    if (pad.op["value"] != 0 or len(widths) != 4 or any(widths[0]) or any(widths[1])
            or min(min(w) for w in widths) < 0):
        return None
    (top, bottom), (left, right) = node.op["padding"]
    padding = ((top + widths[2][0], bottom + widths[2][1]),
               (left + widths[3][0], right + widths[3][1]))
    return make(node, Op.make("conv2d", **dict(node.op.params(), padding=padding)),
                [b["x"], node.parents[1]])


#: the rewrite rules of the ``simplify`` pass (not to be confused with the shape
#: layer's ``graphc.shape.rules.RULES``)
SIMPLIFY_RULES = [_identity_rule(i, _exact_identity(i)) for i in IDENTITIES] + [
    Rule("double_negation", Pat("negative", (Pat("negative", (X,)),)), _keep_x),
    Rule("transpose_transpose", Pat("transpose", (Pat("transpose", (X,), name="inner"),)),
         _compose_transposes),
    Rule("identity_transpose", Pat("transpose", (X,)), _identity_transpose),
    Rule("reshape_reshape", Pat("reshape", (Pat("reshape", (X,)),)), _reshape_once),
    Rule("identity_reshape", Pat("reshape", (X,)), _keep_x),
    Rule("copy", Pat("copy", (X,)), _keep_x),
    Rule("identity_cast", Pat("astype", (X,)), _keep_x),
    Rule("identity_broadcast", Pat("broadcast_to", (X,)), _keep_x),
    Rule("pad_into_conv", Pat("conv2d", (Pat("pad", (X,), name="pad"), Pat())), _pad_into_conv),
]

# its rules keep a parent, or re-make a transpose, a reshape or a convolution
SIMPLIFY = Pass("simplify", SIMPLIFY_RULES,
                produces=frozenset({"transpose", "reshape", "conv2d"}),
                doc="useless ops that leave NumPy's results unchanged")
# it re-makes the broadcasting op it matched on other parents
EXPANSIONS = Pass("drop_expansions", function=_drop_expansion,
                  matches=frozenset(_BROADCASTING), produces=frozenset(_BROADCASTING),
                  doc="broadcast_to/tile/repeat feeding an op that broadcasts anyway")


def _zeros(b, node):
    return make_fill(node, 0)


#: value-changing rewrites, for the ``fast_math`` pass (:mod:`.fast_math`): the
#: identities wherever they hold in value (``x + 0.0 -> x`` keeps ``-0.0``), and
#: ``x * 0 -> 0`` (wrong for inf and NaN) and its kin
FAST_MATH_RULES = [_identity_rule(i, _keep_x, "_any_bits") for i in IDENTITIES] + [
    Rule("multiply_zero", Pat("multiply", (X, Const(0)), commutative=True), _zeros),
    Rule("zero_divide", Pat("divide", (Const(0), X)), _zeros),
    Rule("subtract_self", Pat("subtract", (X, X)), _zeros),
]
