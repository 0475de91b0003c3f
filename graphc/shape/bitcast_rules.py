"""Shape and dtype rule of ``bitcast``: each element's bytes reinterpreted as another
dtype of the same size (NumPy's ``x.view(dtype)``), so the shape is unchanged.

>>> import numpy as np
>>> from graphc.type import Op
>>> class A:  # any object with shape and dtype will do
...     def __init__(self, shape, dtype): self.shape, self.dtype = shape, np.dtype(dtype)
>>> bitcast(Op.make("bitcast", dtype=np.dtype("int32")), [A((2, 3), "float32")])
((2, 3), dtype('int32'))
"""
from __future__ import annotations

from ..type.errors import DTypeError


def bitcast(op, parents):
    """The input's shape and ``op["dtype"]``, which must have the input dtype's size."""
    source, target = parents[0].dtype, op["dtype"]
    if source.itemsize != target.itemsize:
        raise DTypeError(f"bitcast: {source} ({source.itemsize} bytes) cannot be "
                         f"reinterpreted as {target} ({target.itemsize} bytes): the two "
                         "dtypes must have the same size")
    return parents[0].shape, target
