"""Shape rules of the collective kinds (``all_reduce``, ``broadcast``, ``all_gather``):
every rank holds a value of the same shape and dtype; ``all_gather`` stacks the ranks'
values along axis 0. Parents after the first only order the collectives (every rank
must issue them in the same order) and are not read.

>>> import numpy as np
>>> from types import SimpleNamespace as V
>>> from graphc.type.op import Op
>>> comm = V(size=2, rank=0)
>>> all_gather(Op.make("all_gather", communicator=comm), [V(shape=(3, 4), dtype=np.float32)])
((6, 4), dtype('float32'))
"""
from __future__ import annotations

import numpy as np

from ..type.errors import DTypeError, ShapeError

#: the reductions an all-reduce may apply
REDUCTIONS = ("sum", "mean", "max", "min")


def _checked(op, parents):
    x = parents[0]
    dtype = np.dtype(x.dtype)
    if dtype.kind not in "fciub":
        raise DTypeError(f"{op.kind}: cannot exchange values of dtype {dtype}")
    return tuple(x.shape), dtype


def all_reduce(op, parents):
    """The reduction over the ranks of same-shaped values: the operand's shape."""
    shape, dtype = _checked(op, parents)
    reduction = op["reduction"]
    if reduction not in REDUCTIONS:
        raise ShapeError(f"all_reduce: reduction must be one of {list(REDUCTIONS)}, got "
                         f"{reduction!r}")
    if reduction == "mean" and dtype.kind not in "fc":
        raise DTypeError(f"all_reduce: a mean of {dtype} values would not be {dtype}; "
                         "cast to a float first, or reduce by 'sum'")
    if dtype.kind == "b" and reduction != "max" and reduction != "min":
        raise DTypeError(f"all_reduce: booleans reduce by 'max' (any) or 'min' (all), "
                         f"not {reduction!r}")
    return shape, dtype


def broadcast(op, parents):
    """Rank ``root``'s value on every rank: the operand's shape."""
    shape, dtype = _checked(op, parents)
    size, root = op["communicator"].size, op["root"]
    if not isinstance(root, int) or not 0 <= root < size:
        raise ShapeError(f"broadcast: root must be a rank in [0, {size}), got {root!r}")
    return shape, dtype


def all_gather(op, parents):
    """Every rank's value, stacked along axis 0 in rank order."""
    shape, dtype = _checked(op, parents)
    if not shape:
        raise ShapeError("all_gather: a scalar has no axis 0 to gather along; reshape it "
                         "to (1,) first")
    return (shape[0] * op["communicator"].size,) + shape[1:], dtype
