"""The CPU engine: turn a planned graph into NumPy arrays and a flat list of
bound kernel calls, so that a run is one loop with no allocation.

Every computed value is a view ``buffer[offset:offset + nbytes]`` reinterpreted
with its dtype and shape; variables own one array each (inputs are copied in,
never referenced), constants are their own read-only arrays; a value liveness made
a view (a slice, transpose, broadcast, flip) is NumPy's view of its parent's array,
which its readers' kernels read strided: no step, no bytes.

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

import itertools
import math

import numpy as np

from .cpu_kernels import GENERATED_KERNELS, SCRATCH_BYTES, build_kernel, run_all
from .planners import ALIGN
from .program import Program
from .strategy import PARALLEL_MIN, STREAM_MIN, generated_wanted, stream_chunk

#: kinds whose kernel only copies its input unchanged: skipped when in place
_ELIDABLE = frozenset({"reshape", "copy"})


class RunContext:
    """State kernels read at run time: the random generator (seedable) and the
    scratch of streamed kernels."""

    def __init__(self, seed=None, scratch_slots: int = 1):
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self._slots = [None] * max(int(scratch_slots), 1)
        self.scratch_taken: list[int] = []   # the slot of every scratch handed out

    def scratch(self, nbytes: int) -> np.ndarray:
        """A scratch buffer shared by the kernels of this context: the chunk buffer of
        streamed kernels. Kernels that share a slot must not run at the same time
        (``scratch_taken`` says which slot each got); slots are dealt in turn, one
        per worker of a parallel schedule. Fixed size, made on first use, so views
        bound at build time stay valid."""
        if nbytes > SCRATCH_BYTES:
            raise ValueError(f"scratch: {nbytes} bytes asked, at most {SCRATCH_BYTES}")
        slot = len(self.scratch_taken) % len(self._slots)
        self.scratch_taken.append(slot)
        if self._slots[slot] is None:
            self._slots[slot] = aligned_bytes(SCRATCH_BYTES)
        return self._slots[slot][:nbytes]

    @property
    def scratch_slot_count(self) -> int:
        return len(self._slots)

    @property
    def scratch_bytes(self) -> int:
        """Bytes of scratch made so far (outside the memory plan)."""
        return SCRATCH_BYTES * sum(s is not None for s in self._slots)

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
        self.bind(graph, live, plan)
        values = self.values
        self.kernels = []
        self.scratch_slots = []   # the scratch slots kernels[i] works in
        self.generated = 0
        # a parallel schedule already keeps every core busy: one thread per kernel
        threaded = scratch_slots == 1
        for n in live.steps:
            ins = [values[id(p)] for p in n.parents]
            out = values[id(n)]
            taken = len(self.ctx.scratch_taken)
            if id(n) in live.views:
                self.kernels.append(None)  # a view of its parent's array: nothing to run
            elif (n.op.kind in _ELIDABLE and ins[0].dtype == out.dtype
                    and _address(ins[0]) == _address(out)):
                self.kernels.append(None)  # its parent already holds these bytes
            else:
                kernel = None
                if kernels == "generated":
                    kernel = _generated(n, ins, out, self.ctx, threaded)
                    self.generated += kernel is not None
                self.kernels.append(kernel or numpy_kernel(n, ins, out, self.ctx))
            self.scratch_slots.append(sorted(set(self.ctx.scratch_taken[taken:])))
        self.steps = [k for k in self.kernels if k is not None]
        self.elided = len(self.kernels) - len(self.steps)    # views included
        self.views = len(live.views)

    def buffer(self, size: int) -> np.ndarray:
        return aligned_bytes(size)

    def empty(self, shape, dtype) -> np.ndarray:
        return np.empty(shape, dtype)

    def constant(self, array: np.ndarray) -> np.ndarray:
        return array

    def to_host(self, array: np.ndarray) -> np.ndarray:
        """A copy of one of this program's arrays (they already are NumPy arrays)."""
        return array.copy()
