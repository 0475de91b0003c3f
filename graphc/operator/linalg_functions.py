"""``N.linalg``: NumPy's ``numpy.linalg`` functions as graph nodes.

>>> "LinalgFunctions" in globals()
True
"""
from __future__ import annotations


class LinalgFunctions:
    """``N.linalg`` (``E.linalg`` in eager mode): NumPy's linear algebra."""

    def __init__(self, namespace):
        self._ns = namespace
