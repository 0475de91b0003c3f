"""Order statistics and the nan-functions, composed of ``sort``, ``take_along_axis``
and elementwise arithmetic (so they have gradients through the sort).

Quantiles follow NumPy's algorithm step by step (the virtual index of each
``method=``, its neighbours, the same ``lerp`` and the same float types), so
results match NumPy's bits. The nan-functions read NaN as missing; their
counts of valid values are graph values, so the positions of the order
statistics are computed in the graph too.

>>> import graphc.eager as E, numpy as np
>>> float(E.median(np.array([3.0, 1.0, 2.0, 10.0])))
2.5
"""
from __future__ import annotations

import math

import numpy as np

from ..shape.axes import normalize_axes
from ..type.errors import DTypeError, IndexOutOfRange, ShapeError


def _isnan(ns, x):
    return ns.not_equal(x, x) if x.dtype.kind in "fc" else ns.full(x.shape, False, np.bool_)


def _virtual(alpha, beta):
    """NumPy's ``_compute_virtual_index`` (Hyndman and Fan's continuous methods)."""
    def index(ns, n, q):
        shift = ns.add(alpha, ns.multiply(q, 1 - alpha - beta))
        return ns.subtract(ns.add(ns.multiply(n, q), shift), 1)
    return index


def _linear(ns, n, q):
    return ns.multiply(ns.subtract(n, 1), q)


def _midpoint(ns, n, q):
    at = _linear(ns, n, q)
    return ns.multiply(0.5, ns.add(ns.floor(at), ns.ceil(at)))


def _boundaries(ns, index, take_previous):
    """NumPy's ``_discrete_interpolation_to_boundaries``."""
    previous = ns.floor(index)
    gamma = ns.subtract(index, previous)
    chosen = ns.where(take_previous(gamma, index), previous, ns.add(previous, 1))
    return ns.maximum(chosen, 0.0)


def _inverted_cdf(ns, n, q):
    return _boundaries(ns, ns.subtract(ns.multiply(n, q), 1),
                       lambda gamma, _: ns.equal(gamma, 0))


def _closest_observation(ns, n, q):
    odd = lambda gamma, index: ns.logical_and(  # noqa: E731
        ns.equal(gamma, 0), ns.equal(ns.remainder(ns.floor(index), 2), 1))
    return _boundaries(ns, ns.subtract(ns.subtract(ns.multiply(n, q), 1), 0.5), odd)


def _keep_gamma(ns, gamma, index):
    return gamma


#: method -> (virtual index of (n, q), gamma's fix, or None for methods that pick one
#: element); NumPy's ``_QuantileMethods``
METHODS = {
    "inverted_cdf": (_inverted_cdf, None),
    "averaged_inverted_cdf": (lambda ns, n, q: ns.subtract(ns.multiply(n, q), 1),
                              lambda ns, g, i: ns.where(ns.equal(g, 0), 0.5, 1.0)),
    "closest_observation": (_closest_observation, None),
    "interpolated_inverted_cdf": (_virtual(0, 1), _keep_gamma),
    "hazen": (_virtual(0.5, 0.5), _keep_gamma),
    "weibull": (_virtual(0, 0), _keep_gamma),
    "linear": (_linear, _keep_gamma),
    "median_unbiased": (_virtual(1 / 3.0, 1 / 3.0), _keep_gamma),
    "normal_unbiased": (_virtual(3 / 8.0, 3 / 8.0), _keep_gamma),
    "lower": (lambda ns, n, q: ns.floor(_linear(ns, n, q)), None),
    "higher": (lambda ns, n, q: ns.ceil(_linear(ns, n, q)), None),
    "midpoint": (_midpoint, lambda ns, g, i: ns.where(ns.equal(ns.remainder(i, 1), 0),
                                                      0.0, 0.5)),
    "nearest": (lambda ns, n, q: ns.rint(_linear(ns, n, q)), None),
}


