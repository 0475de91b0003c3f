"""Public functions whose argument errors name them as the user called them
(``N.sum``, ``E.exp``), never the helper that implements them.

>>> from graphc.operator import NS
>>> named = named_functions(NS, "N.")
>>> named["exp"](1.0, 2.0, 3.0)
Traceback (most recent call last):
...
TypeError: N.exp() too many positional arguments; N.exp takes (x)
"""
import functools as _functools
import inspect as _inspect
import re as _re

from .lazy import public_functions as _public

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


def named_function(qualified: str, function, signatures):
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


def named_functions(namespace, prefix: str) -> dict:
    """The public functions of ``namespace`` (and its other public attributes),
    each reporting argument errors as ``prefix + name``."""
    return {name: named_function(f"{prefix}{name}", function,
                                   _signatures(namespace, name, function))
            if callable(function) else function
            for name, function in _public(namespace).items()}
