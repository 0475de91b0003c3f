"""NumPy's elementwise mathematical functions made of existing kinds: float
predicates (``isnan``, ``signbit``...), NaN-aware extremes, ``logaddexp``, angle
conversions, ``sinc``, ``nan_to_num``, ``modf``, the real-number views of complex
functions (``real``, ``angle``...), ``i0`` and the closeness tests.

Each follows NumPy's own formula step by step, so results have NumPy's bits
wherever NumPy's are made of the same ufuncs.

>>> import graphc.eager as E, numpy as np
>>> E.isnan(np.array([1.0, np.nan])).tolist(), E.logaddexp(0.0, 0.0).round(6).item()
([False, True], 0.693147)
"""
from __future__ import annotations

import math

import numpy as np

from ..type.errors import DTypeError

_LN2 = math.log(2.0)
_LOG2E = 1.0 / _LN2

# Cephes' Chebyshev coefficients of exp(-x) I0(x), as numpy.i0 uses them: on [0, 8]
# in (x / 2 - 2), above 8 of sqrt(x) exp(-x) I0(x) in (32 / x - 2)
_I0_A = [-4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
         1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
         -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
         9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
         -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
         1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
         -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
         1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
         -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
         1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1]
_I0_B = [-7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
         3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
         1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
         -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
         7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
         -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
         3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
         2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
         8.04490411014108831608e-1]


def _result_dtype(function, *dtypes):
    """The dtype NumPy's ``function`` gives for arguments of ``dtypes`` (asked on
    one-element arrays), or a DTypeError naming it."""
    try:
        with np.errstate(all="ignore"):
            return np.asarray(function(*[np.ones(1, d) for d in dtypes])).dtype
    except TypeError as exc:
        names = ", ".join(str(np.dtype(d)) for d in dtypes)
        raise DTypeError(f"{function.__name__}: not defined for dtypes ({names}): "
                         f"{exc}") from None


def _chebyshev(ns, x, coefficients):
    """numpy.i0's ``_chbevl``: the Clenshaw recurrence of a Chebyshev series."""
    b0, b1, b2 = coefficients[0], 0.0, None
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = ns.add(ns.subtract(ns.multiply(x, b1), b2), c)
    return ns.multiply(ns.subtract(b0, b2), 0.5)


