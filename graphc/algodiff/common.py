"""Helpers shared by the gradient rules: summing a broadcast gradient back to
an input's shape, fitting dtypes, and the rule signature.

A rule is ``rule(ns, op, inputs, output, g, needs=None)``: ``inputs`` and
``output`` are values of the namespace ``ns`` (graph nodes for
``graphc.ndarray``, arrays for ``graphc.eager``), ``g`` is the gradient of the
loss with respect to ``output``, and ``needs`` (a tuple of booleans, ``None``
for all) says which inputs want a gradient, so a rule can skip the others. It
returns one gradient per input, ``None`` where an input gets none.

>>> import numpy as np, graphc.eager as E
>>> unbroadcast(E._NS, np.ones((2, 3)), (1, 3))
array([[2., 2., 2.]])
"""
from __future__ import annotations

import numpy as np


def wants(needs, i: int) -> bool:
    """Whether input ``i`` wants a gradient (``needs`` is ``None``: all do).

    >>> wants((True, False), 1), wants(None, 5)
    (False, True)
    """
    return needs is None or bool(needs[i])


def is_float(dtype) -> bool:
    """Whether ``dtype`` is a real floating-point type (losses and most rules need one).

    >>> is_float(np.dtype("float32")), is_float(np.dtype("int64"))
    (True, False)
    """
    return np.dtype(dtype).kind == "f"


def carries_gradient(dtype) -> bool:
    """Gradients flow through real and complex floating-point values (a complex
    value's cotangent is ``dL/dRe + i dL/dIm``; see :mod:`.rules`).

    >>> carries_gradient(np.dtype("complex64")), carries_gradient(np.dtype("int8"))
    (True, False)
    """
    return np.dtype(dtype).kind in "fc"


def cast_to(ns, g, dtype):
    """The gradient ``g`` in ``dtype``: a complex one given to a real value keeps its
    real part (the imaginary part is the cotangent of an imaginary part it lacks).

    Example: ``cast_to(ns, g, np.float32)`` for ``g`` of complex64 is ``real(g)``.
    """
    if g.dtype == dtype:
        return g
    if g.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        g = ns.real(g)
    return g if g.dtype == dtype else ns.astype(g, dtype)


def unbroadcast(ns, g, shape):
    """``g`` summed back to ``shape``: over the leading axes broadcasting added and
    over the axes where ``shape`` has size 1 and ``g`` does not.

    Example: ``unbroadcast(ns, g_of_shape_4x3, (3,))`` sums over axis 0.
    """
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = len(g.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and g.shape[lead + i] != 1)
    if axes:
        g = ns.sum(g, axis=axes, keepdims=True)
    return ns.reshape(g, shape)


def fit(ns, g, like):
    """``g`` with the shape (summed back from broadcasting) and dtype of ``like``.

    Example: ``fit(ns, g, x)`` for ``x`` of shape ``(3,)`` and ``g`` of ``(4, 3)``.
    """
    if g is None:
        return None
    if tuple(g.shape) != tuple(like.shape):
        g = unbroadcast(ns, g, like.shape)
    return cast_to(ns, g, like.dtype)


def kept_shape(shape, axes):
    """``shape`` with the reduced ``axes`` (``None``: all) kept as size 1.

    >>> kept_shape((2, 3, 4), (0, 2))
    (1, 3, 1)
    """
    return tuple(1 if axes is None or i in axes else d for i, d in enumerate(shape))


def expand_reduced(ns, g, x_shape, axes):
    """A reduction's gradient ``g`` reshaped with size-1 reduced axes (as with
    ``keepdims=True``), ready to broadcast against the input of ``x_shape``.

    Example: the gradient of ``sum(x, axis=1)`` is ``broadcast_to(expand_reduced(...), x.shape)``.
    """
    return ns.reshape(g, kept_shape(x_shape, axes))
