"""``graphc.compile``: check a graph, plan its memory once, and return an
:class:`Executable` that evaluates it many times.

>>> import numpy as np, graphc, graphc.ndarray as N
>>> x = N.var("x", (2, 3)); w = N.var("w", (3,))
>>> g = graphc.compile(inputs=[x, w], outputs=[N.sum(x * w, axis=1)])
>>> g.run(x=np.ones((2, 3), np.float32), w=np.arange(3, dtype=np.float32))
[array([3., 3.], dtype=float32)]
"""
from __future__ import annotations

import bisect
import gc
import threading
import time
import warnings
import weakref
from typing import Mapping, Optional, Sequence, Union

import numpy as np

from .engine.checker import check_concurrent_plan, check_plan
from .engine.devices import DEVICE_VIEWS, check_device, make_program
from .engine.incremental import IncrementalSchedule
from .engine.fperrors import DeferredFloatErrors
from .feeds import named_feeds
from .engine.interrupts import InterruptGuard
from .engine.heap import TRIM_AFTER_BYTES, release_free_heap
from .engine.liveness import analyse, first_variable_write
from .engine.ordering import order_choice
from .engine.planners import make_plan
from .engine.remat import remat_choice, remat_order
from .engine.schedules import SCHEDULES, make_runner, worker_count
from .engine.strategy import kernel_choice
from .graph import Graph
from .held_once import hold_once
from .optimiser.passes import select_passes
from .optimiser.passes import optimise as run_passes
from .symbol.node import Node
from .type.errors import CommitError, DeviceError, InputError
from .inputs import Inputs
from .reports import Reports
from .type.kinds import KINDS


