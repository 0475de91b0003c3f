"""Making replacement nodes inside rules: same class and source line as the
node they replace, shape and dtype from the shape layer.

>>> import graphc.ndarray as N
>>> from graphc.type import Op
>>> x = N.var("x", (2, 3))
>>> make(x, Op.make("transpose", axes=(1, 0)), [x]).shape
(3, 2)
"""
from __future__ import annotations

import numpy as np

from ..shape.rules import infer
from ..symbol.constants import const_op, immutable
from ..type.op import Op


def make(like, op: Op, parents):
    """A new node of ``like``'s class for ``op`` on ``parents``."""
    parents = tuple(parents)
    shape, dtype = infer(op, parents)
    return type(like)(op, parents, shape, dtype, where=like._where)


def constant_like(like, array: np.ndarray):
    """A constant node of ``like``'s class holding ``array``: the array itself when
    its contents can no longer change (a view of another constant's value costs no
    copy), else a read-only copy.

    >>> import graphc.ndarray as N
    >>> weights = N.const(np.ones((2, 3), np.float32))
    >>> view = weights.value.reshape(6)
    >>> c = constant_like(weights, view)
    >>> c.op.kind, c.shape, c.value is view
    ('const', (6,), True)
    """
    array = np.asarray(array)
    if not immutable(array):
        array = np.array(array, copy=True)
        array.flags.writeable = False
    return type(like).leaf(const_op(array), value=array)


def make_const(like, array: np.ndarray):
    """A constant node holding a read-only copy of ``array`` (a folded result, say).

    >>> import graphc.ndarray as N
    >>> make_const(N.var("x", (2,)), np.zeros(2)).value.flags.writeable
    False
    """
    array = np.array(array, copy=True)
    array.flags.writeable = False
    return constant_like(like, array)


def make_fill(like, value):
    """A node filled with ``value``, with ``like``'s shape and dtype."""
    return make(like, Op.make("fill", shape=like.shape, dtype=like.dtype,
                              value=np.asarray(value).astype(like.dtype).item()), [])
