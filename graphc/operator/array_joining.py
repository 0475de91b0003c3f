"""NumPy's joining, splitting and rearranging functions made of existing kinds:
``hstack`` and friends, ``block``, ``append``, ``array_split`` and friends,
``atleast_Nd``, broadcasting helpers, ``roll``, ``rot90``, ``rollaxis``,
``resize``, ``insert`` and ``delete``.

``insert`` and ``delete`` take static indices: NumPy itself works out which element
goes where (on an array of element numbers), and the result is one gather.

>>> import graphc.eager as E, numpy as np
>>> E.roll(np.arange(5), 2).tolist(), E.hstack([np.zeros(2), np.ones(1)]).tolist()
([3, 4, 0, 1, 2], [0.0, 0.0, 1.0])
"""
from __future__ import annotations

import contextlib
import operator

import numpy as np

from ..shape.axes import normalize_axis
from ..type.errors import DTypeError, IndexOutOfRange, ShapeError


def _static_index(opname, ns, obj):
    """``obj`` (an index, a slice, indices or a mask) known while building."""
    if not ns._is_value(obj):
        return obj
    known = ns._known(obj)
    if known is None:
        raise ShapeError(f"{opname}: the indices must be known while the graph is built "
                         "(a constant or a Python sequence); a computed index gives a "
                         "data-dependent shape")
    return known


@contextlib.contextmanager
def _named(opname):
    """Shape errors of the function a public one calls, named as the public one."""
    try:
        yield
    except ShapeError as exc:
        renamed = ShapeError(f"{opname}: {exc.message.split(': ', 1)[-1]}")
        renamed.location = exc.location
        raise renamed from None


@contextlib.contextmanager
def _numpy_errors(opname, shape):
    """NumPy's refusals of an index, as graphc's errors naming ``opname``."""
    try:
        yield
    except (IndexError, ValueError, TypeError) as exc:
        kind = IndexOutOfRange if isinstance(exc, IndexError) else \
            ShapeError if isinstance(exc, ValueError) else DTypeError
        raise kind(f"{opname}: {exc} (array of shape {shape})") from None


