"""Gradient rules of the shape ops (given to their kinds by :mod:`graphc.ops`):
reshapes and permutations, joins, basic slices, advanced indexing (``gather``,
``take``), ``pad``, ``tile``, ``repeat``, ``flip``.

A basic slice's gradient is the gradient placed back where the slice came
from, built from ``flip``, ``pad`` and reshapes (no scatter). Advanced
indexing adds the gradient back at the cells it read with a ``scatter`` of mode
``add`` (``numpy.add.at``: repeated indices accumulate), in ``O(indices)``.

>>> import numpy as np, graphc.eager as E
>>> from graphc.type import Op
>>> flip_grad(E._NS, Op.make("flip", axis=(0,)), [np.zeros(3)], None,
...           np.array([1.0, 2.0, 3.0]))
[array([3., 2., 1.])]
"""
from __future__ import annotations

import math

import numpy as np

from ..shape.indexing import slice_length
from ..type.errors import GraphError
from .common import fit, unbroadcast, wants


def reshape_grad(ns, op, inputs, output, g, needs=None):
    return [ns.reshape(g, inputs[0].shape)]


def transpose_grad(ns, op, inputs, output, g, needs=None):
    return [ns.transpose(g, tuple(int(i) for i in np.argsort(op["axes"])))]


def broadcast_to_grad(ns, op, inputs, output, g, needs=None):
    return [unbroadcast(ns, g, inputs[0].shape)]


def concatenate_grad(ns, op, inputs, output, g, needs=None):
    axis, start, grads = op["axis"], 0, []
    for i, x in enumerate(inputs):
        stop = start + x.shape[axis]
        if wants(needs, i):
            part = ns.getitem(g, (slice(None),) * axis + (slice(start, stop),))
            grads.append(fit(ns, part, x))
        else:
            grads.append(None)
        start = stop
    return grads


def _spread(ns, g, axis, step):
    """``g`` with ``step - 1`` zeros between its elements along ``axis``."""
    length = g.shape[axis]
    g = ns.reshape(g, g.shape[:axis + 1] + (1,) + g.shape[axis + 1:])
    widths = [(0, 0)] * g.ndim
    widths[axis + 1] = (0, step - 1)
    g = ns.pad(g, widths)
    g = ns.reshape(g, g.shape[:axis] + (length * step,) + g.shape[axis + 2:])
    return ns.getitem(g, (slice(None),) * axis + (slice(0, (length - 1) * step + 1),))


def slice_grad(ns, op, inputs, output, g, needs=None):
    """Undo the key axis by axis: new axes dropped, integers re-inserted as size
    1, negative steps flipped, steps > 1 spread with zeros, then one ``pad``."""
    (x,) = inputs
    key = op["key"]
    if output.size == 0:
        return [ns.zeros(x.shape, g.dtype)]
    per_axis = [e for e in key if e[0] != "n"]
    sizes = [1 if e[0] == "i" else slice_length(*e[1:]) for e in per_axis]
    g = ns.reshape(g, tuple(sizes))
    flips, widths = [], []
    for axis, (e, dim) in enumerate(zip(per_axis, x.shape)):
        if e[0] == "i":
            widths.append((e[1], dim - e[1] - 1))
            continue
        start, _, step = e[1:]
        length = sizes[axis]
        if step < 0:
            flips.append(axis)
            start, step = start + (length - 1) * step, -step
        if step > 1 and length > 1:
            g = _spread(ns, g, axis, step)
        span = (length - 1) * step + 1
        widths.append((start, dim - start - span))
    if flips:
        g = ns.flip(g, tuple(flips))
    return [ns.pad(g, widths)]


def _shift_arrays(key, by):
    """``key`` with its index arrays counted ``by`` parents later."""
    return tuple(("a", e[1] + by) if e[0] == "a" else e for e in key)


def _added_at(ns, shape, key, arrays, g):
    """Zeros of ``shape`` with ``g`` added at ``key`` (repeated indices accumulate)."""
    zeros = ns.zeros(shape, g.dtype)
    return ns._op("scatter", [zeros, g] + list(arrays), key=key, mode="add")


def gather_grad(ns, op, inputs, output, g, needs=None):
    """``g`` added back at the cells the key read (``numpy.add.at``)."""
    x, indices = inputs[0], inputs[1:]
    return [_added_at(ns, x.shape, _shift_arrays(op["key"], 1), indices, g)] + \
        [None] * len(indices)


def take_grad(ns, op, inputs, output, g, needs=None):
    x, indices = inputs
    axis = op["axis"]
    key = tuple(("s", 0, d, 1) if k != axis else ("a", 2) for k, d in enumerate(x.shape))
    return [_added_at(ns, x.shape, key, [indices], g), None]


def _cells(ns, g, key, arrays):
    """``g[key]`` for a scatter's key (its index arrays are parents from 2)."""
    if not arrays:
        return ns._op("slice", [g], key=key)
    return ns._op("gather", [g] + list(arrays), key=_shift_arrays(key, -1))


def scatter_grad(ns, op, inputs, output, g, needs=None):
    """``set``: ``g`` with the written cells zeroed for ``x``, the cells for the values;
    ``add``/``subtract``: ``g`` for ``x``, (minus) the cells for the values;
    ``multiply``: ``g`` times the factors for ``x``, the cells times ``x``'s for the
    values (exact where no index repeats). Other modes have no rule yet."""
    x, values, arrays = inputs[0], inputs[1], list(inputs[2:])
    key, mode = op["key"], op["mode"]
    if mode == "set":
        zero = ns._constant(np.zeros((), g.dtype))
        dx = ns._op("scatter", [g, zero] + arrays, key=key, mode="set")
        dv = _cells(ns, g, key, arrays)
    elif mode in ("add", "subtract"):
        dx, dv = g, _cells(ns, g, key, arrays)
        dv = ns.negative(dv) if mode == "subtract" else dv
    elif mode == "multiply":
        dx = ns._op("scatter", [g, ns.astype(values, g.dtype)] + arrays, key=key, mode=mode)
        dv = ns.multiply(_cells(ns, g, key, arrays), _cells(ns, ns.astype(x, g.dtype), key,
                                                            arrays))
    else:
        raise GraphError(f"grad: the gradient of an update by {mode} (x.at[...].{mode}) is "
                         "not implemented; write it with N.where")
    return [fit(ns, dx, x) if wants(needs, 0) else None,
            fit(ns, dv, values) if wants(needs, 1) else None] + [None] * len(arrays)


def pad_grad(ns, op, inputs, output, g, needs=None):
    (x,) = inputs
    return [ns.getitem(g, tuple(slice(lo, lo + d)
                                for (lo, _), d in zip(op["pad_width"], x.shape)))]


def tile_grad(ns, op, inputs, output, g, needs=None):
    (x,) = inputs
    reps = op["reps"]
    g = ns.reshape(g, tuple(v for r, n in zip(reps, x.shape) for v in (r, n)))
    return [ns.reshape(ns.sum(g, axis=tuple(range(0, 2 * x.ndim, 2))), x.shape)]


def repeat_grad(ns, op, inputs, output, g, needs=None):
    (x,) = inputs
    axis = op["axis"]
    g = ns.reshape(g, x.shape[:axis] + (x.shape[axis], op["repeats"]) + x.shape[axis + 1:])
    return [ns.sum(g, axis=axis + 1)]


def flip_grad(ns, op, inputs, output, g, needs=None):
    return [ns.flip(g, op["axis"])]
