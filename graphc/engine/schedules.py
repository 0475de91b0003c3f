"""How a run calls its steps: one after another in the planned order
(``"serial"``), or through the dependency engine, each step as soon as the
steps it depends on are done, on a pool of threads (``"parallel"``, with a
memory plan that never shares bytes between steps that may overlap, or
``"parallel_reuse"``, with the serial plan: a step reusing bytes then waits for
their earlier users, trading parallelism for memory as MXNet's recycling does).

Under both parallel schedules every step is pushed with the memory it reads and the
memory it writes as engine variables (MXNet's push model). The variables are
*regions* of the planned buffers: bytes that exactly the same values cover
form one region, so two steps conflict precisely when their bytes overlap.
Pushed in the planned order, a step that reuses memory therefore waits for
everything that used those bytes before it: any subset of steps (an
incremental run) computes exactly what the serial order computes. With a plan
made for parallel runs (SINGA's rule, see :mod:`.concurrency`) those waits
are already implied by the data dependencies, so they cost no parallelism.
Random draws and each slot of scratch of streamed kernels (one per worker)
are variables too, so draws happen in the planned order and stay
reproducible, and two kernels never share a scratch at once.

>>> import numpy as np, graphc, graphc.ndarray as N
>>> x = N.var("x", (4,))
>>> g = graphc.compile([x], [N.exp(x) + N.sin(x)], schedule="parallel", workers=2)
>>> g.run(x=np.zeros(4, np.float32))
[array([1., 1., 1., 1.], dtype=float32)]
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

from ..type.kinds import KINDS
from .blas_threads import blas_shared
from .dependency import DependencyEngine, ThreadPool


def memory_regions(live, plan) -> dict[int, list[int]]:
    """``id(value) -> region indices`` covering its planned bytes, where a region is
    a set of byte ranges covered by exactly the same values (so a value that
    overlaps another shares a region with it, and only then).

    >>> import graphc.ndarray as N
    >>> from graphc.graph import Graph
    >>> from graphc.engine.liveness import analyse
    >>> from graphc.engine.planners import plan_blocks
    >>> x = N.var("x", (8,))
    >>> live = analyse(Graph([x], [N.sum(N.exp(x)) + N.sum(N.sin(x))]))
    >>> regions = memory_regions(live, plan_blocks(live))
    >>> [regions[id(n)] for n in live.steps]     # exp, sin and the sum share bytes
    [[0, 1], [2], [0, 1], [3], [0]]
    """
    by_buffer: dict[int, list] = {}
    for n in live.steps:
        if id(n) in plan.place and n.nbytes:
            buf, off = plan.place[id(n)]
            by_buffer.setdefault(buf, []).append((off, off + n.nbytes, id(n)))
    cover: dict[frozenset, int] = {}
    regions: dict[int, set[int]] = {id(n): set() for n in live.steps if id(n) in plan.place}
    for buf in sorted(by_buffer):
        spans = by_buffer[buf]
        edges = sorted({e for lo, hi, _ in spans for e in (lo, hi)})
        # sweep the elementary segments between consecutive edges
        starts = sorted(spans)
        active: dict[int, int] = {}     # id(value) -> its end
        k = 0
        for lo, _ in zip(edges, edges[1:]):
            while k < len(starts) and starts[k][0] <= lo:
                active[starts[k][2]] = starts[k][1]
                k += 1
            for key in [key for key, end in active.items() if end <= lo]:
                del active[key]
            if not active:
                continue
            owners = frozenset(active)
            region = cover.setdefault(owners, len(cover))
            for key in owners:
                regions[key].add(region)
    return {key: sorted(found) for key, found in regions.items()}


_POOLS: dict = {}


def shared_pool(workers=None) -> ThreadPool:
    """One pool of threads per size for the whole process: every compiled graph
    with that many workers pushes to it (threads start on first use)."""
    if workers not in _POOLS:
        _POOLS[workers] = ThreadPool(workers)
    return _POOLS[workers]


class SerialRunner:
    """Calls the kernels in the planned order on the calling thread."""

    workers = 1

    def __init__(self, graph, live, plan, program, workers=None):
        pass

    def __call__(self, indices, kernels, around=None, interrupts=None) -> None:
        """Call ``kernels`` (those of steps ``indices``). ``around``, if given, is a
        context factory every kernel runs inside (on whichever thread runs it);
        ``interrupts`` (an :class:`~.interrupts.InterruptGuard`) is checked
        before each kernel, so an interrupt stops the run between two of them."""
        with around() if around is not None else nullcontext():
            if interrupts is None:
                for kernel in kernels:
                    kernel()
            else:
                for kernel in kernels:
                    if interrupts.raised is not None:
                        interrupts.check()
                    kernel()


class ParallelRunner:
    """Pushes each step to a :class:`~.dependency.DependencyEngine` with the regions
    it reads and writes; a pool of ``workers`` threads (default: one per core) runs
    them. NumPy's BLAS calls and most ufuncs release the GIL, so independent steps
    overlap."""

    def __init__(self, graph, live, plan, program, workers=None):
        pool = shared_pool(workers)
        self.engine, self.workers = DependencyEngine(pool), pool.workers
        regions = memory_regions(live, plan)
        new = self.engine.new_var
        region_vars: dict[int, object] = {}
        by_name = {name: new(name) for name in program.variables}
        rng = new("random generator")
        scratch = [new(f"scratch {k}") for k in range(program.ctx.scratch_slot_count)]

        def region_var(r):
            if r not in region_vars:
                region_vars[r] = new(f"region {r}")
            return region_vars[r]

        def memory_of(node):
            node = live.views.get(id(node), node)     # a view reads its root's memory
            if node.op.kind == "var":
                return [by_name[node.name]]
            if id(node) in live.external:
                return [by_name[live.external[id(node)]]]
            return [region_var(r) for r in regions.get(id(node), ())]

        self.ops = []
        for i, n in enumerate(live.steps):
            reads = [v for p in n.parents for v in memory_of(p)]
            writes = memory_of(n)
            if KINDS[n.op.kind].stateful:
                writes.append(rng)
            writes += [scratch[k] for k in program.scratch_slots[i]]
            self.ops.append((program.kernels[i], tuple(reads), tuple(writes), n.label()))
        self.regions = len(region_vars)

    def __call__(self, indices, kernels, around=None, interrupts=None) -> None:
        """As :meth:`SerialRunner.__call__`; an interrupt skips the steps not
        started yet and is raised once the running ones are done."""
        push, ops = self.engine.push, self.ops
        if interrupts is not None:
            interrupts.cancel = self.engine.cancel
        try:
            with blas_shared(self.workers):      # concurrent GEMMs share the cores
                for i in indices:
                    kernel, reads, writes, name = ops[i]
                    push(kernel if around is None else _inside(around, kernel), reads,
                         writes, name)
                self.engine.wait_all()
        finally:
            if interrupts is not None:
                interrupts.cancel = None
                # an interrupt just after the last op must not cancel the next call
                # (the guard still holds it and raises it)
                self.engine.forget(interrupts.raised)


def _inside(around, kernel):
    """``kernel`` called inside a fresh ``around()`` context (on a worker thread)."""
    def call():
        with around():
            kernel()
    return call



@dataclass(frozen=True)
class Schedule:
    """A ``schedule=`` choice: who calls the kernels, and whether the memory plan
    must keep steps that may overlap apart (SINGA's rule) or is the serial order's
    (then a step reusing bytes waits for their earlier users: MXNet's recycling)."""
    runner: type
    separate_memory: bool
    threads: bool


#: the ``schedule=`` choices of ``graphc.compile``
SCHEDULES = {
    "serial": Schedule(SerialRunner, separate_memory=False, threads=False),
    # as parallel as the data dependencies allow; costs memory (parallel_extra_bytes)
    "parallel": Schedule(ParallelRunner, separate_memory=True, threads=True),
    # the serial plan's memory; reusing bytes orders steps, so less runs at once
    "parallel_reuse": Schedule(ParallelRunner, separate_memory=False, threads=True),
}


def worker_count(schedule: str, workers=None) -> int:
    """The threads ``schedule`` runs on (1 for ``"serial"``, else ``workers`` or one
    per core), after checking both options."""
    if schedule not in SCHEDULES:
        raise ValueError(f"compile: unknown schedule {schedule!r}; expected one of "
                         f"{sorted(SCHEDULES)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise ValueError(f"compile: workers must be a positive int, got {workers!r}")
    return shared_pool(workers).workers if SCHEDULES[schedule].threads else 1


def make_runner(schedule: str, graph, live, plan, program, workers=None):
    """The runner of ``schedule`` (a name in :data:`SCHEDULES`) for a program."""
    worker_count(schedule, workers)
    return SCHEDULES[schedule].runner(graph, live, plan, program, workers)
