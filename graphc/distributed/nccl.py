"""NCCL through CuPy (``cupy.cuda.nccl``), for the GPU engine's arrays
(``compile(device="cuda")``): one process per GPU, the NCCL communicator set up
with a unique id that rank 0 makes and an MPI bootstrap carries to the others.

NCCL's collectives are asynchronous on the current stream; each one is followed by
an event polled against the deadline, so a rank that died gives the others a
``DistributedError`` (and the NCCL communicator is aborted) instead of a hang.
CuPy is imported only here, when an ``NCCL`` communicator is made.

Example::

    comm = graphc.distributed.NCCL()        # bootstrapped over MPI.COMM_WORLD
    step = graphc.compile(inputs, loss, updates, device="cuda")
"""
from __future__ import annotations

import time

import numpy as np

from ..type.errors import DistributedError
from .communicator import DEFAULT_TIMEOUT, Communicator
from .mpi import MPI

#: NumPy dtype name -> the NCCL constant's name
_DTYPES = {"int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32",
           "uint32": "NCCL_UINT32", "int64": "NCCL_INT64", "uint64": "NCCL_UINT64",
           "float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64",
           "bool": "NCCL_UINT8"}
_OPS = {"sum": "NCCL_SUM", "mean": "NCCL_SUM", "max": "NCCL_MAX", "min": "NCCL_MIN"}


def _cupy():
    try:
        import cupy
        from cupy.cuda import nccl
    except ImportError as exc:
        raise DistributedError(f"graphc.distributed.NCCL needs CuPy with NCCL on an NVIDIA "
                               f"GPU (pip install cupy-cuda12x): {exc}") from None
    return cupy, nccl


class NCCL(Communicator):
    """The ranks of ``bootstrap`` (an :class:`~.mpi.MPI` communicator, by default
    ``COMM_WORLD``'s), one GPU each (``device``: default ``rank % GPUs``).

    Example: ``comm = NCCL(timeout=60)``
    """

    name = "NCCL"

    def __init__(self, bootstrap=None, device=None, timeout: float = DEFAULT_TIMEOUT):
        cupy, nccl = _cupy()
        self._cupy, self._nccl = cupy, nccl
        self.bootstrap = MPI(timeout=timeout) if bootstrap is None else bootstrap
        self.rank, self.size = self.bootstrap.rank, self.bootstrap.size
        self.timeout = float(timeout)
        count = cupy.cuda.runtime.getDeviceCount()
        cupy.cuda.Device(self.rank % count if device is None else device).use()
        uid = np.zeros(128, np.int64)
        if self.rank == 0:
            uid[:] = nccl.get_unique_id()
        self.bootstrap.broadcast(uid, uid, 0)
        self.comm = nccl.NcclCommunicator(self.size, tuple(int(v) for v in uid), self.rank)

    def _same_layout(self, what, send, recv, expected) -> None:
        if not all(isinstance(a, self._cupy.ndarray) for a in (send, recv)):
            raise DistributedError(f"NCCL {what}: NCCL moves GPU (CuPy) arrays; compile the "
                                   "graph with device='cuda', or use graphc.distributed.MPI "
                                   "for host arrays")
        super()._same_layout(what, send, recv, expected)

    def _code(self, table, key, what):
        try:
            return getattr(self._nccl, table[key])
        except KeyError:
            raise DistributedError(f"NCCL {what}: cannot exchange {key}") from None

    def _finish(self, what: str) -> None:
        """Wait for the collective just queued, up to the timeout."""
        event = self._cupy.cuda.Event(disable_timing=True)
        event.record()
        deadline = time.monotonic() + self.timeout
        while not event.done:
            if time.monotonic() > deadline:
                self.comm.abort()
                raise DistributedError(f"NCCL {what}: rank {self.rank} of {self.size} waited "
                                       f"{self.timeout:g} s for the other ranks; one of them "
                                       "died, hangs, or never joined (communicator aborted)")
            time.sleep(50e-6)
        self.comm.check_async_error()

    def _stream(self):
        return self._cupy.cuda.get_current_stream().ptr

    def _all_reduce(self, send, recv, reduction):
        dtype = self._code(_DTYPES, recv.dtype.name, "all_reduce")
        self.comm.allReduce(send.data.ptr, recv.data.ptr, recv.size, dtype,
                            self._code(_OPS, reduction, "all_reduce"), self._stream())
        self._finish(f"all_reduce ({reduction}) of {recv.nbytes} bytes")

    def _broadcast(self, send, recv, root):
        self.comm.broadcast(send.data.ptr, recv.data.ptr, recv.size,
                            self._code(_DTYPES, recv.dtype.name, "broadcast"), root,
                            self._stream())
        self._finish(f"broadcast from rank {root} of {recv.nbytes} bytes")

    def _all_gather(self, send, recv):
        self.comm.allGather(send.data.ptr, recv.data.ptr, send.size,
                            self._code(_DTYPES, send.dtype.name, "all_gather"), self._stream())
        self._finish(f"all_gather of {recv.nbytes} bytes")

    def _all_gather_bytes(self, data, what):
        return self.bootstrap._all_gather_bytes(data, what)
