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
from .operator.namespace import SUBMODULES as _SUBMODULES
from .operator.public_names import named_function as _named_function
from .operator.public_names import named_functions as _named_functions


class _Submodule:
    """``N.random``, ``N.linalg``, ``N.fft``: a submodule's functions, each naming
    itself ``N.<submodule>.<name>`` in its argument errors.

    Example: ``noise = N.random.normal(0.0, 0.01, (784, 10))``
    """

    def __init__(self, name, functions):
        self._name = name
        for function, value in _named_functions(functions, f"N.{name}.").items():
            setattr(self, function, value)

    def __repr__(self) -> str:
        names = ", ".join(n for n in sorted(vars(self)) if not n.startswith("_"))
        return f"<graphc.ndarray.{self._name}: {names}>"


globals().update(_named_functions(_NS, "N."))
globals().update({_name: _Submodule(_name, getattr(_NS, _name)) for _name in _SUBMODULES})
# ported code catches NumPy's error by its NumPy name: a run raises it unchanged
linalg.LinAlgError = _np.linalg.LinAlgError  # noqa: F821 (made just above)
grad = _named_function("N.grad", grad, [(_inspect.signature(grad), "")])
value_and_grad = _named_function("N.value_and_grad", value_and_grad,
                                 [(_inspect.signature(value_and_grad), "")])
newaxis = None
pi, e, inf, nan = _np.pi, _np.e, _np.inf, _np.nan

#: NumPy's own objects that mean the same for graph values: the numeric scalar types
#: (dtype names, abstract ones for ``issubdtype``), dtype facts and index helpers
#: (``N.s_[1:-1]`` is a slice). Graph values take any boolean, integer, float or complex
#: dtype (float16 included); a generated kernel serves the ones it knows, NumPy the rest.
_NUMERIC = sorted(n for n in dir(_np) if isinstance(getattr(_np, n), type)
                  and issubclass(getattr(_np, n), _np.generic)
                  and issubclass(getattr(_np, n), (_np.number, _np.bool_))
                  and n != "timedelta64" or n in ("generic", "bool"))   # an integer subclass
_SHARED = _NUMERIC + ["dtype", "finfo", "iinfo", "issubdtype", "isdtype", "promote_types",
                      "can_cast", "min_scalar_type", "euler_gamma", "little_endian", "True_",
                      "False_", "typecodes", "sctypeDict", "ScalarType", "s_", "index_exp"]
globals().update({_name: getattr(_np, _name) for _name in _SHARED})


def _named(name, function):
    """``function`` whose argument errors name it ``N.<name>``, as every function's do."""
    return _named_function(f"N.{name}", function, [(_inspect.signature(function), "")])


def promote_types(type1, type2):
    """NumPy's ``promote_types``. Example: ``N.promote_types(N.int8, N.float32)``"""
    return _np.promote_types(type1, type2)


def min_scalar_type(a):
    """NumPy's ``min_scalar_type`` of a value or dtype. Example: ``N.min_scalar_type(300)``"""
    return _np.min_scalar_type(a)


# NumPy's functions of dtypes, named as graphc's own when called wrongly
globals().update({_name: _named(_name, _function) for _name, _function in
                  [("issubdtype", _np.issubdtype), ("isdtype", _np.isdtype),
                   ("can_cast", _np.can_cast), ("promote_types", promote_types),
                   ("min_scalar_type", min_scalar_type)]})


def _dtype_of(value):
    return value.dtype if isinstance(value, Tensor) else value


def result_type(*arrays_and_dtypes):
    """NumPy's ``result_type``, graph values standing for their dtypes.

    Example: ``N.result_type(x, 1.0)``
    """
    return _np.result_type(*(_dtype_of(v) for v in arrays_and_dtypes))


def shape(a):
    """``a.shape`` (static, known while the graph is built). Example: ``N.shape(x)``"""
    return a.shape if isinstance(a, Tensor) else _np.shape(a)


def ndim(a):
    """``a.ndim``. Example: ``N.ndim(x)``"""
    return len(shape(a))


def size(a, axis=None):
    """The number of elements of ``a`` (along ``axis``). Example: ``N.size(x, 0)``"""
    dims = shape(a)
    return int(_np.prod(dims)) if axis is None else dims[axis]


result_type, shape, ndim, size = (_named(f.__name__, f) for f in (result_type, shape, ndim,
                                                                 size))

__all__ = sorted(list(_public(_NS)) + _SHARED + [
    "Tensor", "grad", "value_and_grad", "newaxis", "pi", "e", "inf", "nan", "result_type",
    "shape", "ndim", "size"])
