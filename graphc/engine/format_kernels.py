"""The kernel of ``round_to_format``: values rounded to a narrow number format
(:mod:`graphc.type.formats`) and held in the format's compute dtype.

Rounding goes through ``ml_dtypes``' casts (round to nearest, ties to even; the small
integers truncate toward zero and wrap, as NumPy's float-to-int casts do), after a
clip to the finite range where the cast saturates. float8_e8m0fnu (powers of two)
rounds by its exponent bits, up, down or to the nearest power.

>>> import numpy as np
>>> rounded_to_format(np.array([1.0, 1000.0], np.float32), "float8_e4m3fn", True, "up")
array([  1., 448.], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ..type.formats import NARROW_FORMATS


def rounded_to_format(x: np.ndarray, name: str, saturate: bool, rounding: str) -> np.ndarray:
    """``x`` rounded to the format ``name``, as an array of its compute dtype."""
    fmt = NARROW_FORMATS[name]
    if name == "float8_e8m0fnu":
        return _powers_of_two(np.asarray(x, np.float32), saturate, rounding)
    if saturate and fmt.saturable:
        x = np.clip(x, fmt.lowest, fmt.highest)  # NaN stays NaN
    return np.asarray(x).astype(fmt.storage_dtype()).astype(fmt.compute_dtype)


def _powers_of_two(x: np.ndarray, saturate: bool, rounding: str) -> np.ndarray:
    """float8_e8m0fnu: 2**(e - 127) for the biased exponent e of float32 ``x``, moved
    up when the rounding asks and the mantissa is not 0 ("up") or reaches one half
    ("nearest"); 255 (from infinities, NaN or an overflow) is NaN."""
    bits = x.view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.int32)
    mantissa = bits & 0x7FFFFF
    special = exponent == 0xFF
    if rounding == "up":
        up = mantissa > 0
    elif rounding == "nearest":
        up = (mantissa >= 0x400000) & (((mantissa & 0x3FFFFF) > 0) | (exponent > 0))
    else:
        up = np.zeros(x.shape, bool)
    up &= ~special
    if saturate:
        up &= exponent != 0xFE
    exponent = exponent + up
    result = np.ldexp(np.float32(1.0), np.minimum(exponent, 0xFE) - 127).astype(np.float32)
    result[special | (exponent >= 0xFF)] = np.nan
    return result


def round_to_format(op, ins, out, ctx):
    """The CPU kernel: round ``ins[0]`` into ``out`` (the compute dtype)."""
    def run():
        out[...] = rounded_to_format(ins[0], op["format"], op["saturate"], op["rounding"])
    return run

