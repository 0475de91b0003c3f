"""Memory planners: every computed value gets a place ``(buffer, offset)`` so
that values alive at the same time never overlap, except a node writing over
a parent that dies at that node (in place, at the same address). Views
(``live.views``) take no place: their root keeps its bytes until their last reader.

Two strategies report the same :class:`Plan`:

- ``"blocks"`` (Owl's): values take whole blocks from a pool keyed by size;
  the smallest big-enough free block, else the largest free block grown, else
  a new one. Each value is the first bytes of its block.
- ``"offsets"`` (TFLite's greedy by size): one arena; in-place chains are
  merged first, then values are placed largest first into the best-fitting
  gap among those whose lifetimes overlap theirs; the same is tried longest-
  lived first and largest size x lifetime first, and the smallest arena is kept.

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
    views = live.views
    # a reader of a view holds the view's root (a view reads nothing itself)
    readers_of = {id(n): [views.get(id(p), p) for p in n.parents]
                  for n in live.steps if id(n) not in views}
    refs = {id(n): 0 for n in live.steps}
    for held in readers_of.values():
        for p in held:
            if id(p) in refs:
                refs[id(p)] += 1
    plan = Plan("blocks", [])
    free: list[int] = []
    order = live.concurrency
    occupant: dict[int, int] = {}   # block -> step of the value it holds last
    after: dict[int, int] = {}      # step -> steps surely after all its users (parallel)

    def may_take(block, step, overwritable_blocks) -> bool:
        # parallel schedule (SINGA's rule): the block's last value must be finished
        # with, by its producer and every reader, before this step can start
        if order is None or block in overwritable_blocks:
            return True
        last = occupant[block]
        if last not in after:
            after[last] = order.after_all_users(last)
        return bool((after[last] >> step) & 1)

    def release(p):
        key = id(p)
        refs[key] -= 1
        if refs[key] == 0 and key not in live.pinned:
            free.append(plan.place[key][0])

    for n in live.steps:
        if id(n) in views:
            continue
        held = readers_of[id(n)]
        if id(n) in live.external:   # computed into its variable: takes no block
            for p in held:
                if id(p) in refs:
                    release(p)
            continue
        overwritable = {id(p) for p in live.inplace.get(id(n), ())}
        for p in held:
            if id(p) in overwritable:
                release(p)
        size, step = n.nbytes, live.step_of[id(n)]
        mine = {plan.place[key][0] for key in overwritable}
        usable = [b for b in free if may_take(b, step, mine)]
        fitting = [b for b in usable if plan.buffers[b] >= size]
        if fitting:
            block = min(fitting, key=lambda b: (plan.buffers[b], b))
        elif usable:
            block = max(usable, key=lambda b: (plan.buffers[b], -b))
            plan.buffers[block] = size
        else:
            block = len(plan.buffers)
            plan.buffers.append(size)
            free.append(block)
        free.remove(block)
        plan.place[id(n)] = (block, 0)
        occupant[block] = step
        for p in held:
            if id(p) in refs and id(p) not in overwritable:
                release(p)
        for p in live.inplace.get(id(n), ()):
            if plan.place[id(p)][0] == block:
                plan.aliases[id(n)] = id(p)
    return plan


def _merge_inplace_chains(live: Liveness):
    """Merge each node into the chain of a parent it may overwrite, when that
    parent is the chain's current tail: the chain then needs one place.
    Returns ``(chains, chain_of, aliases)``; a chain is [start, end, size, members]."""
    chain_of: dict[int, int] = {}
    chains: list[list] = []
    aliases: dict[int, int] = {}
    for n in live.planned_steps():
        i = live.step_of[id(n)]
        # continue the oldest chain that ends here: a residual stream (x + f(x)) then
        # keeps one place for the whole network instead of alternating between two
        open_chains = [chain_of[id(p)] for p in live.inplace.get(id(n), ())
                       if chains[chain_of[id(p)]][1] == i
                       and chains[chain_of[id(p)]][3][-1] is p]
        if open_chains:
            k = min(open_chains, key=lambda k: chains[k][0])
            c = chains[k]
            aliases[id(n)] = id(c[3][-1])
            c[1] = live.last_use[id(n)]
            c[2] = max(c[2], n.nbytes)
            c[3].append(n)
            chain_of[id(n)] = k
        else:
            chain_of[id(n)] = len(chains)
            chains.append([i, live.last_use[id(n)], n.nbytes, [n]])
    return chains, chain_of, aliases


#: steps per bucket of the index of placed chains (keeps placement near-linear)
_BUCKET = 32


def _place(chains, order, after=None):
    """Offsets for ``chains`` placed in ``order``, each into the tightest gap
    among already placed chains whose lifetimes overlap; returns (offsets, arena).
    With ``after`` (chain -> bit set of steps surely after all its users: a
    parallel schedule) chains that are not ordered one before the other overlap
    too, whatever their places in the serial order."""
    buckets: dict[int, list] = {}
    offsets: dict[int, int] = {}
    arena = 0
    for c in order:
        start, end, size, _ = chains[c]
        size = _aligned(size)
        busy = []
        if after is None:
            seen = set()
            for b in range(start // _BUCKET, end // _BUCKET + 1):
                for other in buckets.get(b, ()):
                    if other not in seen:
                        seen.add(other)
                        s, e = chains[other][0], chains[other][1]
                        if s <= end and start <= e:
                            busy.append((offsets[other], _aligned(chains[other][2])))
        else:
            # overlapping lifetimes are never ordered, so one test covers both
            for other in offsets:
                if not ((after[other] >> start) & 1 or (after[c] >> chains[other][0]) & 1):
                    busy.append((offsets[other], _aligned(chains[other][2])))
        busy.sort()
        best, best_gap, cursor = None, None, 0
        for off, sz in busy:
            gap = off - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, off + sz)
        offsets[c] = cursor if best is None else best
        arena = max(arena, offsets[c] + size)
        for b in range(start // _BUCKET, end // _BUCKET + 1):
            buckets.setdefault(b, []).append(c)
    return offsets, arena


def plan_offsets(live: Liveness) -> Plan:
    """One arena: in-place chains merged, then placed largest first (TFLite's
    greedy by size), longest-lived first, largest size x lifetime first, and two
    orders between those; the smallest arena wins, as XLA keeps the better of its
    heuristics."""
    chains, chain_of, aliases = _merge_inplace_chains(live)
    ids = range(len(chains))
    by_size = sorted(ids, key=lambda c: (-chains[c][2], chains[c][0], c))
    by_lifetime = sorted(ids, key=lambda c: (chains[c][0] - chains[c][1], -chains[c][2], c))
    # size x lifetime: big short-lived workspaces (im2col columns) then yield to the
    # long-lived values around them, which greedy-by-size would stack above them
    by_area = sorted(ids, key=lambda c: (-chains[c][2] * (chains[c][1] - chains[c][0] + 1),
                                         chains[c][0], c))
    # between size and area: size weighted by the fourth root of the lifetime, and sizes
    # in 4 MiB classes, longest-lived first within a class (ResNet50's b8 training step:
    # 615 by size, 606 by area, 587 by lifetime, 571 and 574 MiB by these; bound 565)
    by_flattened_area = sorted(ids, key=lambda c: (
        -chains[c][2] * (chains[c][1] - chains[c][0] + 1) ** 0.25, chains[c][0], c))
    by_size_class = sorted(ids, key=lambda c: (-(chains[c][2] >> 22),
                                               chains[c][0] - chains[c][1], c))
    after = None
    if live.concurrency is not None:
        # a chain is finished with once its last member's users are (each member
        # overwrote the one before only after that one's other readers); a pinned
        # value (an output, an update) is never finished with
        after = [0 if id(c[3][-1]) in live.pinned else
                 live.concurrency.after_all_users(live.step_of[id(c[3][-1])]) for c in chains]
    offsets, arena = min((_place(chains, order, after)
                          for order in (by_size, by_lifetime, by_area, by_flattened_area,
                                        by_size_class)),
                         key=lambda result: result[1])
    plan = Plan("offsets", [arena], aliases=aliases)
    for n in live.planned_steps():
        plan.place[id(n)] = (0, offsets[chain_of[id(n)]])
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
