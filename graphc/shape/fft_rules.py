"""The shape and dtype rule of the ``fft`` kind (``numpy.fft``'s transforms).

One kind computes every transform: its attributes are ``transform`` (the NumPy
function: ``fftn``, ``ifftn``, ``rfftn``, ``irfftn``, ``hfft`` or ``ihfft``), ``axes``
(non-negative), ``lengths`` (NumPy's ``s``, or ``(n,)``: the transform's length along
each axis) and ``norm``. The dtype is NumPy's own (float32 in, complex64 out; complex64
into ``irfftn``, float32 out), found by running the transform on a tiny array.

>>> import numpy as np
>>> from graphc.type.op import Op
>>> class A:
...     def __init__(self, shape, dtype): self.shape, self.dtype = shape, np.dtype(dtype)
>>> fft(Op.make("fft", transform="rfftn", axes=(1,), lengths=(8,), norm="backward"),
...     [A((3, 8), "float32")])
((3, 5), dtype('complex64'))
"""
from __future__ import annotations

import functools

import numpy as np

from ..type.errors import DTypeError, ShapeError

#: the transforms whose last axis is half a spectrum (real to complex)
HALF_OUTPUT = ("rfftn", "ihfft")
#: the transforms that take half a spectrum (complex to real)
HALF_INPUT = ("irfftn", "hfft")
TRANSFORMS = ("fftn", "ifftn", "rfftn", "irfftn", "hfft", "ihfft")
NORMS = ("backward", "ortho", "forward")


@functools.lru_cache(maxsize=None)
def fft_dtype(transform: str, dtype: np.dtype) -> np.dtype:
    """The dtype ``numpy.fft.<transform>`` gives for an input of ``dtype``.

    Example: ``fft_dtype("irfftn", np.dtype("complex64"))`` is float32
    """
    try:
        return getattr(np.fft, transform)(np.ones(4, dtype)).dtype
    except TypeError as exc:
        raise DTypeError(f"fft.{transform}: not defined for dtype {dtype}: {exc}") from None


def fft_shape(transform, shape, axes, lengths) -> tuple:
    """The result's shape: each axis of ``axes`` takes its length (half a spectrum, plus
    one, on the last axis of a real-to-complex transform)."""
    result = list(shape)
    for axis, n in zip(axes, lengths):
        result[axis] = n
    if transform in HALF_OUTPUT:
        result[axes[-1]] = lengths[-1] // 2 + 1
    return tuple(result)


def fft(op, parents):
    (x,) = parents
    transform, axes, lengths = op["transform"], op["axes"], op["lengths"]
    name = f"fft.{transform}"
    if transform not in TRANSFORMS or op["norm"] not in NORMS:
        raise ShapeError(f"{name}: unknown transform or norm {op['norm']!r}")
    if not axes or len(axes) != len(lengths) or any(
            not 0 <= a < len(x.shape) for a in axes):
        raise ShapeError(f"{name}: axes {axes} and lengths {lengths} do not fit shape "
                         f"{x.shape}")
    if any(n < 1 for n in lengths):
        raise ShapeError(f"{name}: Invalid number of FFT data points ({min(lengths)}) "
                         "specified.")
    if len(set(axes)) != len(axes) and any(
            lengths[i] != lengths[axes.index(a)] for i, a in enumerate(axes)):
        raise ShapeError(f"{name}: an axis repeated in {axes} must take one length")
    return fft_shape(transform, x.shape, axes, lengths), fft_dtype(transform, x.dtype)
