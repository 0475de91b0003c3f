"""``N.fft``: NumPy's ``numpy.fft`` functions as graph nodes.

>>> "FFTFunctions" in globals()
True
"""
from __future__ import annotations


class FFTFunctions:
    """``N.fft`` (``E.fft`` in eager mode): NumPy's discrete Fourier transforms."""

    def __init__(self, namespace):
        self._ns = namespace
