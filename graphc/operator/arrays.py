"""NumPy's array-building functions made of existing kinds: creation (``linspace``,
``eye``, ``diag``, ``tri``, ``meshgrid``, ...), joining and splitting (``hstack``,
``vstack``, ``array_split``, ...) and index helpers (``ix_``, ``tril_indices``,
``choose``, ``r_``, ...). Each family lives in its own module; this mixin gathers them.

>>> "ArrayMixin" in globals()
True
"""
from __future__ import annotations

from .array_creation import CreationFunctions
from .array_indexing import IndexFunctions
from .array_joining import JoiningFunctions


class ArrayMixin(CreationFunctions, JoiningFunctions, IndexFunctions):
    """Array creation, joining and splitting, written once for every backend."""
