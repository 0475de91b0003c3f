"""Helpers the generated CPU kernels call (:mod:`.numba_codegen`), and the type names
their casts use: the Python twin of :data:`.cuda_codegen.PRELUDE`. Imported only by
generated kernel modules, so only with Numba installed.

Each helper is generic over its operand types (Numba compiles one version per
type), NumPy's semantics: ``maximum``/``minimum`` give NaN when either operand is
NaN; ``clip`` keeps ``x`` where it equals a bound; ``floor_divide`` and
``remainder`` follow NumPy's ``npy_divmod`` for floats. ``graphc_exp_f32`` and
``graphc_erf_f32`` are arithmetic evaluated in float64 and rounded once, which LLVM
vectorises (within one float32 ulp of NumPy's ``exp`` and scipy's ``erf``); their
``_f64`` twins call the C library, element by element. A kernel picks one by its
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
           "graphc_erf_f64", "graphc_exp_f32", "graphc_exp_f64"]


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


# exp(x) = 2^n e^r, n = round(x / ln 2), r = x - n ln 2 (ln 2 split in two, fdlibm's
# hi/lo, so n ln 2 is exact), e^r by its Taylor series to r^7/7! (|r| <= 0.35: relative
# error under 6e-9, a tenth of a float32 ulp), 2^n from its float64 bits: one rounding
# to float32 at the end, so within one ulp of the correctly rounded exp (checked on
# every 3rd float32 in [-110, 95]), overflow to inf and underflow through the
# subnormals as float32 does. All arithmetic and a
# bit cast: LLVM vectorises it, where a call to the C library's expf runs per element.
_LOG2E, _LN2_HI, _LN2_LO = 1.4426950408889634, 6.93147180369123816490e-01, \
    1.90821492927058770002e-10
_EXP_TAYLOR = tuple(1.0 / math.factorial(k) for k in range(8))


@intrinsic
def _float64_from_bits(typingctx, bits):
    """The float64 whose IEEE bits are the int64 ``bits`` (an LLVM bit cast)."""
    if not isinstance(bits, types.Integer) or bits.bitwidth != 64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(bits), codegen


@njit(cache=True, nogil=True, error_model="numpy")
def graphc_exp_f32(x):
    t = float64(x)
    t = 90.0 if t > 90.0 else (-110.0 if t < -110.0 else t)   # NaN passes through
    n = np.floor(t * _LOG2E + 0.5)
    n = 0.0 if n != n else n                 # a NaN never reaches the integer cast
    r = (t - n * _LN2_HI) - n * _LN2_LO
    c = _EXP_TAYLOR
    p = (((((((c[7] * r + c[6]) * r + c[5]) * r + c[4]) * r + c[3]) * r + c[2]) * r + c[1]) * r
         + c[0])
    scale = _float64_from_bits((int64(n) + 1023) << 52)
    return float32(p * scale)


@njit(cache=True, nogil=True, error_model="numpy")
def graphc_exp_f64(x):
    return np.exp(x)
