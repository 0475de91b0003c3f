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
import functools as _functools
import inspect as _inspect
import re as _re

import numpy as _np

from .algodiff.reverse import grad, value_and_grad
from .operator import NS as _NS, Tensor, public_functions as _public

#: how Python's argument errors start: ``_unary.<locals>.function() got ...``
_CALLED = _re.compile(r"^[\w.<>]+\(\) ")

#: functions that dispatch on their arguments: the signatures they accept, in words
_FORMS = {"var": (("variable", "to declare a graph input"),
                  ("variance", "for the variance of x"))}


def _signatures(namespace, name, function):
    """``[(signature, use)]`` of the forms a public function accepts."""
    forms = _FORMS.get(name)
    if forms is None:
        return [(_inspect.signature(function), "")]
    return [(_inspect.signature(getattr(namespace, target)), use) for target, use in forms]


def _binding_problems(signatures, args, kwargs):
    """Why no signature accepts these arguments (one reason each), or ``None``
    when one does."""
    problems = []
    for signature, _ in signatures:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as problem:
            problems.append(str(problem))
        else:
            return None
    return problems


def _plain(signature) -> str:
    """``signature`` as a user reads it: ``(x, axis=None, keepdims=False)``."""
    empty = _inspect.Parameter.empty
    return str(signature.replace(
        parameters=[p.replace(annotation=empty) for p in signature.parameters.values()],
        return_annotation=empty))


def _public_function(qualified: str, function, signatures):
    """``function`` whose argument errors name it as ``qualified`` (``N.sum``).

    A ``TypeError`` raised by the call is checked against ``signatures`` only
    after it happened, so a correct call pays nothing: when no signature binds
    the arguments, the error was Python's own argument check, which would name
    the helper that implements the function (``_reduction.<locals>.function``).
    """
    @_functools.wraps(function)
    def public(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except TypeError as error:
            problems = _binding_problems(signatures, args, kwargs)
            if problems is None:
                raise          # the arguments fit: an error of the computation itself
            takes = " or ".join(f"{_plain(signature)}{' ' + use if use else ''}"
                                for signature, use in signatures)
            # Python's own words without the helper's name they start with, except
            # its count of positional arguments, which counts the namespace (self)
            words = _CALLED.match(str(error))
            problem = str(error)[words.end():] if words and "were given" not in str(error) \
                else problems[0]
            raise TypeError(f"{qualified}() {problem}; {qualified} takes {takes}") from None
    return public


def _public_functions(namespace, prefix: str) -> dict:
    return {name: _public_function(f"{prefix}{name}", function,
                                   _signatures(namespace, name, function))
            if callable(function) else function
            for name, function in _public(namespace).items()}


class _RandomFunctions:
    """``N.random``: draws made afresh on every run from the graph's seedable
    generator (``graphc.compile(..., seed=...)``).

    Example: ``noise = N.random.normal(0.0, 0.01, (784, 10))``
    """

    def __init__(self, random):
        for name, function in _public_functions(random, "N.random.").items():
            setattr(self, name, function)

    def __repr__(self) -> str:
        return "<graphc.ndarray.random: uniform, normal, bernoulli>"


globals().update(_public_functions(_NS, "N."))
random = _RandomFunctions(_NS.random)
grad = _public_function("N.grad", grad, [(_inspect.signature(grad), "")])
value_and_grad = _public_function("N.value_and_grad", value_and_grad,
                                  [(_inspect.signature(value_and_grad), "")])
newaxis = None
pi, e, inf, nan = _np.pi, _np.e, _np.inf, _np.nan
float32, float64, int32, int64, bool_ = (_np.float32, _np.float64, _np.int32, _np.int64,
                                         _np.bool_)

__all__ = sorted(list(_public(_NS)) + ["Tensor", "grad", "value_and_grad", "newaxis", "pi", "e", "inf", "nan",
                                       "float32", "float64", "int32", "int64", "bool_"])
