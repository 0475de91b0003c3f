"""Consecutive oneDNN convolutions run by one compiled loop instead of one Python call
each.

A mobile network is mostly convolutions of a few microseconds, one after the other
(mnasnet0_5: 52 of its 55 steps). Called from Python, each costs its Python frame and a
``ctypes`` call on top of oneDNN's own work: 2.4 us a call for a 1x1x8 convolution,
against 1.4 us from a compiled loop (Numba, calling ``dnnl_primitive_execute`` directly).
:func:`batched` replaces every run of two or more such steps in a kernel list by one
:class:`Batch`; the serial runner uses the batched list (cached with the list
:class:`~.incremental.IncrementalSchedule` returns each steady run), so an interrupt is
now seen between batches rather than between their convolutions.

>>> batched([print, print]) == [print, print]       # nothing of oneDNN's to batch
True
"""
from __future__ import annotations

import ctypes
from functools import lru_cache

import numpy as np

from .onednn_conv import BoundConv

#: the fewest consecutive convolutions worth a batch
MIN_BATCH = 2


def batched(kernels: list) -> list:
    """``kernels`` with each run of :data:`MIN_BATCH` or more consecutive plain
    :class:`~.onednn_conv.BoundConv` kernels (no residual copied in first, one team
    size) replaced by a :class:`Batch` of them; the same list where there is none.

    Example: ``runner_kernels = batched(program_kernels)``"""
    out, run = [], []

    def flush():
        if len(run) >= MIN_BATCH and _loop() is not None:
            out.append(Batch(run))
        else:
            out.extend(run)
        run.clear()

    for kernel in kernels:
        if (type(kernel) is BoundConv and kernel._residual is None
                and (not run or run[0]._threads == kernel._threads)):
            run.append(kernel)
            continue
        flush()
        out.append(kernel)
    flush()
    return out if len(out) != len(kernels) else kernels


class Batch:
    """Convolutions bound to their arrays (:class:`~.onednn_conv.BoundConv`), run in
    order by one compiled loop on the calling thread's OpenMP team and oneDNN stream.

    Example: ``Batch([conv1, conv2])()``"""

    __slots__ = ("convs", "handles", "args", "status")

    def __init__(self, convs):
        self.convs = tuple(convs)        # their memories and argument arrays stay alive
        self.handles = np.array([c._handle.value for c in convs], np.uint64)
        self.args = np.array([ctypes.addressof(c._args) for c in convs], np.uint64)
        self.status = np.zeros(2, np.int64)

    def __call__(self) -> None:
        first = self.convs[0]
        lib = first._lib
        if lib.team() != first._threads:   # another team size: each on its own
            for conv in self.convs:
                conv()
            return
        stream = getattr(lib.streams, "stream", None) or lib.stream()
        if _loop()(self.handles, stream.value, self.args, self.status):
            lib.check(int(self.status[1]), f"execution of convolution {self.status[0]} "
                                           f"of a batch of {len(self.convs)}")


@lru_cache(maxsize=1)
def _loop():
    """The compiled loop over ``dnnl_primitive_execute``, or ``None`` without Numba.
    Compiled once a process (the function's address is part of the code, so it is
    not cached on disk)."""
    from .numba_kernels import available
    if available() is not None:
        return None
    from numba import njit

    from .onednn_conv import _library
    address = ctypes.cast(_library().dll.dnnl_primitive_execute, ctypes.c_void_p).value
    execute = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int,
                               ctypes.c_uint64)(address)

    @njit(nogil=True)
    def run(handles, stream, args, status):
        for i in range(handles.size):
            code = execute(handles[i], stream, 5, args[i])
            if code != 0:
                status[0], status[1] = i, code
                return True
        return False
    return run


__all__ = ["Batch", "MIN_BATCH", "batched"]
