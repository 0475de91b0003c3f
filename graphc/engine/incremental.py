"""Incremental evaluation (Owl's validity flags): a run that changes only some
inputs recomputes only what depends on them, plus whatever must be recomputed
because its memory was reused since it was last computed.

Each step knows which inputs it depends on (a bit mask; random and delay
nodes depend on an "always" bit). A value is *valid* while its bytes still
hold it. For a given set of changed inputs and the current validity state,
:meth:`IncrementalSchedule.plan_run` simulates the run in order: a step runs if
it is dirty, or it is an output or update value that is not valid, or a
step that runs needs it and it is not valid at that moment; running a step invalidates every valid value sharing its bytes. The
resulting step list and the validity state after it are cached, so a steady
pattern of partial runs costs one dictionary lookup. A view (``live.views``) never
runs: a step reading it needs its root instead.

>>> import numpy as np, graphc, graphc.ndarray as N
>>> x, w = N.var("x", (3,)), N.var("w", (3,))
>>> g = graphc.compile([x, w], [N.exp(w) * x])
>>> _ = g.run(x=np.ones(3, np.float32), w=np.zeros(3, np.float32))
>>> _ = g.run(x=np.ones(3, np.float32))      # w unchanged: exp(w) is not recomputed
>>> g.stats()["steps_last_run"]
1
"""
from __future__ import annotations

from ..type.kinds import KINDS


class IncrementalSchedule:
    """Which steps a run must execute, given what changed since the last run."""

    def __init__(self, graph, live, plan, kernels):
        self.live, self.plan, self.kernels = live, plan, kernels
        names = [v.name for v in graph.inputs]
        self.input_bit = {name: 1 << i for i, name in enumerate(names)}
        self.always_bit = 1 << len(names)
        mask = {id(v): self.input_bit[v.name] for v in graph.inputs}
        self.mask = []
        for n in live.steps:
            m = self.always_bit if KINDS[n.op.kind].stateful else 0
            for p in n.parents:
                m |= mask.get(id(p), 0)
            if id(n) in live.external:
                # computed into its variable's memory: feeding that variable
                # overwrites the value, so the step must run again
                m |= self.input_bit[live.external[id(n)]]
            mask[id(n)] = m
            # a view is as fresh as its root: never dirty itself
            self.mask.append(0 if id(n) in live.views else m)
        self.index = {id(n): i for i, n in enumerate(live.steps)}
        self.parent_steps = [[] if id(n) in live.views else
                             [self.index[id(r)] for r in
                              (live.views.get(id(p), p) for p in n.parents)
                              if id(r) in self.index]
                             for n in live.steps]
        self.extent = []
        for i, n in enumerate(live.steps):
            # a value computed into its variable shares bytes with no planned value
            buf, off = plan.place.get(id(n), (-1 - i, 0))
            self.extent.append((buf, off, off + n.nbytes))
        # outputs and update values must hold their values after every run; any
        # other value is recomputed only when something that runs needs it
        roots = live.pinned - live.kept
        self.roots = {i for i, n in enumerate(live.steps) if id(n) in roots}
        self.valid = frozenset()           # nothing computed yet
        self._cache: dict = {}

    def changed_mask(self, names) -> int:
        m = self.always_bit
        for name in names:
            m |= self.input_bit[name]
        return m

    def plan_run(self, changed: int):
        """``(steps to run, their kernels, validity after)`` for a run where
        ``changed`` inputs (a bit mask) have new values; cached per (changed,
        validity). Steps are indices into ``live.steps``, in the planned order."""
        key = (changed, self.valid)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._simulate(changed)
            self._cache[key] = hit
        return hit

    def _simulate(self, changed: int):
        n = len(self.mask)
        run = [bool(self.mask[i] & changed) or (i in self.roots and i not in self.valid)
               for i in range(n)]
        while True:
            valid = set(self.valid)
            restart = False
            for i in range(n):
                if not run[i]:
                    continue
                for p in self.parent_steps[i]:
                    # needed but its bytes were reused: recompute it. (A parent already
                    # scheduled yet clobbered can only come from a plan the checker
                    # rejects; restarting would never end, so it is left to corrupt.)
                    if p not in valid and not run[p]:
                        run[p] = True
                        restart = True
                if restart:
                    break
                buf, lo, hi = self.extent[i]
                valid = {v for v in valid if not (self.extent[v][0] == buf and
                                                  self.extent[v][1] < hi and
                                                  lo < self.extent[v][2] and lo < hi)}
                valid.add(i)
            if not restart:
                # an output kept from an earlier run may have been overwritten by a
                # step that ran before it in these same bytes: compute it again
                lost = [i for i in self.roots if i not in valid and not run[i]]
                for i in lost:
                    run[i] = True
                if not lost:
                    break
        steps = [i for i in range(n) if run[i] and self.kernels[i] is not None]
        return steps, [self.kernels[i] for i in steps], frozenset(valid)

    def commit(self, valid) -> None:
        """Record the validity after a run completed."""
        self.valid = valid

    def invalidate(self) -> None:
        """Forget every value (after a failed run, nothing can be trusted)."""
        self.valid = frozenset()
