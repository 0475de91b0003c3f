"""Rematerialisation (Chen et al. 2016): recompute cheap forward values in the
backward pass instead of holding them through it.

In a training step a forward value is often read twice: by the next forward
step, then, much later, by its gradient (a ReLU output by the next layer's
convolution and by that convolution's weight gradient). Between the two it
only takes memory. When the value is cheap to recompute (one elementwise pass:
see :data:`CHEAP_FAMILIES`, :data:`CHEAP_KINDS`) from parents that are alive
anyway at the late reader (variables, constants, or values read at least as
late), :func:`rematerialise` gives the late readers a clone of it: the same op
on the same parents, so the same kernel computes the same bits. The original
dies after its early readers; the memory order (:mod:`.ordering`) runs the
clone just before its first reader, since a step that frees nothing runs as
late as the depth-first order allows.

:func:`remat_order` is what ``graphc.compile(remat=...)`` calls in place of
:func:`~.ordering.choose_order`: ``None`` leaves the graph as it is;
``"auto"`` clones every candidate and keeps the result only where the
live-bytes lower bound falls; a number of bytes clones candidates greedily,
largest ``bytes x gap`` first, until the lower bound is at most that budget
(a warning names the best bound reached where the budget is out of reach).

>>> import graphc.ndarray as N
>>> from graphc.graph import Graph
>>> x = N.var("x", (256, 256)); w = N.var("w", (256, 256))
>>> h = N.relu(x)                  # read by a matmul now and by a multiply at the end
>>> b = N.tanh(N.tanh(h @ w) @ w)
>>> graph = Graph([x, w], [N.sum(h * b)])
>>> twin, planned, live, report = remat_order(graph, "auto", views=True)
>>> report.values, report.before, report.after
(1, 786432, 524288)
>>> [n.op.kind for n in planned.order if n.parents]
['relu', 'matmul', 'tanh', 'matmul', 'tanh', 'relu', 'multiply', 'sum']
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Optional

from ..graph import Graph
from ..type.kinds import KINDS, is_leaf
from .ordering import choose_order

#: families of kinds one pass over their inputs computes, no reduction among them:
#: recomputing one costs a read of its parents, and the same kernel on the same
#: inputs gives the same bits
CHEAP_FAMILIES = frozenset({"unary", "binary", "ternary", "fused"})
#: shape kinds that copy at most their input once
CHEAP_KINDS = frozenset({"reshape", "transpose", "broadcast_to", "slice", "flip"})
#: kinds of a cheap family never recomputed: an optimiser's fused update belongs
#: to the step that writes its variable
NEVER = frozenset({"fused_adagrad"})
#: how many cheap ancestors up a chain may be recomputed with a value (a batch
#: norm's scale, reshaped from its variable and dead since the forward pass)
MAX_CHAIN = 2
#: values smaller than this are not worth a second kernel call
MIN_BYTES = 1 << 16
#: a value is split only if its readers leave a gap of at least this share of
#: the steps (a forward use, then a backward use)
MIN_GAP_SHARE = 0.1


@dataclass(frozen=True)
class Candidate:
    """A value worth recomputing: ``node``, read late by ``late`` (ids of its
    readers after the gap), ``gap`` steps after its early readers, with the
    ancestors in ``chain`` (dead by then) recomputed first."""

    node: object
    late: frozenset
    gap: int
    chain: tuple = ()       # dead cheap ancestors recomputed with it, parents first

    @property
    def score(self) -> int:
        return self.node.nbytes * self.gap


@dataclass
class RematReport:
    """What :func:`remat_order` did: ``values`` recomputed (new steps), the lower bound
    ``before`` and ``after`` (bytes) and, with a budget, whether it was met."""

    values: int = 0
    before: int = 0
    after: int = 0
    budget: Optional[int] = None

    @property
    def saved_bytes(self) -> int:
        return self.before - self.after

    @property
    def budget_met(self) -> Optional[bool]:
        return None if self.budget is None else self.after <= self.budget


def remat_choice(remat):
    """``remat`` checked (``compile`` checks its options before any work):
    ``None``, ``"auto"`` or a positive number of bytes. Example: ``remat_choice("auto")``"""
    if remat is None or remat == "auto":
        return remat
    if isinstance(remat, bool) or not isinstance(remat, (int, float)) or not remat > 0:
        raise ValueError(f"compile: remat must be None, 'auto' or a memory budget in bytes "
                         f"(a positive number), got {remat!r}")
    return int(remat)


def _recomputable(node) -> bool:
    facts = KINDS[node.op.kind]
    if node.op.kind in NEVER or facts.stateful or facts.fallible:
        return False
    if node.op.kind not in CHEAP_KINDS and facts.family not in CHEAP_FAMILIES:
        return False
    if node.op.kind == "fused":      # every instruction of its program must be safe too
        return all(not (KINDS[op.kind].stateful or KINDS[op.kind].fallible)
                   for op, _ in node.op["program"])
    return True


def candidates(live, min_gap: Optional[int] = None) -> list:
    """The values of ``live`` (a :class:`~.liveness.Liveness`) worth recomputing,
    best (``bytes x gap``) first: cheap, planned (no view, output, update or kept
    value), read before and after a gap of at least ``min_gap`` steps (default
    :data:`MIN_GAP_SHARE` of them), with every parent a leaf, alive at the
    first late reader, or cheap and recomputable from such parents in turn
    (up to :data:`MAX_CHAIN` steps up). Example: ``candidates(choose_order(graph)[1])``"""
    if min_gap is None:
        min_gap = max(2, int(live.end * MIN_GAP_SHARE))
    readers: dict[int, list] = {}
    for n in live.steps:
        for p in dict.fromkeys(n.parents):
            readers.setdefault(id(p), []).append(n)
    use_step: dict[int, int] = {}

    def used_at(node) -> int:
        # a view runs no step: it is used where its first reader runs
        key = id(node)
        if key not in use_step:
            if key in live.views:
                use_step[key] = min((used_at(r) for r in readers.get(key, ())),
                                    default=live.step_of[key])
            else:
                use_step[key] = live.step_of[key]
        return use_step[key]

    def alive(node, step: int) -> bool:
        # a view costs nothing where its root is alive anyway
        if is_leaf(node.op.kind) or live.last_use[id(node)] >= step:
            return True
        return id(node) in live.views and alive(live.views[id(node)], step)

    def ancestors(node, step: int, depth: int):
        """The dead ancestors to recompute with ``node`` (parents first), or None
        where one is not cheap or lies more than ``depth`` steps up."""
        chain = []
        for p in dict.fromkeys(node.parents):
            if alive(p, step):
                continue
            if depth == 0 or not _recomputable(p):
                return None
            above = ancestors(p, step, depth - 1)
            if above is None:
                return None
            seen = {id(q) for q in chain}        # nodes compare lazily: by identity
            chain += [q for q in above + [p] if id(q) not in seen]
        return chain

    found = []
    for v in live.steps:
        key = id(v)
        if (v.nbytes < MIN_BYTES or key in live.views or key in live.pinned
                or key in live.external or not _recomputable(v)):
            continue
        uses = sorted((used_at(r), r.id, r) for r in readers.get(key, ()))
        if len(uses) < 2:
            continue
        gap, split = max((b[0] - a[0], k + 1) for k, (a, b) in enumerate(zip(uses, uses[1:])))
        if gap < min_gap:
            continue
        chain = ancestors(v, uses[split][0], MAX_CHAIN)
        if chain is not None:
            found.append(Candidate(v, frozenset(id(r) for *_, r in uses[split:]), gap,
                                   tuple(chain)))
    found.sort(key=lambda c: -c.score)
    return found


def _copy(node, parents):
    return type(node)(node.op, tuple(parents), node.shape, node.dtype, name=node.name,
                      value=node.value, where=node._where)


def rematerialise(graph, chosen) -> Graph:
    """A new graph in which the late readers of each :class:`Candidate` in
    ``chosen`` read a clone of its value (the same op on the same parents); the
    nodes downstream of them are rebuilt, ``graph`` and its nodes are untouched.
    Example: ``rematerialise(graph, candidates(live)[:3])``"""
    late_of = {id(c.node): c.late for c in chosen}
    chained = {id(a) for c in chosen for a in c.chain}
    new: dict[int, object] = {}
    clones: dict[int, object] = {}

    def mapped(node):
        return new.get(id(node), node)

    def clone(node):
        # one clone per value, shared by every late reader and chain that needs it
        if id(node) not in clones:
            clones[id(node)] = _copy(node, (clone(q) if id(q) in chained else mapped(q)
                                            for q in node.parents))
        return clones[id(node)]

    for n in graph.order:
        if not n.parents:
            continue
        parents = [clone(p) if id(n) in late_of.get(id(p), ()) else mapped(p)
                   for p in n.parents]
        if any(a is not b for a, b in zip(parents, n.parents)):
            new[id(n)] = _copy(n, parents)
    twin = Graph(graph.inputs, [mapped(o) for o in graph.outputs],
                 {var: mapped(value) for var, value in graph.updates})
    twin.single_output = graph.single_output
    return twin


def remat_order(graph, remat=None, order: str = "memory", keep=(), **options):
    """``(graph, graph to plan, its liveness, RematReport)``: :func:`~.ordering.choose_order`
    of ``graph``, or of a rematerialised copy of it where ``remat`` (``"auto"`` or a
    budget in bytes, see the module docstring) lowers the live-bytes lower bound.
    Example: ``graph, planned, live, report = remat_order(graph, "auto")``"""
    remat = remat_choice(remat)
    planned, live = choose_order(graph, order, keep, **options)
    report = RematReport(before=live.lower_bound_bytes(),
                         budget=remat if isinstance(remat, int) else None)
    report.after = report.before
    found = candidates(live) if remat is not None else []
    if not found or (report.budget is not None and report.before <= report.budget):
        return graph, planned, live, report
    tried: dict[int, tuple] = {}

    def attempt(count: int) -> tuple:
        if count not in tried:
            twin = rematerialise(graph, found[:count])
            tried[count] = (twin, *choose_order(twin, order, keep, **options))
        return tried[count]

    best = attempt(len(found))
    if report.budget is not None and best[2].lower_bound_bytes() <= report.budget:
        # the fewest clones that meet the budget: the bound falls as clones are added
        low, high = 1, len(found)
        while low < high:
            middle = (low + high) // 2
            if attempt(middle)[2].lower_bound_bytes() <= report.budget:
                high = middle
            else:
                low = middle + 1
        best = attempt(high)
    bound = best[2].lower_bound_bytes()
    if bound < report.before:
        # the clones, ancestors recomputed with a value included: the rebuilt
        # readers replace their originals
        report.values, report.after = len(best[0].order) - len(graph.order), bound
        graph, planned, live = best
    if report.budget is not None and not report.budget_met:
        warnings.warn(f"compile: remat budget {report.budget} bytes is out of reach: "
                      f"recomputing {len(found)} cheap forward values brings the live-bytes "
                      f"lower bound from {report.before} to {bound} bytes at best (kept: "
                      f"{report.after})", RuntimeWarning, stacklevel=3)
    return graph, planned, live, report
