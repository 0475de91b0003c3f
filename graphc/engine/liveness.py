"""When each computed value is born and dies in a fixed evaluation order, which
parents a node may overwrite in place, and the live-bytes lower bound.

Step ``i`` computes ``steps[i]``. A value is live from its own step to the last
step that reads it; outputs and update values are *pinned*: live to the end.
Variables and constants are not planned (they own their memory).

>>> import graphc.ndarray as N
>>> from graphc.graph import Graph
>>> x = N.var("x", (1000,))
>>> live = analyse(Graph([x], [N.exp(N.exp(x))]))
>>> live.lower_bound_bytes(), live.lower_bound_bytes(inplace=False)
(4000, 8000)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..type.kinds import KINDS, MIN_INPLACE_SIZE, is_leaf
from .strategy import may_overwrite, streams_over_addend
from .concurrency import Concurrency

@dataclass
class Liveness:
    steps: list                      # computed nodes, in evaluation order
    step_of: dict[int, int]          # id(node) -> its step
    last_use: dict[int, int]         # id(node) -> last step that needs it (end if pinned)
    pinned: set[int]                 # ids of outputs and update values
    inplace: dict[int, list] = field(default_factory=dict)  # id(n) -> parents n may overwrite
    kept: set = field(default_factory=set)  # ids pinned because their inputs rarely change
    # id(update value) -> name of the variable it is computed straight into (unplanned)
    external: dict = field(default_factory=dict)
    #: updates not computed into their variable only because a step that may fail
    #: (``fallible``) comes after them
    held_back: int = 0
    # happens-before facts when steps may run in any order their dependencies allow
    # (schedule="parallel"); None for the planned serial order
    concurrency: Optional[Concurrency] = None

    def kept_bytes(self) -> int:
        """Bytes held between runs for values of rarely-changing inputs."""
        return sum(n.nbytes for n in self.steps if id(n) in self.kept)

    @property
    def end(self) -> int:
        return len(self.steps)

    def live_bytes_per_step(self, inplace: bool = True) -> list[int]:
        """Bytes of values that must coexist at each step; with ``inplace`` a node
        that may overwrite a dying parent is counted once with it."""
        delta = [0] * (self.end + 2)
        for n in self.steps:
            if id(n) in self.external:
                continue
            delta[self.step_of[id(n)]] += n.nbytes
            delta[self.last_use[id(n)] + 1] -= n.nbytes
        live, running = [], 0
        for i, n in enumerate(self.steps):
            running += delta[i]
            saved = n.nbytes if inplace and self.inplace.get(id(n)) else 0
            live.append(running - saved)
        return live

    def lower_bound_bytes(self, inplace: bool = True) -> int:
        """No plan in this order can use less: the peak of :meth:`live_bytes_per_step`."""
        return max(self.live_bytes_per_step(inplace), default=0)

    def naive_bytes(self) -> int:
        """Bytes if every computed value had its own memory (values computed into
        their variables excepted)."""
        return sum(n.nbytes for n in self.steps if id(n) not in self.external)

    def planned_steps(self) -> list:
        """The computed values that need planned memory, in evaluation order."""
        return [n for n in self.steps if id(n) not in self.external]


def _may_alias(node, parent) -> bool:
    if parent.dtype != node.dtype:
        return False
    if node.op.kind == "reshape":
        return parent.nbytes == node.nbytes
    return parent.shape == node.shape and node.size >= MIN_INPLACE_SIZE


def kept_values(graph, keep) -> set[int]:
    """Ids of computed values that depend on no input outside ``keep`` (names) and
    on nothing drawn at random: values worth keeping between runs."""
    keep = set(keep)
    unknown = keep - {v.name for v in graph.inputs}
    if unknown:
        raise ValueError(f"compile: pinned inputs {sorted(unknown)} are not inputs of the graph")
    steady: dict[int, bool] = {}
    for n in graph.order:
        kind = n.op.kind
        if kind == "var":
            steady[id(n)] = n.name in keep
        elif is_leaf(kind):
            steady[id(n)] = True
        else:
            steady[id(n)] = not KINDS[kind].stateful and all(steady[id(p)] for p in n.parents)
    return {id(n) for n in graph.order if not is_leaf(n.op.kind) and steady[id(n)]}


def last_fallible_step(steps) -> int:
    """The index of the last step whose kernel may raise on its run-time values
    (``KINDS[kind].fallible``: an index out of range, a callback's error), or -1.

    >>> import graphc.ndarray as N, numpy as np
    >>> x, i = N.var("x", (4,)), N.var("i", (2,), np.int64)
    >>> last_fallible_step([N.exp(x), N.take(x, i), N.sin(x)])
    1
    """
    return max((i for i, n in enumerate(steps) if KINDS[n.op.kind].fallible), default=-1)


def first_variable_write(live) -> int:
    """The first step that writes into a variable (an update computed straight into
    it), or ``live.end``. Every step from there on comes after the last step that
    may fail, so a run computes ``steps[:k]`` freely and then commits ``steps[k:]``
    and its copied updates with interrupts held."""
    return min((live.step_of[key] for key in live.external), default=live.end)


def into_variables(graph, steps, step_of, concurrency=None,
                   after_failures: bool = True) -> dict[int, str]:
    """Update values that can be computed straight into their variable's memory:
    ``id(value) -> variable name``. Safe when nothing reads the variable after the
    step computing its update (the step itself only where it may overwrite that
    parent), the value is no output and feeds no other update, and the variable
    is no output and no other update's source. It saves the update's planned
    bytes (a training step's new weights and optimiser state) and the copy after
    the run. Only after the last step that may fail (:func:`last_fallible_step`):
    a run then writes no variable before every error it can raise is behind
    it, so a failed run leaves every variable as it was (``after_failures=False``
    drops that condition, to count what it costs)."""
    first_safe = last_fallible_step(steps) + 1 if after_failures else 0
    outputs = {id(o) for o in graph.outputs}
    sources: dict[int, int] = {}
    for _, value in graph.updates:
        sources[id(value)] = sources.get(id(value), 0) + 1
    last_read: dict[int, int] = {}
    var_readers: dict[int, list[int]] = {}
    for n in steps:
        for p in n.parents:
            if p.op.kind == "var":
                last_read[id(p)] = step_of[id(n)]
                var_readers.setdefault(id(p), []).append(step_of[id(n)])
    chosen = {}
    for var, value in graph.updates:
        if (is_leaf(value.op.kind) or id(value) in outputs or id(var) in outputs
                or id(var) in sources or sources[id(value)] > 1
                or value.shape != var.shape or value.dtype != var.dtype):
            continue
        step, read = step_of[id(value)], last_read.get(id(var), -1)
        if step < first_safe:
            continue  # a later step may raise after the variable was overwritten
        if read > step or read == step and not all(
                (may_overwrite(value, k) or streams_over_addend(value, k))
                and _may_alias(value, var)
                for k, p in enumerate(value.parents) if p is var):
            continue
        if concurrency is not None and not all(
                r == step or concurrency.before(r, step) for r in var_readers.get(id(var), ())):
            continue  # a reader on a parallel branch could see the new value
        chosen[id(value)] = var.name
    return chosen


def analyse(graph, keep=(), concurrent: bool = False) -> Liveness:
    """The liveness of ``graph.order`` (see the module docstring). Values that
    depend only on the inputs named in ``keep`` (and constants) are pinned too,
    so they survive between runs that do not change those inputs. With
    ``concurrent=True`` steps may later run in any order their dependencies
    allow: ``live.concurrency`` holds the happens-before facts the planners
    then respect, and a node overwrites a parent in place only when every
    other reader of that parent surely ran before it."""
    steps = [n for n in graph.order if not is_leaf(n.op.kind)]
    step_of = {id(n): i for i, n in enumerate(steps)}
    pinned = {id(n) for n in graph.outputs} | {id(v) for _, v in graph.updates}
    kept = kept_values(graph, keep) if keep else set()
    pinned |= kept
    last_use = {id(n): -1 for n in steps}
    for i, n in enumerate(steps):
        for p in n.parents:
            if id(p) in last_use:
                last_use[id(p)] = i
    end = len(steps)
    for key in pinned:
        if key in last_use:
            last_use[key] = end
    live = Liveness(steps, step_of, last_use, pinned)
    live.kept = kept
    if concurrent:
        live.concurrency = Concurrency(live)
    order = live.concurrency
    live.external = into_variables(graph, steps, step_of, order)
    if last_fallible_step(steps) >= 0:     # what atomicity costs: updates not written in
        live.held_back = len(into_variables(graph, steps, step_of, order,
                                            after_failures=False)) - len(live.external)
    for i, n in enumerate(steps):
        if id(n) in live.external:
            continue  # it writes into its variable, not over a parent
        allowed = []
        for pos, p in enumerate(n.parents):
            if (id(p) in step_of and last_use[id(p)] == i and _may_alias(n, p)
                    and all(may_overwrite(n, k) for k, q in enumerate(n.parents) if q is p)
                    and not any(q is p for q in allowed)
                    and (order is None or order.readers_before(step_of[id(p)], i))):
                allowed.append(p)
        if allowed:
            live.inplace[id(n)] = allowed
    return live
