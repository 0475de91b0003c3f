"""The CPU engine: turn a planned graph into NumPy arrays and a flat list of
bound kernel calls, so that a run is one loop with no allocation.

Every computed value is a view ``buffer[offset:offset + nbytes]`` reinterpreted
with its dtype and shape; variables own one array each, constants are their own
read-only arrays; a value liveness made a view (a slice, transpose, broadcast,
flip) is NumPy's view of its parent's array, which its readers' kernels read
strided: no step, no bytes. A large fed input may instead be *bound*
(:meth:`CpuProgram.bind_input`): the kernels of the steps reading it (through its
views too) are rebuilt on the caller's array, which they only read, so a run
copies nothing in.

>>> import graphc.ndarray as N, numpy as np
>>> from graphc.graph import Graph
>>> from graphc.engine.liveness import analyse
>>> from graphc.engine.planners import plan_blocks
>>> x = N.var("x", (3,), np.float64)
>>> g = Graph([x], [N.exp(x) * 2.0])
>>> live = analyse(g); program = CpuProgram(g, live, plan_blocks(live))
>>> program.variables["x"][...] = 0.0; program.execute(); program.values[id(g.outputs[0])]
array([2., 2., 2.])
"""
from __future__ import annotations

import bisect
import itertools
import math

import numpy as np

from .cpu_kernels import GENERATED_KERNELS, SCRATCH_BYTES, build_kernel, run_all
from .planners import ALIGN
from .program import VIEW_OF, Program
from .strategy import PARALLEL_MIN, STREAM_MIN, generated_wanted, stream_chunk

#: kinds whose kernel only copies its input unchanged: skipped when in place
_ELIDABLE = frozenset({"reshape", "copy"})

#: inputs smaller than this are always copied in (a copy costs a few microseconds)
BIND_MIN_BYTES = 256 << 10
#: a new array is bound only where it has this many bytes for each step reading the
#: input: rebuilding one reader's kernel costs 10-45 us (NumPy, generated), about
#: what copying 1 MiB in costs (25-50 us). An array fed again is bound whatever its
#: size (above ``BIND_MIN_BYTES``): its readers are then rebuilt once for many runs
BIND_BYTES_PER_READER = 1 << 20


