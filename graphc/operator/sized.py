"""Functions whose result size depends on the values: in a graph they take a static
``size=`` (and ``fill_value=``) as JAX's do, and raise an error naming ``size=``
without one. Where the values are known while building (eager arrays, constants),
``size`` may be left out and the result is exactly NumPy's.

Each is composed of ``argsort``/``sort``, ``take_along_axis``, ``searchsorted`` and
``bincount``: the ``k`` positions where a mask holds are the first ``k`` of a
stable argsort of its negation.

>>> import graphc.eager as E, numpy as np
>>> E.nonzero(np.array([0, 3, 0, 4]), size=3, fill_value=-1)
(array([ 1,  3, -1]),)
"""
from __future__ import annotations

import math
import operator
from collections import namedtuple

import numpy as np

from ..type.errors import DTypeError, IndexOutOfRange, ShapeError

UniqueAllResult = namedtuple("UniqueAllResult", "values indices inverse_indices counts")
UniqueCountsResult = namedtuple("UniqueCountsResult", "values counts")
UniqueInverseResult = namedtuple("UniqueInverseResult", "values inverse_indices")


def _needs_size(name, what="size"):
    return ShapeError(f"{name}: the size of the result depends on the values, which a graph "
                      f"does not know while building; give a static {what}= (and "
                      f"fill_value=) as in JAX, or use constant/eager values")


