"""NumPy's functions called on graph values (``np.sum(t)``, ``np.concatenate([t,
u])``, ``np.linalg.inv(t)``): NumPy's ``__array_function__`` protocol hands the
call to the namespace function of the same name, which builds the node.

Arguments NumPy passes at their defaults and graphc's function does not take
(``out=None``, ``where=True``) are dropped; any other is an error naming the
function, as a direct call's would be.

>>> import numpy as np, graphc.ndarray as N
>>> x = N.var("x", (2, 3))
>>> np.sum(x, axis=1).shape, np.concatenate([x, x]).shape
((2,), (4, 3))
"""
from __future__ import annotations

import inspect

import numpy as np

#: NumPy's keyword arguments that mean "as usual" at these values
_DEFAULTS = {"out": None, "where": True, "casting": "same_kind", "order": "K",
             "subok": True, "like": None}


def _dtype_of(value):
    return value.dtype if hasattr(value, "op") else value


def _size(a, axis=None):
    return int(np.prod(a.shape)) if axis is None else a.shape[axis]


#: NumPy's functions of static facts (known while the graph is built)
_STATIC = {"shape": lambda a: tuple(a.shape), "ndim": lambda a: len(a.shape), "size": _size,
           "result_type": lambda *values: np.result_type(*map(_dtype_of, values))}


def _target(namespace, func):
    """The namespace function standing for NumPy's ``func`` and its public name
    (``N.linalg.inv``), or ``(None, None)``."""
    module = getattr(func, "__module__", "") or ""
    owner, qualified = namespace, "N."
    for part in module.split(".")[1:]:            # numpy.linalg -> namespace.linalg
        if part.startswith("_"):
            break
        owner, qualified = getattr(owner, part, None), f"{qualified}{part}."
        if owner is None:
            return None, None
    target = getattr(owner, func.__name__, None)
    return target, f"{qualified}{func.__name__}"


def _at_default(key, value) -> bool:
    """Whether NumPy's keyword ``key`` is at its usual value (an array never is)."""
    default = _DEFAULTS.get(key, _DEFAULTS)
    return value is default or isinstance(value, str) and value == default


def _accepted(function, kwargs: dict) -> dict:
    """``kwargs`` less the NumPy defaults ``function`` does not take."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in parameters or not _at_default(k, v)}


def numpy_function(namespace, func, args, kwargs):
    """NumPy's ``func(*args, **kwargs)`` on graph values, built by ``namespace``.

    Example: ``numpy_function(NS, np.mean, (x,), {"axis": 0})``
    """
    name = f"{getattr(func, '__module__', 'numpy')}.{func.__name__}"
    target, qualified = _target(namespace, func)
    if target is None and getattr(func, "__module__", "") == "numpy":
        target = _STATIC.get(func.__name__)
    if target is None:
        raise TypeError(f"{name} has no graphc.ndarray equivalent yet, so it cannot take a "
                        "lazy graphc value (docs/numpy.md lists what graphc.ndarray has)")
    if qualified is not None:   # argument errors name the function as N's
        from .public_names import named_function   # it imports the lazy module, as we are

        target = named_function(qualified, target, [(inspect.signature(target), "")])
    return target(*args, **_accepted(target, kwargs))
