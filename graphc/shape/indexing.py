"""NumPy indexing on shapes: a user's key becomes a hashable, fully resolved
encoding, and the result shape follows NumPy's basic and advanced rules.

Encoded entries: ``("i", k)`` an integer, ``("s", start, stop, step)`` a slice
resolved against its axis, ``("n",)`` a new axis, ``("a", j)`` the ``j``-th
index array (parent ``j`` of the op, counting the indexed array as parent 0).

>>> encode_key("slice", (slice(None, None, -1), None), (4, 3), [])[1]
(4, 1, 3)
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

from ..type.errors import IndexOutOfRange, ShapeError
from .broadcast import broadcast_shapes


@dataclass(frozen=True)
class ArrayIndex:
    """Placeholder for an index array inside a key: parent ``position``, its shape."""

    position: int
    shape: tuple[int, ...]


def _expand_ellipsis(opname: str, key: tuple, ndim: int) -> tuple:
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > ndim:
        raise IndexOutOfRange(f"{opname}: too many indices for array: array is "
                              f"{ndim}-dimensional, but {consumed} were indexed")
    ellipses = [i for i, k in enumerate(key) if k is Ellipsis]
    if len(ellipses) > 1:
        raise ShapeError(f"{opname}: an index can only have a single ellipsis ('...')")
    fill = (slice(None),) * (ndim - consumed)
    if ellipses:
        i = ellipses[0]
        return key[:i] + fill + key[i + 1:]
    return key + fill


def encode_key(opname: str, key, shape: tuple[int, ...], array_shapes) -> tuple[tuple, tuple]:
    """Resolve ``key`` against ``shape``; returns ``(encoded, result_shape)``.

    ``key`` holds ints, slices, ``None``, ``Ellipsis`` and :class:`ArrayIndex`
    placeholders; ``array_shapes`` is unused beyond the placeholders' shapes.
    """
    if not isinstance(key, tuple):
        key = (key,)
    key = _expand_ellipsis(opname, key, len(shape))
    encoded, axis = [], 0
    for k in key:
        if k is None:
            encoded.append(("n",))
            continue
        dim = shape[axis]
        if isinstance(k, slice):
            start, stop, step = k.indices(dim)
            encoded.append(("s", start, stop, step))
        elif isinstance(k, ArrayIndex):
            encoded.append(("a", k.position))
        else:
            try:
                i = operator.index(k)
            except TypeError:
                raise ShapeError(f"{opname}: only integers, slices, None, Ellipsis and "
                                 f"integer arrays are valid indices, got {k!r}") from None
            if not -dim <= i < dim:
                raise IndexOutOfRange(f"{opname}: index {i} is out of bounds for axis "
                                      f"{axis} with size {dim}")
            encoded.append(("i", i % dim))
        axis += 1
    encoded_key = tuple(encoded)
    shapes = {k.position: k.shape for k in key if isinstance(k, ArrayIndex)}
    return encoded_key, key_result_shape(opname, encoded_key, shape, shapes)


def slice_length(start: int, stop: int, step: int) -> int:
    return len(range(start, stop, step))


def key_result_shape(opname: str, encoded: tuple, shape: tuple[int, ...],
                     array_shapes: dict[int, tuple[int, ...]]) -> tuple[int, ...]:
    """The shape NumPy gives ``x[key]`` for an encoded key."""
    advanced = [i for i, e in enumerate(encoded) if e[0] == "a"]
    if advanced:
        # With index arrays present, integers act as 0-d index arrays (NumPy's rule).
        advanced = [i for i, e in enumerate(encoded) if e[0] in "ai"]
        index_shapes = [array_shapes[e[1]] if e[0] == "a" else ()
                        for e in (encoded[i] for i in advanced)]
        try:
            bshape = broadcast_shapes(opname, *index_shapes)
        except ShapeError:  # an IndexError in NumPy, so IndexOutOfRange (both) here
            listed = " ".join(str(tuple(s)) for s in index_shapes)
            raise IndexOutOfRange(f"{opname}: shape mismatch: indexing arrays could not be "
                                  f"broadcast together with shapes {listed} (array shape "
                                  f"{shape})") from None
        adjacent = advanced == list(range(advanced[0], advanced[-1] + 1))
    result, placed = [], False
    for i, e in enumerate(encoded):
        if advanced and i in advanced:
            if not placed and adjacent:
                result.extend(bshape)
            placed = True
        elif e[0] == "s":
            result.append(slice_length(*e[1:]))
        elif e[0] == "n":
            result.append(1)
    if advanced and not adjacent:
        result = list(bshape) + result
    return tuple(result)


def decode_basic(encoded: tuple) -> tuple:
    """An encoded key without index arrays as a Python key (for ``ndarray.__getitem__``)."""
    out = []
    for e in encoded:
        if e[0] == "i":
            out.append(e[1])
        elif e[0] == "n":
            out.append(None)
        else:
            start, stop, step = e[1:]
            if slice_length(start, stop, step) == 0:
                out.append(slice(0, 0, 1))
            else:  # a negative stop after slice.indices means "past the start": None
                out.append(slice(start, stop if stop >= 0 else None, step))
    return tuple(out)


def decode_with_arrays(encoded: tuple, arrays: dict[int, object]) -> tuple:
    """An encoded key with index arrays substituted from ``arrays`` (position -> array)."""
    basic = decode_basic(tuple(("n",) if e[0] == "a" else e for e in encoded))
    return tuple(arrays[e[1]] if e[0] == "a" else b for e, b in zip(encoded, basic))
