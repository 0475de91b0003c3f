"""Result dtypes, decided by asking NumPy itself on one-element arrays.

NumPy is the specification graphc follows, so rather than re-deriving its
promotion tables (which change between releases, as NumPy 2's weak scalars
did), each rule calls the reference function once per distinct dtype signature
and caches the answer.

>>> import numpy as np
>>> probe_dtype("divide", (np.dtype("int32"), np.dtype("int32")))
dtype('float64')
"""
from __future__ import annotations

import functools
import warnings

import numpy as np

from ..type.errors import DTypeError
from ..type.kinds import reference_function


def probe_dtype(kind: str, dtypes: tuple, extra: tuple = ()) -> np.dtype:
    """The dtype NumPy's reference of ``kind`` returns for arguments of ``dtypes``.

    ``extra`` holds further positional arguments (Python scalars, axes) passed
    after the arrays, which matter for NumPy 2's weak-scalar promotion.
    """
    # the cache key carries each extra argument's type: 0 == 0.0 == False, but
    # clip(int32, 0, None) is int32 and clip(int32, 0.0, None) float64
    return _probe_dtype(kind, tuple(dtypes), tuple((type(e), e) for e in extra))


@functools.lru_cache(maxsize=4096)
def _probe_dtype(kind: str, dtypes: tuple, typed_extra: tuple) -> np.dtype:
    extra = tuple(e for _, e in typed_extra)
    fn = reference_function(kind)
    samples = [np.ones(1, dtype=d) for d in dtypes]
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            result = fn(*samples, *extra)
    except (TypeError, ValueError) as exc:  # UFuncTypeError is a TypeError
        names = ", ".join(str(np.dtype(d)) for d in dtypes)
        raise DTypeError(f"{kind}: not defined for dtypes ({names}): {exc}") from None
    return np.asarray(result).dtype


def as_dtype(opname: str, dtype) -> np.dtype:
    """``dtype`` as a NumPy dtype, refusing object and other non-numeric dtypes."""
    try:
        result = np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"{opname}: {dtype!r} is not a dtype") from None
    if result.kind not in "biufc":
        raise DTypeError(f"{opname}: dtype {result} is not supported "
                         "(expected a boolean, integer, float or complex dtype)")
    return result
