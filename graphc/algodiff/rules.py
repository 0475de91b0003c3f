"""The registry of gradient rules, keyed by op kind like every other layer's.

``GRADIENTS[kind]`` is ``rule(ns, op, inputs, output, g, needs=None)`` (see
:mod:`.common`): one gradient per input, built with the functions of the
namespace ``ns``, so the same rule emits graph nodes (``graphc.ndarray``) or
computes arrays (``graphc.eager``). ``NON_DIFFERENTIABLE`` lists the kinds
that pass no gradient on: leaves, creation and random draws, comparisons and
logical ops, piecewise-constant maths, integer-valued results. Every kind in
``KINDS`` is in exactly one of the two (a test checks it: a new kind's
definition needs a ``grad``). ``delay`` has a rule that raises: it wraps Python code.
``COMPLEX_GRADIENTS`` lists the kinds whose rules also serve complex values, and how.

>>> from graphc.type.kinds import KINDS
>>> sorted(set(KINDS) - set(GRADIENTS) - NON_DIFFERENTIABLE)
[]
"""
from __future__ import annotations

from ..type.errors import GraphError

#: kind -> gradient rule; filled by the op definitions (:mod:`graphc.ops`, their ``grad``)
GRADIENTS: dict = {}
#: kinds that pass no gradient on; filled by the op definitions too
NON_DIFFERENTIABLE: set = set()

#: ``COMPLEX_GRADIENTS[kind]`` says how the kind's rule serves complex values (a node
#: or input of a complex dtype); a kind not listed refuses them. Cotangents of complex
#: values follow PyTorch's convention, ``dL/dRe z + i dL/dIm z`` for a real loss ``L``.
#: :data:`HOLOMORPHIC`: the rule is the real derivative formula, analytic in the
#: inputs, and applies conjugated (``conj(rule(conj(g)))``); :data:`DIRECT`: the rule
#: already gives the convention's cotangents (real-linear maps, re-indexing, ``abs``,
#: ``real``, the FFTs, ``eig``). Filled by the op definitions (their ``complex_grad``).
COMPLEX_GRADIENTS: dict = {}
HOLOMORPHIC = "holomorphic"
DIRECT = "direct"


def delay_grad(ns, op, inputs, output, g, needs=None):
    """A delay runs arbitrary Python code: refused, saying what to do instead."""
    fn = op["fn"]
    name = getattr(fn, "__name__", repr(fn))
    raise GraphError(f"grad: cannot differentiate through delay node calling {name}: it runs "
                     "arbitrary NumPy code with no gradient rule; build that part from "
                     "graphc functions, or keep the delay off the path from the variables "
                     "to the loss")


def rule_for(kind: str):
    """The gradient rule of ``kind``; ``None`` for a non-differentiable kind; a
    :class:`GraphError` for a kind with no decision.

    >>> rule_for("less") is None, callable(rule_for("exp"))
    (True, True)
    """
    rule = GRADIENTS.get(kind)
    if rule is not None or kind in NON_DIFFERENTIABLE:
        return rule
    raise GraphError(f"grad: no gradient rule for op kind {kind!r}; add one to "
                     "graphc/algodiff (GRADIENTS) or list it in NON_DIFFERENTIABLE")
