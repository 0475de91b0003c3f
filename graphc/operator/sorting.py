"""Sorting, searching, cumulative and counting functions, statistics built on them,
and functions whose output size depends on the values (given a static ``size=``).

The kinds are few (``sort``, ``argsort``, ``cumsum``, ``cumprod``, ``searchsorted``,
``take_along_axis``, ``bincount``: :mod:`graphc.ops.sorting`); everything else is
composed of them, so it gets gradients, ONNX export and memory planning for free.
Order statistics and the nan-functions are in :mod:`.statistics`, the functions
of a value-dependent size in :mod:`.sized` and :mod:`.histograms`.

>>> "SortingMixin" in globals()
True
>>> import graphc.eager as E, numpy as np
>>> E.sort(np.array([3, 1, 2]))
array([1, 2, 3])
"""
from __future__ import annotations

import operator

import numpy as np

from ..shape.axes import normalize_axis
from ..type.errors import DTypeError, ShapeError
from .histograms import HistogramMixin
from .sized import SizedMixin
from .statistics import StatisticsMixin

#: ``kind=`` values NumPy accepts; only 'stable' and 'mergesort' promise stability
_SORT_KINDS = (None, "quicksort", "mergesort", "heapsort", "stable")


def _stable(name, kind, stable, order=None) -> bool:
    if order is not None:
        raise DTypeError(f"{name}: order= sorts structured arrays by field, which graphc "
                         "does not have")
    if kind not in _SORT_KINDS:
        raise ShapeError(f"{name}: kind must be one of {_SORT_KINDS[1:]}, got {kind!r}")
    return bool(stable) or kind in ("stable", "mergesort")


def _sort_axis(ns, name, x, axis):
    """``x`` (flattened when ``axis`` is None) and the axis, normalised."""
    if axis is None:
        return ns.ravel(x), 0
    if x.ndim == 0:
        raise ShapeError(f"{name}: axis {axis} is out of bounds for array of dimension 0")
    return x, normalize_axis(name, axis, x.ndim)


def isnan_of(ns, x):
    """Where ``x`` is NaN (all False for integers and booleans)."""
    if x.dtype.kind in "fc":
        return ns.not_equal(x, x)
    return ns.full(x.shape, False, np.bool_)


