"""Gradient rules of the shape ops (given to their kinds by :mod:`graphc.ops`):
reshapes and permutations, joins, basic slices, advanced indexing (``gather``,
``take``), ``pad``, ``tile``, ``repeat``, ``flip``.

A basic slice's gradient is the gradient placed back where the slice came
from, built from ``flip``, ``pad`` and reshapes (no scatter). Advanced
indexing scatters with a one-hot matrix: ``dx = one_hot(positions)^T g``, so
repeated indices accumulate; it costs ``O(indices x indexed size)``, which a
dedicated scatter-add kind would bring down to ``O(indices)``.

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


def _scatter_rows(ns, positions, g, depth):
    """``dx[p] = sum of g where positions == p`` for a flat ``dx`` of ``depth``."""
    hot = ns.one_hot(ns.ravel(positions), depth, g.dtype)
    return ns.matmul(ns.ravel(g), hot)


def gather_grad(ns, op, inputs, output, g, needs=None):
    """The flat position each result element was read from is the same key
    applied to ``arange(x.size)``; the gradient is scattered to those positions."""
    x, indices = inputs[0], inputs[1:]
    flat = ns.reshape(ns.arange(math.prod(x.shape), dtype=np.int64), x.shape)
    positions = ns._op("gather", [flat] + list(indices), key=op["key"])
    return [ns.reshape(_scatter_rows(ns, positions, g, math.prod(x.shape)), x.shape)] + \
        [None] * len(indices)


def take_grad(ns, op, inputs, output, g, needs=None):
    x, indices = inputs
    axis = op["axis"]
    n = x.shape[axis]
    indices = ns.ravel(ns.where(ns.less(indices, 0), ns.add(indices, n), indices))
    hot = ns.one_hot(indices, n, g.dtype)
    before, after = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1:])
    g3 = ns.reshape(g, (before, math.prod(indices.shape), after))
    return [ns.reshape(ns.einsum("piq,in->pnq", g3, hot), x.shape), None]


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
