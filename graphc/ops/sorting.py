"""The sorting, searching and cumulative kinds. One definition each.

>>> from graphc.ops import DEFINITIONS
>>> isinstance(DEFINITIONS, dict)
True
"""
from __future__ import annotations

from .definition import define  # noqa: F401 (the kinds of this family are defined here)
