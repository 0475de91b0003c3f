"""Shape and dtype rules of the sorting, searching, cumulative and counting kinds
(:mod:`graphc.ops.sorting`). The operator layer normalises the attributes first
(axes non-negative, lengths non-negative ints).

>>> import numpy as np
>>> from graphc.type import Op
>>> class A:
...     def __init__(self, shape, dtype): self.shape, self.dtype = shape, np.dtype(dtype)
>>> cumulative(Op.make("cumsum", axis=0), [A((3,), "int32")])
((3,), dtype('int64'))
"""
from __future__ import annotations

import numpy as np

from ..type.errors import DTypeError, ShapeError
from .broadcast import broadcast_shapes
from .dtypes import probe_dtype

_INTP = np.dtype(np.intp)


def _check_axis(opname, axis, shape):
    if not 0 <= axis < max(len(shape), 1) or not shape:
        raise ShapeError(f"{opname}: axis {axis} is out of bounds for an array of shape "
                         f"{shape} (expected at least one dimension)")


def sort(op, parents):
    (x,) = parents
    _check_axis(op.kind, op["axis"], x.shape)
    return x.shape, x.dtype


def argsort(op, parents):
    (x,) = parents
    _check_axis(op.kind, op["axis"], x.shape)
    return x.shape, _INTP


def cumulative(op, parents):
    """The input's shape; NumPy's dtype (small integers and bools widen to intp)."""
    (x,) = parents
    _check_axis(op.kind, op["axis"], x.shape)
    return x.shape, probe_dtype(op.kind, (x.dtype,))


def searchsorted(op, parents):
    a, v = parents
    if len(a.shape) != 1:
        raise ShapeError(f"searchsorted: the sorted array must be one-dimensional, got shape "
                         f"{a.shape}")
    if op["side"] not in ("left", "right"):
        raise ShapeError(f"searchsorted: side must be 'left' or 'right', got {op['side']!r}")
    try:
        np.result_type(a.dtype, v.dtype)
    except TypeError:
        raise DTypeError(f"searchsorted: cannot compare {v.dtype} values with a sorted array "
                         f"of {a.dtype}") from None
    return v.shape, _INTP


def take_along_axis(op, parents):
    """NumPy's: ``indices`` has ``x``'s rank; the other axes broadcast."""
    x, indices = parents
    axis = op["axis"]
    if indices.dtype.kind not in "iu":
        raise DTypeError(f"take_along_axis: indices must be integers, got {indices.dtype}")
    if len(indices.shape) != len(x.shape):
        raise ShapeError(f"take_along_axis: indices of shape {indices.shape} must have as many "
                         f"dimensions as the array of shape {x.shape}")
    _check_axis("take_along_axis", axis, x.shape)
    others = [(d, i) for k, (d, i) in enumerate(zip(x.shape, indices.shape)) if k != axis]
    try:
        rest = broadcast_shapes("take_along_axis", (tuple(d for d, _ in others)),
                                tuple(i for _, i in others))
    except ShapeError:
        raise ShapeError(f"take_along_axis: shapes {x.shape} and {indices.shape} do not "
                         f"broadcast along the axes other than {axis}") from None
    shape = rest[:axis] + (indices.shape[axis],) + rest[axis:]
    if x.shape[axis] == 0 and indices.shape[axis] and 0 not in shape:
        raise ShapeError(f"take_along_axis: cannot take from an empty axis {axis} of shape "
                         f"{x.shape}")
    return shape, x.dtype


def bincount(op, parents):
    x = parents[0]
    if x.dtype.kind not in "iub" or len(x.shape) != 1:
        raise DTypeError(f"bincount: expected a one-dimensional array of non-negative "
                         f"integers, got {x.dtype} of shape {x.shape}")
    if len(parents) == 1:
        return (op["length"],), _INTP
    weights = parents[1]
    if weights.shape != x.shape:
        raise ShapeError(f"bincount: weights of shape {weights.shape} must have the shape "
                         f"{x.shape} of the values counted")
    if weights.dtype.kind not in "biuf":
        raise DTypeError(f"bincount: weights must be real numbers, got {weights.dtype}")
    return (op["length"],), np.dtype(np.float64)


def top_k(op, parents):
    """The input's shape with ``k`` along the axis; intp indices (real values only:
    complex numbers have no order a top-k could follow). Example: k=2 along axis 0
    of a (5, 3) input gives intp indices of shape (2, 3)."""
    (x,) = parents
    _check_axis("top_k", op["axis"], x.shape)
    if x.dtype.kind == "c":
        raise DTypeError(f"top_k: the values must be real to be ranked, got {x.dtype} of "
                         f"shape {x.shape}")
    n, k = x.shape[op["axis"]], op["k"]
    if not 0 <= k <= n:
        raise ShapeError(f"top_k: k={k} must be in [0, {n}], the length of axis {op['axis']} "
                         f"of the input of shape {x.shape}")
    shape = list(x.shape)
    shape[op["axis"]] = k
    return tuple(shape), _INTP