class SortingMixin(StatisticsMixin, SizedMixin, HistogramMixin):
    """Sorting, cumulative, counting and order statistics, for every backend."""

    # -- sorting -----------------------------------------------------------------------
    def sort(self, a, axis=-1, kind=None, order=None, *, stable=None):
        """``a`` sorted along ``axis`` (None: flattened), NaNs last, as ``numpy.sort``;
        ``stable=True`` (or ``kind='stable'``) keeps equal elements in order.

        Example: ``N.sort(scores, axis=1)``
        """
        stable = _stable("sort", kind, stable, order)
        x, axis = _sort_axis(self, "sort", self._lift(a), axis)
        return self._op("sort", [x], axis=axis, stable=stable)

    def argsort(self, a, axis=-1, kind=None, order=None, *, stable=None):
        """The indices that sort ``a`` along ``axis`` (None: flattened), as
        ``numpy.argsort``; dtype intp.

        Example: ``order = N.argsort(keys)``
        """
        stable = _stable("argsort", kind, stable, order)
        x, axis = _sort_axis(self, "argsort", self._lift(a), axis)
        return self._op("argsort", [x], axis=axis, stable=stable)

    def top_k(self, a, k, axis=-1, largest=True):
        """The ``k`` largest values of ``a`` along ``axis`` (``largest=False``: the
        smallest) and their indices (intp), best first, as ``torch.topk`` and
        ``jax.lax.top_k``: NaN ranks above every number (first among the largest,
        last among the smallest), equal values come in index order (ONNX's ``TopK``).
        The values' gradient reaches the chosen elements. Returns ``(values, indices)``.

        Example: ``scores, order = N.top_k(objectness, 1000)``
        """
        x = self._lift(a)
        if x.ndim == 0:
            raise ShapeError("top_k: the input must have at least one dimension, got a "
                             "0-d array")
        axis = normalize_axis("top_k", axis, x.ndim)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise ShapeError(f"top_k: k must be an int, got {k!r}")
        if not isinstance(largest, (bool, np.bool_)):
            raise ShapeError(f"top_k: largest must be True or False, got {largest!r}")
        indices = self._op("top_k", [x], k=int(k), axis=axis, largest=bool(largest))
        return self.take_along_axis(x, indices, axis), indices

    def _check_kth(self, name, x, kth, axis):
        n = x.shape[axis]
        for k in np.atleast_1d(np.asarray(kth)).ravel():
            k = operator.index(k)
            if not -n <= k < n:
                raise ShapeError(f"{name}: kth(={k}) out of bounds (axis {axis} of length {n})")

    def partition(self, a, kth, axis=-1, kind="introselect", order=None):
        """``a`` with the ``kth`` element(s) in their sorted places, smaller ones
        before and larger after. graphc sorts the whole axis, which is one such
        arrangement (NumPy's leaves the others in an unspecified order).

        Example: ``N.partition(x, 2)``
        """
        _stable("partition", None, None, order)
        x, axis_n = _sort_axis(self, "partition", self._lift(a), axis)
        self._check_kth("partition", x, kth, axis_n)
        return self._op("sort", [x], axis=axis_n, stable=False)

    def argpartition(self, a, kth, axis=-1, kind="introselect", order=None):
        """Indices that partition ``a`` around ``kth`` (a full ``argsort``, which is one
        valid answer; see :meth:`partition`). Example: ``N.argpartition(x, 2)``"""
        _stable("argpartition", None, None, order)
        x, axis_n = _sort_axis(self, "argpartition", self._lift(a), axis)
        self._check_kth("argpartition", x, kth, axis_n)
        return self._op("argsort", [x], axis=axis_n, stable=False)

    def sort_complex(self, a):
        """``a`` as complex numbers sorted by real part, then imaginary part, along
        the last axis (``numpy.sort_complex``). Example: ``N.sort_complex(roots)``"""
        x = self._lift(a)
        target = np.sort_complex(np.zeros(1, x.dtype)).dtype
        return self.sort(self.astype(x, target), axis=-1)

    def lexsort(self, keys, axis=-1):
        """Indices sorting by several keys, the LAST key first (``numpy.lexsort``):
        successive stable sorts. Example: ``N.lexsort((first_names, surnames))``"""
        if self._is_value(keys) or isinstance(keys, np.ndarray):
            keys = self._lift(keys)
            keys = [self.getitem(keys, i) for i in range(keys.shape[0])] if keys.ndim else []
        else:
            keys = [self._lift(k) for k in keys]
        if not keys:
            raise ShapeError("lexsort: need at least one key")
        shapes = {k.shape for k in keys}
        if len(shapes) != 1:
            raise ShapeError(f"lexsort: all keys need the same shape, got "
                             f"{[k.shape for k in keys]}")
        if axis is None:
            keys, axis = [self.ravel(k) for k in keys], 0
        x, axis = _sort_axis(self, "lexsort", keys[0], axis)
        order = self.argsort(x, axis=axis, stable=True)
        for key in keys[1:]:
            ranked = self.take_along_axis(key, order, axis)
            order = self.take_along_axis(order, self.argsort(ranked, axis=axis, stable=True),
                                         axis)
        return order

    def take_along_axis(self, arr, indices, axis=-1):
        """Elements of ``arr`` at ``indices`` along ``axis`` (None: flattened), the
        other axes broadcast (``numpy.take_along_axis``).

        Example: ``N.take_along_axis(x, N.argsort(x, axis=1), axis=1)``
        """
        x, indices = self._lift(arr), self._lift(indices)
        if axis is None:
            if indices.ndim != 1:
                raise ShapeError(f"take_along_axis: indices of shape {indices.shape} must be "
                                 "one-dimensional when axis is None")
            x, axis = self.ravel(x), 0
        if x.ndim == 0:
            raise ShapeError("take_along_axis: the array must have at least one dimension")
        axis = normalize_axis("take_along_axis", axis, x.ndim)
        self._check_range("take_along_axis", indices, x.shape[axis], axis)
        return self._op("take_along_axis", [x, indices], axis=axis)

    def _check_range(self, name, indices, size, axis):
        known = self._known(indices)
        if known is not None and known.size and known.dtype.kind in "iu" and (
                known.min() < -size or known.max() >= size):
            from ..type.errors import IndexOutOfRange
            bad = known[(known < -size) | (known >= size)].flat[0]
            raise IndexOutOfRange(f"{name}: index {bad} is out of bounds for axis {axis} "
                                  f"with size {size}")

    # -- searching ----------------------------------------------------------------------
    def searchsorted(self, a, v, side="left", sorter=None):
        """Where ``v``'s values would go in the sorted 1-D ``a`` to keep it sorted
        (``side``: before or after equal ones); ``sorter`` sorts ``a`` first.

        Example: ``N.searchsorted(edges, x, side="right")``
        """
        a, v = self._lift(a), self._lift(v)
        if sorter is not None:
            a = self.take(a, sorter)
        if side not in ("left", "right"):
            raise ShapeError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        return self._op("searchsorted", [a, v], side=side)

    def digitize(self, x, bins, right=False):
        """The index of the bin of each value of ``x`` (``numpy.digitize``): bins
        increasing or decreasing; of graph-valued bins, both are computed and the
        direction chosen at run time. Example: ``N.digitize(x, [0.0, 1.0, 2.0])``"""
        x, bins = self._lift(x), self._lift(bins)
        if bins.ndim != 1:
            raise ShapeError(f"digitize: bins must be one-dimensional, got shape {bins.shape}")
        if x.dtype.kind == "c" or bins.dtype.kind == "c":
            raise DTypeError("digitize: x may not be complex")
        side = "left" if right else "right"
        known = self._known(bins)
        n = bins.shape[0]
        rising = lambda: self.searchsorted(bins, x, side=side)  # noqa: E731
        falling = lambda: self.subtract(  # noqa: E731
            n, self.searchsorted(self.flip(bins, 0), x, side=side))
        if known is not None:
            step = np.diff(known)
            if (step >= 0).all():
                return rising()
            if (step <= 0).all():
                return falling()
            raise ShapeError("digitize: bins must be monotonically increasing or decreasing")
        if n < 2:
            return rising()
        increasing = self.less_equal(self.getitem(bins, 0), self.getitem(bins, -1))
        return self.where(increasing, rising(), falling())

    # -- cumulative ---------------------------------------------------------------------
    def _cumulative(self, name, kind, a, axis, dtype, masked=None):
        x = self._lift(a)
        if masked is not None and x.dtype.kind in "fc":
            x = self.where(isnan_of(self, x), masked, x)
        if axis is None:
            x, axis = self.ravel(x), 0
        elif x.ndim == 0:
            raise ShapeError(f"{name}: axis {axis} is out of bounds for array of dimension 0")
        axis = normalize_axis(name, axis, x.ndim)
        if dtype is not None:
            dtype = self._dtype(name, dtype)
            x = self.astype(x, dtype)
        result = self._op(kind, [x], axis=axis)
        # integers accumulate in intp (wrapping the same way) before the asked dtype
        return result if dtype is None or result.dtype == dtype else self.astype(result, dtype)

    def cumsum(self, a, axis=None, dtype=None):
        """Running sums along ``axis`` (None: flattened), as ``numpy.cumsum``.

        Example: ``N.cumsum(x, axis=0)``
        """
        return self._cumulative("cumsum", "cumsum", a, axis, dtype)

    def cumprod(self, a, axis=None, dtype=None):
        """Running products along ``axis`` (None: flattened), as ``numpy.cumprod``;
        its gradient is exact where ``a`` holds zeros. Example: ``N.cumprod(x, axis=1)``"""
        return self._cumulative("cumprod", "cumprod", a, axis, dtype)

    def nancumsum(self, a, axis=None, dtype=None):
        """Running sums with NaNs counted as 0. Example: ``N.nancumsum(x)``"""
        return self._cumulative("nancumsum", "cumsum", a, axis, dtype, masked=0)

    def nancumprod(self, a, axis=None, dtype=None):
        """Running products with NaNs counted as 1. Example: ``N.nancumprod(x)``"""
        return self._cumulative("nancumprod", "cumprod", a, axis, dtype, masked=1)

    def _cumulative_api(self, name, kind, x, axis, dtype, include_initial, identity):
        x = self._lift(x)
        if axis is None:
            if x.ndim > 1:
                raise ShapeError(f"{name}: axis must be given for arrays of more than one "
                                 f"dimension (shape {x.shape})")
            if x.ndim == 0:
                raise ShapeError(f"{name}: the array must have at least one dimension")
            axis = 0
        result = self._cumulative(name, kind, x, axis, dtype)
        if not include_initial:
            return result
        axis = normalize_axis(name, axis, x.ndim)
        shape = result.shape[:axis] + (1,) + result.shape[axis + 1:]
        return self.concatenate([self.full(shape, identity, result.dtype), result], axis=axis)

    def cumulative_sum(self, x, /, *, axis=None, dtype=None, include_initial=False):
        """The array API's running sum: ``cumsum`` with a leading 0 if ``include_initial``.

        Example: ``N.cumulative_sum(x, axis=1, include_initial=True)``
        """
        return self._cumulative_api("cumulative_sum", "cumsum", x, axis, dtype,
                                    include_initial, 0)

    def cumulative_prod(self, x, /, *, axis=None, dtype=None, include_initial=False):
        """The array API's running product: ``cumprod`` with a leading 1 if
        ``include_initial``. Example: ``N.cumulative_prod(x, axis=0)``"""
        return self._cumulative_api("cumulative_prod", "cumprod", x, axis, dtype,
                                    include_initial, 1)
