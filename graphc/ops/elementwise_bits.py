"""The elementwise kinds that composition cannot express well: integer bits
(``bitwise_and``/``or``/``xor``, ``invert``, the shifts, ``bitwise_count``), ``gcd``
and ``lcm``, and the floating-point representation functions (``fmod``, ``copysign``,
``nextafter``, ``spacing``, ``frexp``'s two parts, ``ldexp``). One definition each,
by the makers of :mod:`.elementwise`; imported at its end.

Semantics are NumPy's: a shift by a negative amount or by the width or more gives 0
(-1 for a right shift of a negative value), a right shift of a signed value is
arithmetic. On booleans the public ``bitwise_and``/``or``/``xor``/``invert`` build the
logical kinds (:mod:`graphc.operator.elementwise`); these kinds take booleans too,
as NumPy does.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["left_shift"].names
('left_shift', 'bitwise_left_shift')
"""
from __future__ import annotations

import numpy as np

from ..onnx import export_bits
from ..operator import generated as _operator_names
from .definition import NO_GRADIENT, Refused, define
from .elementwise import binary, unary


def frexp_mantissa(x, out=None):
    """``numpy.frexp(x)[0]``: the mantissa, in [0.5, 1) in magnitude (the reference of
    the kind ``frexp_mantissa``).

    >>> float(frexp_mantissa(np.float64(12.0)))
    0.75
    """
    mantissa = np.frexp(x)[0]
    if out is None:
        return mantissa
    out[...] = mantissa
    return out


def frexp_exponent(x, out=None):
    """``numpy.frexp(x)[1]``: the exponent, ``x == mantissa * 2**exponent``.

    >>> int(frexp_exponent(np.float64(12.0)))
    4
    """
    exponent = np.frexp(x)[1]
    if out is None:
        return exponent
    out[...] = exponent
    return out


def _bitwise(name, c_operator, bool_c, bool_py, onnx_op, on_bool):
    return binary(name, names=(name,), expr={"i": f"{{0}} {c_operator} {{1}}",
                                             "b": f"{{0}} {bool_c} {{1}}"},
                  numba={"i": f"{{T}}({{0}} {c_operator} {{1}})", "b": f"{{0}} {bool_py} {{1}}"},
                  grad=NO_GRADIENT, onnx=export_bits.bitwise_exporter(onnx_op, on_bool),
                  commutative=True)


#: a shift in 64 bits: an amount in [width, 64) leaves a narrower value's low bits
#: zero (or its sign extension), so only amounts outside [0, 64) need the guard
_LEFT_C = ("({1} >= 0 && {1} < 64) ? ({T})((unsigned long long)(long long){0} << {1}) "
           ": ({T})0")
_RIGHT_C = "({1} >= 0 && {1} < 64) ? ({T})((long long){0} >> {1}) : ({0} < 0 ? ({T})-1 : ({T})0)"
_LEFT_PY = "{T}(np.int64({0}) << np.int64({1})) if {1} >= 0 and {1} < 64 else {T}(0)"
_RIGHT_PY = ("{T}(np.int64({0}) >> np.int64({1})) if {1} >= 0 and {1} < 64 "
             "else {T}(-1 if {0} < 0 else 0)")

_NO_ONNX_GCD = Refused("ONNX has no greatest common divisor (a loop of remainders)")
_NO_ONNX_BITS = Refused("ONNX cannot read a float's sign bit or exponent (-0.0, NaN, "
                        "subnormals)")


def _fmod_export(ctx, op, ins, out):
    a, b = (ctx.cast(v, out.dtype) for v in ins)
    if out.dtype.kind in "iu":   # C's % on integers; NumPy gives 0 for a zero divisor
        zero = ctx.scalar(0, out.dtype)
        safe = ctx.op("Where", [ctx.op("Equal", [b, zero]), ctx.scalar(1, out.dtype), b])
        mod = ctx.op("Mod", [a, safe], fmod=1)
        return ctx.op("Where", [ctx.op("Equal", [b, zero]), zero, mod], out=out.name)
    return ctx.op("Mod", [a, b], out=out.name, fmod=1)


def _copysign_a(ns, op, a, b, y, g):
    # y = |a| * s(b): the slope in a is sign(a) * s(b), s(b) = copysign(1, b)
    return ns.multiply(g, ns.multiply(ns.sign(a), ns.copysign(ns.ones_like(y), b)))


def _frexp_mantissa_grad(ns, op, x, y, g):
    return ns.ldexp(g, ns.negative(ns._op("frexp_exponent", [x])))


