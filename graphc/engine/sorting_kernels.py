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