class ElementwiseMathMixin:
    """Elementwise composites of :class:`~graphc.operator.mathematics.MathMixin`."""

    def _inexact(self, name, x):
        """``x`` as NumPy's float-only ufunc ``name`` sees it: integers and
        booleans cast to the float dtype NumPy picks."""
        x = self._lift(x)
        dtype = _result_dtype(getattr(np, name), x.dtype)
        return x if x.dtype == dtype else self.astype(x, dtype)

    def _false_like(self, x, value=False):
        return self.full(x.shape, value, np.bool_)

    # -- predicates --------------------------------------------------------------------
    def isnan(self, x):
        """True where ``x`` is NaN (``x != x``).

        Example: ``N.isnan(x)``
        """
        x = self._lift(x)
        return self.not_equal(x, x) if x.dtype.kind in "fc" else self._false_like(x)

    def isinf(self, x):
        """True where ``x`` is +inf or -inf.

        Example: ``N.isinf(x)``
        """
        x = self._lift(x)
        return self.equal(self.absolute(x), np.inf) if x.dtype.kind == "f" else \
            self._false_like(x)

    def isposinf(self, x):
        """True where ``x`` is +inf. Example: ``N.isposinf(x)``"""
        x = self._lift(x)
        return self.equal(x, np.inf) if x.dtype.kind == "f" else self._false_like(x)

    def isneginf(self, x):
        """True where ``x`` is -inf. Example: ``N.isneginf(x)``"""
        x = self._lift(x)
        return self.equal(x, -np.inf) if x.dtype.kind == "f" else self._false_like(x)

    def signbit(self, x):
        """True where the sign bit of ``x`` is set (-0.0 and negative NaNs included).

        Example: ``N.signbit(x)``
        """
        x = self._lift(x)
        if x.dtype.kind == "f":
            return self.less(self.copysign(self.ones_like(x), x), 0)
        _result_dtype(np.signbit, x.dtype)
        return self.less(x, 0) if x.dtype.kind == "i" else self._false_like(x)

    # -- arithmetic --------------------------------------------------------------------
    def fabs(self, x):
        """Absolute value as a float (NumPy's ``fabs`` has float loops only).

        Example: ``N.fabs(x)``
        """
        return self.absolute(self._inexact("fabs", x))

    def _nan_aware(self, name, a, b, extreme):
        a, b = self._lift_all(a, b)
        dtype = _result_dtype(getattr(np, name), a.dtype, b.dtype)
        a, b = (v if v.dtype == dtype else self.astype(v, dtype) for v in (a, b))
        # NaN only where both are: a NaN operand gives the other one
        return self.where(self.isnan(b), a, self.where(self.isnan(a), b, extreme(a, b)))

    def fmax(self, a, b):
        """Elementwise maximum ignoring NaNs (NaN only where both are).

        Example: ``N.fmax(x, y)``
        """
        return self._nan_aware("fmax", a, b, self.maximum)

    def fmin(self, a, b):
        """Elementwise minimum ignoring NaNs. Example: ``N.fmin(x, y)``"""
        return self._nan_aware("fmin", a, b, self.minimum)

    def float_power(self, a, b):
        """``a ** b`` computed in float64 (or wider), as ``numpy.float_power``.

        Example: ``N.float_power(x, 0.5)``
        """
        a, b = self._lift_all(a, b)
        dtype = _result_dtype(np.float_power, a.dtype, b.dtype)
        return self.power(self.astype(a, dtype), self.astype(b, dtype))

    def heaviside(self, x1, x2):
        """0 where ``x1 < 0``, 1 where ``x1 > 0``, ``x2`` where ``x1 == 0``, NaN for NaN.

        Example: ``N.heaviside(x, 0.5)``
        """
        x1, x2 = self._lift_all(x1, x2)
        dtype = _result_dtype(np.heaviside, x1.dtype, x2.dtype)
        x1, x2 = self.astype(x1, dtype), self.astype(x2, dtype)
        step = self.where(self.less(x1, 0), 0.0, self.where(self.greater(x1, 0), 1.0, x2))
        return self.astype(self.where(self.isnan(x1), x1, step), dtype)

    def _logaddexp(self, name, a, b, tail, on_tie):
        a, b = self._lift_all(a, b)
        dtype = _result_dtype(getattr(np, name), a.dtype, b.dtype)
        a, b = self.astype(a, dtype), self.astype(b, dtype)
        # NumPy's npy_logaddexp: the larger plus a correction of the (never positive)
        # negated gap; equal operands (infinities included) add the tie value
        gap = self.negative(self.absolute(self.subtract(a, b)))
        value = self.add(self.maximum(a, b), tail(gap))
        return self.where(self.equal(a, b), self.add(a, on_tie), value)

    def logaddexp(self, a, b):
        """``log(exp(a) + exp(b))`` without overflow.

        Example: ``N.logaddexp(log_p, log_q)``
        """
        return self._logaddexp("logaddexp", a, b, lambda d: self.log1p(self.exp(d)), _LN2)

    def logaddexp2(self, a, b):
        """``log2(2**a + 2**b)`` without overflow. Example: ``N.logaddexp2(a, b)``"""
        return self._logaddexp("logaddexp2", a, b,
                               lambda d: self.multiply(self.log1p(self.exp2(d)), _LOG2E), 1.0)

    def _scaled(self, name, x, numerator, denominator):
        x = self._inexact(name, x)
        dtype = x.dtype
        if dtype == np.float16:   # NumPy's half loops compute in float32
            x = self.astype(x, np.float32)
        # NumPy's constant rounds in the computing dtype: (pi / 180) as float32 pi / 180
        factor = x.dtype.type(numerator) / x.dtype.type(denominator)
        scaled = self.multiply(x, self._lift(np.asarray(factor, x.dtype)))
        return scaled if scaled.dtype == dtype else self.astype(scaled, dtype)

    def deg2rad(self, x):
        """Degrees to radians. Example: ``N.deg2rad(angle)``"""
        return self._scaled("deg2rad", x, np.pi, 180.0)

    def radians(self, x):
        """Degrees to radians (``deg2rad``). Example: ``N.radians(angle)``"""
        return self._scaled("radians", x, np.pi, 180.0)

    def rad2deg(self, x):
        """Radians to degrees. Example: ``N.rad2deg(theta)``"""
        return self._scaled("rad2deg", x, 180.0, np.pi)

    def degrees(self, x):
        """Radians to degrees (``rad2deg``). Example: ``N.degrees(theta)``"""
        return self._scaled("degrees", x, 180.0, np.pi)

    def sinc(self, x):
        """``sin(pi x) / (pi x)``, 1 at 0, as ``numpy.sinc`` computes it.

        Example: ``N.sinc(x)``
        """
        x = self._lift(x)
        y = self.multiply(np.pi, self.where(self.equal(x, 0), 1.0e-20, x))
        return self.divide(self.sin(y), y)

    def nan_to_num(self, x, copy=True, nan=0.0, posinf=None, neginf=None):
        """NaN replaced by ``nan``, infinities by ``posinf``/``neginf`` (default the
        dtype's largest and smallest finite values).

        Example: ``N.nan_to_num(x, nan=0.0, posinf=1e9)``
        """
        x = self._lift(x)
        if x.dtype.kind != "f":
            return self.copy(x)
        info = np.finfo(x.dtype)
        big = info.max if posinf is None else posinf
        small = info.min if neginf is None else neginf
        fill = [self._lift(np.asarray(v, x.dtype)) for v in (nan, big, small)]
        x = self.where(self.isnan(x), fill[0], x)
        x = self.where(self.equal(x, np.inf), fill[1], x)
        return self.where(self.equal(x, -np.inf), fill[2], x)

    def positive(self, x):
        """``+x`` (a copy). Example: ``N.positive(x)``"""
        x = self._lift(x)
        _result_dtype(np.positive, x.dtype)
        return self.copy(x)

    def pow(self, a, b):
        """``a ** b`` (NumPy 2's name for ``power``). Example: ``N.pow(x, 3)``"""
        return self.power(a, b)

    def atan2(self, a, b):
        """``arctan2(a, b)`` (NumPy 2's name). Example: ``N.atan2(y, x)``"""
        return self.arctan2(a, b)

    def cbrt(self, x):
        """The real cube root (negative for negative ``x``), ``|x| ** (1/3)`` with
        ``x``'s sign: within an ulp or two of NumPy's correctly rounded ``cbrt``.

        Example: ``N.cbrt(x)``
        """
        x = self._inexact("cbrt", x)
        return self.copysign(self.power(self.absolute(x), 1.0 / 3.0), x)

    def around(self, x, decimals: int = 0):
        """Round half to even (``round``). Example: ``N.around(x)``"""
        return self.round(x, decimals)

    def fix(self, x):
        """Round toward zero (``trunc``), as ``numpy.fix``. Example: ``N.fix(x)``"""
        x = self._lift(x)
        dtype = _result_dtype(np.fix, x.dtype)
        return self.trunc(x if x.dtype == dtype else self.astype(x, dtype))

    def modf(self, x):
        """``(fractional, integral)`` parts, both with ``x``'s sign; ``(±0, ±inf)`` for
        infinities.

        Example: ``frac, whole = N.modf(x)``
        """
        x = self._inexact("modf", x)
        whole = self.trunc(x)
        # x - trunc(x) is exact; its sign (and inf's zero) follow x, as C's modf
        frac = self.where(self.isinf(x), 0.0, self.subtract(x, whole))
        return self.copysign(frac, x), whole

    def divmod(self, a, b):
        """``(a // b, a % b)``. Example: ``q, r = N.divmod(x, 3)``"""
        return self.floor_divide(a, b), self.remainder(a, b)

    # -- complex functions on real values ---------------------------------------------------
    def conj(self, x):
        """The complex conjugate: ``x`` itself for real ``x``. Example: ``N.conj(x)``"""
        x = self._lift(x)
        if x.dtype.kind == "c":
            return self._op("conjugate", [x])
        dtype = _result_dtype(np.conj, x.dtype)     # int8 for booleans
        return x if x.dtype == dtype else self.astype(x, dtype)

    def conjugate(self, x):
        """The complex conjugate (``conj``). Example: ``N.conjugate(x)``"""
        return self.conj(x)

    def real(self, x):
        """The real part: ``x`` itself for real ``x``. Example: ``N.real(N.fft.fft(x))``"""
        x = self._lift(x)
        return self._op("real", [x]) if x.dtype.kind == "c" else x

    def imag(self, x):
        """The imaginary part: zeros of ``x``'s dtype for real ``x``.
        Example: ``N.imag(N.fft.fft(x))``"""
        x = self._lift(x)
        return self._op("imag", [x]) if x.dtype.kind == "c" else self.zeros(x.shape, x.dtype)

    def angle(self, z, deg: bool = False):
        """The argument of ``z`` (``arctan2(imag, real)``): 0 or pi for real ``z``, in
        degrees if ``deg``.

        Example: ``N.angle(N.fft.fft(x))``
        """
        z = self._lift(z)
        a = self.arctan2(self.imag(z), self.real(z)) if z.dtype.kind == "c" else \
            self.arctan2(0, z)
        return self.multiply(a, 180 / np.pi) if deg else a

    def iscomplex(self, x):
        """True where ``x`` has a nonzero imaginary part: nowhere for real ``x``.
        Example: ``N.iscomplex(N.fft.fft(x))``"""
        x = self._lift(x)
        return self.not_equal(self.imag(x), 0) if x.dtype.kind == "c" else self._false_like(x)

    def isreal(self, x):
        """True where ``x`` has no imaginary part: everywhere for real ``x``.
        Example: ``N.isreal(N.fft.fft(x))``"""
        x = self._lift(x)
        return self.equal(self.imag(x), 0) if x.dtype.kind == "c" else \
            self._false_like(x, True)

    def iscomplexobj(self, x) -> bool:
        """Whether ``x``'s dtype is complex (a Python bool, known while building).

        Example: ``N.iscomplexobj(x)``
        """
        return self._lift(x).dtype.kind == "c"

    def isrealobj(self, x) -> bool:
        """Whether ``x``'s dtype is not complex. Example: ``N.isrealobj(x)``"""
        return not self.iscomplexobj(x)

    def common_type(self, *arrays):
        """The inexact scalar type NumPy's ``common_type`` gives these arrays
        (float64 for integers). Example: ``N.common_type(x, y)``"""
        dtypes = [self._lift(a).dtype for a in arrays]
        return np.common_type(*[np.empty(0, d) for d in dtypes])

    def i0(self, x):
        """The modified Bessel function of the first kind, order 0, by NumPy's
        Chebyshev series (Cephes).

        Example: ``N.i0(x)``
        """
        x = self._lift(x)
        if x.dtype.kind == "c":
            raise DTypeError(f"i0: complex arrays are not supported, got {x.dtype}")
        if x.dtype.kind != "f":
            x = self.astype(x, np.float64)
        x = self.absolute(x)
        near = self.multiply(self.exp(x), _chebyshev(
            self, self.subtract(self.divide(x, 2.0), 2), _I0_A))
        # the far branch on x >= 8 only, so the near values never divide by zero
        far_x = self.maximum(x, 8.0)
        far = self.divide(self.multiply(self.exp(far_x), _chebyshev(
            self, self.subtract(self.divide(32.0, far_x), 2.0), _I0_B)), self.sqrt(far_x))
        return self.where(self.less_equal(x, 8.0), near, far)

    # -- closeness -------------------------------------------------------------------------
    def isclose(self, a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
        """``|a - b| <= atol + rtol * |b|`` elementwise (``b`` finite), or ``a == b``;
        NaNs equal if ``equal_nan``. As ``numpy.isclose``.

        Example: ``N.isclose(x, y, rtol=1e-6)``
        """
        a, b = self._lift_all(a, b)
        dtype = np.result_type(b.dtype, 1.0)
        b = b if b.dtype == dtype else self.astype(b, dtype)
        close = self.less_equal(self.absolute(self.subtract(a, b)),
                                self.add(atol, self.multiply(rtol, self.absolute(b))))
        result = self.logical_or(self.logical_and(close, self.isfinite(b)), self.equal(a, b))
        if equal_nan:
            result = self.logical_or(result, self.logical_and(self.isnan(a), self.isnan(b)))
        return result

    def allclose(self, a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
        """Whether every pair is close (``isclose``): a 0-d boolean value.

        Example: ``N.allclose(x, y)``
        """
        return self.all(self.isclose(a, b, rtol, atol, equal_nan))

    def array_equal(self, a1, a2, equal_nan: bool = False):
        """Whether both have one shape and equal elements: a 0-d boolean value (False
        for different shapes, decided while building).

        Example: ``N.array_equal(x, y)``
        """
        a1, a2 = self._lift_all(a1, a2)
        if a1.shape != a2.shape:
            return self.full((), False, np.bool_)
        same = self.equal(a1, a2)
        if equal_nan:
            same = self.logical_or(same, self.logical_and(self.isnan(a1), self.isnan(a2)))
        return self.all(same)

    def array_equiv(self, a1, a2):
        """Whether both broadcast to one shape with equal elements (0-d boolean).

        Example: ``N.array_equiv(x, row)``
        """
        a1, a2 = self._lift_all(a1, a2)
        try:
            np.broadcast_shapes(a1.shape, a2.shape)
        except ValueError:
            return self.full((), False, np.bool_)
        return self.all(self.equal(a1, a2))

    def count_nonzero(self, a, axis=None, *, keepdims: bool = False):
        """The number of nonzero elements (NaN counts), over ``axis``; intp.

        Example: ``N.count_nonzero(x, axis=0)``
        """
        a = self._lift(a)
        nonzero = a if a.dtype == np.bool_ else self.not_equal(a, 0)
        return self.sum(self.astype(nonzero, np.intp), axis, keepdims)
