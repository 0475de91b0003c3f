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
  ``cupy.RawKernel``); other nodes use the CPU engine's kernel builders, whose NumPy calls reach ``xp``
  through NumPy's dispatch protocols (``__array_ufunc__``,
  ``__array_function__``). Kinds known not to work that way (random draws on
  the host generator, the streamed scratch kernels) are refused by name.

On the CPU the tests run this program with NumPy as ``xp`` and the generated
kernels compiled by a C compiler, so everything but CuPy itself is exercised.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..type.errors import DeviceError
from ..type.kinds import is_elementwise
from .cpu import RunContext
from .cpu_kernels import build_kernel
from .program import Program
from . import cuda_window as window
from .cuda_codegen import elementwise_kernel, supported

#: kinds the device program cannot run yet, and why (said in the error)
UNSUPPORTED = {"random_uniform": "draws on the host generator",
               "random_normal": "draws on the host generator",
               "random_bernoulli": "draws on the host generator",
               "random_draw": "draws on the host generator",
               "delay": "calls back into Python with host arrays",
               "loop": "runs its body as a graph compiled for the host",
               "loop_part": "reads a loop's results, which live on the host"}


class DeviceProgram(Program):
    """Buffers, views and steps of one compiled graph in ``xp``'s memory."""

    host_views = False      # outputs always come back as host copies

    def __init__(self, graph, live, plan, backend, seed=None):
        self.xp, self.ctx = backend.xp, RunContext(seed)
        self.bind(graph, live, plan)
        self.kernels, self.scratch_slots = [], []
        self.generated = 0             # steps that are one generated kernel each
        for n in live.steps:
            self.kernels.append(self._kernel(n, backend))
            self.scratch_slots.append([])
        self.steps = [k for k in self.kernels if k is not None]
        self.elided = 0

    def buffer(self, size: int):
        return self.xp.empty(size, dtype=np.uint8)

    def empty(self, shape, dtype):
        return self.xp.empty(shape, dtype=dtype)

    def constant(self, array):
        return self.xp.asarray(array)

    def _kernel(self, node, backend):
        kind = node.op.kind
        if kind in UNSUPPORTED:
            raise DeviceError(f"compile(device=...): {node.label()} ({kind}) cannot run on the "
                              f"device yet: it {UNSUPPORTED[kind]}")
        ins = [self.values[id(p)] for p in node.parents]
        out = self.values[id(node)]
        dtypes = [p.dtype.name for p in node.parents]
        shapes = [p.shape for p in node.parents]
        if is_elementwise(kind) and supported(node.op, dtypes, node.dtype.name):
            kernel = backend.elementwise(elementwise_kernel(node.op, dtypes, node.dtype.name))
            self.generated += 1
            return partial(kernel, *ins, out)
        if kind in window.KINDS and window.supported(node.op, shapes, dtypes, node.shape,
                                                     node.dtype):
            kernel = backend.raw(window.window_kernel(node.op, shapes, dtypes, node.shape,
                                                      node.dtype))
            self.generated += 1
            return partial(kernel, *[self.xp.ascontiguousarray(a) for a in ins], out)
        before = len(self.ctx.scratch_taken)
        call = build_kernel(node.op, ins, out, self.ctx)
        if len(self.ctx.scratch_taken) != before:
            raise DeviceError(f"compile(device=...): {node.label()} ({kind}) streams through a "
                              "host scratch buffer, which the device program does not have")
        return call

    def to_host(self, array) -> np.ndarray:
        """A host (NumPy) copy of a device array."""
        asnumpy = getattr(self.xp, "asnumpy", None)
        return asnumpy(array) if asnumpy is not None else np.array(array, copy=True)