class RunContext:
    """State kernels read at run time: the random generator (seedable) and the
    scratch of streamed kernels; ``kernels``: the program's kernel choice
    (``"numpy"`` or ``"generated"``), which a NumPy kernel may read to take a
    faster, not bit-exact form (:func:`.cpu_kernels.sigmoid`)."""

    kernels = "numpy"

    def __init__(self, seed=None, scratch_slots: int = 1):
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self._slots = [None] * max(int(scratch_slots), 1)
        self.scratch_taken: list[int] = []   # the slot of every scratch handed out
        self._replay: list[int] = []         # slots a rebuilt kernel takes again
        # workspaces (see workspace()): None until the program turns them on
        self._arenas = None
        self._arena_need = [0] * len(self._slots)
        self._kernel_slot, self._offset, self.short = None, 0, False

    def use_workspaces(self) -> None:
        """Serve :meth:`workspace` from per-slot arenas (a :class:`CpuProgram` does)."""
        self._arenas = [None] * len(self._slots)

    def begin_kernel(self) -> None:
        """The next workspaces belong to a new kernel: they start at the arena's start."""
        self._kernel_slot, self._offset, self.short = None, 0, False

    def workspace(self, shape, dtype) -> np.ndarray:
        """An uninitialised array a kernel fills and uses within each of its calls (a
        strided image's phases, a pooling gradient's masks): a view of its slot's
        arena, which every kernel of that slot shares, since they never run at once
        (the slot counts as the kernel's scratch for the parallel schedules). Until the
        arena exists, or where it is too small, a new array, and ``short`` tells the
        program to build the kernel again once the arenas are made at the size the
        largest kernel asked for (:meth:`make_arenas`).

        Example: ``masks = ctx.workspace(y.shape, np.bool_)``"""
        dtype = np.dtype(dtype)
        nbytes = -(-math.prod(shape) * dtype.itemsize // ALIGN) * ALIGN
        if self._arenas is None:
            return self.memory(nbytes)[:math.prod(shape) * dtype.itemsize].view(
                dtype).reshape(shape)
        if self._kernel_slot is None:
            if self._replay:
                self._kernel_slot = self._replay.pop(0)
            else:
                self._kernel_slot = len(self.scratch_taken) % len(self._slots)
                self.scratch_taken.append(self._kernel_slot)
        slot, start = self._kernel_slot, self._offset
        self._offset += nbytes
        self._arena_need[slot] = max(self._arena_need[slot], self._offset)
        arena = self._arenas[slot]
        if arena is None or self._offset > arena.nbytes:
            self.short = True
            return np.empty(shape, dtype)
        return arena[start:start + math.prod(shape) * dtype.itemsize].view(dtype).reshape(shape)

    def make_arenas(self) -> None:
        """Make each slot's arena at the largest size one kernel asked of it."""
        for slot, need in enumerate(self._arena_need):
            if need and (self._arenas[slot] is None or self._arenas[slot].nbytes < need):
                self._arenas[slot] = aligned_bytes(need)

    @property
    def workspace_bytes(self) -> int:
        """Bytes of the workspace arenas (outside the memory plan)."""
        return sum(a.nbytes for a in self._arenas or () if a is not None)

    def scratch(self, nbytes: int) -> np.ndarray:
        """A scratch buffer shared by the kernels of this context: the chunk buffer of
        streamed kernels. Kernels that share a slot must not run at the same time
        (``scratch_taken`` says which slot each got); slots are dealt in turn, one
        per worker of a parallel schedule. Fixed size, made on first use, so views
        bound at build time stay valid."""
        if nbytes > SCRATCH_BYTES:
            raise ValueError(f"scratch: {nbytes} bytes asked, at most {SCRATCH_BYTES}")
        if self._replay:      # a kernel rebuilt on other arrays keeps its slots
            slot = self._replay.pop(0)
        else:
            slot = len(self.scratch_taken) % len(self._slots)
            self.scratch_taken.append(slot)
        if self._slots[slot] is None:
            self._slots[slot] = self.memory(SCRATCH_BYTES)
        return self._slots[slot][:nbytes]

    def memory(self, nbytes: int):
        """``nbytes`` of uint8 where this context's kernels compute: host memory here,
        the device's in a device program's context."""
        return aligned_bytes(nbytes)

    @property
    def scratch_slot_count(self) -> int:
        return len(self._slots)

    @property
    def scratch_bytes(self) -> int:
        """Bytes of scratch made so far (outside the memory plan)."""
        return SCRATCH_BYTES * sum(s is not None for s in self._slots)

    @property
    def saved_rng(self) -> np.random.Generator:
        """The PCG64 generator a checkpoint saves and restores (this context's own)."""
        return self.rng

    def seed(self, seed) -> None:
        """Restart the draws: the same seed gives the same sequence of runs."""
        self.rng.bit_generator.state = np.random.PCG64(seed).state

    @property
    def draws(self) -> dict:
        """The generator's position (a plain dict); setting it puts it back, so a
        failed run leaves the draws of the next run unchanged."""
        return self.rng.bit_generator.state

    @draws.setter
    def draws(self, state: dict) -> None:
        self.rng.bit_generator.state = state


def aligned_bytes(size: int) -> np.ndarray:
    """A writable uint8 array of ``size`` bytes starting at an ``ALIGN`` boundary."""
    raw = np.empty(size + ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start:start + size]


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _generated(node, ins, out, ctx, threaded: bool):
    """The generated kernel of ``node``, or ``None`` where the NumPy one serves: an
    elementwise node the strategy picks (:func:`.strategy.generated_wanted`), or a
    kind with a generated builder (``GENERATED_KERNELS``); ``threaded``: whether
    kernels may use every core (not under a parallel schedule)."""
    if generated_wanted(node):
        from .numba_kernels import generated_kernel
        return generated_kernel(node.op, ins, out,
                                parallel=threaded and node.size >= PARALLEL_MIN)
    builder = GENERATED_KERNELS.get(node.op.kind)
    return None if builder is None else builder(node.op, ins, out, ctx, threaded)


def _blocks(shape):
    """Index tuples cutting an array of ``shape`` into blocks of fewer than
    :data:`STREAM_MIN` elements, along its leading axes.

    >>> [b for b in _blocks((3, STREAM_MIN // 2))]
    [(slice(0, 1, None),), (slice(1, 2, None),), (slice(2, 3, None),)]
    """
    if not shape or math.prod(shape) < STREAM_MIN:
        return [()]
    inner = math.prod(shape[1:])
    if inner < STREAM_MIN:
        rows = max(1, (STREAM_MIN - 1) // max(inner, 1))
        return [(slice(i, i + rows),) for i in range(0, shape[0], rows)]
    return [(slice(i, i + 1),) + rest
            for i, rest in itertools.product(range(shape[0]), _blocks(shape[1:]))]


def numpy_kernel(node, ins, out, ctx):
    """The NumPy kernel of ``node``. A fused program that would stream through the
    scratch (which needs contiguous inputs) but reads a strided view runs in blocks
    small enough not to stream instead, each input cut like ``out`` (liveness lets
    it write over only what an unstreamed program may, ``_streams_strided``)."""
    if (node.op.kind == "fused" and stream_chunk(out.shape, [a.shape for a in ins],
                                                 out.dtype.itemsize)
            and not all(a.flags.c_contiguous for a in ins if a.size == out.size)):
        return run_all(build_kernel(node.op, [a[index] if a.size == out.size else a
                                              for a in ins], out[index], ctx)
                       for index in _blocks(out.shape))
    return build_kernel(node.op, ins, out, ctx)


class _Rebindable:
    """A step's kernel that :meth:`CpuProgram.bind_input` may swap for one built on
    other arrays; the lists holding the step keep this object."""

    __slots__ = ("kernel",)

    def __init__(self, kernel):
        self.kernel = kernel

    def __call__(self):
        self.kernel()

    def __getattr__(self, name):
        # what a kernel shows of itself (a generated kernel's function) shows through
        if name == "kernel":
            raise AttributeError(name)
        return getattr(self.kernel, name)


class CpuProgram(Program):
    """Buffers, views and steps for one compiled graph on the CPU. With
    ``kernels="generated"`` the elementwise steps that gain from it
    (:func:`.strategy.generated_wanted`) run as generated loops
    (:mod:`.numba_kernels`), the rest as NumPy calls; ``generated`` counts them."""

    host_views = True      # values are host arrays: copy_outputs=False may hand out views
    reads_views = True     # slices, transposes... are NumPy views its kernels read strided

    def __init__(self, graph, live, plan, seed=None, scratch_slots: int = 1,
                 kernels: str = "numpy"):
        self.ctx = RunContext(seed, scratch_slots)
        self.ctx.kernels = kernels
        self.bind(graph, live, plan)
        values = self.values
        self._live, self._kernel_choice = live, kernels
        self.kernels = []
        self.scratch_slots = []   # the scratch slots kernels[i] works in
        self._slots_taken = []    # the same, in the order kernels[i]'s build took them
        self.generated = 0
        # a parallel schedule already keeps every core busy: one thread per kernel
        self._threaded = scratch_slots == 1
        self.ctx.use_workspaces()
        short = []                # kernels built before their slot's arena was big enough
        for i, n in enumerate(live.steps):
            ins = [values[id(p)] for p in n.parents]
            out = values[id(n)]
            taken = len(self.ctx.scratch_taken)
            self.ctx.begin_kernel()
            if id(n) in live.views:
                self.kernels.append(None)  # a view of its parent's array: nothing to run
            elif (n.op.kind in _ELIDABLE and ins[0].dtype == out.dtype
                    and _address(ins[0]) == _address(out)):
                self.kernels.append(None)  # its parent already holds these bytes
            else:
                kernel, generated = self._build(n, ins, out)
                self.generated += generated
                self.kernels.append(kernel)
                if self.ctx.short:
                    short.append(i)
            self._slots_taken.append(self.ctx.scratch_taken[taken:])
            self.scratch_slots.append(sorted(set(self._slots_taken[-1])))
        # one arena per slot, the size of the largest kernel's workspaces: the few
        # kernels that have any are built again on it (ResNet50's training step: 43 MiB
        # of phases and masks, one array each, become one 6 MiB arena)
        self.ctx.make_arenas()
        for i in short:
            n = live.steps[i]
            self.ctx._replay = list(self._slots_taken[i])
            self.ctx.begin_kernel()
            try:
                self.kernels[i] = self._build(n, [values[id(p)] for p in n.parents],
                                              values[id(n)])[0]
            finally:
                self.ctx._replay = []
        self._inputs = {v.name: v for v in graph.inputs}
        self._own = {}            # step -> the kernel it has on the variables' arrays
        self._bound = {}          # input -> the caller's array its readers read
        self._readers = self._bindable(graph, live)
        self.steps = [k for k in self.kernels if k is not None]
        self.elided = len(self.kernels) - len(self.steps)    # views included
        self.views = len(live.views)
        memory = sorted((_address(a), _address(a) + a.nbytes)
                        for a in self.buffers + list(self.variables.values()) if a.nbytes)
        self._starts, self._ends = [s for s, _ in memory], [e for _, e in memory]

    def _build(self, node, ins, out):
        """``(kernel, whether it is generated)`` computing ``node`` from ``ins`` into ``out``."""
        if self._kernel_choice == "generated":
            kernel = _generated(node, ins, out, self.ctx, self._threaded)
            if kernel is not None:
                return kernel, True
        return numpy_kernel(node, ins, out, self.ctx), False

    def _bindable(self, graph, live) -> dict:
        """``name -> (view steps, reader steps)`` of every input that may be bound: at
        least :data:`BIND_MIN_BYTES`, never written by the
        plan (no update's target), neither it nor a view of it an output or an
        update's value (those are read from the variable's array after the
        run). The reader steps' kernels are
        wrapped (:class:`_Rebindable`) so that binding swaps them in place: the
        runners and the incremental schedule keep the wrappers."""
        targets = {v.name for v, _ in graph.updates}
        read_after = {id(o) for o in graph.outputs} | {id(u) for _, u in graph.updates}
        root = {}              # id(value) -> the input it is, or is a view of
        for v in graph.inputs:
            if v.nbytes >= BIND_MIN_BYTES and v.name not in targets:
                root[id(v)] = v.name
        found: dict = {}
        for i, n in enumerate(live.steps):
            if id(n) in live.views:
                name = root.get(id(n.parents[0]))
                if name is not None:
                    root[id(n)] = name
                    found.setdefault(name, ([], []))[0].append(i)
                continue
            for name in {root[id(p)] for p in n.parents if id(p) in root}:
                found.setdefault(name, ([], []))[1].append(i)
        for key in read_after:
            found.pop(root.get(key), None)
        readers = {}
        for name, (views, steps) in found.items():
            if steps and all(self.kernels[i] is not None for i in steps):
                readers[name] = (views, steps)
                for i in steps:
                    if i not in self._own:
                        self._own[i] = self.kernels[i]
                        self.kernels[i] = _Rebindable(self.kernels[i])
        return readers

    @property
    def bindable(self) -> frozenset:
        """The inputs :meth:`bind_input` may bind (see :meth:`_bindable`).
        Example: ``"x" in program.bindable``"""
        return frozenset(self._readers)

    def can_bind(self, name: str, array: np.ndarray, again: bool = False) -> bool:
        """Whether ``array`` (of the input's dtype and shape, checked already) may be
        bound as input ``name``: a bindable input, a C-contiguous, aligned array
        with the variable's dtype, and no byte of it in this program's memory
        (an output view of a ``copy_outputs=False`` graph fed back is copied:
        the run writes over it); and worth it: the array bound already, one fed
        ``again`` (the same array as the last feed), or one of at least
        :data:`BIND_BYTES_PER_READER` per step reading the input.

        Example: ``if program.can_bind("x", X): program.bind_input("x", X)``"""
        if name not in self._readers or not (array.flags.c_contiguous and array.flags.aligned):
            return False
        if array.dtype != self.variables[name].dtype or array.nbytes == 0:
            return False
        if not (again or array is self._bound.get(name)
                or array.nbytes >= BIND_BYTES_PER_READER * len(self._readers[name][1])):
            return False
        lo = _address(array)
        # the program's arrays are disjoint: only the last one starting below the
        # array's end may overlap it
        k = bisect.bisect_left(self._starts, lo + array.nbytes) - 1
        return k < 0 or self._ends[k] <= lo

    def bind_input(self, name: str, array=None) -> None:
        """Rebuild the kernels reading input ``name`` (through its views too) on
        ``array`` instead of the variable's own array, or back on the variable's
        array when ``array`` is ``None``; a step reading several bound inputs reads
        each from its array. The kernels only read it; this program holds
        ``array`` until the next call for ``name``. Check it with :meth:`can_bind`
        first.

        Example: ``program.bind_input("x", X); program.execute()``"""
        if array is None:
            self._bound.pop(name, None)
        else:
            self._bound[name] = array
        nodes = self._live.steps
        seen = {}                  # id(value) -> its array under the bindings now
        for bound, given in self._bound.items():
            seen[id(self._inputs[bound])] = given
            for i in self._readers[bound][0]:
                n = nodes[i]
                seen[id(n)] = VIEW_OF[n.op.kind](n.op, seen[id(n.parents[0])], n)
        for i in self._readers[name][1]:
            n = nodes[i]
            if not any(id(p) in seen for p in n.parents):
                self.kernels[i].kernel = self._own[i]     # built on the variables
                continue
            ins = [seen.get(id(p), self.values[id(p)]) for p in n.parents]
            self.ctx._replay = list(self._slots_taken[i])
            self.ctx.begin_kernel()
            try:
                self.kernels[i].kernel = self._build(n, ins, self.values[id(n)])[0]
            finally:
                self.ctx._replay = []

    def buffer(self, size: int) -> np.ndarray:
        return aligned_bytes(size)

    def empty(self, shape, dtype) -> np.ndarray:
        return np.empty(shape, dtype)

    def constant(self, array: np.ndarray) -> np.ndarray:
        return array

    def to_host(self, array: np.ndarray) -> np.ndarray:
        """A copy of one of this program's arrays (they already are NumPy arrays)."""
        return array.copy()
