"""Elementwise functions: unary maths, broadcasting binaries, ``where``, ``clip``.

The plain ones are generated (:func:`unary_function`, :func:`binary_function`)
for each public name an op definition in :mod:`graphc.ops` gives its kind.

>>> import graphc.eager as E, numpy as np
>>> E.maximum(np.array([-1.0, 2.0]), 0.0)
array([0., 2.])
"""
from __future__ import annotations

import operator

import numpy as np

from ..shape.dtypes import probe_dtype
from ..type.errors import DTypeError
from ..type.kinds import KINDS
from .namespace import is_python_scalar

#: ``array ** e`` is not always ``numpy.power``: ``ndarray.__pow__`` calls another
#: ufunc for some exponents (NumPy's ``fast_scalar_power``), keyed here by the
#: exponent's exact Python type and value -> (ufunc, the array dtype kinds that take
#: it). Their results differ from power's: float16 ``x ** 0.5`` is sqrt (NaN at
#: -inf, -0.0 at -0.0) where ``np.power(x, 0.5)`` gives inf and +0.0, complex
#: ``x ** 2`` and ``x ** -1`` differ in signed zeros and infs, and a bool ``x ** 2``
#: is int8. A NumPy scalar or a float ``2.0`` exponent takes power.
POWER_SHORTCUTS = {
    (int, 2): ("square", "biufc"),
    (int, -1): ("reciprocal", "fc"),
    (float, 0.5): ("sqrt", "fc"),
}


def power_shortcut(dtype, exponent):
    """The name of the ufunc NumPy's ``array ** exponent`` uses instead of power for
    an array of ``dtype``, or ``None`` when it uses power.

    >>> power_shortcut(np.dtype(np.float16), 0.5), power_shortcut(np.dtype(np.int8), 0.5)
    ('sqrt', None)
    """
    if type(exponent) not in (int, float):
        return None
    ufunc, kinds = POWER_SHORTCUTS.get((type(exponent), exponent), (None, ""))
    return ufunc if np.dtype(dtype).kind in kinds else None


def unary_function(name: str, kind: str):
    """The public function ``name`` of a one-array elementwise ``kind`` (made for each
    name a definition in :mod:`graphc.ops` gives it).

    Example: ``unary_function("exp", "exp")`` is ``N.exp``'s implementation.
    """
    def function(self, x):
        return self._op(kind, [self._lift(x)])

    function.__name__ = name
    function.__doc__ = (f"Elementwise ``{name}`` of ``x``, with NumPy's semantics and dtypes.\n\n"
                        f"Example: ``N.{name}(x)``")
    return function


_INT64 = np.iinfo(np.int64)


def _wide_int(v, other):
    """A Python int outside the integer range of ``other``'s dtype as an int64 (NumPy 2
    compares such an int exactly instead of raising OverflowError)."""
    dtype = getattr(other, "dtype", None)
    if type(v) is int and dtype is not None and dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= v <= info.max and _INT64.min <= v <= _INT64.max:
            return np.int64(v)
    return v


def binary_function(name: str, kind: str):
    """The public function ``name`` of a broadcasting two-array ``kind``: operands
    lifted as NumPy 2 would (weak Python scalars), with NumPy's special cases for
    logical ops and comparisons (from the kind's flags).

    Example: ``binary_function("add", "add")`` is ``N.add``'s implementation.
    """
    facts = KINDS[kind]
    logical, comparison = facts.logical, facts.comparison

    def function(self, a, b):
        if logical:  # NumPy 2 takes a Python scalar's truth value (1e-94 is True,
            # although it would round to 0.0 as a float32)
            a, b = (bool(v) if is_python_scalar(v) else v for v in (a, b))
        elif comparison:
            a, b = _wide_int(a, b), _wide_int(b, a)
        return self._op(kind, self._lift_all(a, b))

    function.__name__ = name
    function.__doc__ = (f"Elementwise ``{name}`` of ``a`` and ``b`` with NumPy broadcasting "
                        f"and type promotion.\n\nExample: ``N.{name}(x, y)``")
    return function