def _to_last(ns, name, x, axis):
    """``x`` with the reduced axes moved last and merged into one; the batch shape,
    the merged length and the result's shape with the reduced axes kept as 1."""
    axes = normalize_axes(name, axis, x.ndim)
    axes = tuple(range(x.ndim)) if axes is None else axes
    kept = [d for d in range(x.ndim) if d not in axes]
    batch = tuple(x.shape[d] for d in kept)
    n = math.prod(x.shape[a] for a in axes)
    flat = ns.reshape(ns.transpose(x, kept + list(axes)), batch + (n,))
    keep_shape = tuple(1 if d in axes else x.shape[d] for d in range(x.ndim))
    return flat, batch, n, keep_shape


def _finish(ns, values, q_shape, batch, keep_shape, keepdims):
    """Values of shape ``batch + (k,)`` as NumPy's result: ``q``'s axes first."""
    values = ns.moveaxis(values, -1, 0)
    return ns.reshape(values, q_shape + (keep_shape if keepdims else batch))


def _lerp(ns, a, b, gamma, dtype):
    """NumPy's ``_lerp``: ``a + (b - a) t``, from ``b``'s side where ``t >= 0.5``;
    the difference in the values' dtype, the rest in ``dtype``."""
    diff = ns.astype(ns.subtract(b, a), dtype)
    t, rest = ns.astype(gamma, dtype), ns.astype(ns.subtract(1.0, gamma), dtype)
    a, b = ns.astype(a, dtype), ns.astype(b, dtype)
    return ns.where(ns.greater_equal(gamma, 0.5), ns.subtract(b, ns.multiply(diff, rest)),
                    ns.add(a, ns.multiply(diff, t)))


