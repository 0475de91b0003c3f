"""Collectives as graph nodes, and SINGA's fused synchronisation of gradients.

:func:`all_reduce`, :func:`broadcast` and :func:`all_gather` build the collective
kinds (:mod:`graphc.ops.collectives`) in a namespace: graph nodes with
``graphc.ndarray`` (the default), arrays at once with ``graphc.eager``.
:func:`fused_all_reduce` packs many small gradients into buckets of about
``bucket_bytes`` (SINGA's ``fusedSynch``): each bucket is one all-reduce of the
gradients concatenated, which the dependency engine runs as soon as the bucket's
last gradient exists, while the backward pass goes on. Every collective after the
first takes the one before it as an (unread) parent, so every rank issues them in
the same order whatever the schedule.

>>> import numpy as np, graphc, graphc.ndarray as N
>>> from graphc.distributed import Local
>>> x = N.var("x", (3,))
>>> graphc.compile([x], all_reduce(x, Local(), "mean")).run(x=np.ones(3, np.float32))
array([1., 1., 1.], dtype=float32)
"""
from __future__ import annotations

import math

import numpy as np

from ..operator import NS
from ..symbol.node import Node

#: SINGA's default bucket of fused gradients is a few MiB: big enough that the
#: latency of one exchange is amortised, small enough to start early
DEFAULT_BUCKET_BYTES = 4 << 20


def _namespace(ns, values):
    """``ns``, or the namespace of ``values``: graph nodes build nodes, anything else
    (arrays, values traced by ``graphc.eager.grad``) computes at once."""
    if ns is not None:
        return ns
    if any(isinstance(v, Node) or hasattr(v, "__graphc_value__") for v in values):
        return NS
    from .. import eager
    return eager._NS


def _check(communicator, what):
    for attribute in ("all_reduce", "broadcast", "all_gather", "rank", "size"):
        if not hasattr(communicator, attribute):
            raise TypeError(f"{what}: communicator must be a graphc.distributed "
                            f"communicator (MPI(), NCCL(), Local()), got "
                            f"{type(communicator).__name__}")


def all_reduce(x, communicator, reduction: str = "sum", after=(), ns=None):
    """The ``reduction`` ("sum", "mean", "max", "min") of ``x`` over the ranks, on
    every rank. ``after``: collectives this one must follow (the order in which the
    ranks issue them).

    Example: ``total = all_reduce(local_count, comm, "sum")``
    """
    _check(communicator, "all_reduce")
    ns = _namespace(ns, [x])
    return ns._op("all_reduce", [ns._lift(x), *after], communicator=communicator,
                  reduction=reduction)


def broadcast(x, communicator, root: int = 0, after=(), ns=None):
    """Rank ``root``'s ``x`` on every rank.

    Example: ``w = broadcast(w0, comm, root=0)``
    """
    _check(communicator, "broadcast")
    ns = _namespace(ns, [x])
    return ns._op("broadcast", [ns._lift(x), *after], communicator=communicator, root=root)


def all_gather(x, communicator, after=(), ns=None):
    """Every rank's ``x`` stacked along axis 0, in rank order.

    Example: ``everyone = all_gather(local_scores, comm)``  (``size * n`` rows)
    """
    _check(communicator, "all_gather")
    ns = _namespace(ns, [x])
    return ns._op("all_gather", [ns._lift(x), *after], communicator=communicator)


def buckets(values, bucket_bytes: int) -> list:
    """``values`` split, in order, into runs of one dtype holding at most
    ``bucket_bytes`` (a larger value is a bucket of its own).

    >>> import numpy as np, types
    >>> v = [types.SimpleNamespace(nbytes=n, dtype=np.float32) for n in (3, 3, 5, 1)]
    >>> [len(b) for b in buckets(v, 6)]
    [2, 2]
    """
    groups, current, size = [], [], 0
    for value in values:
        fits = current and size + value.nbytes <= bucket_bytes and \
            current[0].dtype == value.dtype
        if current and not fits:
            groups.append(current)
            current, size = [], 0
        current.append(value)
        size += value.nbytes
    if current:
        groups.append(current)
    return groups


def fused_all_reduce(values, communicator, reduction: str = "mean",
                     bucket_bytes: int = DEFAULT_BUCKET_BYTES, after=(), ns=None) -> list:
    """``all_reduce`` of each of ``values``, fused into buckets of about
    ``bucket_bytes`` (give the values in the order they are computed: a backward
    pass's gradients last layer first). Returns the reduced values in the same order;
    the last one's node is last in the chain of collectives.

    Example: ``grads = fused_all_reduce(grads[::-1], comm)[::-1]``
    """
    _check(communicator, "fused_all_reduce")
    if not isinstance(bucket_bytes, int) or bucket_bytes < 1:
        raise ValueError(f"fused_all_reduce: bucket_bytes must be a positive int, got "
                         f"{bucket_bytes!r}")
    ns = _namespace(ns, values)
    values = [ns._lift(v) for v in values]
    reduced, previous = [], list(after)
    for bucket in buckets(values, bucket_bytes):
        if len(bucket) == 1:
            (value,) = bucket
            node = all_reduce(value, communicator, reduction, previous, ns)
            reduced.append(node)
        else:
            packed = ns.concatenate([ns.reshape(v, (-1,)) for v in bucket])
            node = all_reduce(packed, communicator, reduction, previous, ns)
            start = 0
            for value in bucket:
                count = math.prod(value.shape)
                reduced.append(ns.reshape(ns.getitem(node, slice(start, start + count)),
                                          value.shape))
                start += count
        previous = [node]
    return reduced


def shard(index: np.ndarray, communicator) -> np.ndarray:
    """This rank's equal share of ``index`` (the rows of a global batch): the
    ``rank``-th of ``size`` consecutive blocks.

    >>> from graphc.distributed import Local
    >>> shard(np.arange(6), Local())
    array([0, 1, 2, 3, 4, 5])
    """
    n = len(index) // communicator.size
    return index[communicator.rank * n:(communicator.rank + 1) * n]