class ElementwiseMixin:
    def where(self, condition, a, b):
        """Elements of ``a`` where ``condition`` holds, else of ``b`` (broadcast).

        Example: ``N.where(x > 0, x, 0.01 * x)``
        """
        condition = self._lift(condition)
        if condition.dtype != np.bool_:
            condition = self.astype(condition, np.bool_)
        a, b = self._lift_all(a, b)
        return self._op("where", [condition, a, b])

    def clip(self, x, a_min, a_max):
        """``x`` limited to ``[a_min, a_max]``; bounds may be scalars, arrays or ``None``.

        Example: ``N.clip(x, 0.0, 6.0)``
        """
        x = self._lift(x)
        # only Python numbers are weak scalars; NumPy scalars and 0-d arrays are
        # strong (they take part in type promotion), so they go the array way
        scalars = all(v is None or is_python_scalar(v) for v in (a_min, a_max))
        if scalars:
            if a_min is None and a_max is None:
                return self.copy(x)
            lo, hi = _scalar(a_min), _scalar(a_max)
            # the result dtype is an attribute too: ops compare attributes by value and
            # 0 == 0.0, yet clip(int32, 0, None) is int32 and clip(int32, 0.0, None) is
            # float64; without it the two would be one op to common-subexpression merging
            return self._op("clip", [x], lo=lo, hi=hi,
                            dtype=probe_dtype("clip", (x.dtype,), (lo, hi)))
        if a_min is not None:
            x = self.maximum(x, a_min)
        return x if a_max is None else self.minimum(x, a_max)

    def rint(self, x):
        """Round half to even, as ``numpy.rint``: integers and booleans become floats
        (float64, float16 for booleans) like NumPy's, then are rounded.

        Example: ``N.rint(x)``
        """
        x = self._lift(x)
        if x.dtype.kind not in "fc":  # np.rint has only float loops
            x = self.astype(x, np.rint(np.ones(1, x.dtype)).dtype)
        return self._op("round", [x])

    def round_to_format(self, x, format: str, saturate: bool = True, rounding: str = "up"):
        """``x`` rounded to a narrow number format (``"bfloat16"``, ``"float8_e4m3fn"``,
        ``"float8_e4m3fnuz"``, ``"float8_e5m2"``, ``"float8_e5m2fnuz"``,
        ``"float4_e2m1fn"``, ``"float8_e8m0fnu"``, ``"int4"``, ``"uint4"``, ``"int2"``,
        ``"uint2"``: :data:`graphc.type.formats.NARROW_FORMATS`) and held in the format's
        compute dtype (float32, int8 or uint8), where every value of the format is exact:
        a cast to the format and back, or fake quantization. Floats round to nearest,
        ties to even, as ``ml_dtypes``' casts do; the integers truncate toward zero and
        wrap. ``saturate`` clips to the float8 formats' finite range first (otherwise
        values beyond it become infinity or NaN); ``rounding`` (``"up"``, ``"down"`` or
        ``"nearest"``) says how float8_e8m0fnu, which holds only powers of two, rounds.
        The gradient passes unchanged (straight through).

        Example: ``N.round_to_format(x, "bfloat16")``
        """
        from ..type.formats import E8M0_ROUNDINGS, narrow_format

        x = self._lift(x)
        fmt = narrow_format(format)
        if rounding not in E8M0_ROUNDINGS:
            raise ValueError(f"round_to_format: rounding must be one of {E8M0_ROUNDINGS}, "
                             f"got {rounding!r}")
        return self._op("round_to_format", [x], format=fmt.name, saturate=bool(saturate),
                        rounding=rounding)

    def round(self, x, decimals: int = 0):
        """Round half to even to ``decimals`` places, by NumPy's steps (scale by a power
        of ten, ``rint``, scale back), so the bits are NumPy's.

        Example: ``N.round(x, 2)``
        """
        x = self._lift(x)
        decimals = operator.index(decimals)
        if decimals == 0 or (x.dtype.kind in "biu" and decimals > 0):
            return self._op("round", [x])
        if x.dtype.kind in "biu":        # to tens, hundreds, ...: in floats, then back
            wide = self.astype(x, np.float64)
            return self.astype(self.multiply(self._op("round", [
                self.divide(wide, 10.0 ** -decimals)]), 10.0 ** -decimals), x.dtype)
        if decimals > 0:
            scale = 10.0 ** decimals
            return self.divide(self._op("round", [self.multiply(x, scale)]), scale)
        scale = 10.0 ** -decimals
        return self.multiply(self._op("round", [self.divide(x, scale)]), scale)

    def isfinite(self, x):
        """True where ``x`` is neither infinite nor NaN: ``abs(x) < inf``."""
        x = self._lift(x)
        if x.dtype.kind not in "fc":
            return self.full(x.shape, True, np.bool_)
        return self.less(self.absolute(x), np.inf)

    def _logical_or_bitwise(self, kind, a, b):
        """``&``, ``|``, ``^`` (``kind`` the logical one): the logical kind on booleans,
        the bitwise kind on integers (and a bool with an integer), an error on floats."""
        a, b = self._lift_all(a, b)
        if a.dtype == np.bool_ and b.dtype == np.bool_:
            return self._op(kind, [a, b])
        bitwise = _BITWISE_OF[kind]
        if a.dtype.kind not in "biu" or b.dtype.kind not in "biu":
            raise DTypeError(f"{bitwise}: expected integer or boolean operands, got "
                             f"{a.dtype} and {b.dtype}")
        return self._op(bitwise, [a, b])

    def bitwise_and(self, a, b):
        """Elementwise ``a & b`` of integers or booleans (logical ``and`` on booleans).

        Example: ``N.bitwise_and(x, 0xFF)``
        """
        return self._logical_or_bitwise("logical_and", a, b)

    def bitwise_or(self, a, b):
        """Elementwise ``a | b`` of integers or booleans.

        Example: ``N.bitwise_or(flags, 4)``
        """
        return self._logical_or_bitwise("logical_or", a, b)

    def bitwise_xor(self, a, b):
        """Elementwise ``a ^ b`` of integers or booleans.

        Example: ``N.bitwise_xor(x, y)``
        """
        return self._logical_or_bitwise("logical_xor", a, b)

    def invert(self, x):
        """Elementwise ``~x``: the bits of integers flipped, ``not`` of booleans.

        Example: ``N.invert(mask)``
        """
        x = self._lift(x)
        if x.dtype == np.bool_:
            return self._op("logical_not", [x])
        if x.dtype.kind not in "iu":
            raise DTypeError(f"invert: expected an integer or boolean array, got {x.dtype}")
        return self._op("invert", [x])

    bitwise_not = invert
    bitwise_invert = invert

    def frexp(self, x):
        """``(mantissa, exponent)`` with ``x == mantissa * 2**exponent`` and
        ``0.5 <= |mantissa| < 1`` (0 for 0); the exponent is int32.

        Example: ``m, e = N.frexp(x)``
        """
        x = self._lift(x)
        if x.dtype.kind not in "biuf":
            raise DTypeError(f"frexp: expected a real array, got {x.dtype}")
        return self._op("frexp_mantissa", [x]), self._op("frexp_exponent", [x])


#: the logical kind behind ``&``, ``|``, ``^`` -> the bitwise kind for integers
_BITWISE_OF = {"logical_and": "bitwise_and", "logical_or": "bitwise_or",
               "logical_xor": "bitwise_xor"}


def _scalar(v):
    if v is None:
        return None
    v = v.item() if hasattr(v, "item") else v
    return v

