"""The CPU kernels of the three convolution kinds (eager mode, unoptimised graphs,
and 1x1 convolutions the lowering keeps): :mod:`graphc.operator.conv_gemm`'s
decomposition, the one the optimiser lowers to, run once at build time on a
:class:`BindingNamespace`, which binds each of its steps to an array allocated
for it. A run then makes the same kernel calls as the lowered graph, so the
two give the same bits, and allocates nothing.

>>> import graphc.ndarray as N, numpy as np
>>> x, w = np.ones((1, 2, 4, 4)), np.ones((3, 2, 3, 3))
>>> op = N.conv2d(N.var("x", x.shape), N.var("w", w.shape), padding=1).op
>>> out = np.empty((1, 3, 4, 4))
>>> decomposed_kernel(op, [x, w], out, None)(); out[0, 0, 0]
array([ 8., 12., 12.,  8.])
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..engine.conv_builders import generated_conv
from ..engine.cpu_kernels import GENERATED_KERNELS, build_kernel, run_all
from ..operator import Namespace
from ..operator.conv_gemm import DECOMPOSITIONS
from ..shape.rules import infer
from ..type.op import Op

_COPY = Op.make("copy")


class BindingNamespace(Namespace):
    """Array functions that compute nothing yet: each op gets an array of its
    inferred shape (allocated like its first operand: NumPy's, or a device's), and a
    step (the engine's kernel) bound to it once :meth:`program` says where the
    result goes. A reshape of a C-contiguous array is a view of it (no step).

    >>> ns, x, out = BindingNamespace(None), np.arange(6.0), np.empty((2, 3))
    >>> run = ns.program(ns.exp(ns.reshape(x, (2, 3))), out)   # exp binds out itself
    >>> x[:] = 0.0; _ = run(); out
    array([[1., 1., 1.],
           [1., 1., 1.]])
    """

    def __init__(self, ctx, parallel=None):
        # no super().__init__(): its ``random`` would refer back to this namespace, and
        # that cycle would keep every workspace array alive until the cyclic collector
        # ran (eager mode builds one of these per convolution)
        self._ctx = ctx
        # None: NumPy's kernels only; a bool: generated kernels where a kind has one
        # (threaded or not), as the lowered graph's steps would run
        self._parallel = parallel
        self.generated = 0   # steps bound to a generated kernel
        self._steps = []     # (op, parents, the array the step writes)

    def _apply(self, op, parents):
        if op.kind == "reshape":
            (x,) = parents
            if not x.flags.c_contiguous:
                # the reshape of a strided array would be a copy made now, never refreshed
                x = self._apply(_COPY, [x])
            return x.reshape(op["shape"])
        shape, dtype = infer(op, parents)
        # in the operands' array module (CuPy's in a device program), C-ordered
        result = np.empty_like(parents[0], dtype=dtype, shape=shape, order="C")
        self._steps.append((op, tuple(parents), result))
        return result

    def _constant(self, array, name=None):
        return np.asarray(array)

    def _is_value(self, x):
        return hasattr(x, "__array_function__")     # a NumPy array, or CuPy's

    def _known(self, x):
        return x if isinstance(x, np.ndarray) else None

    def program(self, result, out):
        """One callable running every step, the last one writing ``result`` into ``out``:
        when ``result`` is the whole of the last step's array (or a view of it with its
        own shape), that step writes into ``out`` itself, else ``result`` is copied."""
        steps, tail = list(self._steps), []
        last = steps[-1][2] if steps else None
        if (last is not None and (result is last or result.base is last)
                and result.size == last.size and result.flags.c_contiguous
                and out.flags.c_contiguous and out.dtype == last.dtype):
            op, parents, _ = steps[-1]
            steps[-1] = (op, parents, out.reshape(last.shape))
        else:
            tail = [partial(np.copyto, out, result)]
        calls = [self._kernel(op, parents, array) for op, parents, array in steps]
        self._steps = []     # the kernels hold what they need
        return run_all(calls + tail)

    def _kernel(self, op, parents, array):
        builder = None if self._parallel is None else GENERATED_KERNELS.get(op.kind)
        kernel = None if builder is None else builder(op, parents, array, self._ctx,
                                                      self._parallel)
        if kernel is None:
            return build_kernel(op, parents, array, self._ctx)
        self.generated += 1
        return kernel


def decomposed_kernel(op, ins, out, ctx):
    """The kernel of each convolution kind: its decomposition (looked up in
    :data:`~graphc.operator.conv_gemm.DECOMPOSITIONS`) bound to arrays once.

    Example: ``decomposed_kernel(op, [x, w], out, ctx)()``
    """
    ns = BindingNamespace(ctx)
    return ns.program(DECOMPOSITIONS[op.kind](ns, *ins, op), out)


def generated_decomposed(op, ins, out, ctx, parallel: bool):
    """``OpDef.generated`` of the convolution kinds: the direct kernel
    (:func:`~graphc.engine.conv_builders.generated_conv`) where it serves, else the
    decomposition with generated kernels for its steps (a 1x1 convolution's GEMM on
    the generated kernels' threads, :mod:`graphc.engine.numba_gemm`); ``None`` (the
    NumPy kernel) when no step has one.

    Example: ``generated_decomposed(op, [x, w], out, ctx, parallel=True)()``
    """
    direct = generated_conv(op, ins, out, ctx, parallel)
    if direct is not None:
        return direct
    ns = BindingNamespace(ctx, parallel)
    program = ns.program(DECOMPOSITIONS[op.kind](ns, *ins, op), out)
    return program if ns.generated else None


__all__ = ["BindingNamespace", "decomposed_kernel", "generated_decomposed"]
