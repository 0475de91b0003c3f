"""NumPy's array-building functions made of existing kinds: creation (``linspace``,
``eye``, ``diag``, ``tri``, ``meshgrid``, ...), joining and splitting (``hstack``,
``vstack``, ``array_split``, ...) and index helpers.

>>> "ArrayMixin" in globals()
True
"""
from __future__ import annotations


class ArrayMixin:
    """Array creation, joining and splitting, written once for every backend."""
