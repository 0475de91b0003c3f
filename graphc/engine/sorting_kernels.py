"""CPU kernels of the sorting, searching, cumulative and counting kinds
(:mod:`graphc.ops.sorting`), as NumPy calls writing into the planned output.

>>> import numpy as np
>>> from graphc.type import Op
>>> out = np.empty(3)
>>> sort(Op.make("sort", axis=0, stable=False), [np.array([2.0, 0.0, 1.0])], out, None)()
>>> out
array([0., 1., 2.])
"""
from __future__ import annotations

from functools import partial

import numpy as np


def _kind(op):
    """NumPy's ``kind=`` for a sort: a stable one where the op asks for it."""
    return "stable" if op["stable"] else None


def sort(op, ins, out, ctx):
    """Copy, then sort in place (``out`` may be the input's own memory)."""
    x, axis, kind = ins[0], op["axis"], _kind(op)

    def sort():
        np.copyto(out, x)
        out.sort(axis=axis, kind=kind)
    return sort


def argsort(op, ins, out, ctx):
    x, axis, kind = ins[0], op["axis"], _kind(op)

    def argsort():
        np.copyto(out, np.argsort(x, axis=axis, kind=kind))
    return argsort


def cumulative(op, ins, out, ctx):
    """``numpy.cumsum``/``numpy.cumprod`` along ``axis``, in the output's dtype."""
    function = np.cumsum if op.kind == "cumsum" else np.cumprod
    return partial(function, ins[0], op["axis"], out.dtype, out)


def searchsorted(op, ins, out, ctx):
    a, v, side = ins[0], ins[1], op["side"]

    def searchsorted():
        np.copyto(out, np.searchsorted(a, v, side=side))
    return searchsorted


def take_along_axis(op, ins, out, ctx):
    x, indices, axis = ins[0], ins[1], op["axis"]

    def take_along_axis():
        # NumPy broadcasts the other axes; indices out of range raise IndexError
        np.copyto(out, np.take_along_axis(x, indices, axis))
    return take_along_axis


def bincount(op, ins, out, ctx):
    """Counts (or sums of ``weights``) of each value in ``[0, length)``; values
    outside are dropped (as JAX's ``bincount(..., length=)``)."""
    x, weights, length = ins[0], (ins[1] if len(ins) > 1 else None), op["length"]

    def bincount():
        inside = (x >= 0) & (x < length)
        kept = x[inside]
        counted = np.bincount(kept, None if weights is None else weights[inside],
                              minlength=length)
        np.copyto(out, counted[:length], casting="unsafe")
    return bincount


def ranked(row: np.ndarray, largest: bool) -> np.ndarray:
    """The indices of a 1-D ``row`` best first: by value, descending where ``largest``
    (NaN first, as NumPy's sort ranks it above everything), ascending otherwise (NaN
    last); equal values in index order.

    >>> ranked(np.array([1.0, 3.0, np.nan, 3.0]), largest=True).tolist()
    [2, 1, 3, 0]
    """
    if not largest:
        return np.argsort(row, kind="stable")
    # a stable ascending sort of the reversed row, read backwards: descending, and
    # equal values (met in reversed index order) come out in index order
    n = row.shape[-1]
    return n - 1 - np.argsort(row[..., ::-1], axis=-1, kind="stable")[..., ::-1]


def _candidates(row: np.ndarray, k: int, largest: bool):
    """Indices (ascending) of a superset of ``row``'s ``k`` best that is all of the
    values better than the k-th best and every value equal to it, or ``None`` where
    the k-th best is NaN (then the whole row is ranked)."""
    n = row.shape[0]
    kth = np.partition(row, n - k if largest else k - 1)[n - k if largest else k - 1]
    if kth != kth:
        return None
    # NaN ranks above every number: kept among the largest, left out of the smallest
    return np.flatnonzero(~(row < kth) if largest else row <= kth)


#: a row at least this many times longer than k is first narrowed by a partition (O(n))
#: to the values that can be among the k best
_PARTITION_RATIO = 8


def _top_k_row(row: np.ndarray, k: int, largest: bool, out: np.ndarray) -> None:
    chosen = None
    if k and row.shape[0] >= _PARTITION_RATIO * k:
        chosen = _candidates(row, k, largest)
    if chosen is None:
        out[...] = ranked(row, largest)[:k]
    else:
        out[...] = chosen[ranked(row[chosen], largest)[:k]]


def top_k(op, ins, out, ctx):
    """The indices of the ``k`` best values along ``axis`` (see :func:`ranked`), best
    first: one row at a time where a partition can narrow long rows, else one sort."""
    x, k, axis, largest = ins[0], op["k"], op["axis"], op["largest"]
    n = x.shape[axis]

    def top_k():
        rows, into = np.moveaxis(x, axis, -1), np.moveaxis(out, axis, -1)
        if k and n >= _PARTITION_RATIO * k and rows.size // max(n, 1) <= 64:
            for at in np.ndindex(rows.shape[:-1]):
                _top_k_row(rows[at], k, largest, into[at])
        else:
            np.copyto(into, ranked(rows, largest)[..., :k])
    return top_k
