"""Memory planners: every computed value gets a place ``(buffer, offset)`` so
that values alive at the same time never overlap, except a node writing over
a parent that dies at that node (in place, at the same address).

Two strategies report the same :class:`Plan`:

- ``"blocks"`` (Owl's): values take whole blocks from a pool keyed by size;
  the smallest big-enough free block, else the largest free block grown, else
  a new one. Each value is the first bytes of its block.
- ``"offsets"`` (TFLite's greedy by size): one arena; in-place chains are
  merged first, then values are placed largest first into the best-fitting
  gap among those whose lifetimes overlap theirs.

>>> import graphc.ndarray as N
>>> from graphc.graph import Graph
>>> from graphc.engine.liveness import analyse
>>> x = N.var("x", (1000,))
>>> live = analyse(Graph([x], [N.exp(N.sin(N.exp(x)))]))
>>> plan_blocks(live).planned_bytes, plan_offsets(live).planned_bytes
(4000, 4032)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .liveness import Liveness

#: byte alignment of every offset in the arena (a cache line)
ALIGN = 64


@dataclass
class Plan:
    strategy: str
    buffers: list[int]                                    # size of each buffer in bytes
    place: dict[int, tuple[int, int]] = field(default_factory=dict)  # id(node) -> (buf, off)
    aliases: dict[int, int] = field(default_factory=dict)  # id(node) -> id(parent) it overwrites

    @property
    def planned_bytes(self) -> int:
        return sum(self.buffers)


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def plan_blocks(live: Liveness) -> Plan:
    """Owl's algorithm, in the evaluation order (see the module docstring)."""
    refs = {id(n): 0 for n in live.steps}
    for n in live.steps:
        for p in n.parents:
            if id(p) in refs:
                refs[id(p)] += 1
    plan = Plan("blocks", [])
    free: list[int] = []

    def release(p):
        key = id(p)
        refs[key] -= 1
        if refs[key] == 0 and key not in live.pinned:
            free.append(plan.place[key][0])

    for n in live.steps:
        overwritable = {id(p) for p in live.inplace.get(id(n), ())}
        for p in n.parents:
            if id(p) in overwritable:
                release(p)
        size = n.nbytes
        fitting = [b for b in free if plan.buffers[b] >= size]
        if fitting:
            block = min(fitting, key=lambda b: (plan.buffers[b], b))
        elif free:
            block = max(free, key=lambda b: (plan.buffers[b], -b))
            plan.buffers[block] = size
        else:
            block = len(plan.buffers)
            plan.buffers.append(size)
            free.append(block)
        free.remove(block)
        plan.place[id(n)] = (block, 0)
        for p in n.parents:
            if id(p) in refs and id(p) not in overwritable:
                release(p)
        for p in live.inplace.get(id(n), ()):
            if plan.place[id(p)][0] == block:
                plan.aliases[id(n)] = id(p)
    return plan


def plan_offsets(live: Liveness) -> Plan:
    """Greedy by size in one arena, with in-place chains merged beforehand."""
    # 1. merge each node into the chain of a parent it may overwrite, when that
    #    parent is the chain's current tail: the chain then needs one place.
    chain_of: dict[int, int] = {}
    chains: list[list] = []          # [start, end, size, members]
    aliases: dict[int, int] = {}
    for n in live.steps:
        i = live.step_of[id(n)]
        for p in live.inplace.get(id(n), ()):
            c = chains[chain_of[id(p)]]
            if c[1] == i and c[3][-1] is p:
                c[1] = live.last_use[id(n)]
                c[2] = max(c[2], n.nbytes)
                c[3].append(n)
                chain_of[id(n)] = chain_of[id(p)]
                aliases[id(n)] = id(p)
                break
        else:
            chain_of[id(n)] = len(chains)
            chains.append([i, live.last_use[id(n)], n.nbytes, [n]])
    # 2. largest first, each into the tightest gap among lifetime-overlapping ones
    order = sorted(range(len(chains)), key=lambda c: (-chains[c][2], chains[c][0], c))
    placed: list[tuple[int, int, int, int]] = []   # (start, end, offset, size)
    offset_of: dict[int, int] = {}
    arena = 0
    for c in order:
        start, end, size, _ = chains[c]
        size = _aligned(size)
        busy = sorted((off, sz) for s, e, off, sz in placed if s <= end and start <= e)
        best, best_gap, cursor = None, None, 0
        for off, sz in busy:
            gap = off - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, off + sz)
        offset = cursor if best is None else best
        placed.append((start, end, offset, size))
        offset_of[c] = offset
        arena = max(arena, offset + size)
    plan = Plan("offsets", [arena], aliases=aliases)
    for n in live.steps:
        plan.place[id(n)] = (0, offset_of[chain_of[id(n)]])
    return plan


PLANNERS = {"blocks": plan_blocks, "offsets": plan_offsets}


def make_plan(live: Liveness, strategy: str) -> Plan:
    """Plan with the named strategy (``"blocks"`` or ``"offsets"``)."""
    try:
        planner = PLANNERS[strategy]
    except KeyError:
        raise ValueError(f"compile: unknown plan {strategy!r}; expected one of "
                         f"{sorted(PLANNERS)}") from None
    return planner(live)
