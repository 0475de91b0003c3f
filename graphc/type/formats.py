"""Narrow number formats: bfloat16, the float8 and float4 formats, and 2- and 4-bit
integers, which NumPy has no native dtype for.

graphc holds a value of a narrow format in a wide *compute* dtype (float32 for the
float formats, int8 or uint8 for the small integers), rounded to the format's values:
every value of a narrow format is exact in its compute dtype, so a cast to the format
and back is exact and arithmetic on rounded values is arithmetic on the format's
values (as XLA's CPU backend computes bfloat16: in float32, rounding the results).
``ml_dtypes`` (the library JAX and onnx use for these types) gives the rounding and
the storage dtypes for arrays that cross the API.

>>> NARROW_FORMATS["float8_e4m3fn"].highest, NARROW_FORMATS["int4"].compute_dtype
(448.0, dtype('int8'))
>>> narrow_format("bfloat16").is_float
True
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import DTypeError

#: ``rounding=`` of :func:`round_to_format`: how a value between two powers of two rounds
#: to float8_e8m0fnu (the other formats round to nearest, ties to even, as IEEE casts do)
E8M0_ROUNDINGS = ("up", "down", "nearest")


@dataclass(frozen=True)
class NarrowFormat:
    """One narrow format: its name (``ml_dtypes``'s), the dtype graphc computes it in,
    its lowest and highest finite values, whether a saturating cast clips to them
    (the float8 formats; ONNX's ``saturate``), and whether it has a NaN.

    Example: ``NARROW_FORMATS["uint4"].lowest == 0``
    """

    name: str
    compute: str
    lowest: float
    highest: float
    saturable: bool = False
    has_nan: bool = True

    @property
    def compute_dtype(self) -> np.dtype:
        return np.dtype(self.compute)

    @property
    def is_float(self) -> bool:
        return self.compute_dtype.kind == "f"

    def storage_dtype(self) -> np.dtype:
        """The ``ml_dtypes`` dtype that stores the format one value per element."""
        try:
            import ml_dtypes
        except ImportError:  # pragma: no cover - a dependency of graphc
            raise DTypeError(f"the {self.name} format needs the ml_dtypes package "
                             "(pip install ml_dtypes)") from None
        return np.dtype(getattr(ml_dtypes, self.name))


def _float(name, highest, saturable=True, has_nan=True, lowest=None):
    return NarrowFormat(name, "float32", -highest if lowest is None else lowest, highest,
                        saturable, has_nan)


#: format name -> its facts; the names are ``ml_dtypes``'s (and so the dtypes' names)
NARROW_FORMATS: dict[str, NarrowFormat] = {f.name: f for f in (
    _float("bfloat16", 3.3895313892515355e38, saturable=False),
    _float("float8_e4m3fn", 448.0),
    _float("float8_e4m3fnuz", 240.0),
    _float("float8_e5m2", 57344.0),
    _float("float8_e5m2fnuz", 57344.0),
    # float4 has no NaN or infinity: its cast saturates by construction
    _float("float4_e2m1fn", 6.0, saturable=False, has_nan=False),
    # powers of two 2**-127 .. 2**127 and NaN; no sign, no zero
    _float("float8_e8m0fnu", 2.0 ** 127, saturable=False, lowest=2.0 ** -127),
    NarrowFormat("int4", "int8", -8, 7, has_nan=False),
    NarrowFormat("uint4", "uint8", 0, 15, has_nan=False),
    NarrowFormat("int2", "int8", -2, 1, has_nan=False),
    NarrowFormat("uint2", "uint8", 0, 3, has_nan=False),
)}


def narrow_format(name_or_dtype) -> NarrowFormat:
    """The narrow format named by a string or an ``ml_dtypes`` dtype; a clear error
    naming the known formats otherwise.

    Example: ``narrow_format(ml_dtypes.bfloat16).compute == "float32"``
    """
    name = name_or_dtype if isinstance(name_or_dtype, str) else _dtype_name(name_or_dtype)
    try:
        return NARROW_FORMATS[name]
    except KeyError:
        raise DTypeError(f"{name_or_dtype!r} is not a narrow number format; the formats are "
                         f"{sorted(NARROW_FORMATS)}") from None


def is_narrow(dtype) -> bool:
    """Whether ``dtype`` is one of the narrow formats' storage dtypes.

    >>> is_narrow(np.float32)
    False
    """
    try:
        return _dtype_name(dtype) in NARROW_FORMATS
    except TypeError:
        return False


def _dtype_name(dtype) -> str:
    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype)
