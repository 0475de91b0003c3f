"""Where a reshape of strided memory is still a view, as NumPy decides it: a reshape that
only splits a dimension, merges dimensions that step over each other exactly, or adds
and drops dimensions of one element, reads the same bytes with other strides.

MobileViT's and ViT's attention take the queries, keys and values as slices of one
product, then drop the leading axis of one element (``(1, 4, 4, 64, 20)`` ->
``(4, 4, 64, 20)``): NumPy makes no copy there, and a compiled graph makes none either
(:func:`graphc.engine.liveness.view_roots`).

>>> nocopy_strides((4, 1, 3), (48, 48, 16), (4, 3))
(48, 16)
>>> nocopy_strides((4, 3), (48, 16), (12,)) is None        # 48 != 3 * 16: not one run
False
>>> nocopy_strides((4, 3), (64, 16), (12,)) is None
True
"""
from __future__ import annotations

import math

import numpy as np


def nocopy_strides(shape, strides, new_shape):
    """The strides (in bytes, as ``strides``) of ``new_shape`` reading the elements of an
    array of ``shape`` and ``strides`` in C order without a copy, or ``None`` where a
    reshape must copy (NumPy's own test, ``_attempt_nocopy_reshape``).

    >>> nocopy_strides((2, 6), (4, 8), (2, 2, 3))         # a transposed (6, 2)
    (4, 24, 8)
    """
    shape, new_shape = tuple(shape), tuple(new_shape)
    if math.prod(shape) != math.prod(new_shape):
        return None
    if math.prod(shape) == 0:
        return _c_strides(new_shape, 1)
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    new = [n for n in new_shape if n != 1]
    found = [0] * len(new)
    oi = ni = 0
    while ni < len(new) and oi < len(old):
        oj, nj = oi + 1, ni + 1
        old_size, new_size = old[oi][0], new[ni]
        while old_size != new_size:        # the smallest groups of equal size
            if new_size < old_size:
                new_size *= new[nj]
                nj += 1
            else:
                old_size *= old[oj][0]
                oj += 1
        # the old group must be one run: each dimension steps over the next exactly
        if any(old[k][1] != old[k + 1][0] * old[k + 1][1] for k in range(oi, oj - 1)):
            return None
        stride = old[oj - 1][1]
        for k in range(nj - 1, ni - 1, -1):
            found[k] = stride
            stride *= new[k]
        oi, ni = oj, nj
    it = iter(found)
    last = strides[-1] if len(strides) else 0
    # a dimension of one element: any stride reads the same; NumPy's choice does not
    # matter to a reader, the one after it (or the last) is as good
    result = [next(it) if n != 1 else None for n in new_shape]
    for k in range(len(result) - 1, -1, -1):
        if result[k] is None:
            result[k] = result[k + 1] * new_shape[k + 1] if k + 1 < len(result) else last
    return tuple(result)


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def layout(node, views, view_of) -> tuple:
    """``(shape, strides)`` of ``node``'s value: C-contiguous where it is no view (a
    planned value) or a constant's own array's; else its root's layout taken through the
    chain of views (``view_of``: :data:`.program.VIEW_OF`, applied to an array with that
    layout over one element, which nothing reads)."""
    chain = []
    while id(node) in views:
        chain.append(node)
        node = node.parents[0]
    if node.op.kind == "const" and node.value is not None:
        strides = np.asarray(node.value).strides
    else:
        strides = _c_strides(node.shape, node.dtype.itemsize)
    fake = np.lib.stride_tricks.as_strided(np.zeros(1, node.dtype), shape=node.shape,
                                           strides=strides)
    for view in reversed(chain):
        fake = view_of[view.op.kind](view.op, fake, view)
    return fake.shape, fake.strides


def reshaped(array, shape):
    """``array`` reshaped to ``shape`` as a view: NumPy's reshape where ``array`` is
    contiguous, else the strides :func:`nocopy_strides` finds (``ValueError`` where
    none do: a copy would be needed).

    >>> x = np.arange(12.0).reshape(3, 4)[:, ::2]
    >>> y = reshaped(x[None], (3, 2)); np.shares_memory(y, x), bool((y == x).all())
    (True, True)
    """
    if array.flags.c_contiguous:
        return array.reshape(shape)
    strides = nocopy_strides(array.shape, array.strides, shape)
    if strides is None:
        raise ValueError(f"reshape: {array.shape} with strides {array.strides} to {shape} "
                         "needs a copy")
    return np.lib.stride_tricks.as_strided(array, shape=tuple(shape), strides=strides,
                                           writeable=array.flags.writeable)


__all__ = ["layout", "nocopy_strides", "reshaped"]
