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

from ..operator.lazy import _const_op
from ..shape.rules import infer
from ..type.op import Op


def make(like, op: Op, parents):
    """A new node of ``like``'s class for ``op`` on ``parents``."""
    parents = tuple(parents)
    shape, dtype = infer(op, parents)
    return type(like)(op, parents, shape, dtype, where=like._where)


def make_const(like, array: np.ndarray):
    """A constant node holding (a read-only copy of) ``array``."""
    array = np.array(array, copy=True)
    array.flags.writeable = False
    return type(like).leaf(_const_op(array), value=array)


def make_fill(like, value):
    """A node filled with ``value``, with ``like``'s shape and dtype."""
    return make(like, Op.make("fill", shape=like.shape, dtype=like.dtype,
                              value=np.asarray(value).astype(like.dtype).item()), [])