def compile(inputs: Sequence[Node] = (), outputs: Union[Node, Sequence[Node]] = (),
            updates: Optional[Mapping[Node, Node]] = None, *, plan: str = "blocks",
            optimise=True, fast_math: bool = False, pinned: Sequence = (), seed=None,
            copy_outputs: bool = True, check: bool = False, schedule: str = "serial",
            workers: Optional[int] = None, device: Optional[str] = None,
            kernels: Optional[str] = None, order: str = "memory",
            views: bool = True, bind_inputs: bool = True, remat=None,
            capture: bool = False, tf32: bool = False) -> "Executable":
    """Compile ``outputs`` (one node or a list) as functions of the variables
    ``inputs``; ``updates`` maps variables to the values they take after each
    run (a training step's weights).

    ``plan`` picks the memory planner: ``"blocks"`` (Owl's pool of blocks) or
    ``"offsets"`` (one arena, greedy by size). ``optimise`` is ``True`` (the
    default pipeline), ``False`` (none) or a list of pass names (see
    ``graphc.optimiser.PIPELINE``); ``fast_math=True`` adds rewrites that may
    change result bits (for inf and NaN: ``x * 0 -> 0``; signed zeros: ``x + 0.0
    -> x``; a division by a multiply by a reciprocal; a convolution gradient's
    summation order); by default every rewrite gives NumPy's bits (a float32 convolution
    with a constant kernel runs on oneDNN, in its own summation order, and a ReLU it
    applies gives NaN, not 0, for a pre-activation of ``-inf``; a sigmoid it applies, a
    squeeze-and-excitation gate's, is oneDNN's, within 4 ulp, 0 below 1.7e-38).
    ``pinned`` names inputs (or passes their variables) that rarely change: values
    computed only from them keep their memory, so runs that leave them out skip
    recomputing them.
    ``seed`` seeds the random ops. With ``copy_outputs=False`` ``run`` returns
    read-only views into the graph's memory, valid until the next run (an
    output that is a variable with an update is still a copy: the update
    overwrites the variable). ``check=True`` verifies every optimiser pass and
    the memory plan with the independent checkers (slower; the tests do).
    ``schedule="serial"`` (the default) runs the steps in the planned order;
    ``schedule="parallel"`` runs each step as soon as the steps it depends on
    are done, on ``workers`` threads (default: one per core), with a memory
    plan that shares bytes only between steps that can never overlap (its
    extra cost is ``stats()["parallel_extra_bytes"]``); ``"parallel_reuse"``
    keeps the serial plan's memory, and a step reusing bytes waits for their
    earlier users instead. ``device="cuda"`` runs the same plan in GPU memory
    through CuPy (imported only then; a clear ``DeviceError`` says what is
    missing), serially, outputs copied to the host; ``device=None`` (the default)
    is ``$GRAPHC_DEVICE`` (for the serial schedule), else ``"cpu"``. On the device, ``capture=True`` records
    each run's kernels into a CUDA graph (from the second run with the same steps)
    and replays it with one launch (:mod:`graphc.engine.cuda_graphs`;
    ``stats()["captured_graphs"]``), and ``tf32=True`` lets float32 matrix products
    use TF32 tensor cores (about 3e-4 relative error instead of float32's 1e-7). ``kernels`` picks how the CPU
    runs elementwise steps: ``"generated"`` (the default where Numba is installed;
    ``$GRAPHC_KERNELS`` changes the default) compiles each fused chain into one
    loop over memory, split across the cores, and keeps NumPy's calls where those
    are faster; ``"numpy"`` runs one NumPy call per instruction (the reference the
    generated kernels are tested against). Generated kernels are cached on disk
    (``$GRAPHC_CACHE_DIR``), so only the first graph of a structure compiles them.
    ``order`` is the order the steps run in and are planned for: ``"memory"``
    (the default) frees values early and computes each update into its variable
    right after the variable's last reader (:mod:`graphc.engine.ordering`; kept
    only where its live-bytes lower bound is below the depth-first order's);
    ``"dfs"`` runs ``graph.order``, the post-order depth-first search.
    With ``views=True`` (the default) a slice, transpose, broadcast or flip whose
    readers all read strided memory is, as in NumPy, a view of its parent's memory
    (no bytes planned, no copy run), as is a reshape of contiguous memory;
    ``views=False`` copies each of them (the device reads only reshapes as views).
    ``remat`` (rematerialisation, :mod:`graphc.engine.remat`): ``None`` (the
    default) plans the graph as it is; ``"auto"`` recomputes cheap forward values
    (elementwise, fused, reshapes) just before their late readers (a backward
    pass) instead of holding them, where that lowers the live-bytes lower bound;
    a number of bytes does so, largest first, until the bound is within that
    budget (a ``RuntimeWarning`` where it cannot be); it keeps GEMMs and their
    elementwise epilogues apart (the ``fuse_epilogue`` pass), so the epilogues can be
    recomputed. Results are bit for bit the same; ``stats()["rematerialised_values"]`` and ``["remat_saved_bytes"]`` say
    what it did.
    With ``bind_inputs=True`` (the default) ``run`` reads a large fed array in
    place instead of copying it in (the CPU only): one C-contiguous and aligned,
    of at least 256 KiB, and either of at least 1 MiB per step reading it or the
    array fed last time, for an input no update targets that is not pinned, an
    output or an update's value. The graph never writes the
    array, holds it until that input is fed again or assigned, and recomputes
    what depends on it on every run, fed or not (its owner may have changed it
    in place); ``stats()["bound_inputs"]`` counts them. ``bind_inputs=False``
    copies every input.

    Example::

        g = graphc.compile(inputs=[x, w], outputs=[h, y])
        h1, y1 = g.run(x=X, w=W)
    """
    threads = worker_count(schedule, workers)     # checks the options before any work
    # $GRAPHC_DEVICE is the default for graphs that can run there: a parallel schedule
    # is one of CPU threads, so such a graph stays on the CPU unless a device is named
    device = check_device(device if device is not None or schedule == "serial" else "cpu")
    kernels = kernel_choice(kernels)
    order = order_choice(order)
    remat = remat_choice(remat)
    if device != "cpu" and schedule != "serial":
        raise DeviceError(f"compile: schedule {schedule!r} runs steps on CPU threads; "
                          f"device {device!r} runs them in order on one stream (use "
                          "schedule='serial')")
    gc_was_enabled = gc.isenabled()
    gc.disable()  # building makes many small objects; full collections cost more than planning
    try:
        started = time.perf_counter()
        single = isinstance(outputs, Node)
        source = Graph(inputs, [outputs] if single else list(outputs), updates)
        _agree_across_ranks(source)
        graph, report, passes_run = source, [], ()
        passes = select_passes(optimise, fast_math)
        if remat is not None:
            # rematerialisation recomputes cheap elementwise values (a ReLU's output) in
            # the backward pass; inside a GEMM's epilogue they would cost the GEMM
            passes = tuple(p for p in passes if p != "fuse_epilogue")
        if passes:
            from .eager import evaluate

            roots = source.outputs + [value for _, value in source.updates]
            result = run_passes(roots, passes, evaluate=evaluate, check=check,
                                kernels=kernels if device == "cpu" else "device")
            passes_run = passes
            report = result.report
            k = len(source.outputs)
            graph = Graph(source.inputs, result.roots[:k],
                          {var: value for (var, _), value in zip(source.updates,
                                                                 result.roots[k:])})
        keep = [p if isinstance(p, str) else p.name for p in pinned]
        concurrent = SCHEDULES[schedule].separate_memory
        # the order the engine runs and plans; the graph keeps its depth-first order
        # the device's raw kernels read contiguous memory: its only views are reshapes
        views = views if device == "cpu" else (DEVICE_VIEWS if views else False)
        graph, planned, serial_live, remat_report = remat_order(graph, remat, order, keep,
                                                                views=views)
        live = (analyse(planned, keep, concurrent=True, views=views) if concurrent
                else serial_live)
        memory = make_plan(live, plan)
        if check:    # the checkers see each reader of a view read its root (viewless)
            check_plan(live, memory)
            if concurrent:
                check_concurrent_plan(live, memory)
        program = make_program(device, graph, live, memory, seed, threads, kernels,
                               capture=capture, tf32=tf32)
        runner = program.wrap_runner(make_runner(schedule, graph, live, memory, program,
                                                 workers))
        hold_once(source, graph)
        # what parallelism costs: the same graph planned for the serial order
        serial_bytes = (make_plan(serial_live, plan).planned_bytes if concurrent
                        else memory.planned_bytes)
        return Executable(graph, live, memory, program, single=single, copy_outputs=copy_outputs,
                          build_seconds=time.perf_counter() - started, source=source,
                          report=report, passes=passes_run, schedule=schedule, runner=runner,
                          serial_planned_bytes=serial_bytes, order=order,
                          views=views,
                          bindable=program.bindable - set(keep) if bind_inputs else (),
                          remat=remat_report)
    finally:
        if gc_was_enabled:
            gc.enable()


