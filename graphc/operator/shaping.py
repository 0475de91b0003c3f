"""Shape functions and indexing: reshape, transpose and friends, joins and
splits, basic and integer-array indexing, take, pad, tile, repeat, flip,
one_hot, astype.

Several NumPy functions are the same op with other arguments (``squeeze`` and
``expand_dims`` are reshapes, ``swapaxes`` and ``moveaxis`` are transposes),
so they normalise their arguments here and emit that op.

>>> import graphc.eager as E, numpy as np
>>> E.moveaxis(np.zeros((2, 3, 4)), 0, -1).shape
(3, 4, 2)
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..shape.axes import normalize_axes, normalize_axis, resolve_reshape
from ..shape.indexing import ArrayIndex, encode_key
from ..type.errors import DTypeError, IndexOutOfRange, ShapeError


def _as_index_sequence(opname, value):
    if isinstance(value, int) or hasattr(value, "__index__") and np.ndim(value) == 0:
        return (operator.index(value),)
    return tuple(operator.index(v) for v in value)


class ShapingMixin:
    # -- reshapes --------------------------------------------------------------
    def reshape(self, x, shape):
        """``x`` with a new shape of the same size; one dimension may be ``-1``.

        Example: ``N.reshape(x, (batch, -1))``
        """
        x = self._lift(x)
        shape = resolve_reshape("reshape", shape, math.prod(x.shape), x.shape)
        return x if shape == x.shape else self._op("reshape", [x], shape=shape)

    def ravel(self, x):
        """``x`` flattened to one dimension. Example: ``N.ravel(x)``"""
        return self.reshape(x, (-1,))

    def expand_dims(self, x, axis):
        """``x`` with new size-1 axes at ``axis`` (int or tuple) of the result.

        Example: ``N.expand_dims(x, 0)``
        """
        x = self._lift(x)
        new_axes = len(_as_index_sequence("expand_dims", axis))
        axes = normalize_axes("expand_dims", axis, x.ndim + new_axes)
        shape, rest = [], iter(x.shape)
        for i in range(x.ndim + len(axes)):
            shape.append(1 if i in axes else next(rest))
        return self.reshape(x, tuple(shape))

    def squeeze(self, x, axis=None):
        """``x`` without size-1 axes (all of them, or those in ``axis``).

        Example: ``N.squeeze(x, axis=1)``
        """
        x = self._lift(x)
        axes = normalize_axes("squeeze", axis, x.ndim)
        if axes is None:
            axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
        bad = [a for a in axes if x.shape[a] != 1]
        if bad:
            raise ShapeError(f"squeeze: cannot select axis {bad[0]} of shape {x.shape} to "
                             "squeeze out: its size is not one")
        return self.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))

    # -- axis permutations -----------------------------------------------------
    def transpose(self, x, axes=None):
        """``x`` with its axes permuted (reversed by default), as ``numpy.transpose``.

        Example: ``N.transpose(x, (0, 2, 1))``
        """
        x = self._lift(x)
        if axes is None:
            axes = tuple(reversed(range(x.ndim)))
        axes = tuple(normalize_axis("transpose", a, x.ndim)
                     for a in _as_index_sequence("transpose", axes))
        if axes == tuple(range(x.ndim)):
            return x
        return self._op("transpose", [x], axes=axes)

    def swapaxes(self, x, axis1: int, axis2: int):
        """``x`` with two axes exchanged. Example: ``N.swapaxes(x, 0, 1)``"""
        x = self._lift(x)
        perm = list(range(x.ndim))
        i, j = normalize_axis("swapaxes", axis1, x.ndim), normalize_axis("swapaxes", axis2, x.ndim)
        perm[i], perm[j] = perm[j], perm[i]
        return self.transpose(x, perm)

    def moveaxis(self, x, source, destination):
        """``x`` with axes moved from ``source`` to ``destination`` (ints or sequences).

        Example: ``N.moveaxis(x, 0, -1)``
        """
        x = self._lift(x)
        src = [normalize_axis("moveaxis", a, x.ndim) for a in _as_index_sequence("moveaxis", source)]
        dst = [normalize_axis("moveaxis", a, x.ndim)
               for a in _as_index_sequence("moveaxis", destination)]
        if len(src) != len(dst):
            raise ShapeError("moveaxis: source and destination must have the same number of "
                             "elements")
        for what, axes in (("source", src), ("destination", dst)):
            if len(set(axes)) != len(axes):
                raise ShapeError(f"moveaxis: repeated axis in {what} {axes}")
        order = [a for a in range(x.ndim) if a not in src]
        for d, s in sorted(zip(dst, src)):
            order.insert(d, s)
        return self.transpose(x, order)

    def broadcast_to(self, x, shape):
        """``x`` repeated along size-1 and missing leading axes to ``shape``.

        Example: ``N.broadcast_to(bias, (batch, 10))``
        """
        x = self._lift(x)
        shape = self._shape("broadcast_to", shape)
        return x if shape == x.shape else self._op("broadcast_to", [x], shape=shape)

    # -- joins and splits ------------------------------------------------------
    def concatenate(self, arrays, axis=0):
        """Join arrays along an existing axis (``None``: flatten them first).

        Example: ``N.concatenate([a, b], axis=1)``
        """
        arrays = [self._lift(a) for a in arrays]
        if not arrays:
            raise ShapeError("concatenate: need at least one array to concatenate")
        if axis is None:
            arrays, axis = [self.ravel(a) for a in arrays], 0
        if arrays[0].ndim == 0:
            raise ShapeError("concatenate: zero-dimensional arrays cannot be concatenated")
        axis = normalize_axis("concatenate", axis, arrays[0].ndim)
        if len(arrays) == 1:
            return arrays[0]
        return self._op("concatenate", arrays, axis=axis)

    def stack(self, arrays, axis=0):
        """Join same-shaped arrays along a new axis. Example: ``N.stack([a, b], axis=-1)``"""
        arrays = [self._lift(a) for a in arrays]
        if not arrays:
            raise ShapeError("stack: need at least one array to stack")
        shapes = {a.shape for a in arrays}
        if len(shapes) != 1:
            raise ShapeError(f"stack: all input arrays must have the same shape, got "
                             f"{[a.shape for a in arrays]}")
        axis = normalize_axis("stack", axis, arrays[0].ndim + 1)
        expanded = [self.expand_dims(a, axis) for a in arrays]
        return expanded[0] if len(expanded) == 1 else self._op("concatenate", expanded, axis=axis)

    def split(self, x, indices_or_sections, axis=0):
        """A list of sub-arrays: ``n`` equal parts, or cut at the given indices.

        Example: ``left, right = N.split(x, 2, axis=1)``
        """
        x = self._lift(x)
        axis = normalize_axis("split", axis, x.ndim)
        size = x.shape[axis]
        if np.ndim(indices_or_sections) == 0:  # sections; else indices (a list, an array)
            n = operator.index(indices_or_sections)
            if n <= 0 or size % n:
                raise ShapeError(f"split: array split does not result in an equal division: "
                                 f"axis {axis} of size {size} into {n} sections")
            cuts = [size // n * i for i in range(1, n)]
        else:
            cuts = [min(max(operator.index(c), 0) if c >= 0 else max(size + c, 0), size)
                    for c in indices_or_sections]
        bounds = [0] + cuts + [size]
        prefix = (slice(None),) * axis
        return [self.getitem(x, prefix + (slice(lo, max(lo, hi)),))
                for lo, hi in zip(bounds[:-1], bounds[1:])]

    # -- indexing ----------------------------------------------------------------
    def getitem(self, x, key):
        """``x[key]`` with NumPy's basic (ints, slices, None, ...) and integer-array
        indexing. Boolean masks must be known while building (constants).

        Example: ``x[:, 1:3]``, ``x[..., None]``, ``x[idx]``
        """
        x = self._lift(x)
        encoded, arrays = self._index_key("getitem", x, key, first=1)
        if not arrays:
            if all(e == ("s", 0, d, 1) for e, d in zip(encoded, x.shape)) and len(encoded) == x.ndim:
                return x
            return self._op("slice", [x], key=encoded)
        self._check_bounds(x, encoded, arrays)
        take_axis = _single_take_axis(encoded, x.shape)
        if take_axis is not None:
            return self._op("take", [x, arrays[0]], axis=take_axis)
        return self._op("gather", [x] + arrays, key=encoded)

    def _index_key(self, opname, x, key, first):
        """A NumPy key on ``x`` as ``(encoded, index arrays)``: the encoding of
        :func:`~graphc.shape.indexing.encode_key`, its index arrays counted as parents
        from position ``first`` (a boolean mask known while building becomes integer
        arrays)."""
        key = key if isinstance(key, tuple) else (key,)
        key = tuple(self._lift(k) if _is_array_like(k, self) else k for k in key)
        # the axes each entry indexes: a mask as many as it has, an Ellipsis the rest
        ranks = [k.ndim if self._is_value(k) and k.dtype == np.bool_ else
                 0 if k is None or k is Ellipsis else 1 for k in key]
        rest, axis = max(x.ndim - sum(ranks), 0), 0
        placeholders = []
        for k, rank in zip(key, ranks):
            axis += rest if k is Ellipsis else rank
            if self._is_value(k):
                known = self._known(k)
                if k.dtype == np.bool_:
                    if known is None:
                        raise ShapeError(f"{opname}: a boolean mask computed in the graph gives "
                                         "a data-dependent shape; use N.where instead")
                    _check_mask(x.shape, axis - rank, known.shape)
                    placeholders.extend(self._constant(i) for i in np.nonzero(known))
                    continue
                if k.dtype.kind not in "iu":
                    raise DTypeError(f"{opname}: index arrays must be integer or boolean, got "
                                     f"{k.dtype}")
                if k.ndim == 0 and known is not None:
                    # a known 0-d integer indexes as the integer does, as in NumPy: a
                    # basic index, so x[i] is a view, not a gather (ONNX's Gather of one
                    # constant index: q, k, v = qkv[0], qkv[1], qkv[2])
                    k = int(known)
            placeholders.append(k)
        entries, arrays = [], []
        for k in placeholders:
            if self._is_value(k):
                arrays.append(k)
                entries.append(ArrayIndex(first + len(arrays) - 1, k.shape))
            else:
                entries.append(k)
        encoded, _ = encode_key(opname, tuple(entries), x.shape, None)
        return encoded, arrays

    def _check_bounds(self, x, encoded, arrays, first=1, opname="getitem"):
        axis = 0
        for e in encoded:
            if e[0] == "a":
                known = self._known(arrays[e[1] - first])
                size = x.shape[axis]
                if known is not None and known.size and (known.min() < -size or known.max() >= size):
                    bad = known[(known < -size) | (known >= size)].flat[0]
                    raise IndexOutOfRange(f"{opname}: index {bad} is out of bounds for axis "
                                          f"{axis} with size {size}")
            if e[0] != "n":
                axis += 1

    def take(self, a, indices, axis=None):
        """Elements of ``a`` at integer ``indices`` along ``axis`` (None: flattened).

        Example: ``N.take(table, ids, axis=0)``
        """
        a = self._lift(a)
        if axis is None:
            a, axis = self.ravel(a), 0
        axis = normalize_axis("take", axis, a.ndim)
        indices = self._lift(indices)
        key = (slice(None),) * axis + (indices,)
        return self.getitem(a, key) if indices.dtype.kind in "iu" else self._op(
            "take", [a, indices], axis=axis)

    # -- other copies ------------------------------------------------------------
    def pad(self, x, pad_width, mode: str = "constant", constant_values=0):
        """``x`` padded with ``constant_values``; ``pad_width`` as in ``numpy.pad``.

        Example: ``N.pad(image, ((0, 0), (0, 0), (1, 1), (1, 1)))``
        """
        x = self._lift(x)
        if mode != "constant":
            raise ValueError(f"pad: mode {mode!r} is not supported (only 'constant')")
        try:
            widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2))
        except ValueError:
            raise ShapeError(f"pad: pad_width {pad_width!r} does not fit the {x.ndim} axes of "
                             f"shape {x.shape}") from None
        if (widths < 0).any():
            raise ShapeError(f"pad: negative pad widths {pad_width!r}")
        widths = tuple((int(lo), int(hi)) for lo, hi in widths)
        if not any(lo or hi for lo, hi in widths):
            return x
        value = np.asarray(constant_values).item()
        return self._op("pad", [x], pad_width=widths, value=value)

    def tile(self, x, reps):
        """``x`` repeated ``reps`` times along each axis (``numpy.tile``).

        Example: ``N.tile(row, (4, 1))``
        """
        x = self._lift(x)
        reps = _as_index_sequence("tile", reps)
        if len(reps) > x.ndim:
            x = self.reshape(x, (1,) * (len(reps) - x.ndim) + x.shape)
        reps = (1,) * (x.ndim - len(reps)) + reps
        return x if all(r == 1 for r in reps) else self._op("tile", [x], reps=reps)

    def repeat(self, x, repeats, axis=None):
        """Each element of ``x`` repeated (an int, or one count per element) along
        ``axis`` (None: flattened). Example: ``N.repeat(x, 2, axis=1)``"""
        x = self._lift(x)
        if axis is None:
            x, axis = self.ravel(x), 0
        axis = normalize_axis("repeat", axis, x.ndim)
        if np.ndim(repeats) == 0:
            return self._op("repeat", [x], axis=axis, repeats=operator.index(repeats))
        counts = np.asarray(repeats, dtype=np.int64)
        if counts.shape == (1,):  # one count for every element, as in NumPy
            counts = np.broadcast_to(counts, (x.shape[axis],))
        if counts.shape != (x.shape[axis],) or (counts < 0).any():
            raise ShapeError(f"repeat: repeats must be non-negative with one count per element "
                             f"of axis {axis} (size {x.shape[axis]}), got shape {counts.shape}")
        return self.take(x, np.repeat(np.arange(x.shape[axis]), counts), axis=axis)

    def flip(self, x, axis=None):
        """``x`` with the order of elements reversed along ``axis`` (None: all).

        Example: ``N.flip(kernel, axis=(2, 3))``
        """
        x = self._lift(x)
        axes = normalize_axes("flip", axis, x.ndim)
        axes = tuple(range(x.ndim)) if axes is None else axes
        return x if not axes else self._op("flip", [x], axis=axes)

    def one_hot(self, indices, depth: int, dtype=None):
        """A new last axis of size ``depth`` with 1 at each index, 0 elsewhere.

        Example: ``N.one_hot(labels, 10)``
        """
        indices = self._lift(indices)
        return self._op("one_hot", [indices], depth=operator.index(depth),
                        dtype=self._dtype("one_hot", dtype))

    def astype(self, x, dtype):
        """``x`` converted to ``dtype`` (unsafe casting, as ``ndarray.astype``).

        Example: ``N.astype(mask, np.float32)``
        """
        x = self._lift(x)
        dtype = self._dtype("astype", dtype)
        return x if dtype == x.dtype else self._op("astype", [x], dtype=dtype)

    def bitcast(self, x, dtype):
        """``x``'s bytes reinterpreted as ``dtype`` of the same item size (NumPy's
        ``x.view(dtype)``, ONNX's BitCast); the shape is unchanged.

        Example: ``N.bitcast(N.var("x", (3,)), np.int32)``
        """
        return self._op("bitcast", [self._lift(x)], dtype=self._dtype("bitcast", dtype))

    def copy(self, x):
        """A copy of ``x``. Example: ``N.copy(x)``"""
        return self._op("copy", [self._lift(x)])


def _check_mask(shape, axis, mask_shape):
    """A boolean mask must match the axes it indexes exactly (NumPy's IndexError)."""
    indexed = shape[axis:axis + len(mask_shape)]
    if len(indexed) < len(mask_shape):
        raise IndexOutOfRange(f"getitem: too many indices for array: a boolean index of shape "
                              f"{mask_shape} at axis {axis} of shape {shape}")
    for i, (d, m) in enumerate(zip(indexed, mask_shape)):
        if d != m and not (d == 1 and m == 0):  # NumPy lets an empty mask index a 1
            raise IndexOutOfRange(f"getitem: boolean index did not match indexed array along "
                                  f"axis {axis + i}; size of axis is {d} but size of "
                                  f"corresponding boolean axis is {m} (array shape {shape}, "
                                  f"mask shape {mask_shape})")


def _is_array_like(k, ns) -> bool:
    if k is None or k is Ellipsis or isinstance(k, (slice, int, np.integer)):
        return False
    return ns._is_value(k) or isinstance(k, (list, np.ndarray)) or (
        isinstance(k, (bool, np.bool_)))


def _single_take_axis(encoded, shape):
    """The axis when the key is one index array among full slices, else None."""
    if any(e[0] in "in" for e in encoded):
        return None
    arrays = [i for i, e in enumerate(encoded) if e[0] == "a"]
    if len(arrays) != 1:
        return None
    if all(e == ("s", 0, d, 1) for e, d in zip(encoded, shape) if e[0] == "s"):
        return arrays[0]
    return None
