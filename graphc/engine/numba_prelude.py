"""Helpers the generated CPU kernels call (:mod:`.numba_codegen`), and the type names
their casts use: the Python twin of :data:`.cuda_codegen.PRELUDE`. Imported only by
generated kernel modules, so only with Numba installed.

Each helper is generic over its operand types (Numba compiles one version per
type), NumPy's semantics: ``maximum``/``minimum`` give NaN when either operand is
NaN; ``clip`` keeps ``x`` where it equals a bound; ``floor_divide`` and
``remainder`` follow NumPy's ``npy_divmod`` for floats.

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
           "graphc_clip", "graphc_floor_divide", "graphc_remainder"]


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