class StatisticsMixin:
    """Medians, quantiles and the nan-functions (part of ``SortingMixin``)."""

    def _static_q(self, name, q, scale):
        known = self._known(q) if self._is_value(q) else np.asarray(q)
        if known is None:
            raise ShapeError(f"{name}: q must be known while building (a constant or "
                             "array-like), not a graph value")
        q = np.true_divide(np.asarray(known), scale)
        what = "Percentiles must be in the range [0, 100]" if scale == 100 else \
            "Quantiles must be in the range [0, 1]"
        if q.dtype.kind not in "biuf" or q.ndim > 2 or not ((q >= 0) & (q <= 1)).all():
            raise ShapeError(f"{name}: {what} (and q at most 2-D), got {known!r}")
        return q

    def _quantile(self, name, a, q, axis, method, keepdims, *, scale, nan_aware):
        weak = type(q) in (int, float)
        x = self._lift(a)
        if x.dtype.kind not in "iuf":
            raise DTypeError(f"{name}: a must be an array of real numbers, got {x.dtype}")
        if method not in METHODS:
            raise ShapeError(f"{name}: {method!r} is not a valid method; use one of "
                             f"{sorted(METHODS)}")
        q = self._static_q(name, q, scale)
        flat, batch, n, keep_shape = _to_last(self, name, x, axis)
        if n == 0:
            raise IndexOutOfRange(f"{name}: index -1 is out of bounds for an empty axis "
                                  f"(shape {x.shape})")
        nan_aware = nan_aware and x.dtype.kind == "f"
        ordered = self.sort(flat, axis=-1)
        qs = self.const(q.ravel().astype(np.float64))
        count = self.sum(self.logical_not(_isnan(self, flat)), axis=-1, keepdims=True) \
            if nan_aware else n
        index, fix_gamma = METHODS[method]
        virtual = index(self, count, qs)
        last = self.subtract(count, 1)
        if fix_gamma is None:       # one element: NumPy keeps the array's dtype
            at = self.astype(self.minimum(virtual, self.astype(last, np.float64)), np.int64)
            result = self._gather_last(ordered, at, batch)
        else:
            floor = self.floor(virtual)
            above = self.greater_equal(virtual, last)
            below = self.less(virtual, 0)
            previous = self.where(above, -1.0, self.where(below, 0.0, floor))
            following = self.where(above, -1.0, self.where(below, 0.0, self.add(floor, 1.0)))
            gamma = fix_gamma(self, self.subtract(virtual, previous), virtual)
            lower, upper = (self._gather_last(ordered, self._position(p, last), batch)
                            for p in (previous, following))
            dtype = x.dtype if weak and x.dtype.kind == "f" else np.dtype(np.float64)
            result = _lerp(self, lower, upper, gamma, dtype)
        result = self._nan_result(result, ordered, count, nan_aware)
        return _finish(self, result, q.shape, batch, keep_shape, keepdims)

    def _position(self, index, last):
        """A float index of NumPy's (-1: the last valid value) as an int64 position."""
        return self.astype(self.where(self.less(index, 0), self.astype(last, np.float64),
                                      index), np.int64)

    def _gather_last(self, ordered, positions, batch):
        if positions.ndim == 1:
            positions = self.reshape(positions, (1,) * len(batch) + positions.shape)
        return self.take_along_axis(ordered, self.maximum(positions, 0), axis=-1)

    def _nan_result(self, result, ordered, count, nan_aware):
        """NaN where NumPy gives NaN: a slice holding NaN (sorted last), or, for the
        nan-functions, a slice of NaNs only."""
        if ordered.dtype.kind != "f":
            return result
        if nan_aware:
            return self.where(self.equal(count, 0), np.nan, result)
        tail = self.getitem(ordered, (Ellipsis, slice(-1, None)))
        return self.where(_isnan(self, tail), self.astype(tail, result.dtype), result)

    def quantile(self, a, q, axis=None, out=None, overwrite_input=False, method="linear",
                 keepdims=False, *, weights=None, interpolation=None):
        """The ``q``-th quantiles (``q`` in [0, 1], static) along ``axis``, with every
        ``method=`` of ``numpy.quantile`` (default ``'linear'``); ``weights`` are not
        supported. Example: ``N.quantile(x, [0.25, 0.75], axis=0)``"""
        self._refuse_extras("quantile", out, weights, interpolation)
        return self._quantile("quantile", a, q, axis, method, keepdims, scale=1,
                              nan_aware=False)

    def percentile(self, a, q, axis=None, out=None, overwrite_input=False, method="linear",
                   keepdims=False, *, weights=None, interpolation=None):
        """The ``q``-th percentiles (``q`` in [0, 100], static) along ``axis``, as
        ``numpy.percentile``. Example: ``N.percentile(x, 95, axis=1)``"""
        self._refuse_extras("percentile", out, weights, interpolation)
        return self._quantile("percentile", a, q, axis, method, keepdims, scale=100,
                              nan_aware=False)

    def nanquantile(self, a, q, axis=None, out=None, overwrite_input=False, method="linear",
                    keepdims=False, *, weights=None, interpolation=None):
        """:meth:`quantile` ignoring NaNs (a slice of NaNs only gives NaN).

        Example: ``N.nanquantile(x, 0.5, axis=0)``
        """
        self._refuse_extras("nanquantile", out, weights, interpolation)
        return self._quantile("nanquantile", a, q, axis, method, keepdims, scale=1,
                              nan_aware=True)

    def nanpercentile(self, a, q, axis=None, out=None, overwrite_input=False,
                      method="linear", keepdims=False, *, weights=None, interpolation=None):
        """:meth:`percentile` ignoring NaNs. Example: ``N.nanpercentile(x, 90)``"""
        self._refuse_extras("nanpercentile", out, weights, interpolation)
        return self._quantile("nanpercentile", a, q, axis, method, keepdims, scale=100,
                              nan_aware=True)

    @staticmethod
    def _refuse_extras(name, out, weights=None, interpolation=None):
        if out is not None:
            raise TypeError(f"{name}: out= is not supported: graph values are immutable; "
                            "use the result")
        if weights is not None or interpolation is not None:
            raise TypeError(f"{name}: weights= and interpolation= (deprecated: use method=) "
                            "are not supported")

    def _median(self, name, a, axis, keepdims, nan_aware):
        x = self._lift(a)
        if x.dtype.kind not in "biuf":
            raise DTypeError(f"{name}: expected real numbers, got {x.dtype}")
        flat, batch, n, keep_shape = _to_last(self, name, x, axis)
        dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
        shape = keep_shape if keepdims else batch
        if n == 0:
            return self.full(shape, np.nan, dtype)
        nan_aware = nan_aware and x.dtype.kind == "f"
        ordered = self.astype(self.sort(flat, axis=-1), dtype)
        if nan_aware:
            count = self.sum(self.logical_not(_isnan(self, flat)), axis=-1, keepdims=True)
            low = self.maximum(self.floor_divide(self.subtract(count, 1), 2), 0)
            high = self.floor_divide(count, 2)
            odd = self.equal(self.remainder(count, 2), 1)
        else:
            count, low, high, odd = n, np.array([(n - 1) // 2]), np.array([n // 2]), n % 2
        lower, upper = (self._gather_last(ordered, self.astype(self._lift(p), np.int64), batch)
                        for p in (low, high))
        middle = self.divide(self.add(lower, upper), 2)
        result = self.where(odd, lower, middle)
        result = self._nan_result(result, ordered, count, nan_aware)
        return self.reshape(result, shape)

    def median(self, a, axis=None, out=None, overwrite_input=False, keepdims=False):
        """The median along ``axis`` (None: all; tuples too), as ``numpy.median``:
        the middle value, or the mean of the two middle ones; NaN if a slice holds NaN.

        Example: ``N.median(x, axis=0)``
        """
        self._refuse_extras("median", out)
        return self._median("median", a, axis, keepdims, False)

    def nanmedian(self, a, axis=None, out=None, overwrite_input=False, keepdims=False):
        """:meth:`median` ignoring NaNs (a slice of NaNs only gives NaN).

        Example: ``N.nanmedian(x, axis=1)``
        """
        self._refuse_extras("nanmedian", out)
        return self._median("nanmedian", a, axis, keepdims, True)

    # -- the nan-functions that reduce ---------------------------------------------------
    def _without_nans(self, a, filler):
        x = self._lift(a)
        if x.dtype.kind not in "fc":
            return x, None
        mask = _isnan(self, x)
        return self.where(mask, self.astype(self._lift(filler), x.dtype), x), mask

    def nansum(self, a, axis=None, dtype=None, out=None, keepdims=False):
        """The sum with NaNs counted as 0. Example: ``N.nansum(x, axis=0)``"""
        self._refuse_extras("nansum", out)
        return self.sum(self._without_nans(a, 0)[0], axis=axis, dtype=dtype,
                        keepdims=keepdims)

    def nanprod(self, a, axis=None, dtype=None, out=None, keepdims=False):
        """The product with NaNs counted as 1. Example: ``N.nanprod(x, axis=1)``"""
        self._refuse_extras("nanprod", out)
        return self.prod(self._without_nans(a, 1)[0], axis=axis, dtype=dtype,
                         keepdims=keepdims)

    def _nan_extreme(self, name, a, axis, keepdims, largest):
        x = self._lift(a)
        if x.dtype.kind != "f":
            return (self.max if largest else self.min)(x, axis=axis, keepdims=keepdims)
        filled, mask = self._without_nans(x, -np.inf if largest else np.inf)
        extreme = (self.max if largest else self.min)(filled, axis=axis, keepdims=keepdims)
        return self.where(self.all(mask, axis=axis, keepdims=keepdims), np.nan, extreme)

    def nanmax(self, a, axis=None, out=None, keepdims=False):
        """The maximum ignoring NaNs (NaN for a slice of NaNs only).

        Example: ``N.nanmax(x, axis=1)``
        """
        self._refuse_extras("nanmax", out)
        return self._nan_extreme("nanmax", a, axis, keepdims, True)

    def nanmin(self, a, axis=None, out=None, keepdims=False):
        """The minimum ignoring NaNs. Example: ``N.nanmin(x)``"""
        self._refuse_extras("nanmin", out)
        return self._nan_extreme("nanmin", a, axis, keepdims, False)

    def _nan_arg(self, name, a, axis, keepdims, largest):
        x = self._lift(a)
        arg = self.argmax if largest else self.argmin
        if x.dtype.kind != "f":
            return arg(x, axis=axis, keepdims=keepdims)
        mask = _isnan(self, x)
        known = self._known(x)
        if known is not None and np.isnan(known).all(axis=axis).any():
            raise ShapeError(f"{name}: All-NaN slice encountered")
        flat = x if axis is not None else self.ravel(x)
        axes = None if axis is None else axis
        extreme = self._nan_extreme(name, flat, axes, True, largest)
        hits = self.equal(flat, extreme)
        position = self.argmax(hits, axis=axis, keepdims=keepdims)
        empty = self.all(mask, axis=axis, keepdims=keepdims)
        return self.where(empty, -1, position)

    def nanargmax(self, a, axis=None, out=None, *, keepdims=False):
        """The index of the maximum ignoring NaNs. NumPy raises on a slice of NaNs only;
        in a graph the values are not known while building, so such a slice gives -1
        (as JAX); known values (eager, constants) raise as NumPy does.

        Example: ``N.nanargmax(x, axis=1)``
        """
        self._refuse_extras("nanargmax", out)
        return self._nan_arg("nanargmax", a, axis, keepdims, True)

    def nanargmin(self, a, axis=None, out=None, *, keepdims=False):
        """The index of the minimum ignoring NaNs (-1 for a slice of NaNs only, see
        :meth:`nanargmax`). Example: ``N.nanargmin(x)``"""
        self._refuse_extras("nanargmin", out)
        return self._nan_arg("nanargmin", a, axis, keepdims, False)

    def _nan_moments(self, name, a, axis, dtype, ddof, keepdims):
        x = self._lift(a)
        if x.dtype.kind not in "fc":
            return None, x
        filled, mask = self._without_nans(x, 0)
        if dtype is not None:
            filled = self.astype(filled, dtype)
        count = self.sum(self.logical_not(mask), axis=axis, keepdims=True)
        total = self.sum(filled, axis=axis, keepdims=True)
        return (count, total, filled, mask), x

    def nanmean(self, a, axis=None, dtype=None, out=None, keepdims=False):
        """The mean of the values that are not NaN (NaN for a slice of NaNs only).

        Example: ``N.nanmean(x, axis=0)``
        """
        self._refuse_extras("nanmean", out)
        parts, x = self._nan_moments("nanmean", a, axis, dtype, 0, keepdims)
        if parts is None:
            return self.mean(x, axis=axis, dtype=dtype, keepdims=keepdims)
        count, total, _, _ = parts
        mean = self.divide(total, self.astype(count, total.dtype))
        return mean if keepdims else self._squeeze_axes(mean, axis)

    def _squeeze_axes(self, value, axis):
        axes = normalize_axes("nanmean", axis, value.ndim)
        return self.reshape(value, () if axes is None else tuple(
            d for i, d in enumerate(value.shape) if i not in axes))

    def nanvar(self, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
               mean=None, correction=None):
        """The variance of the values that are not NaN, as ``numpy.nanvar`` (NaN where
        fewer than ``ddof + 1`` remain). Example: ``N.nanvar(x, axis=1, ddof=1)``"""
        self._refuse_extras("nanvar", out)
        if mean is not None:
            raise TypeError("nanvar: mean= is not supported")
        ddof = ddof if correction is None else correction
        parts, x = self._nan_moments("nanvar", a, axis, dtype, ddof, keepdims)
        if parts is None:
            return self.variance(x, axis=axis, ddof=ddof, keepdims=keepdims, dtype=dtype)
        count, total, filled, mask = parts
        if filled.dtype.kind == "c":
            raise DTypeError("nanvar: complex values are not supported")
        average = self.divide(total, self.astype(count, total.dtype))
        deviation = self.where(mask, self.zeros((), filled.dtype),
                               self.subtract(filled, average))
        squares = self.multiply(deviation, deviation)
        summed = self.sum(squares, axis=axis, keepdims=True)
        dof = self.subtract(count, ddof)
        variance = self.divide(summed, self.astype(self.maximum(dof, 0), summed.dtype))
        variance = self.where(self.less_equal(dof, 0), np.nan, variance)
        return variance if keepdims else self._squeeze_axes(variance, axis)

    def nanstd(self, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *,
               mean=None, correction=None):
        """The standard deviation of the values that are not NaN (``numpy.nanstd``).

        Example: ``N.nanstd(x, axis=0)``
        """
        return self.sqrt(self.nanvar(a, axis=axis, dtype=dtype, out=out, ddof=ddof,
                                     keepdims=keepdims, mean=mean, correction=correction))