def _agree_across_ranks(graph) -> None:
    """Each communicator a collective of ``graph`` names checks that its ranks built
    the same graph (kinds, shapes, dtypes, edges, in order): a rank that built another
    would otherwise exchange mismatched buffers or wait forever."""
    communicators = {}
    for node in graph.order:
        communicator = node.op.get("communicator")
        if communicator is not None:
            communicators.setdefault(id(communicator), communicator)
    if not communicators:
        return
    position = {id(n): i for i, n in enumerate(graph.order)}
    lines = [f"{i}: {n.op.kind} {tuple(n.shape)} {n.dtype} of "
             f"{[position[id(p)] for p in n.parents]}" for i, n in enumerate(graph.order)]
    for communicator in communicators.values():
        communicator.agree(lines, "compile")


class Executable(Reports, Inputs):
    """A compiled graph: ``run`` it, ``assign`` its variables, read ``stats``."""

    def __init__(self, graph, live, plan, program, *, single, copy_outputs, build_seconds,
                 schedule, runner, serial_planned_bytes, source=None, report=(), passes=(),
                 order="dfs", views=False, bindable=(), remat=None):
        self.graph, self.liveness, self.plan, self.program = graph, live, plan, program
        self.source = source if source is not None else graph   # the graph before optimising
        self.report = list(report)
        self._passes = tuple(passes)
        self._single, self._copy = single, copy_outputs or not program.host_views
        self._build_seconds = build_seconds
        self.schedule, self._runner = schedule, runner
        self._order = order              # the compile option: pass_report plans the same way
        self._views = views              # the same: slices... as views, or copies
        self._serial_bytes = serial_planned_bytes
        self._remat = remat              # what rematerialisation did (a RematReport)
        self._vars = {v.name: v for v in graph.inputs}
        self._has_value: set[str] = set()
        self._changed: set[str] = set()      # inputs with new values since the last run
        self._assigned: set[str] = set()     # last set by assign (parameters), not by a feed
        # inputs a run may read from the caller's array instead of copying it in, and
        # the array each is bound to now (held until that input is fed or assigned)
        self._bindable = frozenset(bindable)
        self._bound: dict[str, np.ndarray] = {}
        self._assigned_bytes = 0       # assigned since the heap was last given back
        self._last_fed: dict[str, weakref.ref] = {}   # bound when fed again
        self._schedule = IncrementalSchedule(graph, live, plan, program.kernels)
        self._steps_last_run = 0
        self._outputs = [program.values[id(o)] for o in graph.outputs]
        # a variable with an update is overwritten at the end of the run, so even
        # without copy_outputs it is returned as a copy of its value during the run
        updated = {id(v) for v, _ in graph.updates}
        self._overwritten = [id(o) in updated for o in graph.outputs]
        self._updated_names = [v.name for v, _ in graph.updates]
        # updates computed straight into their variable need no copy
        # updates are simultaneous: one whose value is another variable is staged
        # through a buffer of its own (allocated once, ``stats()["staging_bytes"]``)
        self._updates = [(program.variables[v.name], program.values[id(u)],
                          program.empty_like(program.values[id(u)])
                          if u.op.kind == "var" else None)
                         for v, u in graph.updates if id(u) not in live.external]
        # steps from this one on write variables (or come after one that does): they
        # run as the commit phase, after every step that may fail, interrupts held
        self._commit_from = first_variable_write(live)
        # old values of fed inputs, put back by a failed run; a buffer per input,
        # allocated the first time it is fed (``stats()["rollback_bytes"]``)
        self._rollback: dict[str, np.ndarray] = {}
        self._runner_thread = None         # the thread that ran a copy_outputs=False graph
        self._warned_sharing = False
        # runs that draw random numbers put the generator back when they fail
        self._draws = any(KINDS[n.op.kind].family == "random" for n in live.steps)
        self._torn: set[str] = set()     # variables a failed commit may have half-written
        # runs of one graph are serialised: they share its memory and its variables
        self._lock = threading.RLock()

    # -- running -----------------------------------------------------------------
    def run(self, *feeds, **kwargs):
        """Evaluate the graph. Inputs by name (``run(x=X)``, or a dict for names that
        are no Python identifiers: ``run({"gpu_0/data_0": X})``) or by position in
        the order given to ``compile`` (``run(X, W)``). An input left out keeps its
        value from the last feed, ``assign`` or update; only what depends on
        changed inputs (or on random draws) is recomputed, plus values whose memory
        was reused since. Every input needs a value before the first run. Returns
        one array per output (a list, or the array itself if one node was
        compiled); then applies the updates.

        A run is all or nothing: if it raises (a bad index fed at run time, a
        failing ``N.delay``, ``KeyboardInterrupt``), every variable keeps its value
        from before the run, fed inputs included; if it returns, every update is
        applied. Runs of one graph from several threads are serialised.

        Example: ``h1, y1 = g.run(x=X, w=W)``
        """
        checked = self._checked(named_feeds(list(self._vars), feeds, kwargs))
        if not self._copy:
            self._note_sharing()
        if self._assigned_bytes >= TRIM_AFTER_BYTES:
            self._assigned_bytes = 0
            release_free_heap()
        guard, committed = InterruptGuard(), False
        try:
            guard.__enter__()
            with self._lock:
                self._refuse_torn("run", self._torn - set(checked))   # a feed replaces it
                missing = [n for n in self._vars
                           if n not in checked and n not in self._has_value]
                if missing:
                    raise InputError(f"run: missing value for input(s) {missing}; pass them "
                                     "by name or set them once with assign; later runs may "
                                     "leave out inputs that keep their values")
                results, conditions = self._run(checked, guard)
                committed = True
            conditions.report()   # after the commit: a warning made an error cannot tear it
            guard.__exit__()
            guard.check()
        except BaseException as error:
            guard.__exit__()
            if committed:         # an interrupt while committing, or a warning made an error
                error.add_note("graphc: raised after the run committed; the run completed "
                               "and its updates are applied")
            elif guard.raised is not None and guard.raised is not error:
                raise guard.raised from error
            raise
        return results

    @property
    def lock(self) -> "threading.RLock":
        """The (re-entrant) lock every run of this graph takes. Hold it to use the
        read-only views that runs of a ``copy_outputs=False`` graph return while
        other threads run it too: the next run, from any thread, overwrites them.

        Example::

            with g.lock:
                total = g.run(x=X).sum()
        """
        return self._lock

    def _note_sharing(self) -> None:
        """Warn once when a second thread runs a ``copy_outputs=False`` graph
        without holding :attr:`lock`: its views are overwritten by other threads."""
        me = threading.get_ident()
        if self._lock._is_owned() or self._runner_thread in (None, me):
            self._runner_thread = me
            return
        if not self._warned_sharing:
            self._warned_sharing = True
            warnings.warn("run: this graph was compiled with copy_outputs=False and is run "
                          "from several threads; the views a run returns are overwritten "
                          "by the next run from any thread. Hold `graph.lock` while using "
                          "them, or compile with copy_outputs=True", RuntimeWarning,
                          stacklevel=3)

    def _run(self, checked: dict, guard: InterruptGuard):
        """One run, with the lock held and ``guard`` installed (see :meth:`run`).
        Phases: feed (interrupts held), compute every step that may fail (an
        interrupt stops it between kernels), then commit: the steps that write
        variables, the outputs and the copied updates (interrupts held). A
        failure before the commit puts the fed inputs back; nothing after it can
        fail but a bug (:class:`~graphc.CommitError`). Returns the results and
        the floating-point conditions of the commit, to report."""
        had_value, assigned = set(self._has_value), set(self._assigned)
        bound = dict(self._bound)
        draws = self.program.ctx.draws if self._draws else None
        schedule, conditions = self._schedule, DeferredFloatErrors()
        fed, saved = False, set()
        try:
            binds = self._bindings(checked)
            saved = self._save_fed(checked, binds)
            fed = True
            self._feed(checked, binds)
            self._assigned.difference_update(checked)
            # a bound array may have been changed in place by its owner since the
            # last run: what reads it is always recomputed
            changed = self._changed.union(self._bound) if self._bound else self._changed
            steps, kernels, valid_after = schedule.plan_run(schedule.changed_mask(changed))
            split = bisect.bisect_left(steps, self._commit_from)
            guard.holding = False
            self._runner(steps[:split], kernels[:split], interrupts=guard)
            guard.holding = True
            guard.check()            # an interrupt after the last kernel
            # nothing may fail from here on: results are allocated before any write
            staging = self._output_staging()
        except BaseException:
            guard.holding = True
            schedule.invalidate()
            if fed:
                self._restore_fed(checked, had_value, assigned, saved, bound)
            if draws is not None:
                self.program.ctx.draws = draws    # the retried run draws the same numbers
            raise
        try:
            if split < len(steps):
                self._runner(steps[split:], kernels[split:], conditions.recording)
            results = self._collect(staging)
            for dst, src, staged in self._updates:
                dst[...] = src if staged is None else staged
        except BaseException as error:   # a bug or exhausted memory: no way back
            schedule.invalidate()
            self._torn = set(self._updated_names)
            raise CommitError(
                f"run: a step that writes variables failed while the run committed "
                f"({type(error).__name__}: {error}); variables {sorted(self._torn)} may be "
                "partly updated, so the graph will not run or return them until they "
                "are assigned again (for instance from a checkpoint)") from error
        schedule.commit(valid_after)
        self._changed = set(self._updated_names)
        self._steps_last_run = len(kernels)
        return (results[0] if self._single else results), conditions

    def _output_staging(self) -> list:
        """The host arrays the commit phase copies outputs into (``None`` where an
        output is returned another way), allocated before anything is written."""
        return [np.empty(o.shape, o.dtype)
                if (self._copy and self.program.host_views) or (not self._copy and stale)
                else None for o, stale in zip(self._outputs, self._overwritten)]

    def _collect(self, staging: list) -> list:
        """Stage the updates read from other variables and return the outputs."""
        for _, src, staged in self._updates:
            if staged is not None:
                staged[...] = src
        results = []
        for o, out in zip(self._outputs, staging):
            if out is not None:
                np.copyto(out, o)
            else:
                out = self.program.to_host(o) if self._copy else o.view()
            if not self._copy:
                out.flags.writeable = False    # the same on every run: views or not
            results.append(out)
        return results

    def seed(self, seed) -> None:
        """Restart the graph's random generator. Example: ``g.seed(0)``"""
        with self._lock:
            self.program.ctx.seed(seed)

    # -- inspection --------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return list(self._vars)

    @property
    def assigned_names(self) -> list[str]:
        """The inputs whose value was last set by ``assign`` (parameters, as opposed
        to data fed to ``run``); ONNX export makes them initializers.
        Example: ``g.assign(w=W); g.assigned_names == ["w"]``"""
        return [n for n in self._vars if n in self._assigned]

    def save_values(self, path) -> None:
        """Save every variable's value (optimiser state included) and the random
        generator's state to ``path`` (``.npz``, no pickle), atomically: a crash
        while saving leaves the previous file intact (see :mod:`graphc.checkpoint`).
        Example: ``g.save_values("step-1000.npz")``"""
        from .checkpoint import save_values

        save_values(self, path)

    def load_values(self, path, strict: bool = True) -> None:
        """Load what :meth:`save_values` saved. Names, shapes and dtypes are checked
        against the graph before anything is assigned (all or nothing); a variable
        the file lacks or the graph lacks is an ``InputError`` unless
        ``strict=False``. Example: ``g.load_values("step-1000.npz")``"""
        from .checkpoint import load_values

        load_values(self, path, strict=strict)

    def save(self, path, values: bool = False) -> None:
        """Save the graph as written (not its plan or optimisations) to ``path``
        (``.npz``), atomically; ``graphc.load`` compiles it again. With
        ``values=True`` the file also holds every variable's value and the random
        generator's state, which ``graphc.load`` restores (the generator goes on
        where it was; ``seed`` restarts it). Example: ``g.save("model.npz", values=True)``"""
        from .checkpoint import save

        save(self, path, values=values)

    def __repr__(self) -> str:
        s = self.stats()
        return (f"<graphc.Executable {s['nodes']} nodes, {s['steps']} steps, "
                f"{s['planned_bytes']} bytes planned ({s['plan']})>")


def load(path, max_bytes=None, **options) -> Executable:
    """Load a graph saved with ``Executable.save`` and compile it again
    (``options`` as for :func:`compile`), with the variables' values and the
    random generator's state if it was saved with ``values=True``. The file is untrusted: anything wrong in
    it raises ``GraphError``, and a graph whose constants or values together take
    more than ``max_bytes`` (default 4 GiB) is refused before it is allocated.
    Example: ``g = graphc.load("model.npz", max_bytes=16 << 30)``"""
    from .graph.serialize import load as load_graph
    from .operator.lazy import Tensor

    from .checkpoint import load_saved_values

    graph = load_graph(path, node_class=Tensor, max_bytes=max_bytes)
    outputs = graph.outputs[0] if graph.single_output else graph.outputs
    executable = compile(graph.inputs, outputs, dict(graph.updates), **options)
    load_saved_values(executable, path)     # a file saved with values=True: nothing otherwise
    return executable
