"""Gradient rules of the sorting, cumulative and counting kinds (given to their
kinds by :mod:`graphc.ops.sorting`).

A sort is a permutation of its input, so its gradient is the incoming gradient
sent back through that permutation (``argsort``, then a scatter). Scatters are
``bincount`` with weights over flat positions, so they cost ``O(size)``, not the
``O(size x indexed size)`` of a one-hot product; a ``take_along_axis`` and a
``bincount`` are each other's gradients.

>>> import numpy as np, graphc.eager as E
>>> from graphc.type import Op
>>> cumsum_grad(E._NS, Op.make("cumsum", axis=0), [np.zeros(3)], None, np.ones(3))
[array([3., 2., 1.])]
"""
from __future__ import annotations

import math

import numpy as np

from .common import fit


def _positions(shape, out_shape, axis):
    """The flat position in an array of ``shape`` of every element of a
    ``take_along_axis`` result of ``out_shape``, less the indexed axis's term
    (NumPy int64; axes of ``shape`` of size 1 were broadcast, so they give 0)."""
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    base = np.zeros([1 if d == axis else n for d, n in enumerate(out_shape)], np.int64)
    for d, n in enumerate(out_shape):
        if d != axis and shape[d] != 1:
            line = np.arange(n, dtype=np.int64) * strides[d]
            base = base + line.reshape([n if k == d else 1 for k in range(len(out_shape))])
    return base, strides[axis]


def scatter_along_axis(ns, indices, g, shape, axis):
    """The gradient of ``take_along_axis(x, indices, axis)`` (``x`` of ``shape``) for
    the incoming ``g``: each element of ``g`` added at the place it was taken from.

    Example: ``scatter_along_axis(ns, argsort(x), g, x.shape, axis)`` undoes a sort.
    """
    n = shape[axis]
    indices = ns.astype(indices, np.int64)
    indices = ns.where(ns.less(indices, 0), ns.add(indices, n), indices)
    base, stride = _positions(shape, g.shape, axis)
    flat = ns.add(ns.multiply(indices, stride), ns.const(base))
    flat = ns.broadcast_to(flat, g.shape)
    total = math.prod(shape)
    summed = ns._op("bincount", [ns.ravel(flat), ns.ravel(g)], length=total)
    return ns.astype(ns.reshape(summed, shape), g.dtype)


def sort_grad(ns, op, inputs, output, g, needs=None):
    (x,) = inputs
    order = ns._op("argsort", [x], axis=op["axis"], stable=True)
    return [fit(ns, scatter_along_axis(ns, order, g, x.shape, op["axis"]), x)]


def take_along_axis_grad(ns, op, inputs, output, g, needs=None):
    x, indices = inputs
    return [fit(ns, scatter_along_axis(ns, indices, g, x.shape, op["axis"]), x), None]


def bincount_grad(ns, op, inputs, output, g, needs=None):
    """The weights' gradient: the incoming gradient at each value's bin (0 for values
    outside ``[0, length)``, which were dropped)."""
    x, weights = inputs
    length = op["length"]
    if length == 0:
        return [None, ns.zeros_like(weights)]
    inside = ns.logical_and(ns.greater_equal(x, 0), ns.less(x, length))
    bins = ns.where(inside, x, 0)
    picked = ns._op("take_along_axis", [g, bins], axis=0)
    return [None, fit(ns, ns.where(inside, picked, 0.0), weights)]


def _reverse_cumsum(ns, g, axis):
    return ns.flip(ns._op("cumsum", [ns.flip(g, axis)], axis=axis), axis)


def cumsum_grad(ns, op, inputs, output, g, needs=None):
    (x,) = inputs
    return [fit(ns, _reverse_cumsum(ns, g, op["axis"]), x)]


def cumprod_grad(ns, op, inputs, output, g, needs=None):
    """Exact with zeros: before a line's first zero, ``sum_{j>=i} g_j y_j / x_i``;
    at the first zero, the same sum over the products taken with that zero read as
    one; after it, 0 (every product there holds the zero twice over)."""
    (x,) = inputs
    axis = op["axis"]
    is_zero = ns.equal(x, 0)
    zeros_so_far = ns._op("cumsum", [is_zero], axis=axis)
    before = ns.equal(zeros_so_far, 0)
    first_zero = ns.logical_and(is_zero, ns.equal(zeros_so_far, 1))
    ones = ns.where(first_zero, ns.ones_like(x), x)
    skipping = ns._op("cumprod", [ones], axis=axis)
    up_to_zero = _reverse_cumsum(ns, ns.multiply(g, ns.where(before, output, 0.0)), axis)
    at_zero = _reverse_cumsum(ns, ns.multiply(g, skipping), axis)
    safe_x = ns.where(before, x, ns.ones_like(x))
    grad = ns.where(before, ns.divide(up_to_zero, safe_x),
                    ns.where(first_zero, at_zero, 0.0))
    return [fit(ns, grad, x)]