class JoiningFunctions:
    """Joins, splits, dimension helpers, rolls and rotations, insert and delete."""

    # -- at least n dimensions ---------------------------------------------------
    def _atleast(self, arys, shape_of):
        out = []
        for a in arys:
            a = self._lift(a)
            out.append(self.reshape(a, shape_of(a.shape)))
        return out[0] if len(out) == 1 else tuple(out)

    def atleast_1d(self, *arys):
        """Each array with at least one axis (a 0-d one becomes shape ``(1,)``); one
        array, or a tuple for several. Example: ``N.atleast_1d(x)``"""
        return self._atleast(arys, lambda s: s if len(s) >= 1 else (1,))

    def atleast_2d(self, *arys):
        """Each array with at least two axes (``(n,)`` becomes ``(1, n)``).
        Example: ``N.atleast_2d(x)``"""
        return self._atleast(arys, lambda s: s if len(s) >= 2 else (1,) * (2 - len(s)) + s)

    def atleast_3d(self, *arys):
        """Each array with at least three axes (``(n,)`` becomes ``(1, n, 1)``,
        ``(m, n)`` becomes ``(m, n, 1)``). Example: ``N.atleast_3d(x)``"""
        shapes = {0: lambda s: (1, 1, 1), 1: lambda s: (1,) + s + (1,), 2: lambda s: s + (1,)}
        return self._atleast(arys, lambda s: shapes.get(len(s), lambda s: s)(s))

    # -- joins ---------------------------------------------------------------------
    def _joined(self, opname, arrays, axis, dtype, casting):
        if isinstance(arrays, (list, tuple)) is False and not self._is_value(arrays):
            raise DTypeError(f"{opname}: arrays to stack must be passed as a sequence")
        arrays = list(arrays)
        if not arrays:
            raise ShapeError(f"{opname}: need at least one array to concatenate")
        if dtype is not None:
            dtype = self._dtype(opname, dtype)
            for a in arrays:
                if not np.can_cast(a.dtype, dtype, casting):
                    raise DTypeError(f"{opname}: cannot cast array data from {a.dtype} to "
                                     f"{dtype} according to the rule {casting!r}")
            arrays = [self.astype(a, dtype) for a in arrays]
        with _named(opname):
            return self.concatenate(arrays, axis=axis)

    def _lifted(self, arrays):
        if self._is_value(arrays):
            return list(arrays)
        return [self._lift(a) for a in arrays]

    def vstack(self, tup, *, dtype=None, casting="same_kind"):
        """Arrays joined along their first axis (1-D ones as rows).

        Example: ``N.vstack([a, b])``
        """
        arrays = [self.atleast_2d(a) for a in self._lifted(tup)]
        return self._joined("vstack", arrays, 0, dtype, casting)

    def row_stack(self, tup, *, dtype=None, casting="same_kind"):
        """``vstack`` (NumPy's older name). Example: ``N.row_stack([a, b])``"""
        return self.vstack(tup, dtype=dtype, casting=casting)

    def hstack(self, tup, *, dtype=None, casting="same_kind"):
        """Arrays joined along their second axis (the first for 1-D arrays).

        Example: ``N.hstack([a, b])``
        """
        arrays = [self.atleast_1d(a) for a in self._lifted(tup)]
        axis = 0 if arrays and arrays[0].ndim == 1 else 1
        return self._joined("hstack", arrays, axis, dtype, casting)

    def dstack(self, tup):
        """Arrays joined along their third axis (depth). Example: ``N.dstack([r, g, b])``"""
        arrays = [self.atleast_3d(a) for a in self._lifted(tup)]
        return self._joined("dstack", arrays, 2, None, "same_kind")

    def column_stack(self, tup):
        """1-D arrays as the columns of a 2-D array (2-D arrays join as they are).

        Example: ``N.column_stack([x, y])``
        """
        arrays = [a if a.ndim >= 2 else self.reshape(a, (-1, 1))
                  for a in self._lifted(tup)]
        return self._joined("column_stack", arrays, 1, None, "same_kind")

    def concat(self, arrays, /, *, axis=0):
        """``concatenate`` (the array API's name). Example: ``N.concat([a, b], axis=1)``"""
        return self.concatenate(arrays, axis=axis)

    def append(self, arr, values, axis=None):
        """``values`` appended to ``arr`` along ``axis`` (None: both flattened).

        Example: ``N.append(x, [1.0, 2.0])``
        """
        arr, values = self._lift(arr), self._lift(np.asarray(values)
                                                  if not self._is_value(values) else values)
        if axis is None:
            return self.concatenate([self.ravel(arr), self.ravel(values)])
        return self.concatenate([arr, values], axis=axis)

    def block(self, arrays):
        """An array assembled from nested lists of blocks: the innermost lists join
        along the last axis, the next along the one before, and so on.

        Example: ``N.block([[A, B], [C, D]])``
        """
        depth, ndim = self._block_depth(arrays, ())
        return self._block(arrays, 0, depth, max(depth, ndim))

    def _block_depth(self, arrays, index):
        """The nesting depth of the lists (the same for every block) and the largest
        number of dimensions of a block."""
        if isinstance(arrays, tuple):
            raise DTypeError(f"block: arrays is a tuple at index {list(index)}; only lists "
                             "can be used to arrange blocks")
        if not isinstance(arrays, list):
            return 0, np.ndim(arrays) if not self._is_value(arrays) else arrays.ndim
        if not arrays:
            raise ShapeError(f"block: list at index {list(index)} cannot be empty")
        found = [self._block_depth(a, index + (i,)) for i, a in enumerate(arrays)]
        if len({d for d, _ in found}) != 1:
            raise ShapeError(f"block: list depths are mismatched at index {list(index)}")
        return found[0][0] + 1, max(n for _, n in found)

    def _block(self, arrays, depth, max_depth, ndim):
        if not isinstance(arrays, list):
            a = self._lift(arrays)
            return self.reshape(a, (1,) * (ndim - a.ndim) + a.shape)
        parts = [self._block(a, depth + 1, max_depth, ndim) for a in arrays]
        return self.concatenate(parts, axis=-(max_depth - depth))

    # -- splits ----------------------------------------------------------------------
    def array_split(self, ary, indices_or_sections, axis=0):
        """A list of sub-arrays: ``n`` parts as equal as can be (the first ones one
        longer), or cut at the given indices. Example: ``N.array_split(x, 3)``"""
        ary = self._lift(ary)
        axis = normalize_axis("array_split", axis, ary.ndim)
        total = ary.shape[axis]
        if np.ndim(indices_or_sections) == 0:
            sections = operator.index(indices_or_sections)
            if sections <= 0:
                raise ShapeError("array_split: number sections must be larger than 0, got "
                                 f"{sections}")
            each, extras = divmod(total, sections)
            sizes = [0] + extras * [each + 1] + (sections - extras) * [each]
            bounds = np.cumsum(sizes).tolist()
        else:
            bounds = [0] + [operator.index(i) for i in indices_or_sections] + [total]
        prefix = (slice(None),) * axis
        return [self.getitem(ary, prefix + (slice(lo, hi),))
                for lo, hi in zip(bounds[:-1], bounds[1:])]

    def _split_along(self, opname, ary, indices_or_sections, min_ndim, axis):
        ary = self._lift(ary)
        if ary.ndim < min_ndim:
            raise ShapeError(f"{opname}: only works on arrays of {min_ndim} or more "
                             f"dimensions, got shape {ary.shape}")
        with _named(opname):
            return self.split(ary, indices_or_sections, axis)

    def hsplit(self, ary, indices_or_sections):
        """``split`` along the second axis (the first for 1-D arrays).
        Example: ``N.hsplit(x, 2)``"""
        ary = self._lift(ary)
        return self._split_along("hsplit", ary, indices_or_sections, 1, 1 if ary.ndim > 1 else 0)

    def vsplit(self, ary, indices_or_sections):
        """``split`` along the first axis. Example: ``N.vsplit(x, 2)``"""
        return self._split_along("vsplit", ary, indices_or_sections, 2, 0)

    def dsplit(self, ary, indices_or_sections):
        """``split`` along the third axis. Example: ``N.dsplit(x, 2)``"""
        return self._split_along("dsplit", ary, indices_or_sections, 3, 2)

    def unstack(self, x, /, *, axis=0):
        """The slices of ``x`` along ``axis``, as a tuple. Example: ``a, b = N.unstack(x)``"""
        x = self._lift(x)
        if x.ndim == 0:
            raise ShapeError("unstack: input array must be at least 1-d")
        axis = normalize_axis("unstack", axis, x.ndim)
        prefix = (slice(None),) * axis
        return tuple(self.getitem(x, prefix + (i,)) for i in range(x.shape[axis]))

    # -- broadcasting ------------------------------------------------------------------
    def broadcast_shapes(self, *args):
        """The shape the given shapes broadcast to (NumPy's rules).

        Example: ``N.broadcast_shapes((3, 1), (4,))`` is ``(3, 4)``
        """
        try:
            return np.broadcast_shapes(*args)
        except ValueError as exc:
            raise ShapeError(f"broadcast_shapes: {exc}") from None

    def broadcast_arrays(self, *args):
        """The arrays broadcast to one shape, as a tuple.

        Example: ``a, b = N.broadcast_arrays(a, b)``
        """
        arrays = [self._lift(a) for a in args]
        try:
            shape = np.broadcast_shapes(*(a.shape for a in arrays))
        except ValueError:
            raise ShapeError(f"broadcast_arrays: shape mismatch: objects cannot be broadcast to "
                             f"a single shape, got {[a.shape for a in arrays]}") from None
        return tuple(self.broadcast_to(a, shape) for a in arrays)

    # -- rolls, rotations, axis moves ------------------------------------------------------
    def roll(self, a, shift, axis=None):
        """``a`` with its elements shifted by ``shift`` along ``axis`` (None: the
        flattened array), wrapping around; ``shift`` and ``axis`` may be tuples.

        Example: ``N.roll(x, (1, -1), axis=(0, 1))``
        """
        a = self._lift(a)
        if axis is None:
            return self.reshape(self.roll(self.ravel(a), shift, 0), a.shape)
        shifts = dict.fromkeys(range(a.ndim), 0)
        try:
            pairs = np.broadcast(shift, axis)
        except ValueError:
            raise ShapeError(f"roll: shift {shift!r} and axis {axis!r} cannot be broadcast to "
                             "one another") from None
        for sh, ax in pairs:
            shifts[normalize_axis("roll", int(ax), a.ndim)] += int(sh)
        for ax, sh in shifts.items():
            size = a.shape[ax]
            if size and sh % size:
                cut = size - sh % size
                prefix = (slice(None),) * ax
                a = self.concatenate([self.getitem(a, prefix + (slice(cut, None),)),
                                      self.getitem(a, prefix + (slice(0, cut),))], axis=ax)
        return a

    def rot90(self, m, k=1, axes=(0, 1)):
        """``m`` rotated by 90 degrees ``k`` times in the plane of ``axes``, from the
        first axis towards the second. Example: ``N.rot90(image, 2)``"""
        m = self._lift(m)
        axes = tuple(axes)
        if len(axes) != 2:
            raise ShapeError(f"rot90: len(axes) must be 2, got {axes}")
        if axes[0] == axes[1] or abs(axes[0] - axes[1]) == m.ndim:
            raise ShapeError(f"rot90: axes must be different, got {axes}")
        first, second = (normalize_axis("rot90", a, m.ndim) for a in axes)
        k = operator.index(k) % 4
        if k == 0:
            return m
        if k == 2:
            return self.flip(self.flip(m, first), second)
        order = list(range(m.ndim))
        order[first], order[second] = order[second], order[first]
        if k == 1:
            return self.transpose(self.flip(m, second), order)
        return self.flip(self.transpose(m, order), second)

    def fliplr(self, m):
        """``m`` with its columns (second axis) reversed. Example: ``N.fliplr(x)``"""
        m = self._lift(m)
        if m.ndim < 2:
            raise ShapeError(f"fliplr: input must be >= 2-d, got shape {m.shape}")
        return self.flip(m, 1)

    def flipud(self, m):
        """``m`` with its rows (first axis) reversed. Example: ``N.flipud(x)``"""
        m = self._lift(m)
        if m.ndim < 1:
            raise ShapeError("flipud: input must be >= 1-d")
        return self.flip(m, 0)

    def rollaxis(self, a, axis, start=0):
        """``a`` with ``axis`` moved to stand before ``start`` (``moveaxis`` is the
        clearer form). Example: ``N.rollaxis(x, 2)``"""
        a = self._lift(a)
        n = a.ndim
        axis = normalize_axis("rollaxis", axis, n)
        start = operator.index(start)
        if start < 0:
            start += n
        if not 0 <= start < n + 1:
            raise ShapeError(f"rollaxis: 'start' arg requires {-n} <= start < {n + 1}, but "
                             f"{start} was passed in")
        if axis < start:
            start -= 1
        order = [d for d in range(n) if d != axis]
        order.insert(start, axis)
        return self.transpose(a, order)

    def permute_dims(self, a, /, axes=None):
        """``transpose`` (the array API's name). Example: ``N.permute_dims(x, (1, 0))``"""
        return self.transpose(a, axes)

    def matrix_transpose(self, x, /):
        """``x`` with its last two axes swapped. Example: ``N.matrix_transpose(batch)``"""
        x = self._lift(x)
        if x.ndim < 2:
            raise ShapeError(f"matrix_transpose: input array must be at least 2-dimensional, "
                             f"got shape {x.shape}")
        return self.swapaxes(x, -1, -2)

    def resize(self, a, new_shape):
        """``a`` flattened, repeated as often as needed and cut to ``new_shape``.

        Example: ``N.resize(x, (2, 5))``
        """
        a = self._lift(a)
        shape = tuple(operator.index(d) for d in np.atleast_1d(new_shape).tolist())
        if any(d < 0 for d in shape):
            raise ShapeError(f"resize: all elements of `new_shape` must be non-negative, "
                             f"got {shape}")
        size = int(np.prod(shape, dtype=np.int64))
        if a.size == 0 or size == 0:
            return self.zeros(shape, a.dtype)
        flat = self.ravel(a)
        repeats = -(-size // a.size)
        return self.reshape(self.getitem(self.tile(flat, repeats), slice(0, size)), shape)

    # -- insert and delete ------------------------------------------------------------------
    def insert(self, arr, obj, values, axis=None):
        """``values`` inserted into ``arr`` before the static index (or indices)
        ``obj`` along ``axis`` (None: the flattened array), cast to ``arr``'s dtype.

        Example: ``N.insert(x, 1, 0.0, axis=1)``
        """
        arr = self._lift(arr)
        obj = _static_index("insert", self, obj)
        values = self._lift(values if self._is_value(values) else np.asarray(values))
        numbers = np.arange(arr.size, dtype=np.int64).reshape(arr.shape)
        # values' elements numbered after arr's, negative to tell them apart
        tags = -1 - np.arange(values.size, dtype=np.int64).reshape(values.shape)
        with _numpy_errors("insert", arr.shape):
            placed = np.insert(numbers, obj, tags, axis=axis)
        source = np.where(placed >= 0, placed, arr.size - 1 - placed)
        pool = self.concatenate([self.ravel(arr), self.ravel(self.astype(values, arr.dtype))])
        return self._gather_flat(pool, source, arr.dtype)

    def delete(self, arr, obj, axis=None):
        """``arr`` without the static index (indices, slice or mask) ``obj`` along
        ``axis`` (None: the flattened array). Example: ``N.delete(x, [0, 2], axis=1)``"""
        arr = self._lift(arr)
        obj = _static_index("delete", self, obj)
        numbers = np.arange(arr.size, dtype=np.int64).reshape(arr.shape)
        with _numpy_errors("delete", arr.shape):
            kept = np.delete(numbers, obj, axis=axis)
        return self._gather_flat(self.ravel(arr), kept, arr.dtype)

    def _gather_flat(self, pool, source, dtype):
        """The elements of the flat ``pool`` at the static positions ``source``."""
        if source.size == 0:
            return self.zeros(source.shape, dtype)
        return self.getitem(pool, self._constant(source))
