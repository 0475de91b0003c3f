"""NumPy broadcasting on shape tuples, with errors that name the operation.

>>> broadcast_shapes("add", (3, 1), (4,))
(3, 4)
"""
from __future__ import annotations

from ..type.errors import ShapeError


def broadcast_shapes(opname: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape NumPy broadcasting gives ``shapes``; ``ShapeError`` if they clash."""
    first = shapes[0]
    if all(s == first for s in shapes):  # the common case, and the fast one
        return first
    ndim = max(len(s) for s in shapes)
    result = [1] * ndim
    for s in shapes:
        offset = ndim - len(s)
        for i, d in enumerate(s):
            r = result[offset + i]
            if r == 1:
                result[offset + i] = d
            elif d != 1 and d != r:
                listed = " and ".join(str(tuple(x)) for x in shapes)
                raise ShapeError(f"{opname}: operands could not be broadcast together: "
                                 f"shapes {listed} differ in axis {offset + i - ndim} "
                                 f"({r} vs {d}) and neither is 1")
    return tuple(result)


def check_broadcast_to(opname: str, shape: tuple[int, ...], target: tuple[int, ...]) -> None:
    """Raise unless ``shape`` broadcasts to exactly ``target`` (one direction only)."""
    ok = len(shape) <= len(target) and all(
        d == 1 or d == t for d, t in zip(reversed(shape), reversed(target)))
    if not ok:
        raise ShapeError(f"{opname}: cannot broadcast shape {tuple(shape)} to {tuple(target)}")
