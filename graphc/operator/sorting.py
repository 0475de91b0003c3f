"""Sorting, searching, cumulative and counting functions, statistics built on them,
and functions whose output size depends on the values (given a static ``size=``).

>>> "SortingMixin" in globals()
True
"""
from __future__ import annotations


class SortingMixin:
    """Sorting, cumulative, counting and order statistics, for every backend."""
