"""What ``run`` and ``assign`` were given, checked against a graph's inputs before
anything is stored: names, shapes, dtypes, Python numbers whose value must
survive the conversion, and the forms ``run`` accepts (keywords, one dict,
arrays by position).

>>> import numpy as np, graphc.ndarray as N
>>> x = N.var("x", (2,))
>>> checked_feeds({"x": x}, {"x": np.zeros(3, np.float32)})
Traceback (most recent call last):
...
graphc.type.errors.InputError: run: input 'x' expects shape (2,) but got shape (3,)
>>> named_feeds(["x", "w"], (1, 2), {})
{'x': 1, 'w': 2}
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from .symbol.node import Node
from .type.errors import InputError

#: dtype kinds a Python scalar may be given for without changing its value
_SCALAR_KINDS = ((bool, "biufc"), (int, "iufc"), (float, "fc"), (complex, "c"))


def _python_scalar(what: str, name: str, value, dtype: np.dtype) -> np.ndarray:
    """A Python number for a 0-d input, converted only if its value survives."""
    kinds = next(k for t, k in _SCALAR_KINDS if isinstance(value, t))
    if dtype.kind not in kinds:
        raise InputError(f"{what}: input {name!r} expects dtype {dtype} but got the Python "
                         f"{type(value).__name__} {value!r}")
    try:
        return np.asarray(value, dtype=dtype)
    except OverflowError:
        raise InputError(f"{what}: input {name!r} expects dtype {dtype} but got "
                         f"{value!r}, which is out of its range") from None


def checked_feeds(variables: Mapping, feeds: Mapping, what: str = "run",
                  device: bool = False) -> dict:
    """``feeds`` as ``name -> array``, each checked against the input variable of
    that name in ``variables``; the first problem raises ``InputError`` naming
    ``what`` (``run`` or ``assign``), the input and what it expects. ``device``: the
    graph runs on a GPU, which also takes arrays already in device memory (CuPy's,
    or any with ``__cuda_array_interface__``): they are copied device to device."""
    checked = {}
    for name, value in feeds.items():
        var = variables.get(name)
        if var is None:
            raise InputError(f"{what}: unknown input {name!r}; the graph's inputs are "
                             f"{sorted(variables)}")
        if isinstance(value, Node):
            raise InputError(f"{what}: input {name!r} got a lazy graph value; pass a NumPy "
                             "array")
        if isinstance(value, (bool, int, float, complex)) and var.shape == ():
            value = _python_scalar(what, name, value, var.dtype)
        on_device = hasattr(value, "__cuda_array_interface__")
        if on_device and not device:
            raise InputError(f"{what}: input {name!r} got a GPU array "
                             f"({type(value).__module__}.{type(value).__name__}), but this "
                             "graph runs on the CPU; pass a NumPy array (cupy.asnumpy) or "
                             "compile with device='cuda'")
        try:
            array = value if on_device else np.asarray(value)
        except (ValueError, TypeError) as exc:
            raise InputError(f"{what}: input {name!r} expects shape {var.shape} dtype "
                             f"{var.dtype} but got a value that is not an array: "
                             f"{exc}") from None
        if array.shape != var.shape:
            raise InputError(f"{what}: input {name!r} expects shape {var.shape} but got "
                             f"shape {array.shape}")
        if array.dtype != var.dtype:
            raise InputError(f"{what}: input {name!r} expects dtype {var.dtype} but got "
                             f"{array.dtype}; convert it with .astype(np.{var.dtype})")
        checked[name] = array
    return checked


def named_feeds(names: list, feeds: tuple, kwargs: dict) -> dict:
    """``run``'s arguments (one dict, or arrays in the order of the inputs
    ``names``, plus keywords) as one ``name -> value`` mapping."""
    if len(feeds) == 1 and (feeds[0] is None or isinstance(feeds[0], Mapping)):
        given = dict(feeds[0] or {})
        bad = [k for k in given if not isinstance(k, str)]
        if bad:
            raise InputError(f"run: input names must be strings, got {bad[0]!r}; the "
                             f"graph's inputs are {names}")
    else:
        if any(isinstance(f, Mapping) for f in feeds):
            raise InputError("run: give inputs either as one dict or as arrays in the "
                             f"order of the graph's inputs {names}, not both")
        if len(feeds) > len(names):
            raise InputError(f"run: the graph has {len(names)} input(s) {names} but "
                             f"{len(feeds)} positional values were given")
        given = dict(zip(names, feeds))
    twice = sorted(set(given) & set(kwargs))
    if twice:
        raise InputError(f"run: input(s) {twice} given twice (by position or dict and by "
                         "keyword)")
    given.update(kwargs)
    return given
