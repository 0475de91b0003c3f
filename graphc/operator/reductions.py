"""Reductions with NumPy's ``axis`` (None, int, negative, tuple) and ``keepdims``.

``var``, ``std`` and ``logsumexp`` are composites of primitive ops, so they get
planned memory and (later) gradients for free.

>>> import graphc.eager as E, numpy as np
>>> E.logsumexp(np.array([[0.0, 0.0]]), axis=-1)
array([0.69314718])
"""
from __future__ import annotations

import math

import numpy as np

from ..shape.axes import normalize_axes
from ..shape.dtypes import as_dtype
from ..type.errors import DTypeError


def _keepdims(name: str, keepdims) -> bool:
    """``keepdims`` as a bool; anything else is refused, chiefly a dtype given in
    NumPy's third position (``numpy.sum(x, axis, dtype)``), which here is
    ``keepdims``."""
    if isinstance(keepdims, (bool, np.bool_)) or (isinstance(keepdims, (int, np.integer))
                                                   and keepdims in (0, 1)):
        return bool(keepdims)
    raise TypeError(f"{name}: keepdims must be True or False, got {keepdims!r}; give a dtype "
                    f"by keyword: {name}(x, axis, dtype=...)")


def _cast(self, x, dtype: np.dtype):
    """``x`` in the ``dtype=`` of a reduction, cast as NumPy casts it (unsafely:
    ``float -> int`` truncates, as in ``numpy.sum(x, dtype=np.int32)``)."""
    return self.astype(x, dtype) if x.dtype != dtype else x


#: reductions that take NumPy's ``dtype=`` (the others, max/min/any/all, do not there either)
WITH_DTYPE = frozenset({"sum", "prod", "mean"})


def reduction_function(name: str, kind: str):
    """The public function ``name`` of a reduction ``kind`` (``axis``, ``keepdims``,
    and ``dtype=`` where NumPy takes it).

    Example: ``reduction_function("amax", "max")`` is ``N.amax``'s implementation.
    """
    def reduce(self, x, axis, keepdims):
        x = self._lift(x)
        axes = normalize_axes(name, axis, x.ndim)
        return self._op(kind, [x], axis=axes, keepdims=_keepdims(name, keepdims))

    def reduce_in(self, x, axis=None, keepdims: bool = False, *, dtype=None):
        if dtype is None:
            return reduce(self, x, axis, keepdims)
        dtype = as_dtype(name, dtype)
        result = reduce(self, _cast(self, self._lift(x), dtype), axis, keepdims)
        # sums of small integers widen (int32 -> int64) as in NumPy; dtype= keeps
        # the asked type, wrapping as NumPy's accumulation in that type does
        return result if result.dtype == dtype else self.astype(result, dtype)

    if name in WITH_DTYPE:
        function = reduce_in
        extra = (" ``dtype``: cast to, compute in and return this dtype, as NumPy's "
                 "``dtype=``.")
    else:
        def function(self, x, axis=None, keepdims: bool = False):
            return reduce(self, x, axis, keepdims)
        extra = ""

    function.__name__ = function.__qualname__ = name
    function.__doc__ = (f"``{name}`` over ``axis`` (None: all; int or tuple, negative "
                        f"allowed), keeping reduced axes as size 1 if ``keepdims``.{extra}\n\n"
                        f"Example: ``N.{name}(x, axis=1, keepdims=True)``")
    return function


def arg_reduction_function(name: str, kind: str):
    """The public function ``name`` of ``argmax``/``argmin``: one axis or None.

    Example: ``arg_reduction_function("argmax", "argmax")``
    """
    def function(self, x, axis=None, keepdims: bool = False):
        x = self._lift(x)
        if isinstance(axis, (tuple, list)):  # as NumPy: one axis, not a sequence of one
            raise TypeError(f"{name}: axis must be an integer or None, got {axis!r}")
        axes = normalize_axes(name, axis, x.ndim) if axis is not None else None
        return self._op(kind, [x], axis=axes, keepdims=_keepdims(name, keepdims))

    function.__name__ = function.__qualname__ = name
    function.__doc__ = (f"Index of the {name[3:]}imum along ``axis`` (None: of the flattened "
                        f"array), as ``numpy.{name}``; dtype intp.\n\nExample: ``N.{name}(x, axis=1)``")
    return function


class ReductionMixin:
    def _count(self, x, axes) -> int:
        return math.prod(x.shape) if axes is None else math.prod(x.shape[a] for a in axes)

    def variance(self, x, axis=None, ddof: int = 0, keepdims: bool = False, *, dtype=None):
        """Variance along ``axis`` with ``ddof`` (``numpy.var``); also ``N.var(x, ...)``.
        ``dtype`` (floating point) is the type computed in and returned.

        Example: ``N.variance(x, axis=0)``
        """
        x = self._lift(x)
        if dtype is not None:
            x = self._float_accumulator("var", x, dtype)
        axes = normalize_axes("var", axis, x.ndim)
        keepdims = _keepdims("var", keepdims)
        deviation = self.subtract(x, self.mean(x, axis=axes, keepdims=True))
        squares = self.sum(self.square(deviation), axis=axes, keepdims=keepdims)
        # NumPy divides by max(n - ddof, 0): x / 0 is inf, 0 / 0 is NaN
        count = max(self._count(x, axes) - ddof, 0)
        return self.divide(squares, float(count))

    def std(self, x, axis=None, ddof: int = 0, keepdims: bool = False, *, dtype=None):
        """Standard deviation along ``axis`` (``numpy.std``); ``dtype`` as for
        :meth:`variance`.

        Example: ``N.std(x, axis=1, keepdims=True)``
        """
        if dtype is not None:
            x = self._float_accumulator("std", self._lift(x), dtype)
        return self.sqrt(self.variance(x, axis=axis, ddof=ddof, keepdims=keepdims))

    def _float_accumulator(self, name, x, dtype):
        """``x`` in the floating-point ``dtype=`` of ``var``/``std`` (NumPy computes
        an integer dtype= with truncated means and squares, which graphc does not
        copy)."""
        dtype = as_dtype(name, dtype)
        if dtype.kind not in "fc":
            raise DTypeError(f"{name}: dtype= must be a floating-point type, got {dtype}")
        return _cast(self, x, dtype)

    def logsumexp(self, x, axis=None, keepdims: bool = False):
        """``log(sum(exp(x)))`` along ``axis``, computed without overflow
        (as ``scipy.special.logsumexp``; rows of ``-inf`` give ``-inf``).

        Example: ``N.logsumexp(logits, axis=-1)``
        """
        x = self._lift(x)
        if x.dtype.kind in "biu":  # as SciPy: integers and booleans in float64
            x = self.astype(x, np.float64)
        self._require_float("logsumexp", x)
        axes = normalize_axes("logsumexp", axis, x.ndim)
        peak = self.max(x, axis=axes, keepdims=True)
        peak = self.where(self.isfinite(peak), peak, 0.0)
        total = self.sum(self.exp(self.subtract(x, peak)), axis=axes, keepdims=True)
        result = self.add(self.log(total), peak)
        if keepdims:
            return result
        return self.reshape(result, tuple(d for i, d in enumerate(result.shape)
                                          if axes is not None and i not in axes))

