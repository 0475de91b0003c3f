"""The collective kinds of data-parallel training (SINGA's communication ops, as
graph nodes): ``all_reduce``, ``broadcast`` and ``all_gather``. One definition each.

Each op carries its ``communicator`` (:mod:`graphc.distributed`) as an attribute. They
are ``stateful`` (never folded, merged or skipped by an incremental run: every rank
must take part in every collective of every run) and ``fallible`` (a rank that dies
or never joins raises ``DistributedError`` after the communicator's timeout, before
any variable is written). Parents after the first only fix the order in which the
ranks issue their collectives. Built by :func:`graphc.distributed.all_reduce` and
friends; not exported to ONNX, not saved.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["all_reduce"].overwrites, DEFINITIONS["all_gather"].fallible
((0,), True)
"""
from __future__ import annotations

from ..algodiff import collectives as grads
from ..algodiff.rules import DIRECT
from ..engine import collective_kernels as kernels
from ..shape import collective_rules as shapes
from .definition import OpDef, Refused, define

_NO_ONNX = Refused("a collective of distributed training: ONNX graphs run on one device")


def collective(name, *, overwrites, grad) -> OpDef:
    """A collective kind: its shape rule, kernel and gradient named after it.

    Example: ``collective("broadcast", overwrites=(0,), grad=grads.broadcast_grad)``
    """
    return OpDef(name, "collective", None, None, overwrites=overwrites, stateful=True,
                 fallible=True, shape=getattr(shapes, name), kernel=getattr(kernels, name),
                 grad=grad, complex_grad=DIRECT, onnx=_NO_ONNX)


define(
    # MPI and NCCL reduce in place (MPI_IN_PLACE), so the result may take x's memory
    collective("all_reduce", overwrites=(0,), grad=grads.all_reduce_grad),
    collective("broadcast", overwrites=(0,), grad=grads.broadcast_grad),
    collective("all_gather", overwrites=(), grad=grads.all_gather_grad),
)
