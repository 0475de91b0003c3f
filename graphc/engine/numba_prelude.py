"""Helpers the generated CPU kernels call (:mod:`.numba_codegen`), and the type names
their casts use: the Python twin of :data:`.cuda_codegen.PRELUDE`. Imported only by
generated kernel modules, so only with Numba installed.

Each helper is generic over its operand types (Numba compiles one version per
type), NumPy's semantics: ``maximum``/``minimum`` give NaN when either operand is
NaN; ``clip`` keeps ``x`` where it equals a bound; ``floor_divide`` and
``remainder`` follow NumPy's ``npy_divmod`` for floats. ``graphc_exp_f32`` (float32
arithmetic with fused multiply-adds) and ``graphc_erf_f32`` (float64 arithmetic rounded
once) are arithmetic only, which LLVM vectorises, within one float32 ulp of the
correctly rounded exp and of scipy's ``erf``; their ``_f64`` twins call the C library,
element by element. ``graphc_maxnum`` is C's ``fmax`` (NaN-ignoring), for reductions
that must vectorise. A kernel picks one by its
compute dtype (the ``{S}`` suffix of :data:`.numba_codegen.DIALECT`).

Generated kernel modules inline these helpers into their own disk cache, which
Numba keys on the kernel module's text alone: the generator stamps every kernel
with a digest of this file (:data:`.numba_codegen.PRELUDE_DIGEST`), so editing a
helper rebuilds the kernels that use it.

>>> y = graphc_max(1.0, float("nan")); y != y
True
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.extending import intrinsic, overload
from numba.np.numpy_support import as_dtype

float32, float64, int32, int64, bool_ = np.float32, np.float64, np.int32, np.int64, np.bool_

__all__ = ["float32", "float64", "int32", "int64", "bool_", "graphc_max", "graphc_min",
           "graphc_clip", "graphc_floor_divide", "graphc_remainder", "graphc_erf_f32",
           "graphc_erf_f64", "graphc_exp_f32", "graphc_exp_nonpositive_f32", "graphc_exp_f64",
           "graphc_maxnum"]


@njit(cache=True, nogil=True)
def graphc_max(a, b):
    return a if (a > b or a != a) else b


@njit(cache=True, nogil=True)
def graphc_min(a, b):
    return a if (a < b or a != a) else b


@njit(cache=True, nogil=True)
def graphc_clip(x, lo, hi):
    x = lo if x < lo else x
    return hi if x > hi else x


def _float_divmod(a, b):
    """NumPy's ``npy_divmod`` for floats: ``(floor quotient, modulus)``, written for
    Numba's typing: every constant in the operands' own type."""


def graphc_floor_divide(a, b):
    """NumPy's ``floor_divide`` for floats (Numba only: see the overload)."""


def graphc_remainder(a, b):
    """NumPy's ``remainder`` for floats (Numba only: see the overload)."""


@overload(_float_divmod, jit_options={"error_model": "numpy"})
def _float_divmod_typed(a, b):
    T = as_dtype(a).type
    zero, one, half = T(0), T(1), T(0.5)

    def divmod_(a, b):
        mod = np.fmod(a, b)
        div = (a - mod) / b
        if mod:
            if (b < zero) != (mod < zero):
                mod += b
                div -= one
        else:
            mod = np.copysign(zero, b)
        if div:
            floordiv = np.floor(div)
            if div - floordiv > half:
                floordiv += one
        else:
            floordiv = np.copysign(zero, a / b)
        return floordiv, mod
    return divmod_


@overload(graphc_floor_divide, jit_options={"error_model": "numpy"})
def _floor_divide_typed(a, b):
    def floor_divide(a, b):
        return _float_divmod(a, b)[0] if b else a / b
    return floor_divide


@overload(graphc_remainder, jit_options={"error_model": "numpy"})
def _remainder_typed(a, b):
    def remainder(a, b):
        return _float_divmod(a, b)[1] if b else np.fmod(a, b)
    return remainder


# erf(x) = x P(x^2) / Q(x^2) on [-4, 4] and +-1 beyond (where float32's erf rounds to
# +-1): a least-squares fit of relative error 2e-9, evaluated in float64 and rounded
# once, so it is within one float32 ulp of the correctly rounded erf. Checked against
# scipy's float32 erf on every float32 in [0, 6]: at most 1 ulp apart (2.4% of them).
# Only arithmetic, so a fused loop that calls it (GELU) still runs as vectors; the C
# library's erff is a call per element, ~6.6 ns here.
ERF_P = (1.1283791693631917, 0.18520363550014515, 0.054317248249559955,
         0.003849667814920859, 0.0003796215112684029, 4.685088567072263e-06,
         -1.320380330992079e-08)
ERF_Q = (1.0, 0.49746586218277816, 0.11395883719910715, 0.015462242907689397,
         0.0013075988495489463, 6.311359985875653e-05)


@njit(cache=True, nogil=True, error_model="numpy")
def graphc_erf_f32(x):
    t = float64(x)
    t = 4.0 if t > 4.0 else (-4.0 if t < -4.0 else t)    # NaN passes through
    s = t * t
    p = ((((((ERF_P[6] * s + ERF_P[5]) * s + ERF_P[4]) * s + ERF_P[3]) * s + ERF_P[2]) * s
          + ERF_P[1]) * s + ERF_P[0])
    q = (((((ERF_Q[5] * s + ERF_Q[4]) * s + ERF_Q[3]) * s + ERF_Q[2]) * s + ERF_Q[1]) * s
         + 1.0)
    return float32(t * p / q)


