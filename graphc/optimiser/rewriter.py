"""Rules, passes, and the engine that applies them.

A :class:`Rule` is a pattern plus a function that builds the replacement from
the bindings (or declines with ``None``). A :class:`Pass` is a named, ordered
list of rules (or a node function), with its schedule as data: the stage it
runs in (:data:`STAGES`), the kinds it may rewrite and the kinds it may make.
The graph is rebuilt bottom-up from the roots: parents first, each node
re-made with its rewritten parents, then every applicable rule is tried at
it until none applies; with ``merge=True`` identical nodes (same op, same
parents) become one, which is common-subexpression elimination.

>>> import graphc.ndarray as N
>>> x = N.var("x", (3,))
>>> roots, changes = rewrite([N.exp(x) + N.exp(x)], node_rewriter=None, merge=True)
>>> changes, roots[0].parents[0] is roots[0].parents[1]
(1, True)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence, Union

from ..symbol.node import Node
from ..symbol.traverse import consumer_counts, topological_order
from ..type.kinds import KINDS
from .pattern import MatchContext, Pat


@dataclass(frozen=True)
class Rule:
    """Replace what ``pattern`` matches with ``build(bindings, node)``."""

    name: str
    pattern: Pat
    build: Callable[[dict, Node], Optional[Node]]

    def apply(self, node, ctx: MatchContext) -> Optional[Node]:
        bindings: dict = {}
        if not self.pattern.match(node, ctx, bindings):
            return None
        result = self.build(bindings, node)
        if result is None or result is node:
            return None
        if result.shape != node.shape or result.dtype != node.dtype:
            raise AssertionError(f"rule {self.name} changed {node.label()} from "
                                 f"{node.shape} {node.dtype} to {result.shape} {result.dtype}")
        return result


#: the optimiser's stages, in the order they run; each runs to a fixed point before
#: the next starts. "fuse" comes last because a fused node hides its members from
#: every pattern (the AdaGrad rule, FMA): fusing earlier would pre-empt them. "epilogue"
#: (a GEMM taking the elementwise program that reads its product) comes after it, so
#: the program it takes is whole: taken earlier, a bias would leave its activation out.
STAGES = ("rewrite", "fuse", "epilogue")


@dataclass
class Pass:
    """A named rewrite pass: ``rules`` indexed by root kind, or ``function``
    (node, ctx) -> replacement or None; ``merge`` also merges equal nodes;
    ``graph_function`` (roots -> ``(new roots, changes)``) rewrites the whole graph
    at once, for facts no single node holds (run before each round's traversal).

    Its schedule is data: ``stage`` (one of :data:`STAGES`); ``matches``, the
    kinds at whose nodes it may change the graph (``None``: those its rules'
    patterns name, or any kind for a function or a merging pass; else a set of
    kind names, or a predicate on a kind name where the set is only known once
    every op is defined); ``produces``, every kind of node it may create
    (``None``: undeclared, so any). The executor skips a pass that can match
    nothing present or made by another pass, and ``check=True`` verifies
    that a round made no kind that its passes do not declare.

    >>> from graphc.optimiser.pattern import Pat
    >>> p = Pass("exp_to_tanh", [Rule("e", Pat("exp"), lambda b, n: None)],
    ...          produces=frozenset({"tanh"}))
    >>> p.stage, p.applies_to({"exp", "add"}), p.applies_to({"add"})
    ('rewrite', True, False)
    """

    name: str
    rules: Sequence[Rule] = ()
    function: Optional[Callable] = None
    merge: bool = False
    graph_function: Optional[Callable] = None
    doc: str = ""
    stage: str = STAGES[0]
    matches: Union[None, frozenset, Callable[[str], bool]] = None
    produces: Optional[frozenset] = None
    _index: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self):
        if self.stage not in STAGES:
            raise ValueError(f"pass {self.name!r}: stage {self.stage!r} is not one of {STAGES}")
        if self.produces is not None:
            self.produces = frozenset(self.produces)
        if self.matches is not None and not callable(self.matches):
            self.matches = frozenset(self.matches)
        for rule in self.rules:
            kinds = rule.pattern.kinds
            for k in (kinds if isinstance(kinds, tuple) else (kinds,)):
                self._index.setdefault(k, []).append(rule)
                if k is not None and self.matches is not None and not self._may_match(k):
                    raise ValueError(f"pass {self.name!r}: rule {rule.name!r} matches {k!r}, "
                                     "which the pass's matches leaves out")

    def _may_match(self, kind: str) -> bool:
        matches = self.matches
        return matches(kind) if callable(matches) else kind in matches

    def applies_to(self, kinds) -> bool:
        """Whether the pass can change a graph holding ops of these ``kinds``."""
        if self.merge:
            return True
        if self.matches is not None:
            return any(self._may_match(k) for k in kinds)
        if self.function is not None or None in self._index:
            return True
        return not set(kinds).isdisjoint(self._index)

    def rewrite_node(self, node, ctx):
        if self.function is not None:
            return self.function(node, ctx)
        for rule in self._index.get(node.op.kind, []) + self._index.get(None, []):
            result = rule.apply(node, ctx)
            if result is not None:
                return result
        return None


def remake(node, parents) -> Node:
    """``node`` with new ``parents`` (same op, shape, dtype, name and source line)."""
    return type(node)(node.op, tuple(parents), node.shape, node.dtype, name=node.name,
                      value=node.value, where=node._where)


def rewrite(roots: Sequence[Node], node_rewriter=None, merge: bool = False,
            max_rounds: int = 1000):
    """Rebuild the graph of ``roots``; returns ``(new_roots, changes)``.

    ``node_rewriter(node, ctx)`` returns a replacement or ``None``; it is applied
    at each node until it declines (at most ``max_rounds`` times per node).
    """
    order = topological_order(roots)
    counts = consumer_counts(order)
    for r in roots:  # an output is used by the caller too: never single-use
        counts[id(r)] += 1
    ctx = MatchContext(counts)
    # every node counted stays alive until the end: ``counts`` is keyed by ``id``, and
    # a dropped intermediate's id given to a new node would lend it a stale count
    counted: list[Node] = []
    memo: dict[int, Node] = {}
    table: dict[tuple, Node] = {}
    changes = 0
    for node in order:
        parents = [memo[id(p)] for p in node.parents]
        new = node
        if any(a is not b for a, b in zip(parents, node.parents)):
            new = remake(node, parents)
            counts[id(new)] = counts[id(node)]
            counted.append(new)
        if merge and node.parents and not KINDS[node.op.kind].stateful:
            key = (new.op, tuple(id(p) for p in new.parents))
            first = table.setdefault(key, new)
            if first is not new:
                counts[id(first)] += counts[id(new)]
                new = first
                changes += 1
        elif merge and node.op.kind == "const":
            key = (new.op, ())
            first = table.setdefault(key, new)
            if first is not new and not new.op.get("distinct", False):   # see symbol.constants
                counts[id(first)] += counts[id(new)]
                new = first
                changes += 1
        if node_rewriter is not None:
            for _ in range(max_rounds):
                result = node_rewriter(new, ctx)
                if result is None:
                    break
                counts.setdefault(id(result), counts.get(id(new), 1))
                counted += (new, result)
                new = result
                changes += 1
        memo[id(node)] = new
    return [memo[id(r)] for r in roots], changes
