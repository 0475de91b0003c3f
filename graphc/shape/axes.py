"""Axis and reshape arguments in NumPy's forms, normalised to plain tuples.

>>> normalize_axes("sum", -1, 3)
(2,)
>>> resolve_reshape("reshape", (2, -1), 12, (3, 4))
(2, 6)
"""
from __future__ import annotations

import operator
from typing import Optional, Sequence, Union

from ..type.errors import ShapeError

AxisArg = Union[None, int, Sequence[int]]


def normalize_axis(opname: str, axis: int, ndim: int) -> int:
    """One axis in ``[-ndim, ndim)`` as a non-negative int."""
    try:
        axis = operator.index(axis)
    except TypeError:
        raise ShapeError(f"{opname}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{opname}: axis {axis} is out of bounds for an array of "
                         f"dimension {ndim} (expected -{ndim} <= axis < {ndim})")
    return axis % ndim if ndim else 0


def normalize_axes(opname: str, axis: AxisArg, ndim: int) -> Optional[tuple[int, ...]]:
    """``None`` stays ``None`` (all axes); an int or sequence becomes a sorted tuple."""
    if axis is None:
        return None
    axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    result = tuple(normalize_axis(opname, a, ndim) for a in axes)
    if len(set(result)) != len(result):
        raise ShapeError(f"{opname}: repeated axis in {axis!r}")
    return tuple(sorted(result))


def as_shape(opname: str, shape) -> tuple[int, ...]:
    """An int or a sequence of ints as a shape tuple; negative sizes are refused."""
    # an integer; a 1-D NumPy array has __index__ too, but is a sequence of them
    if isinstance(shape, (int,)) or (hasattr(shape, "__index__")
                                     and getattr(shape, "ndim", 0) == 0):
        shape = (shape,)
    try:
        result = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise ShapeError(f"{opname}: shape must be a sequence of integers, got {shape!r}") from None
    if any(d < 0 for d in result):
        raise ShapeError(f"{opname}: negative dimension in shape {result}")
    return result


def resolve_reshape(opname: str, newshape, size: int, oldshape: tuple[int, ...]) -> tuple[int, ...]:
    """``newshape`` with its one allowed ``-1`` filled in so the sizes agree."""
    if isinstance(newshape, int) or (hasattr(newshape, "__index__")
                                     and getattr(newshape, "ndim", 0) == 0):
        newshape = (newshape,)
    dims = [operator.index(d) for d in newshape]
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1 or any(d < -1 for d in dims):
        raise ShapeError(f"{opname}: can only specify one unknown dimension (-1), got {tuple(dims)}")
    known = 1
    for d in dims:
        if d != -1:
            known *= d
    if unknown:
        if known == 0 or size % known:
            raise ShapeError(f"{opname}: cannot reshape array of shape {oldshape} "
                             f"(size {size}) into shape {tuple(dims)}")
        dims[unknown[0]] = size // known
    elif known != size:
        raise ShapeError(f"{opname}: cannot reshape array of shape {oldshape} "
                         f"(size {size}) into shape {tuple(dims)}")
    return tuple(dims)
