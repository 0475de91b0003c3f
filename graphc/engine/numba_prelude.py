"""Helpers the generated CPU kernels call (:mod:`.numba_codegen`), and the type names
their casts use: the Python twin of :data:`.cuda_codegen.PRELUDE`. Imported only by
generated kernel modules, so only with Numba installed.

Each helper is generic over its operand types (Numba compiles one version per
type), NumPy's semantics: ``maximum``/``minimum`` give NaN when either operand is
NaN; ``clip`` keeps ``x`` where it equals a bound; ``floor_divide`` and
``remainder`` follow NumPy's ``npy_divmod`` for floats; ``graphc_erf`` is the C
library's ``erf`` on float64 and, on float32, a rational function evaluated in
float64 that LLVM vectorises (within one ulp of scipy's float32 ``erf``).

>>> y = graphc_max(1.0, float("nan")); y != y
True
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba.core.extending import overload
from numba.np.numpy_support import as_dtype

float32, float64, int32, int64, bool_ = np.float32, np.float64, np.int32, np.int64, np.bool_

__all__ = ["float32", "float64", "int32", "int64", "bool_", "graphc_max", "graphc_min",
           "graphc_clip", "graphc_floor_divide", "graphc_remainder", "graphc_erf"]


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


def graphc_erf(x):
    """erf in ``x``'s float type (Numba only: see the overload)."""


@overload(graphc_erf, jit_options={"error_model": "numpy"})
def _erf_typed(x):
    if as_dtype(x) != np.float32:
        return lambda x: math.erf(x)
    p0, p1, p2, p3, p4, p5, p6 = ERF_P
    _, q1, q2, q3, q4, q5 = ERF_Q

    def erf32(x):
        t = float64(x)
        t = 4.0 if t > 4.0 else (-4.0 if t < -4.0 else t)    # NaN passes through
        s = t * t
        p = (((((p6 * s + p5) * s + p4) * s + p3) * s + p2) * s + p1) * s + p0
        q = ((((q5 * s + q4) * s + q3) * s + q2) * s + q1) * s + 1.0
        return float32(t * p / q)
    return erf32
