"""Shape and dtype rules of the box-coding kinds (:mod:`graphc.ops.boxes`): ``box_decode``
and ``box_encode``.

Both take two arrays of boxes or deltas whose last axis has 4 entries; their leading axes
broadcast as NumPy's do (``(R, K, 4)`` against ``(R, 1, 4)``, ``(4,)`` against
``(N, 4)``), and the result has the broadcast leading axes, then 4, in the operands'
common floating-point dtype (``np.result_type``). The operator layer normalises the
attributes first; the rules check them again because a graph may come from a file.

>>> import numpy as np
>>> from graphc.type import Op
>>> class A:
...     def __init__(self, shape, dtype="float32"): self.shape, self.dtype = shape, np.dtype(dtype)
>>> op = Op.make("box_decode", weights=(10.0, 10.0, 5.0, 5.0), clip=4.0)
>>> box_decode_rule(op, [A((100, 81, 4)), A((100, 1, 4), "float64")])
((100, 81, 4), dtype('float64'))
"""
from __future__ import annotations

import math

import numpy as np

from ..type.errors import DTypeError, ShapeError
from .broadcast import broadcast_shapes

#: what the weights must be, said in every error about them
WEIGHTS_EXPECTED = "4 positive finite numbers (wx, wy, ww, wh)"


def check_weights(opname: str, weights) -> tuple:
    """``weights`` as stored: a tuple of 4 positive finite Python floats."""
    if not (isinstance(weights, tuple) and len(weights) == 4
            and all(isinstance(w, float) and math.isfinite(w) and w > 0 for w in weights)):
        raise ShapeError(f"{opname}: weights must be {WEIGHTS_EXPECTED}, got {weights!r}")
    return weights


def check_clip(opname: str, clip) -> float:
    """``clip`` as stored: a Python float, not NaN (``inf`` clips nothing)."""
    if not isinstance(clip, float) or math.isnan(clip):
        raise ShapeError(f"{opname}: clip must be a number (not NaN), got {clip!r}")
    return clip


def box_operands(opname: str, names: tuple, first, second) -> tuple:
    """The result's ``(shape, dtype)`` for two ``(..., 4)`` floating-point operands
    called ``names`` in errors; the leading axes broadcast."""
    for what, x in zip(names, (first, second)):
        shape = tuple(x.shape)
        if not shape or shape[-1] != 4:
            raise ShapeError(f"{opname}: {what} must have shape (..., 4), four numbers per "
                             f"box on the last axis, got shape {shape}")
        if x.dtype.kind != "f":
            raise DTypeError(f"{opname}: {what} must be floating-point, got {x.dtype}")
    a, b = tuple(first.shape), tuple(second.shape)
    try:
        lead = broadcast_shapes(opname, a[:-1], b[:-1])
    except ShapeError:
        raise ShapeError(f"{opname}: the leading axes of {names[0]} {a} and {names[1]} {b} "
                         f"must broadcast together (NumPy's rules, the last axis of 4 "
                         f"apart), and {a[:-1]} and {b[:-1]} do not") from None
    return lead + (4,), np.result_type(first.dtype, second.dtype)


def box_decode_rule(op, parents):
    """``(deltas, boxes)``: the broadcast shape, the common float dtype."""
    check_weights("box_decode", op["weights"])
    check_clip("box_decode", op["clip"])
    return box_operands("box_decode", ("deltas", "boxes"), *parents)


def box_encode_rule(op, parents):
    """``(boxes, reference)``: the broadcast shape, the common float dtype."""
    check_weights("box_encode", op["weights"])
    return box_operands("box_encode", ("boxes", "reference"), *parents)
