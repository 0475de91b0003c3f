"""``import graphc.ndarray as N`` in place of ``import numpy as np``: the same
function names, but every call builds a graph node instead of computing.

>>> import graphc.ndarray as N
>>> x = N.var("x", (64, 784)); w = N.var("w", (784, 10))
>>> h = N.maximum(x @ w, 0.0)
>>> h.shape
(64, 10)

See :func:`graphc.compile` to turn nodes into a runnable, memory-planned graph,
and :func:`grad` (``N.grad(loss, wrt)``) for gradients as graph nodes.

A call with arguments a function does not take names the function as you
called it and what it takes (never an internal helper):

>>> N.sum(x, out=None)
Traceback (most recent call last):
...
TypeError: N.sum() got an unexpected keyword argument 'out'; N.sum takes
(x, axis=None, keepdims=False, *, dtype=None)
"""
import inspect as _inspect

import numpy as _np

from .algodiff.reverse import grad, value_and_grad
from .operator import NS as _NS, Tensor, public_functions as _public
from .operator.public_names import named_function as _named_function
from .operator.public_names import named_functions as _named_functions


class _RandomFunctions:
    """``N.random``: draws made afresh on every run from the graph's seedable
    generator (``graphc.compile(..., seed=...)``).

    Example: ``noise = N.random.normal(0.0, 0.01, (784, 10))``
    """

    def __init__(self, random):
        for name, function in _named_functions(random, "N.random.").items():
            setattr(self, name, function)

    def __repr__(self) -> str:
        return "<graphc.ndarray.random: uniform, normal, bernoulli>"


globals().update(_named_functions(_NS, "N."))
random = _RandomFunctions(_NS.random)
grad = _named_function("N.grad", grad, [(_inspect.signature(grad), "")])
value_and_grad = _named_function("N.value_and_grad", value_and_grad,
                                 [(_inspect.signature(value_and_grad), "")])
newaxis = None
pi, e, inf, nan = _np.pi, _np.e, _np.inf, _np.nan
float32, float64, int32, int64, bool_ = (_np.float32, _np.float64, _np.int32, _np.int64,
                                         _np.bool_)

__all__ = sorted(list(_public(_NS)) + ["Tensor", "grad", "value_and_grad", "newaxis", "pi", "e", "inf", "nan",
                                       "float32", "float64", "int32", "int64", "bool_"])
