"""``import graphc.ndarray as N`` in place of ``import numpy as np``: the same
function names, but every call builds a graph node instead of computing.

>>> import graphc.ndarray as N
>>> x = N.var("x", (64, 784)); w = N.var("w", (784, 10))
>>> h = N.maximum(x @ w, 0.0)
>>> h.shape
(64, 10)

See :func:`graphc.compile` to turn nodes into a runnable, memory-planned graph,
and :func:`grad` (``N.grad(loss, wrt)``) for gradients as graph nodes.
"""
import numpy as _np

from .algodiff.reverse import grad, value_and_grad
from .operator import NS as _NS, Tensor, public_functions as _public

globals().update(_public(_NS))
newaxis = None
pi, e, inf, nan = _np.pi, _np.e, _np.inf, _np.nan
float32, float64, int32, int64, bool_ = (_np.float32, _np.float64, _np.int32, _np.int64,
                                         _np.bool_)

__all__ = sorted(list(_public(_NS)) + ["Tensor", "grad", "value_and_grad", "newaxis", "pi", "e", "inf", "nan",
                                       "float32", "float64", "int32", "int64", "bool_"])