@njit(cache=True, nogil=True, error_model="numpy")
def graphc_erf_f64(x):
    return math.erf(x)


# exp(x) = 2^n e^r, n = round(x / ln 2), r = x - n ln 2, all in float32 so a vector
# holds 16 lanes: ln 2 split in two (a 9-bit high part, so n ln2_hi is exact for every
# n that reaches it), e^r by its Taylor series to r^7/7! (|r| <= 0.35: truncation
# 6e-9, a tenth of an ulp) in Horner's form with fused multiply-adds
# (``fastmath={"contract"}``, the only flag: nothing is reordered). n is rounded by
# adding 1.5 * 2^23 (the sum's low bits then hold n as an integer, so no float-to-int
# conversion is needed, and a NaN never reaches one); 2^n is two factors 2^h 2^(n-h)
# made from their bits, so the product passes through the subnormals with one
# rounding. Checked on every 7th float32 in [-104, 89] against exp in float64 rounded
# once: at most 1 ulp apart (0.46% of them), as the float64 evaluation this replaced,
# and NumPy's own SIMD exp is 2. 16 float32 lanes instead of 8 float64 ones: 0.30 ns an
# element here, against 0.9 for the float64 evaluation and 0.46 for NumPy's exp.
_LOG2E_F32, _LN2_HI_F32, _LN2_LO_F32 = np.float32(1.4426950408889634), \
    np.float32(0.693359375), np.float32(-2.12194440e-4)
_EXP_TAYLOR_F32 = tuple(np.float32(1.0 / math.factorial(k)) for k in range(8))
_F32_EXP_MAX, _F32_EXP_MIN = np.float32(89.0), np.float32(-104.0)
#: 1.5 * 2^23: a float32 sum with it is rounded to an integer, held in its low bits
_ROUNDER = np.float32(12582912.0)
_ROUNDER_BITS = int(_ROUNDER.view(np.int32))
#: 2^-64, the last factor of :func:`graphc_exp_nonpositive_f32`
_TWO_TO_MINUS_64 = np.float32(2.0 ** -64)


@intrinsic
def _float32_from_bits(typingctx, bits):
    """The float32 whose IEEE bits are the int32 ``bits`` (an LLVM bit cast)."""
    if not isinstance(bits, types.Integer) or bits.bitwidth != 32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(bits), codegen


@intrinsic
def _bits_of_float32(typingctx, x):
    """The int32 holding the IEEE bits of the float32 ``x`` (an LLVM bit cast)."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(x), codegen


@njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def _exp_parts_f32(t):
    """``(e^r, n)`` for a clamped ``t`` (see above): ``n`` as an int32."""
    rounded = t * _LOG2E_F32 + _ROUNDER
    n = rounded - _ROUNDER
    r = (t - n * _LN2_HI_F32) - n * _LN2_LO_F32
    c = _EXP_TAYLOR_F32
    p = (((((((c[7] * r + c[6]) * r + c[5]) * r + c[4]) * r + c[3]) * r + c[2]) * r + c[1]) * r
         + c[0])
    return p, _bits_of_float32(rounded) - int32(_ROUNDER_BITS)


@njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def graphc_exp_f32(x):
    # beyond the clamps exp is inf (x > 88.73) or rounds to 0 (x < -103.98); NaN passes
    t = _F32_EXP_MAX if x > _F32_EXP_MAX else (_F32_EXP_MIN if x < _F32_EXP_MIN else x)
    p, k = _exp_parts_f32(t)
    h = k >> 1
    return (p * _float32_from_bits(int32((h + 127) << 23))) \
        * _float32_from_bits(int32((k - h + 127) << 23))


@njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def graphc_exp_nonpositive_f32(x):
    """``graphc_exp_f32(x)`` for ``x <= 0`` or NaN (a softmax's shifted values), the same
    bits in fewer instructions (0.22 ns an element here): 2^n is one factor 2^(n+64),
    normal for every n >= -150 it meets, and the product's one rounding is the exact
    multiplication by 2^-64 that ends it."""
    t = _F32_EXP_MIN if x < _F32_EXP_MIN else x
    p, k = _exp_parts_f32(t)
    return (p * _float32_from_bits(int32((k + 64 + 127) << 23))) * _TWO_TO_MINUS_64


@intrinsic
def graphc_maxnum(typingctx, a, b):
    """C's ``fmax``: the larger of two floats of one type, the other where one is NaN
    (LLVM's ``maxnum``). Unlike ``graphc_max`` (NumPy's NaN-propagating maximum), a
    loop reducing with it runs as vectors: for maxima whose NaN does not matter, a
    softmax's row shift (a row holding NaN gives NaN whatever the shift)."""
    if not isinstance(a, types.Float) or a != b:
        return None

    def codegen(context, builder, signature, args):
        kind = args[0].type
        function = builder.module.declare_intrinsic("llvm.maxnum", [kind],
                                                    ir.FunctionType(kind, [kind, kind]))
        return builder.call(function, args)
    return a(a, b), codegen


@njit(cache=True, nogil=True, error_model="numpy")
def graphc_exp_f64(x):
    return np.exp(x)
