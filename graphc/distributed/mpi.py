"""MPI through ``mpi4py``, for arrays in host memory (``pip install -e
'.[distributed]'`` brings mpi4py and MPICH from PyPI; any MPI mpi4py was built for
works, Debian's OpenMPI too). Launched with ``mpiexec -n P python train.py``.

Every collective is issued non-blocking (``Iallreduce``, ``Ibcast``, ``Iallgather``)
and polled against a deadline, so a rank that died or never joined gives the others
a ``DistributedError`` after ``timeout`` seconds instead of a hang; the poll also
drives MPI's progress engine and lets other threads (the dependency engine's
workers) run meanwhile. CuPy arrays are staged through host memory (a CUDA-aware MPI
is not assumed; :class:`~graphc.distributed.nccl.NCCL` is the GPU transport).

Example::

    comm = graphc.distributed.MPI()            # MPI.COMM_WORLD
    trainer = compile_training(model, SGD(0.1), (32, 1, 28, 28), communicator=comm)
"""
from __future__ import annotations

import atexit
import time

import numpy as np

from ..type.errors import DistributedError
from .communicator import DEFAULT_TIMEOUT, Communicator, same_memory

#: seconds between polls once a collective has not finished after the first spins
_POLL_SLEEP = 50e-6
_SPINS = 200


def _mpi():
    try:
        from mpi4py import MPI as mpi
    except ImportError as exc:
        raise DistributedError(
            "graphc.distributed.MPI needs mpi4py and an MPI library: pip install -e "
            "'.[distributed]' (mpi4py and MPICH from PyPI), or Debian's python3-mpi4py "
            f"({exc})") from None
    return mpi


class MPI(Communicator):
    """The ranks of an MPI communicator (``comm``: an ``mpi4py`` communicator, by
    default ``COMM_WORLD``); ``timeout``: seconds a collective waits for the others.

    Example: ``comm = MPI(timeout=60); print(comm.rank, comm.size)``
    """

    name = "MPI"

    def __init__(self, comm=None, timeout: float = DEFAULT_TIMEOUT):
        mpi = _mpi()
        self._mpi = mpi
        self.comm = mpi.COMM_WORLD if comm is None else comm
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        if not timeout > 0:
            raise ValueError(f"MPI: timeout must be a positive number of seconds, got "
                             f"{timeout!r}")
        self.timeout = float(timeout)
        self._ops = {"sum": mpi.SUM, "mean": mpi.SUM, "max": mpi.MAX, "min": mpi.MIN}
        self._failed = False
        # every rank must reach this point: a rank that never starts is found here
        self._wait(self.comm.Ibarrier(), "joining the communicator")

    def _wait(self, request, what: str) -> None:
        """Poll ``request`` until it completes or the timeout passes."""
        spins, deadline = 0, None
        while not request.Test():
            spins += 1
            if spins < _SPINS:
                continue
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.timeout
            elif now > deadline:
                self._give_up()
                raise DistributedError(
                    f"MPI {what}: rank {self.rank} of {self.size} waited {self.timeout:g} s "
                    "for the other ranks; one of them died, hangs, or never joined. This "
                    "process cannot go on with the group: exit it (mpiexec ends the others)")
            time.sleep(_POLL_SLEEP)

    def _give_up(self) -> None:
        """After a timeout the request can never complete, and MPI_Finalize would wait
        for it at exit: end the job at exit instead of hanging there."""
        if not self._failed:
            self._failed = True
            atexit.register(self.comm.Abort, 1)

    @staticmethod
    def _host(array):
        """``array`` in host memory (CuPy's staged), and a function writing back."""
        if isinstance(array, np.ndarray):
            return array, None
        host = array.get()
        return host, (lambda: array.set(host))

    def _all_reduce(self, send, recv, reduction):
        if reduction not in self._ops:
            raise DistributedError(f"MPI all_reduce: unknown reduction {reduction!r}")
        recv_host, write_back = self._host(recv)
        source = self._mpi.IN_PLACE if same_memory(send, recv) else self._host(send)[0]
        if self.size > 1 or source is not self._mpi.IN_PLACE:
            self._wait(self.comm.Iallreduce(source, recv_host, op=self._ops[reduction]),
                       f"all_reduce ({reduction}) of {recv.nbytes} bytes")
        if write_back:
            write_back()

    def _broadcast(self, send, recv, root):
        recv_host, write_back = self._host(recv)
        if self.rank == root and not same_memory(send, recv):
            np.copyto(recv_host, self._host(send)[0])
        self._wait(self.comm.Ibcast(recv_host, root=root),
                   f"broadcast from rank {root} of {recv.nbytes} bytes")
        if write_back:
            write_back()

    def _all_gather(self, send, recv):
        recv_host, write_back = self._host(recv)
        self._wait(self.comm.Iallgather(self._host(send)[0], recv_host),
                   f"all_gather of {recv.nbytes} bytes")
        if write_back:
            write_back()

    def _all_gather_bytes(self, data, what):
        lengths = np.zeros(self.size, np.int64)
        self._wait(self.comm.Iallgather(np.array([len(data)], np.int64), lengths),
                   f"{what}: comparing the ranks' graphs")
        gathered = np.zeros(int(lengths.sum()), np.uint8)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        self._wait(self.comm.Iallgatherv(np.frombuffer(data, np.uint8),
                                         [gathered, lengths, offsets, self._mpi.BYTE]),
                   f"{what}: exchanging the ranks' graphs")
        return [gathered[o:o + n].tobytes() for o, n in zip(offsets, lengths)]
