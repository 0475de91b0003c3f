"""Histograms with a static number of bins (``bins`` an int, or static or graph edges):
NumPy's bin edges, computed in the graph when the range comes from the data, and
the counts by ``searchsorted`` and ``bincount``.

>>> import graphc.eager as E, numpy as np
>>> E.histogram(np.array([0.0, 0.5, 1.0]), bins=2)[0]
array([1, 2])
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..type.errors import ShapeError


class HistogramMixin:
    """histogram, histogram2d, histogramdd, histogram_bin_edges (part of ``SortingMixin``)."""

    def _equal_edges(self, name, a, bins, range):
        """NumPy's ``linspace(first, last, bins + 1)`` of the outer edges (the data's
        min and max unless ``range``; widened by 0.5 each side when equal)."""
        if bins < 1:
            raise ShapeError(f"{name}: `bins` must be positive, when an integer")
        if range is not None:
            first, last = (float(v) for v in range)
            if first > last:
                raise ShapeError(f"{name}: max must be larger than min in range parameter.")
            if not (np.isfinite(first) and np.isfinite(last)):
                raise ShapeError(f"{name}: supplied range of [{first}, {last}] is not finite")
            if first == last:
                first, last = first - 0.5, last + 0.5
            compute = np.dtype(np.float64)
            first, last = self.const(np.float64(first)), self.const(np.float64(last))
        else:
            if a.size == 0:
                first, last = self.const(np.float64(0.0)), self.const(np.float64(1.0))
                compute = np.dtype(np.float64)
            else:
                compute = a.dtype if a.dtype.kind == "f" else np.dtype(np.float64)
                first = self.astype(self.min(a), compute)
                last = self.astype(self.max(a), compute)
                same = self.equal(first, last)
                first = self.where(same, self.subtract(first, 0.5), first)
                last = self.where(same, self.add(last, 0.5), last)
        edge_type = np.result_type(a.dtype if a.dtype.kind == "f" else np.float64,
                                   np.float32 if range is None else np.float32)
        step = self.divide(self.subtract(last, first), bins)
        ramp = self.add(self.multiply(self.const(np.arange(bins, dtype=compute)), step), first)
        edges = self.concatenate([ramp, self.reshape(last, (1,))])
        return self.astype(edges, edge_type), first, last

    def _edges(self, name, a, bins, range):
        if isinstance(bins, str):
            raise ShapeError(f"{name}: bins={bins!r} picks the number of bins from the values; "
                             "give an int or the edges")
        if np.ndim(bins) == 0 and not self._is_value(bins):
            return self._equal_edges(name, a, operator.index(bins), range)
        edges = self._lift(bins)
        if edges.ndim != 1 or edges.shape[0] < 2:
            raise ShapeError(f"{name}: bins must be a 1-d array of at least two edges")
        known = self._known(edges)
        if known is not None and (np.diff(known) < 0).any():
            raise ShapeError(f"{name}: bins must increase monotonically, when an array")
        return edges, self.getitem(edges, 0), self.getitem(edges, -1)

    def histogram_bin_edges(self, a, bins=10, range=None, weights=None):
        """The bin edges :meth:`histogram` uses. Example: ``N.histogram_bin_edges(x, 5)``"""
        return self._edges("histogram_bin_edges", self.ravel(self._lift(a)), bins, range)[0]

    def histogram(self, a, bins=10, range=None, density=None, weights=None):
        """Counts of ``a`` (flattened) in ``bins`` (an int: equal bins over ``range`` or
        the data's extent; or the edges), and the edges, as ``numpy.histogram``.

        Example: ``counts, edges = N.histogram(x, bins=20, range=(0.0, 1.0))``
        """
        x = self.ravel(self._lift(a))
        edges, first, last = self._edges("histogram", x, bins, range)
        n = edges.shape[0] - 1
        at = self.subtract(self.searchsorted(edges, x, side="right"), 1)
        at = self.where(self.equal(x, self.getitem(edges, -1)), n - 1, at)
        keep = self.logical_and(self.greater_equal(x, first), self.less_equal(x, last))
        at = self.where(keep, at, n)
        w = None if weights is None else self.ravel(self._lift(weights))
        counts = self.bincount(at, w, length=n)
        if w is not None:
            counts = self.astype(counts, w.dtype)
        if density:
            widths = self.astype(self.subtract(edges[1:], edges[:-1]), np.float64)
            counts = self.divide(self.divide(counts, widths), self.sum(counts))
        return counts, edges

    def histogramdd(self, sample, bins=10, range=None, density=None, weights=None):
        """The D-dimensional histogram of ``sample`` (N points by D), as
        ``numpy.histogramdd``: float counts and one edge array per dimension.

        Example: ``H, edges = N.histogramdd(points, bins=(4, 5))``
        """
        points = self._lift(sample)
        if points.ndim == 1:
            points = self.reshape(points, (points.shape[0], 1))
        if points.ndim != 2:
            raise ShapeError(f"histogramdd: sample must be N points by D dimensions, got "
                             f"shape {points.shape}")
        count, dims = points.shape
        per_dim = list(bins) if isinstance(bins, (list, tuple)) else [bins] * dims
        ranges = list(range) if range is not None else [None] * dims
        if len(per_dim) != dims or len(ranges) != dims:
            raise ShapeError("histogramdd: the dimension of bins (and range) must equal the "
                             "dimension of the sample x")
        edges, flat, sizes = [], None, []
        for d in builtins_range(dims):
            column = self.getitem(points, (slice(None), d))
            e, _, _ = self._edges("histogramdd", column, per_dim[d], ranges[d])
            edges.append(e)
            sizes.append(e.shape[0] + 1)
            at = self.searchsorted(e, column, side="right")
            at = self.where(self.equal(column, self.getitem(e, -1)), self.subtract(at, 1), at)
            flat = at if flat is None else self.add(self.multiply(flat, sizes[-1]), at)
        total = math.prod(sizes)
        w = None if weights is None else self._lift(weights)
        if flat is None:
            flat = self.zeros((count,), np.intp)
        hist = self.astype(self.bincount(flat, w, length=total), np.float64)
        hist = self.reshape(hist, tuple(sizes))
        hist = self.getitem(hist, tuple(slice(1, -1) for _ in sizes))
        if density:
            volume = None
            for d, e in enumerate(edges):
                width = self.astype(self.subtract(e[1:], e[:-1]), np.float64)
                shape = [1] * dims
                shape[d] = e.shape[0] - 1
                width = self.reshape(width, tuple(shape))
                volume = width if volume is None else self.multiply(volume, width)
            hist = self.divide(self.divide(hist, self.sum(hist)), volume)
        return hist, edges

    def histogram2d(self, x, y, bins=10, range=None, density=None, weights=None):
        """The 2-D histogram of points ``(x, y)``: counts and both edge arrays, as
        ``numpy.histogram2d``. Example: ``H, xe, ye = N.histogram2d(x, y, bins=8)``"""
        points = self.stack([self._lift(x), self._lift(y)], axis=1)
        if not isinstance(bins, (list, tuple)) or len(bins) != 2:
            bins = [bins, bins]
        hist, edges = self.histogramdd(points, bins, range, density, weights)
        return hist, edges[0], edges[1]


builtins_range = range
