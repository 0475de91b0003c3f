"""NumPy's mathematical functions made of existing kinds (``logaddexp``, ``isclose``,
``outer``, ``trace``, ``cross``, ``diff``, ``convolve``, ...).

>>> "MathMixin" in globals()
True
"""
from __future__ import annotations


class MathMixin:
    """Composite mathematical functions, written once for every backend."""
