"""What every communicator does, whatever moves its bytes: the collectives a graph's
nodes call (``all_reduce``, ``broadcast``, ``all_gather``), the check that all ranks
built the same graph (:meth:`Communicator.agree`), and host-side helpers for
training set-up (:meth:`Communicator.broadcast_arrays`). :class:`Local` is the
communicator of one process (every collective is a copy), so code written for
several ranks runs unchanged on one.

A subclass implements four byte movers on contiguous arrays (``_all_reduce``,
``_broadcast``, ``_all_gather``, ``_all_gather_bytes``); the base class checks
shapes and dtypes and names the operation in every error.

>>> import numpy as np
>>> comm = Local()
>>> out = np.empty(3)
>>> comm.all_reduce(np.arange(3.0), out, "mean"); out
array([0., 1., 2.])
"""
from __future__ import annotations

import hashlib
import time

import numpy as np

from ..type.errors import DistributedError

#: how long a rank waits for the others in one collective before it gives up (seconds)
DEFAULT_TIMEOUT = 300.0


def same_memory(a, b) -> bool:
    """Whether two arrays (NumPy or CuPy) are views of the same bytes, as a result
    planned over its operand is: the collective then runs in place.

    >>> x = np.zeros(4); same_memory(x, x[:]), same_memory(x, x.copy())
    (True, False)
    """
    if a is b:
        return True
    pointer = (lambda v: v.data.ptr) if hasattr(getattr(a, "data", None), "ptr") else \
        (lambda v: v.__array_interface__["data"][0])
    return a.shape == b.shape and pointer(a) == pointer(b)


class Communicator:
    """A group of ``size`` processes, this one being ``rank``. ``timeout``: seconds
    a collective waits for the other ranks before raising ``DistributedError``."""

    name = "communicator"
    rank, size, timeout = 0, 1, DEFAULT_TIMEOUT

    def __repr__(self) -> str:
        return f"<{type(self).__name__} rank {self.rank} of {self.size}>"

    @property
    def stats(self) -> dict:
        """What this rank's collectives cost so far: ``calls``, ``bytes`` (of the
        results) and ``seconds`` (wall time inside them, waiting included).

        Example: ``comm.stats["seconds"] / steps``: communication a step
        """
        if "_stats" not in self.__dict__:
            self._stats = {"calls": 0, "bytes": 0, "seconds": 0.0}
        return self._stats

    def _timed(self, mover, *args) -> None:
        started = time.perf_counter()
        mover(*args)
        stats = self.stats
        stats["calls"] += 1
        stats["bytes"] += args[1].nbytes
        stats["seconds"] += time.perf_counter() - started

    # -- the collectives of the graph's nodes ---------------------------------------
    def all_reduce(self, send, recv, reduction: str = "sum") -> None:
        """``recv`` = the ``reduction`` ("sum", "mean", "max", "min") of every rank's
        ``send`` (``recv`` may be ``send``: in place).

        Example: ``comm.all_reduce(grad, grad, "mean")``
        """
        self._same_layout("all_reduce", send, recv, send.shape)
        self._timed(self._all_reduce, send, recv, reduction)
        if reduction == "mean" and self.size > 1:
            recv /= self.size

    def broadcast(self, send, recv, root: int = 0) -> None:
        """``recv`` = rank ``root``'s ``send`` on every rank.

        Example: ``comm.broadcast(weights, weights, root=0)``
        """
        self._same_layout("broadcast", send, recv, send.shape)
        self._timed(self._broadcast, send, recv, root)

    def all_gather(self, send, recv) -> None:
        """``recv`` = every rank's ``send`` stacked along axis 0, in rank order.

        Example: ``comm.all_gather(local, gathered)`` with ``gathered`` of
        ``(size * len(local),) + local.shape[1:]``
        """
        expected = (send.shape[0] * self.size,) + tuple(send.shape[1:])
        self._same_layout("all_gather", send, recv, expected)
        self._timed(self._all_gather, send, recv)

    # -- set-up helpers on the host -------------------------------------------------
    def broadcast_arrays(self, arrays: dict, root: int = 0) -> dict:
        """Rank ``root``'s arrays (name -> array, the same names and shapes on every
        rank) as new arrays on every rank.

        Example: ``params = comm.broadcast_arrays(model.init(seed))``
        """
        result = {}
        for name in sorted(arrays):
            value = np.array(arrays[name], copy=True, order="C")
            self.broadcast(value, value, root)
            result[name] = value
        return {name: result[name] for name in arrays}

    def agree(self, description: list, what: str) -> None:
        """Check that every rank gives the same ``description`` (lines of text, e.g.
        the graph's nodes); otherwise raise ``DistributedError`` naming the ranks and
        the first line where they differ.

        Example: ``comm.agree(["matmul (64, 10) float32", ...], "compile")``
        """
        if self.size == 1:
            return
        text = "\n".join(description).encode()
        digests = self._all_gather_bytes(hashlib.sha256(text).digest(), what)
        if len(set(digests)) == 1:
            return
        texts = [t.decode().split("\n") for t in self._all_gather_bytes(text, what)]
        mine = texts[self.rank]
        other = next(r for r, t in enumerate(texts) if t != mine)
        theirs = texts[other]
        line = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b),
                    min(len(mine), len(theirs)))
        show = (lambda lines: lines[line] if line < len(lines) else "(nothing: the graph "
                f"ends after {len(lines)} lines)")
        raise DistributedError(
            f"{what}: the ranks built different graphs ({self.name}, rank {self.rank} of "
            f"{self.size}); every rank must build the same operations on the same "
            f"shapes. First difference at line {line}: rank {self.rank} has "
            f"{show(mine)!r}, rank {other} has {show(theirs)!r}")

    # -- checks ---------------------------------------------------------------------
    def _same_layout(self, what, send, recv, expected) -> None:
        if tuple(recv.shape) != tuple(expected) or recv.dtype != send.dtype:
            raise DistributedError(f"{self.name} {what}: the result buffer has shape "
                                   f"{tuple(recv.shape)} and dtype {recv.dtype}; expected "
                                   f"{tuple(expected)} and {send.dtype}")

    # -- the byte movers a transport implements --------------------------------------
    def _all_reduce(self, send, recv, reduction) -> None:
        raise NotImplementedError

    def _broadcast(self, send, recv, root) -> None:
        raise NotImplementedError

    def _all_gather(self, send, recv) -> None:
        raise NotImplementedError

    def _all_gather_bytes(self, data: bytes, what: str) -> list:
        """Every rank's ``data`` (any lengths), in rank order."""
        raise NotImplementedError


class Local(Communicator):
    """The communicator of a single process: every collective copies its operand.

    Example: ``trainer = compile_training(model, SGD(0.1), shape, communicator=Local())``
    """

    name = "local"

    def __init__(self, timeout: float = DEFAULT_TIMEOUT):
        self.timeout = float(timeout)

    def _all_reduce(self, send, recv, reduction):
        if recv is not send:
            recv[...] = send

    def _broadcast(self, send, recv, root):
        if root != 0:
            raise DistributedError(f"local broadcast: root {root} is not a rank (one process)")
        if recv is not send:
            recv[...] = send

    def _all_gather(self, send, recv):
        recv[...] = send

    def _all_gather_bytes(self, data, what):
        return [data]
