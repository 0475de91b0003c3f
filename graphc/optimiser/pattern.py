"""Patterns over graph nodes, as data.

A :class:`Pat` names the op kinds it accepts, sub-patterns for the parents,
attribute values, whether the node must have exactly one consumer, and an
optional extra test. Matching fills a dict of named bindings.

>>> import graphc.ndarray as N
>>> x = N.var("x", (3,))
>>> pat = Pat("add", (Pat(name="x"), Const(0.0)), commutative=True)
>>> b = {}
>>> pat.match(x + 0.0, MatchContext({}), b), b["x"] is x
(True, True)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np


@dataclass
class MatchContext:
    """What a pattern may ask about the graph: consumer counts by ``id(node)``
    (outputs count one extra, so they are never fused away)."""

    consumers: dict[int, int] = field(default_factory=dict)

    def uses(self, node) -> int:
        return self.consumers.get(id(node), 1)


@dataclass(frozen=True)
class Pat:
    """A node pattern. ``kinds`` is a kind or a tuple of kinds (``None``: any);
    ``parents`` a tuple of sub-patterns (``None``: any parents)."""

    kinds: Any = None
    parents: Optional[tuple] = None
    name: Optional[str] = None
    attrs: tuple = ()
    single_use: bool = False
    commutative: bool = False
    test: Optional[Callable[[Any], bool]] = None

    def match(self, node, ctx: MatchContext, bindings: dict) -> bool:
        kinds = self.kinds
        if kinds is not None and node.op.kind != kinds and (
                not isinstance(kinds, tuple) or node.op.kind not in kinds):
            return False
        if any(node.op.get(k, _MISSING) != v for k, v in self.attrs):
            return False
        if self.single_use and ctx.uses(node) != 1:
            return False
        if self.test is not None and not self.test(node):
            return False
        if self.name is not None:
            bound = bindings.get(self.name)
            if bound is not None and bound is not node:
                return False
        if self.parents is not None:
            if len(self.parents) != len(node.parents):
                return False
            orders = [node.parents]
            if self.commutative and len(node.parents) == 2:
                orders.append(node.parents[::-1])
            for parents in orders:
                trial = dict(bindings)
                if all(p.match(q, ctx, trial) for p, q in zip(self.parents, parents)):
                    bindings.clear()
                    bindings.update(trial)
                    break
            else:
                return False
        if self.name is not None:
            bindings[self.name] = node
        return True


_MISSING = object()


def constant_value(node):
    """The array of a constant node, else ``None``."""
    return node.value if node.op.kind == "const" else None


def is_constant_equal(node, value) -> bool:
    """Whether ``node`` is a constant whose every element equals ``value``."""
    array = constant_value(node)
    if array is None or array.size == 0:
        return False
    with np.errstate(all="ignore"):
        return bool(np.all(array == value))


def Const(value, name: Optional[str] = None) -> Pat:
    """A constant whose every element equals ``value``."""
    return Pat("const", name=name, test=lambda n: is_constant_equal(n, value))


def Scalar(name: Optional[str] = None) -> Pat:
    """A constant with one element (any shape of size 1)."""
    return Pat("const", name=name, test=lambda n: n.value.size == 1)
