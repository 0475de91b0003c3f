"""An independent check of a memory plan: no two values alive at the same step
share bytes, except a node that overwrites, at exactly the same address, a
parent it is allowed to overwrite and that dies at that node.

>>> import graphc.ndarray as N
>>> from graphc.graph import Graph
>>> from graphc.engine.liveness import analyse
>>> from graphc.engine.planners import plan_blocks
>>> x = N.var("x", (8,))
>>> live = analyse(Graph([x], [N.exp(x) + N.sin(x)]))
>>> check_plan(live, plan_blocks(live))
"""
from __future__ import annotations

from ..type.errors import GraphcError
from .liveness import viewless


class PlanError(GraphcError, AssertionError):
    """A memory plan that would let one value corrupt another."""


def check_plan(live, plan) -> None:
    """Raise :class:`PlanError` describing the first violation, if any. Views
    (``live.views``) own no bytes: their readers are checked as readers of the
    root (:func:`.liveness.viewless`)."""
    live, plan = viewless(live, plan)
    active: list = []
    for i, n in enumerate(live.steps):
        if id(n) in live.external:
            if id(n) in plan.place:
                raise PlanError(f"{n.label()} is computed into its variable but was planned")
            continue
        buf, off = plan.place[id(n)]
        end = off + n.nbytes
        if end > plan.buffers[buf] or off % max(n.dtype.itemsize, 1):
            raise PlanError(f"{n.label()}: bytes [{off}, {end}) do not fit buffer {buf} of "
                            f"{plan.buffers[buf]} bytes, or are misaligned for {n.dtype}")
        active = [v for v in active if live.last_use[id(v)] >= i]
        allowed = {id(p) for p in live.inplace.get(id(n), ())}
        for v in active:
            vbuf, voff = plan.place[id(v)]
            if vbuf != buf or n.nbytes == 0 or v.nbytes == 0:
                continue
            if voff < end and off < voff + v.nbytes:
                exact_inplace = (id(v) in allowed and live.last_use[id(v)] == i and voff == off
                                 and v.nbytes == n.nbytes)
                if not exact_inplace:
                    raise PlanError(f"{n.label()} (step {i}, bytes [{off}, {end}) of buffer "
                                    f"{buf}) overlaps {v.label()} (bytes [{voff}, "
                                    f"{voff + v.nbytes}), alive until step "
                                    f"{live.last_use[id(v)]})")
        active.append(n)


def check_concurrent_plan(live, plan) -> None:
    """Raise :class:`PlanError` unless the plan is also safe when steps run in any
    order their dependencies allow (SINGA's rule): two values share bytes only if
    one's producer surely starts after every step touching the other has ended
    (it depends on all of them), or it overwrites the other in place, exactly, as
    a parent it may overwrite, after every other reader of it.

    Reachability is computed here, independently of the planners' analysis.

    >>> import graphc.ndarray as N
    >>> from graphc.graph import Graph
    >>> from graphc.engine.liveness import analyse
    >>> from graphc.engine.planners import plan_blocks
    >>> x = N.var("x", (8,))
    >>> g = Graph([x], [N.sum(N.exp(x)) + N.sum(N.sin(x))])
    >>> check_concurrent_plan(analyse(g, concurrent=True), plan_blocks(analyse(g, concurrent=True)))
    >>> check_concurrent_plan(analyse(g), plan_blocks(analyse(g)))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    graphc.engine.checker.PlanError: sin#... (step 2) shares bytes with exp#... (step 0) but does not wait for sum#... (step 1), which uses them: the two may run at the same time
    """
    live, plan = viewless(live, plan)
    steps = live.steps
    index = {id(n): i for i, n in enumerate(steps)}
    ancestors = [0] * len(steps)
    readers: list[list[int]] = [[] for _ in steps]
    for i, n in enumerate(steps):
        mask = 0
        for p in n.parents:
            j = index.get(id(p))
            if j is not None:
                mask |= ancestors[j] | (1 << j)
                if i not in readers[j]:
                    readers[j].append(i)
        ancestors[i] = mask
    placed = sorted((plan.place[id(n)][0], plan.place[id(n)][1], i) for i, n in enumerate(steps)
                    if id(n) in plan.place and n.nbytes)
    for k, (buf, off, i) in enumerate(placed):
        end = off + steps[i].nbytes
        for buf2, off2, j in placed[k + 1:]:
            if buf2 != buf or off2 >= end:
                break
            _check_ordered(live, steps, ancestors, readers, *sorted((i, j)))


def _check_ordered(live, steps, ancestors, readers, first, second) -> None:
    """``second`` (the later step in the planned order) shares bytes with ``first``'s
    value: every user of that value must be an ancestor of ``second``, but for
    ``second`` itself when it overwrites that value in place."""
    a, b = steps[first], steps[second]
    in_place = any(p is a for p in live.inplace.get(id(b), ()))
    for u in readers[first] + [first]:
        if u == second and in_place:
            continue
        if not (ancestors[second] >> u) & 1:
            raise PlanError(f"{b.label()} (step {second}) shares bytes with {a.label()} (step "
                            f"{first}) but does not wait for {steps[u].label()} (step {u}), "
                            f"which uses them: the two may run at the same time")
