"""Which steps can never run at the same time, whatever order a parallel
schedule picks: step ``j`` surely runs after step ``i`` when it depends on it
(directly or through other steps). SINGA's rule for sharing memory under a
parallel schedule follows: a value may take the bytes of another only when
*every* step that touches the other (its producer and all its readers) runs
surely before the new value's producer.

Reachability is kept as Python integers used as bit sets (bit ``j`` of
``descendants[i]`` says step ``j`` depends on step ``i``): a graph of a few
thousand steps needs a few hundred kilobytes and the tests are single
machine-word operations per 64 steps.

>>> import graphc.ndarray as N
>>> from graphc.graph import Graph
>>> from graphc.engine.liveness import analyse
>>> x = N.var("x", (8,))
>>> a, b = N.exp(x), N.sin(x)          # two branches: may run together
>>> live = analyse(Graph([x], [N.cos(a) + N.cos(b)]))
>>> order = Concurrency(live)
>>> [n.op.kind for n in live.steps]
['exp', 'cos', 'sin', 'cos', 'add']
>>> order.before(0, 1), order.before(0, 2), order.before(2, 4)
(True, False, True)
>>> order.critical_path
3
"""
from __future__ import annotations


class Concurrency:
    """Happens-before facts about ``live.steps`` (see the module docstring)."""

    def __init__(self, live):
        steps = live.steps
        index = {id(n): i for i, n in enumerate(steps)}
        self.parents = [sorted({index[id(p)] for p in n.parents if id(p) in index})
                        for n in steps]
        children: list[list[int]] = [[] for _ in steps]
        for i, ps in enumerate(self.parents):
            for p in ps:
                children[p].append(i)
        self.readers = children
        # strict descendants, built backwards: steps are in a topological order
        descendants = [0] * len(steps)
        for i in range(len(steps) - 1, -1, -1):
            mask = 0
            for c in children[i]:
                mask |= descendants[c] | (1 << c)
            descendants[i] = mask
        self.descendants = descendants
        depth = [0] * len(steps)
        for i, ps in enumerate(self.parents):
            depth[i] = 1 + max((depth[p] for p in ps), default=0)
        #: the longest chain of dependent steps: no schedule finishes in fewer rounds
        self.critical_path = max(depth, default=0)

    def before(self, i: int, j: int) -> bool:
        """Step ``j`` depends on step ``i`` (so it never starts before ``i`` ends)."""
        return bool((self.descendants[i] >> j) & 1)

    def after_all_users(self, i: int) -> int:
        """Bit set of the steps that run surely after the producer (step ``i``) and
        every reader of its value: those whose value may take its bytes."""
        mask = self.descendants[i]
        for r in self.readers[i]:
            mask &= self.descendants[r]
        return mask

    def readers_before(self, i: int, step: int) -> bool:
        """Every reader of step ``i``'s value other than ``step`` (and the producer)
        runs surely before ``step``: ``step`` may overwrite it in place."""
        return self.before(i, step) and all(r == step or self.before(r, step)
                                            for r in self.readers[i])
