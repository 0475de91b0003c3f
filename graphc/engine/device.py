"""A planned graph on an accelerator's memory: the CPU program's design (a few
buffers allocated once, every value a view, a flat list of bound kernel calls)
written against an *array module* ``xp`` (CuPy for ``device="cuda"``).

- Memory: one ``xp.empty(size, uint8)`` per planned buffer, made once; each
  value is a view of one; variables are device arrays; constants are copied to
  the device once, when the program is built. A run copies inputs in and
  outputs out and moves nothing else.
- Kernels: every elementwise node, the optimiser's fused nodes included, is
  ONE generated elementwise kernel (:mod:`.cuda_codegen`), built by
  ``backend.elementwise(source)`` (``cupy.ElementwiseKernel`` on a GPU); the
  window nodes (im2col, col2im, poolings and their gradients) are one
  generated raw kernel each (:mod:`.cuda_window`, ``backend.raw(source)``:
  ``cupy.RawKernel``); fused reductions one ``cupy.ReductionKernel`` each
  (:mod:`.cuda_reduce`); other nodes use the CPU engine's kernel builders, whose
  NumPy calls reach ``xp`` through NumPy's dispatch protocols
  (``__array_ufunc__``, ``__array_function__``), or a device builder where that
  does not carry over (:mod:`.device_builders`: CuPy's generator, ``one_hot``,
  the kinds run on host copies).
- ``capture=True``: runs replayed as CUDA graphs (:mod:`.cuda_graphs`, the
  products through :mod:`.cuda_blas`); ``tf32=True``: TF32 products.

On the CPU the tests run this program with NumPy as ``xp`` and the generated
kernels compiled by a C compiler, so everything but CuPy itself is exercised.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..type.errors import DeviceError, GraphcError
from ..type.kinds import KINDS, is_elementwise
from .cpu import RunContext
from . import cpu_kernels
from .cpu_kernels import build_kernel
from .device_builders import DEVICE_BUILDERS, HOST_CHECKS
from .program import Program
from . import cuda_window as window
from .cuda_codegen import elementwise_kernel, supported
from .cuda_blas import gemm_plan
from .cuda_graphs import GemmStep, LibraryCall
from .cuda_reduce import first_stage, reduction_kernel, reduction_stages

#: kinds whose kernel makes matrix products (cuBLAS): the ones ``tf32=True`` affects,
#: the convolutions the optimiser leaves whole (their decomposition ends in a GEMM) too
MATRIX_PRODUCTS = frozenset({"matmul", "dot", "einsum", "conv2d", "conv2d_backward_input",
                             "conv2d_backward_kernel"})
#: families whose kernels call CUDA libraries (cuBLAS, cuSOLVER, cuFFT, NCCL), which
#: are launched between captured CUDA graphs rather than inside them
LIBRARY_FAMILIES = frozenset({"linalg", "collective"})


class DeviceRunContext(RunContext):
    """The run context of a device program: the random ops draw from ``make_rng(seed)``
    (CuPy's generator, its state in device memory) instead of NumPy's, but for
    ``random_draw``, which draws from NumPy's generator on the host (``host_rng``,
    seeded as a CPU program's). A failed run puts both generators' states back (the
    device's copied in place, so a captured CUDA graph that draws keeps drawing from
    the same state)."""

    def __init__(self, seed, make_rng, xp):
        super().__init__(seed)
        self._make_rng, self._xp = make_rng, xp
        self.host_rng = self.rng
        self.rng = make_rng(seed)

    @property
    def saved_rng(self):
        """The generator a checkpoint saves: the host's (PCG64); CuPy's state is not."""
        return self.host_rng

    def memory(self, nbytes: int):
        """Device memory for the scratch and workspaces of the NumPy kernels that run
        on the device (a fused program CuPy cannot generate: complex values, say)."""
        return self._xp.empty(nbytes, dtype=np.uint8)

    def seed(self, seed) -> None:
        self.host_rng.bit_generator.state = np.random.PCG64(seed).state
        state, fresh = _state_of(self.rng), _state_of(self._make_rng(seed))
        if state is not None and fresh is not None and state.shape == fresh.shape:
            state[...] = fresh
        else:
            self.rng = self._make_rng(seed)

    @property
    def draws(self):
        state = _state_of(self.rng)
        return (None if state is None else state.copy(), self.host_rng.bit_generator.state)

    @draws.setter
    def draws(self, saved) -> None:
        device, host = saved
        self.host_rng.bit_generator.state = host
        state = _state_of(self.rng)
        if device is not None and state is not None:
            state[...] = device


def _state_of(rng):
    """The device array holding a CuPy generator's state (its bit generator's
    ``_state``), or ``None`` where this CuPy keeps it elsewhere (a failed run then
    leaves the draws advanced)."""
    bits = getattr(rng, "bit_generator", None) or getattr(rng, "_bit_generator", None)
    state = getattr(bits, "_state", None)
    return state if hasattr(state, "shape") and hasattr(state, "copy") else None


class DeviceProgram(Program):
    """Buffers, views and steps of one compiled graph in ``xp``'s memory."""

    host_views = False      # outputs always come back as host copies
    reads_views = True      # the views liveness makes for it: reshapes (DEVICE_VIEWS)

    def __init__(self, graph, live, plan, backend, seed=None, capture=False, tf32=False):
        if capture and backend.capture is None:
            raise DeviceError("compile(capture=True): this device backend cannot capture "
                              "CUDA graphs")
        if tf32 and backend.tf32 is None:
            raise DeviceError("compile(tf32=True): this CuPy has no switch for TF32 matrix "
                              "products (cupy._core._routines_linalg.set_compute_type)")
        self._capture = backend.capture if capture else None
        self._tf32 = backend.tf32 if tf32 else None
        self.replay = None             # the GraphReplay runner, with capture=True
        self.xp = backend.xp
        self.ctx = (RunContext(seed) if backend.rng is None
                    else DeviceRunContext(seed, backend.rng, backend.xp))
        self.bind(graph, live, plan)
        self.kernels, self.scratch_slots = [], []
        self.generated = 0             # steps that are one generated kernel each
        for n in live.steps:     # a view (a reshape, here) has no step
            self.kernels.append(None if id(n) in live.views else self._kernel(n, backend))
            self.scratch_slots.append([])
        self.steps = [k for k in self.kernels if k is not None]
        self.elided = len(self.kernels) - len(self.steps)

    def buffer(self, size: int):
        return self._made(self.xp.empty(size, dtype=np.uint8))

    def empty(self, shape, dtype):
        return self._made(self.xp.empty(shape, dtype=dtype))

    def constant(self, array):
        return self._made(self.xp.asarray(array))

    def _made(self, array):
        """Count the device bytes this program allocates (``stats()["device_bytes"]``)."""
        self.device_bytes = getattr(self, "device_bytes", 0) + array.nbytes
        return array

    def _kernel(self, node, backend):
        kind = node.op.kind
        ins = [self.values[id(p)] for p in node.parents]
        out = self.values[id(node)]
        dtypes = [p.dtype.name for p in node.parents]
        shapes = [p.shape for p in node.parents]
        if is_elementwise(kind) and supported(node.op, dtypes, node.dtype.name):
            kernel = backend.elementwise(elementwise_kernel(node.op, dtypes, node.dtype.name))
            self.generated += 1
            return partial(kernel, *ins, out)
        if kind == "fused_reduce" and backend.reduction is not None:
            try:
                source = reduction_kernel(node.op, dtypes)
            except (NotImplementedError, GraphcError, KeyError):
                source = None       # a program without a generated form: refused below
            if source is not None:
                self.generated += 1
                if reduction_stages(node.op)[1]:
                    return self._two_stages(node.op, source, backend, ins, out)
                return partial(backend.reduction(source), *ins, out)
        if kind in window.KINDS and window.supported(node.op, shapes, dtypes, node.shape,
                                                     node.dtype):
            kernel = backend.raw(window.window_kernel(node.op, shapes, dtypes, node.shape,
                                                      node.dtype))
            self.generated += 1
            return partial(kernel, *[self.xp.ascontiguousarray(a) for a in ins], out)
        device_builder = DEVICE_BUILDERS.get(kind)
        if device_builder is not None:
            call = device_builder(node.op, ins, out, self.ctx, self.xp)
            # a step that waits for the device (a check read on the host) runs
            # between captured graphs
            return LibraryCall(call) if kind in HOST_CHECKS else call
        call = build_kernel(node.op, ins, out, self.ctx)
        if kind == "matmul" and self._capture is not None:
            plan = gemm_plan(*cpu_kernels.matmul_operands(node.op, ins, out))
            if plan is not None:
                return GemmStep(call, plan, out.dtype, self._tf32, tf32=self._tf32 is not None)
        if kind in MATRIX_PRODUCTS or KINDS[kind].family in LIBRARY_FAMILIES:
            return LibraryCall(call, self._tf32 if kind in MATRIX_PRODUCTS else None)
        return call

    def _two_stages(self, op, source, backend, ins, out):
        """A fused reduction over the trailing axes into a small buffer of partial
        results (made once, outside the plan: N*C elements for batch norm), then over
        the rest with CuPy's own reduction (:func:`.cuda_reduce.reduction_stages`)."""
        first, shape = first_stage(source, op)
        partial_results = self.empty(shape, out.dtype)
        inner = backend.reduction(first)
        combine = getattr(self.xp, op["reduce"])
        outer, keep = reduction_stages(op)[1], bool(op["keepdims"])

        def two_stages():
            inner(*ins, partial_results)
            if out.ndim:
                combine(partial_results, axis=outer, keepdims=keep, out=out)
            else:       # CuPy 14's CUB path fails on a 0-d out= (see _full_reduction)
                out[...] = combine(partial_results, axis=outer, keepdims=keep)
        return two_stages

    def store(self, dst, src) -> None:
        """Copy ``src`` into the device array ``dst``: a host (NumPy) array is uploaded
        (CuPy's ``set``: its ``[...] =`` takes no NumPy array), a device array copied."""
        if isinstance(src, np.ndarray) and hasattr(dst, "set"):
            dst.set(src if src.flags.c_contiguous else src.copy(order="C"))
        else:
            dst[...] = src

    def wrap_runner(self, runner):
        """``runner``, or with ``capture=True`` a :class:`~.cuda_graphs.GraphReplay`
        around it."""
        if self._capture is None:
            return runner
        from .cuda_graphs import GraphReplay
        self.replay = GraphReplay(runner, self._capture)
        return self.replay

    def device_stats(self) -> dict:
        """What only a device program has: the device bytes it allocated (planned
        buffers, variables, constants, partial results; the captures' temporaries are
        ``capture_held_bytes``), what CuPy's pool holds for the whole process, and
        the captured graphs."""
        replay = self.replay
        pool = getattr(self.xp, "get_default_memory_pool", None)
        return {"device_bytes": getattr(self, "device_bytes", 0),
                # process-wide: every graph's arrays, libraries' temporaries, free blocks
                "device_pool_bytes": pool().total_bytes() if pool is not None else None,
                "captured_graphs": replay.graphs if replay else 0,
                "replay_launches": replay.pieces if replay else 0,
                "graph_replays": replay.replays if replay else 0,
                "capture_held_bytes": replay.held_bytes if replay else 0}

    def to_host(self, array) -> np.ndarray:
        """A host (NumPy) copy of a device array."""
        asnumpy = getattr(self.xp, "asnumpy", None)
        return asnumpy(array) if asnumpy is not None else np.array(array, copy=True)
