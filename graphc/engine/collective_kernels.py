"""Kernels of the collective kinds: each calls its op's communicator (the
``communicator`` attribute: any object with ``all_reduce``, ``broadcast`` and
``all_gather`` methods, such as :mod:`graphc.distributed`'s), which moves the bytes
(MPI for host arrays, NCCL for CuPy arrays) and raises ``DistributedError`` when a
rank does not take part in time. The result may be the operand's own memory (the
planner decides): the communicators reduce in place then.

>>> import numpy as np
>>> from graphc.type.op import Op
>>> class One:
...     size, rank = 1, 0
...     def all_reduce(self, send, recv, reduction): recv[...] = send
>>> x, out = np.arange(3.0), np.empty(3)
>>> all_reduce(Op.make("all_reduce", communicator=One(), reduction="sum"), [x], out, None)()
>>> out
array([0., 1., 2.])
"""
from __future__ import annotations


def all_reduce(op, ins, out, ctx):
    communicator, reduction = op["communicator"], op["reduction"]

    def run():
        communicator.all_reduce(ins[0], out, reduction)
    return run


def broadcast(op, ins, out, ctx):
    communicator, root = op["communicator"], op["root"]

    def run():
        communicator.broadcast(ins[0], out, root)
    return run


def all_gather(op, ins, out, ctx):
    communicator = op["communicator"]

    def run():
        communicator.all_gather(ins[0], out)
    return run
