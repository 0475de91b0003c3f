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


class PlanError(GraphcError, AssertionError):
    """A memory plan that would let one value corrupt another."""


def check_plan(live, plan) -> None:
    """Raise :class:`PlanError` describing the first violation, if any."""
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