define(
    _bitwise("bitwise_and", "&", "&&", "and", "BitwiseAnd", "And"),
    _bitwise("bitwise_or", "|", "||", "or", "BitwiseOr", "Or"),
    _bitwise("bitwise_xor", "^", "!=", "!=", "BitwiseXor", "Xor"),
    unary("invert", names=("invert", "bitwise_not", "bitwise_invert"),
          expr={"i": "~{0}", "b": "!{0}"}, numba={"i": "{T}(~{0})", "b": "not {0}"},
          grad=NO_GRADIENT, onnx=export_bits.invert_export),
    binary("left_shift", names=("left_shift", "bitwise_left_shift"), expr={"i": _LEFT_C},
           numba={"i": _LEFT_PY}, grad=NO_GRADIENT, onnx=export_bits.left_shift_export),
    binary("right_shift", names=("right_shift", "bitwise_right_shift"), expr={"i": _RIGHT_C},
           numba={"i": _RIGHT_PY}, grad=NO_GRADIENT, onnx=export_bits.right_shift_export),
    unary("bitwise_count", expr={}, numba={}, grad=NO_GRADIENT,
          onnx=Refused("ONNX has no population count")),
    binary("gcd", expr={}, numba={}, grad=NO_GRADIENT, onnx=_NO_ONNX_GCD, commutative=True),
    binary("lcm", expr={}, numba={}, grad=NO_GRADIENT, onnx=_NO_ONNX_GCD, commutative=True),
    binary("copysign", expr={"f": "copysign{m}({0}, {1})"},
           numba={"f": "np.copysign({0}, {1})"},
           grad=(_copysign_a, lambda ns, op, a, b, y, g: None), onnx=_NO_ONNX_BITS),
    # C's fmod: the remainder with a's sign, exact (a - trunc(a / b) * b would round);
    # a - trunc(a / b) * b in slope
    binary("fmod", expr={"f": "fmod{m}({0}, {1})"}, numba={"f": "np.fmod({0}, {1})"},
           grad=(lambda ns, op, a, b, y, g: g,
                 lambda ns, op, a, b, y, g: ns.negative(ns.multiply(g, ns.trunc(
                     ns.divide(ns.subtract(a, y), b))))),
           onnx=_fmod_export),
    # nextafter(a, b) moves a by one ulp: slope 1 in a, none in b
    binary("nextafter", expr={"f": "nextafter{m}({0}, {1})"},
           numba={"f": "np.nextafter({0}, {1})"},
           grad=(lambda ns, op, a, b, y, g: g, lambda ns, op, a, b, y, g: None),
           onnx=_NO_ONNX_BITS),
    # NumPy's npy_spacing: the gap to the next float away from zero (up from -0.0); NaN
    # at +-inf
    unary("spacing",
          expr={"f": "isinf({0}) ? ({T})NAN : nextafter{m}({0}, {0} < 0 ? -({T})INFINITY "
                     ": ({T})INFINITY) - {0}"},
          numba={"f": "{T}(np.nan) if np.isinf({0}) else "
                      "np.nextafter({0}, {T}(-np.inf) if {0} < 0 else {T}(np.inf)) - {0}"},
          grad=NO_GRADIENT, onnx=_NO_ONNX_BITS),
    unary("frexp_mantissa", names=(), reference="graphc.ops.elementwise_bits.frexp_mantissa",
          expr={}, numba={}, grad=_frexp_mantissa_grad, onnx=_NO_ONNX_BITS),
    unary("frexp_exponent", names=(), reference="graphc.ops.elementwise_bits.frexp_exponent",
          expr={}, numba={}, grad=NO_GRADIENT, onnx=_NO_ONNX_BITS),
    # x * 2**e, exact (no rounding of 2**e): slope 2**e in x, none in the integer e
    binary("ldexp", expr={}, numba={},
           grad=(lambda ns, op, a, b, y, g: ns.ldexp(g, b), lambda ns, op, a, b, y, g: None),
           onnx=_NO_ONNX_BITS),
)

__all__ = ["frexp_mantissa", "frexp_exponent"]

# NumPy ufuncs that graphc.operator's math mixins write by hand (composites): reached
# from np.isnan(tensor) and ndarray-tensor mixes through Tensor.__array_ufunc__ too
_operator_names.UFUNC_NAMES.update((name, name) for name in (
    "isnan", "isinf", "signbit", "fabs", "fmax", "fmin", "float_power", "heaviside",
    "logaddexp", "logaddexp2", "deg2rad", "radians", "rad2deg", "degrees", "positive",
    "cbrt", "modf", "divmod", "conjugate", "frexp"))