class SizedMixin:
    """nonzero, unique, set operations, bincount and index conversions (part of
    ``SortingMixin``)."""

    def _static_size(self, name, size, known_size):
        """``size`` as an int; or, left out, the size ``known_size()`` computes from
        known values (None when they are not known)."""
        if size is not None:
            size = operator.index(size)
            if size < 0:
                raise ShapeError(f"{name}: size must be non-negative, got {size}")
            return size
        known = known_size()
        if known is None:
            raise _needs_size(name)
        return int(known)

    def _first_true(self, mask, size):
        """Positions (int64, ascending) of the first ``size`` True entries of the 1-D
        ``mask``, padded with 0; and which of the ``size`` are real."""
        n = mask.shape[0]
        order = self.argsort(self.logical_not(mask), stable=True)
        order = self.getitem(order, slice(0, size)) if size <= n else self.pad(
            order, ((0, size - n),))
        valid = self.less(self.const(np.arange(size)), self.sum(mask))
        return self.astype(order, np.int64), valid

    def _unravel(self, flat, shape):
        strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
        return [self.remainder(self.floor_divide(flat, s), d) if d else flat
                for s, d in zip(strides, shape)]

    def nonzero(self, a, *, size=None, fill_value=None):
        """The indices of the elements that are not zero, one array per axis
        (``numpy.nonzero``); in a graph, the first ``size`` of them, padded with
        ``fill_value`` (default 0; or one per axis). Example: ``N.nonzero(x, size=10)``"""
        x = self._lift(a)
        if x.ndim == 0:
            raise ShapeError("nonzero: calling nonzero on 0d arrays is not allowed; use "
                             "N.atleast_1d(x).nonzero()")
        mask = self.ravel(x if x.dtype == np.bool_ else self.not_equal(x, 0))
        known = self._known(x)
        size = self._static_size("nonzero", size,
                                 lambda: None if known is None else np.count_nonzero(known))
        flat, valid = self._first_true(mask, size)
        fills = np.broadcast_to(np.asarray(0 if fill_value is None else fill_value), (x.ndim,))
        return tuple(self.where(valid, c, self.astype(self._lift(int(f)), np.int64))
                     for c, f in zip(self._unravel(flat, x.shape), fills))

    def argwhere(self, a, *, size=None, fill_value=None):
        """The indices of the non-zero elements, one row each (``numpy.argwhere``);
        ``size``/``fill_value`` as :meth:`nonzero`. Example: ``N.argwhere(x, size=4)``"""
        x = self._lift(a)
        if x.ndim == 0:
            rows = self.argwhere(self.reshape(x, (1,)), size=size, fill_value=fill_value)
            return self.getitem(rows, (slice(None), slice(0, 0)))
        return self.stack(self.nonzero(x, size=size, fill_value=fill_value), axis=1)

    def flatnonzero(self, a, *, size=None, fill_value=None):
        """Indices of the non-zero elements of ``ravel(a)``. Example: ``N.flatnonzero(x, size=3)``"""
        return self.nonzero(self.ravel(self._lift(a)), size=size, fill_value=fill_value)[0]

    # -- unique ----------------------------------------------------------------------------
    def unique(self, ar, return_index=False, return_inverse=False, return_counts=False,
               axis=None, *, equal_nan=True, sorted=True, size=None, fill_value=None):
        """The sorted unique values of ``ar`` (flattened), as ``numpy.unique``, with
        the indices of first occurrences, the inverse and the counts on request; in a
        graph the first ``size`` values, padded with ``fill_value`` (default: the
        smallest value; indices and counts are padded with 0).

        Example: ``N.unique(labels, size=10)``
        """
        if axis is not None:
            raise ShapeError("unique: axis= is not supported (unique sub-arrays); flatten "
                             "or compare rows with sort and take_along_axis")
        x = self._lift(ar)
        flat = self.ravel(x)
        n = flat.shape[0]
        known = self._known(x)
        size = self._static_size("unique", size, lambda: None if known is None else len(
            np.unique(known, equal_nan=equal_nan)))
        order = self.argsort(flat, stable=True)
        ordered = self.take_along_axis(flat, order, 0)
        if n:
            differs = self.not_equal(ordered[1:], ordered[:-1])
            if equal_nan and x.dtype.kind in "fc":
                both_nan = self.logical_and(self.not_equal(ordered[1:], ordered[1:]),
                                            self.not_equal(ordered[:-1], ordered[:-1]))
                differs = self.logical_and(differs, self.logical_not(both_nan))
            starts = self.concatenate([self.full((1,), True, np.bool_), differs])
        else:
            starts = self.full((0,), True, np.bool_)
        first, valid = self._first_true(starts, size)
        safe = self.minimum(first, max(n - 1, 0))
        if n:
            values = self.take_along_axis(ordered, safe, 0)
            fill = self.getitem(ordered, 0) if fill_value is None else fill_value
            values = self.where(valid, values, self.astype(self._lift(fill), x.dtype))
        else:
            values = self.full((size,), 0 if fill_value is None else fill_value, x.dtype)
        results = [values]
        if return_index:
            index = self.take_along_axis(order, safe, 0) if n else self.zeros((size,), np.intp)
            results.append(self.where(valid, index, 0))
        if return_inverse:
            group = self.subtract(self.cumsum(starts), 1)
            inverse = self.take_along_axis(group, self.argsort(order), 0) if n else group
            results.append(self.reshape(inverse, x.shape))
        if return_counts:
            ends = self.concatenate([self.getitem(first, slice(1, None)), self.const([n])])
            ends = self.where(self.concatenate([self.getitem(valid, slice(1, None)),
                                                self.full((1,), False, np.bool_)]), ends, n)
            counts = self.where(valid, self.subtract(ends, first), 0)
            results.append(self.astype(counts, np.intp))
        return results[0] if len(results) == 1 else tuple(results)

    def unique_values(self, x, *, size=None, fill_value=None):
        """The array API's unique values (NaNs kept apart), sorted (NumPy's come in no
        promised order). Example: ``N.unique_values(x, size=5)``"""
        return self.unique(x, equal_nan=False, size=size, fill_value=fill_value)

    def unique_counts(self, x, *, size=None, fill_value=None):
        """Unique values and their counts. Example: ``v, c = N.unique_counts(x, size=5)``"""
        return UniqueCountsResult(*self.unique(x, return_counts=True, equal_nan=False,
                                               size=size, fill_value=fill_value))

    def unique_inverse(self, x, *, size=None, fill_value=None):
        """Unique values and where each element of ``x`` is among them.

        Example: ``v, i = N.unique_inverse(x, size=5)``
        """
        return UniqueInverseResult(*self.unique(x, return_inverse=True, equal_nan=False,
                                                size=size, fill_value=fill_value))

    def unique_all(self, x, *, size=None, fill_value=None):
        """Unique values, first indices, inverse and counts.

        Example: ``N.unique_all(x, size=5).counts``
        """
        return UniqueAllResult(*self.unique(x, True, True, True, equal_nan=False, size=size,
                                            fill_value=fill_value))

    # -- selections --------------------------------------------------------------------------
    def _select(self, name, condition, flat, size, fill_value):
        mask = self.ravel(self._lift(condition))
        mask = mask if mask.dtype == np.bool_ else self.not_equal(mask, 0)
        known = self._known(mask)
        if known is not None and size is None:
            return self.take(flat, np.flatnonzero(known[:flat.shape[0]]))
        size = self._static_size(name, size, lambda: None)
        positions, valid = self._first_true(mask, size)
        taken = self.take_along_axis(flat, self.minimum(positions, max(flat.shape[0] - 1, 0)),
                                     0) if flat.shape[0] else self.zeros((size,), flat.dtype)
        fill = self.astype(self._lift(0 if fill_value is None else fill_value), flat.dtype)
        return self.where(valid, taken, fill)

    def extract(self, condition, arr, *, size=None, fill_value=None):
        """The elements of ``ravel(arr)`` where ``ravel(condition)`` is true; in a graph
        the first ``size``, padded with ``fill_value`` (0). Example: ``N.extract(x > 0, x, size=8)``"""
        flat = self.ravel(self._lift(arr))
        cond = self._lift(condition)
        if cond.size != flat.shape[0]:
            raise ShapeError(f"extract: condition of shape {cond.shape} must have as many "
                             f"elements as the array ({flat.shape[0]})")
        return self._select("extract", cond, flat, size, fill_value)

    def compress(self, condition, a, axis=None, out=None, *, size=None, fill_value=None):
        """The slices of ``a`` along ``axis`` (None: flattened) where the 1-D
        ``condition`` is true: a constant condition needs no size; a graph one takes
        ``size`` (slices padded with ``fill_value``, 0).

        Example: ``N.compress([True, False, True], x, axis=1)``
        """
        x = self._lift(a)
        if axis is None:
            x, axis = self.ravel(x), 0
        from ..shape.axes import normalize_axis
        axis = normalize_axis("compress", axis, x.ndim)
        cond = self._lift(condition)
        if cond.ndim != 1:
            raise ShapeError(f"compress: condition must be a 1-d array, got shape {cond.shape}")
        length = x.shape[axis]
        known = self._known(cond)
        if known is not None:
            chosen = np.flatnonzero(known)
            if chosen.size and chosen[-1] >= length:
                raise IndexOutOfRange(f"compress: index {chosen[-1]} is out of bounds for "
                                      f"axis {axis} with size {length}")
            return self.take(x, chosen, axis=axis)
        if cond.shape[0] > length:
            raise ShapeError(f"compress: condition of length {cond.shape[0]} is longer than "
                             f"axis {axis} of size {length}")
        size = self._static_size("compress", size, lambda: None)
        mask = cond if cond.dtype == np.bool_ else self.not_equal(cond, 0)
        positions, valid = self._first_true(mask, size)
        taken = self.take(x, self.minimum(positions, max(length - 1, 0)), axis=axis)
        shape = [1] * x.ndim
        shape[axis] = size
        fill = self.astype(self._lift(0 if fill_value is None else fill_value), x.dtype)
        return self.where(self.reshape(valid, tuple(shape)), taken, fill)

    def trim_zeros(self, filt, trim="fb", axis=None, *, size=None, fill_value=None):
        """``filt`` (1-D) without its leading ('f') and/or trailing ('b') zeros; in a
        graph the first ``size`` values of the trimmed array, padded with 0.

        Example: ``N.trim_zeros(x, size=4)``
        """
        x = self._lift(filt)
        if x.ndim != 1 or axis not in (None, 0, -1):
            raise ShapeError(f"trim_zeros: graphc trims one-dimensional arrays, got shape "
                             f"{x.shape}")
        trim = trim.lower()
        known = self._known(x)
        if known is not None and size is None:
            return self.const(np.trim_zeros(known, trim))
        size = self._static_size("trim_zeros", size, lambda: None)
        n = x.shape[0]
        mask = self.not_equal(x, 0)
        any_ = self.any(mask)
        start = self.argmax(mask) if "f" in trim else 0
        stop = self.subtract(n, self.argmax(self.flip(mask, 0))) if "b" in trim else n
        stop = self.where(any_, stop, start)
        at = self.add(self.const(np.arange(size)), start)
        taken = self.take_along_axis(x, self.minimum(at, max(n - 1, 0)), 0) if n else \
            self.zeros((size,), x.dtype)
        fill = self.astype(self._lift(0 if fill_value is None else fill_value), x.dtype)
        return self.where(self.less(at, stop), taken, fill)

    # -- sets -------------------------------------------------------------------------------
    def isin(self, element, test_elements, assume_unique=False, invert=False, *, kind=None):
        """Whether each element of ``element`` is in ``test_elements`` (a sort and a
        binary search). Example: ``N.isin(labels, [1, 3, 5])``"""
        x, tests = self._lift(element), self.ravel(self._lift(test_elements))
        if tests.shape[0] == 0:
            found = self.full(x.shape, False, np.bool_)
        else:
            ordered = self.sort(tests)
            at = self.minimum(self.searchsorted(ordered, x), tests.shape[0] - 1)
            found = self.equal(self.take(ordered, at), x)
        return self.logical_not(found) if invert else found

    def _set_values(self, name, values, keep, size, fill_value, known_size):
        """The sorted unique ``values`` for which ``keep`` holds."""
        size = self._static_size(name, size, known_size)
        positions, valid = self._first_true(keep, size)
        n = values.shape[0]
        taken = self.take(values, self.minimum(positions, max(n - 1, 0))) if n else \
            self.zeros((size,), values.dtype)
        fill = self.getitem(values, 0) if fill_value is None and n else (fill_value or 0)
        return self.where(valid, taken, self.astype(self._lift(fill), values.dtype))

    def _both_known(self, *arrays):
        known = [self._known(self._lift(a)) for a in arrays]
        return None if any(k is None for k in known) else known

    def union1d(self, ar1, ar2, *, size=None, fill_value=None):
        """Sorted unique values in either array. Example: ``N.union1d(a, b, size=8)``"""
        joined = self.concatenate([self.ravel(self._lift(ar1)), self.ravel(self._lift(ar2))])
        known = self._both_known(ar1, ar2)
        return self.unique(joined, size=size if size is not None or known else _raise(
            "union1d"), fill_value=fill_value)

    def intersect1d(self, ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                    fill_value=None):
        """Sorted unique values in both arrays. Example: ``N.intersect1d(a, b, size=4)``"""
        if return_indices:
            raise TypeError("intersect1d: return_indices=True is not supported")
        a = self.unique(self._lift(ar1), size=self._lift(ar1).size)
        a_all = self.sort(self.ravel(self._lift(ar1)))
        b = self.ravel(self._lift(ar2))
        keep = self.logical_and(self._is_start(a_all), self.isin(a_all, b))
        known = self._both_known(ar1, ar2)
        del a
        return self._set_values("intersect1d", a_all, keep, size, fill_value, lambda: None
                                if known is None else len(np.intersect1d(*known)))

    def setdiff1d(self, ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
        """Sorted unique values of ``ar1`` not in ``ar2``. Example: ``N.setdiff1d(a, b, size=4)``"""
        a_all = self.sort(self.ravel(self._lift(ar1)))
        keep = self.logical_and(self._is_start(a_all),
                                self.isin(a_all, self._lift(ar2), invert=True))
        known = self._both_known(ar1, ar2)
        return self._set_values("setdiff1d", a_all, keep, size, fill_value, lambda: None
                                if known is None else len(np.setdiff1d(*known)))

    def setxor1d(self, ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
        """Sorted unique values in exactly one of the arrays.

        Example: ``N.setxor1d(a, b, size=4)``
        """
        a, b = self.ravel(self._lift(ar1)), self.ravel(self._lift(ar2))
        a_all, b_all = self.sort(a), self.sort(b)
        both = self.sort(self.concatenate([a_all, b_all]))
        in_a, in_b = self.isin(both, a), self.isin(both, b)
        keep = self.logical_and(self._is_start(both), self.logical_xor(in_a, in_b))
        known = self._both_known(ar1, ar2)
        return self._set_values("setxor1d", both, keep, size, fill_value, lambda: None
                                if known is None else len(np.setxor1d(*known)))

    def _is_start(self, ordered):
        """True at the first of each run of equal values of a sorted 1-D array."""
        if ordered.shape[0] == 0:
            return self.full((0,), False, np.bool_)
        differs = self.not_equal(self.getitem(ordered, slice(1, None)),
                                 self.getitem(ordered, slice(None, -1)))
        return self.concatenate([self.full((1,), True, np.bool_), differs])

    # -- counting and index conversions --------------------------------------------------------
    def bincount(self, x, weights=None, minlength=0, *, length=None):
        """Counts of each value of the non-negative integers ``x`` (or sums of their
        ``weights``), as ``numpy.bincount``. In a graph the result's ``length`` must be
        static (JAX's ``length=``; values at or past it are dropped).

        Example: ``N.bincount(labels, length=10)``
        """
        x = self._lift(x)
        if x.dtype == np.bool_:
            x = self.astype(x, np.intp)
        if x.ndim != 1:
            raise ShapeError(f"bincount: expected a one-dimensional array, got shape {x.shape}")
        if x.dtype.kind not in "iu":
            raise DTypeError(f"bincount: cannot count values of dtype {x.dtype}; expected "
                             "integers")
        minlength = operator.index(minlength) if minlength is not None else 0
        if minlength < 0:
            raise ShapeError("bincount: minlength must not be negative")
        known = self._known(x)
        if known is not None and known.size and known.min() < 0:
            raise ShapeError("bincount: 'list' argument must have no negative elements")
        if length is None:
            if known is None:
                raise _needs_size("bincount", "length")
            length = max(int(known.max()) + 1 if known.size else 0, minlength)
        parents = [x] if weights is None else [x, self._lift(weights)]
        return self._op("bincount", parents, length=operator.index(length))

    def ravel_multi_index(self, multi_index, dims, mode="raise", order="C"):
        """Flat indices of coordinate arrays into an array of shape ``dims`` (static).
        ``mode='raise'`` checks known values only; 'wrap' and 'clip' as NumPy.

        Example: ``N.ravel_multi_index((rows, cols), (4, 5))``
        """
        dims = tuple(operator.index(d) for d in np.atleast_1d(dims))
        coords = [self._lift(c) for c in multi_index]
        if len(coords) != len(dims):
            raise ShapeError(f"ravel_multi_index: {len(coords)} coordinate arrays for "
                             f"{len(dims)} dimensions")
        modes = (mode,) * len(dims) if isinstance(mode, str) else tuple(mode)
        axes = list(range(len(dims)))[::-1] if order == "F" else list(range(len(dims)))
        strides = {a: math.prod(dims[b] for b in axes[i + 1:]) for i, a in enumerate(axes)}
        total = None
        for d, (c, size, how) in enumerate(zip(coords, dims, modes)):
            if c.dtype.kind not in "iu":
                raise DTypeError(f"ravel_multi_index: coordinates must be integers, got "
                                 f"{c.dtype}")
            known = self._known(c)
            if how == "raise" and known is not None and known.size and (
                    known.min() < 0 or known.max() >= size):
                raise ShapeError("ravel_multi_index: invalid entry in coordinates array")
            c = self.astype(c, np.intp)
            if how == "wrap":
                c = self.remainder(c, size)
            elif how == "clip":
                c = self.clip(c, 0, size - 1)
            term = self.multiply(c, strides[d])
            total = term if total is None else self.add(total, term)
        return total

    def unravel_index(self, indices, shape, order="C"):
        """Coordinates in an array of ``shape`` (static) of flat ``indices``, one array
        per axis. Example: ``rows, cols = N.unravel_index(flat, (4, 5))``"""
        shape = tuple(operator.index(d) for d in np.atleast_1d(shape))
        x = self._lift(indices)
        if x.dtype.kind not in "iu":
            raise DTypeError(f"unravel_index: indices must be integers, got {x.dtype}")
        known = self._known(x)
        if known is not None and known.size and (known.min() < 0 or
                                                 known.max() >= math.prod(shape)):
            raise ShapeError(f"unravel_index: index {known.max()} is out of bounds for array "
                             f"with size {math.prod(shape)}")
        x = self.astype(x, np.intp)
        if order == "F":
            return tuple(self._unravel(x, shape[::-1])[::-1])
        return tuple(self._unravel(x, shape))

    def interp(self, x, xp, fp, left=None, right=None, period=None):
        """Piecewise-linear interpolation of ``(xp, fp)`` at ``x`` (``numpy.interp``,
        through ``searchsorted``; float64). Example: ``N.interp(t, times, values)``"""
        if period is not None:
            raise TypeError("interp: period= is not supported")
        x = self.astype(self._lift(x), np.float64)
        xp, fp = self._lift(xp), self._lift(fp)
        if xp.ndim != 1 or fp.ndim != 1 or xp.shape != fp.shape or xp.shape[0] == 0:
            raise ShapeError(f"interp: xp and fp must be 1-D sequences of the same non-zero "
                             f"length, got shapes {xp.shape} and {fp.shape}")
        xp = self.astype(xp, np.float64)
        fp = self.astype(fp, np.result_type(fp.dtype, np.float64))
        n = xp.shape[0]
        first, last = self.getitem(fp, 0), self.getitem(fp, -1)
        left = first if left is None else left
        right = last if right is None else right
        if n == 1:
            inner = self.broadcast_to(first, x.shape)
        else:
            j = self.clip(self.subtract(self.searchsorted(xp, x, side="right"), 1), 0, n - 2)
            x0, x1 = self.take(xp, j), self.take(xp, self.add(j, 1))
            y0, y1 = self.take(fp, j), self.take(fp, self.add(j, 1))
            slope = self.divide(self.subtract(y1, y0), self.subtract(x1, x0))
            inner = self.add(self.multiply(slope, self.subtract(x, x0)), y0)
            again = self.add(self.multiply(slope, self.subtract(x, x1)), y1)
            inner = self.where(self.not_equal(inner, inner), again, inner)
            inner = self.where(self.logical_and(self.not_equal(inner, inner),
                                                self.equal(y0, y1)), y0, inner)
            inner = self.where(self.equal(x0, x), y0, inner)
        inner = self.where(self.equal(x, self.getitem(xp, -1)), last, inner)
        inner = self.where(self.greater(x, self.getitem(xp, -1)), right, inner)
        return self.where(self.less(x, self.getitem(xp, 0)), left, inner)

    def packbits(self, a, axis=None, bitorder="big"):
        """Booleans (non-zero values) packed eight to a uint8 along ``axis`` (None:
        flattened), padded with zeros. Example: ``N.packbits(mask, axis=-1)``"""
        x = self._lift(a)
        if x.dtype.kind not in "biu":
            raise DTypeError(f"packbits: expected an integer or boolean array, got {x.dtype}")
        if axis is None:
            x, axis = self.ravel(x), 0
        from ..shape.axes import normalize_axis
        axis = normalize_axis("packbits", axis, x.ndim)
        bits = self.astype(self.not_equal(x, 0), np.uint8)
        n = x.shape[axis]
        groups = -(-n // 8)
        widths = [(0, 0)] * x.ndim
        widths[axis] = (0, groups * 8 - n)
        bits = self.pad(bits, tuple(widths)) if groups * 8 != n else bits
        bits = self.reshape(bits, x.shape[:axis] + (groups, 8) + x.shape[axis + 1:])
        weights = 1 << np.arange(8)[::-1] if bitorder == "big" else 1 << np.arange(8)
        shape = [1] * (x.ndim + 1)
        shape[axis + 1] = 8
        weights = self.const(weights.astype(np.uint8).reshape(shape))
        return self.sum(self.multiply(bits, weights), axis=axis + 1, dtype=np.uint8)

    def unpackbits(self, a, axis=None, count=None, bitorder="big"):
        """The bits of uint8 values, eight per value along ``axis`` (None: flattened);
        ``count`` keeps that many (negative: drops from the end).

        Example: ``N.unpackbits(packed, axis=-1)``
        """
        x = self._lift(a)
        if x.dtype != np.uint8:
            raise DTypeError(f"unpackbits: expected an input array of unsigned byte data "
                             f"type, got {x.dtype}")
        if axis is None:
            x, axis = self.ravel(x), 0
        from ..shape.axes import normalize_axis
        axis = normalize_axis("unpackbits", axis, x.ndim)
        powers = 1 << np.arange(8)[::-1] if bitorder == "big" else 1 << np.arange(8)
        shape = [1] * (x.ndim + 1)
        shape[axis + 1] = 8
        expanded = self.expand_dims(x, axis + 1)
        bits = self.remainder(self.floor_divide(
            expanded, self.const(powers.astype(np.uint8).reshape(shape))), 2)
        n = x.shape[axis] * 8
        bits = self.reshape(bits, x.shape[:axis] + (n,) + x.shape[axis + 1:])
        if count is not None:
            keep = operator.index(count)
            keep = max(n + keep, 0) if keep < 0 else keep
            if keep > n:
                widths = [(0, 0)] * x.ndim
                widths[axis] = (0, keep - n)
                return self.pad(bits, tuple(widths))
            bits = self.getitem(bits, (slice(None),) * axis + (slice(0, keep),))
        return self.astype(bits, np.uint8)


def _raise(name):
    raise _needs_size(name)
