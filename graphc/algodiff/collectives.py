"""Gradient rules of the collective kinds, in SPMD terms: every rank runs the same
graph and the loss is the sum of the ranks' losses, so a value's gradient sums what
every rank's loss says about it.

- ``y = all_reduce(x, sum)``: ``gx = all_reduce(gy, sum)`` (``mean``: the mean);
- ``y = broadcast(x, root)``: the root's ``gx`` is ``all_reduce(gy, sum)``, the
  others' is 0;
- ``y = all_gather(x)``: ``gx`` is this rank's block of ``all_reduce(gy, sum)``.

``max``/``min`` reductions have no rule (the winner would need to be known).
The ordering parents (after the first) get none.

Example: ``N.grad(N.sum(all_reduce(x, comm) ** 2), x)`` is ``all_reduce(2 y, sum)``.
"""
from __future__ import annotations

from ..type.errors import GraphError


def _summed(ns, op, g, reduction="sum"):
    return ns._op("all_reduce", [g], communicator=op["communicator"], reduction=reduction)


def all_reduce_grad(ns, op, inputs, output, g, needs=None):
    reduction = op["reduction"]
    if reduction not in ("sum", "mean"):
        raise GraphError(f"grad: all_reduce by {reduction!r} has no gradient rule; "
                         "differentiate through a 'sum' or 'mean' reduction")
    return [_summed(ns, op, g, reduction)] + [None] * (len(inputs) - 1)


def broadcast_grad(ns, op, inputs, output, g, needs=None):
    communicator = op["communicator"]
    summed = _summed(ns, op, g)
    grad = summed if communicator.rank == op["root"] else ns.zeros_like(summed)
    return [grad] + [None] * (len(inputs) - 1)


def all_gather_grad(ns, op, inputs, output, g, needs=None):
    n, rank = inputs[0].shape[0], op["communicator"].rank
    block = ns.getitem(_summed(ns, op, g), slice(rank * n, (rank + 1) * n))
    return [block] + [None] * (len(inputs) - 1)
