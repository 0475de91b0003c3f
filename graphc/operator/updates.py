"""Updates of array cells: the functional ``scatter`` (``x.at[key].add(v)``, JAX's
form, returns a new value) and NumPy's in-place functions (``N.put``,
``N.copyto``, ``N.fill_diagonal``, ...), which make the array they are given
denote the updated value, as NumPy's write into it.

In graph mode an in-place update never writes into memory the user sees: the
name is rebound to a new node (see :meth:`graphc.symbol.Node.become`), and the
memory plan computes the update in place when nothing else reads the old value.
In eager mode the NumPy array itself is written, as NumPy would.

>>> import graphc.eager as E, numpy as np
>>> a = np.zeros(4)
>>> E.put(a, [0, 2], [5.0, 7.0])
>>> a
array([5., 0., 7., 0.])
"""
from __future__ import annotations

import operator

import numpy as np

from ..type.errors import DTypeError, ShapeError

#: the modes of ``scatter``: ``set`` writes the new values, the others combine them
#: with the old ones by the NumPy ufunc of that name (``min``: ``minimum``), index by
#: index, so repeated indices accumulate (``numpy.add.at``)
MODES = ("set", "add", "subtract", "multiply", "divide", "power", "min", "max")


class UpdateMixin:
    """Cell updates, written once for every backend (its ``_assign`` hook writes)."""

    def _updated(self, x, key, values, mode="set", opname="scatter"):
        """``x`` with ``x[key]`` set to (``mode="set"``) or combined with ``values``:
        a new value; ``x`` is unchanged. ``values`` are cast to ``x``'s dtype."""
        if mode not in MODES:
            raise ValueError(f"{opname}: unknown update mode {mode!r}; modes are {MODES}")
        x = self._lift(x)
        encoded, arrays = self._index_key(opname, x, key, first=2)
        self._check_bounds(x, encoded, arrays, first=2, opname=opname)
        values = self._lift(values, like=x)
        if values.dtype != x.dtype:
            values = self.astype(values, x.dtype)
        # NumPy drops leading axes of length 1 that the cells do not have
        extra = values.ndim - _cells_rank(encoded, arrays, x.ndim)
        if extra > 0 and all(d == 1 for d in values.shape[:extra]):
            values = self.reshape(values, values.shape[extra:])
        return self._op("scatter", [x, values] + arrays, key=encoded, mode=mode)

    def _in_place(self, opname, x, new, what=None):
        """``new`` as the value an in-place operation on ``x`` leaves (NumPy's
        ``x += v``): ``x``'s shape, cast to ``x``'s dtype under ``same_kind``. ``what``
        names the value in the errors (a loop's carried value) instead of NumPy's words."""
        if tuple(new.shape) != tuple(x.shape):
            raise ShapeError(f"{opname}: {what} has shape {x.shape} but the body returned "
                             f"shape {new.shape}; a loop keeps every shape" if what else
                             f"{opname}: non-broadcastable output operand with shape {x.shape} "
                             f"doesn't match the broadcast shape {new.shape}")
        if new.dtype != x.dtype:
            if not np.can_cast(new.dtype, x.dtype, "same_kind"):
                raise DTypeError(f"{opname}: {what} has dtype {x.dtype} but the body returned "
                                 f"{new.dtype}" if what else
                                 f"{opname}: cannot cast the result of dtype {new.dtype} to "
                                 f"the array's dtype {x.dtype} with casting rule 'same_kind'")
            new = self.astype(new, x.dtype)
        return new

    # -- NumPy's functions that write into their first argument ----------------
    def put(self, a, ind, v, mode="raise"):
        """``a.flat[ind] = v`` in place (``v`` repeated to ``ind``'s length);
        ``mode`` ``"wrap"`` or ``"clip"`` brings indices into range.

        Example: ``N.put(a, [0, 2], [5.0, 7.0])``
        """
        target = a
        a = self._lift(a)
        ind = self._lift(ind)
        if ind.dtype.kind not in "iu":
            raise DTypeError(f"put: indices must be integers, got {ind.dtype}")
        ind = self.ravel(ind)
        if mode == "wrap":
            ind = self.remainder(ind, a.size)
        elif mode == "clip":
            ind = self.clip(ind, 0, a.size - 1)
        elif mode != "raise":
            raise ValueError(f"put: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
        v = self.ravel(self._lift(v, like=a))
        if v.size == 0:
            if ind.size:
                raise ValueError("put: cannot write from empty values into a non-empty "
                                 "selection")
            return
        if v.size != ind.size:
            v = _repeat_to(self, v, ind.size)
        flat = self._updated(self.ravel(a), (ind,), v, opname="put")
        self._assign("put", target, self.reshape(flat, a.shape))

    def put_along_axis(self, arr, indices, values, axis):
        """``arr`` with ``values`` written at ``indices`` along ``axis``, in place
        (the inverse of ``take_along_axis``).

        Example: ``N.put_along_axis(a, N.argmax(a, 1, keepdims=True), 0.0, 1)``
        """
        target = arr
        arr, indices = self._lift(arr), self._lift(indices)
        if axis is None:
            arr, indices, axis = self.ravel(arr), self.ravel(indices), 0
        axis = operator.index(axis) % max(arr.ndim, 1)
        if indices.ndim != arr.ndim:
            raise ShapeError(f"put_along_axis: indices of shape {indices.shape} need as many "
                             f"dimensions as the array of shape {arr.shape}")
        key = _along_axis_key(self, arr.shape, indices, axis)
        new = self._updated(arr, key, values, opname="put_along_axis")
        self._assign("put_along_axis", target, self.reshape(new, self._lift(target).shape))

    def putmask(self, a, mask, values):
        """``a[mask] = values`` in place, ``values`` repeated over ``a``'s cells in
        order (NumPy's ``putmask``). Example: ``N.putmask(x, x < 0, 0.0)``"""
        x = self._lift(a)
        values = self._lift(values, like=x)
        if not np.can_cast(values.dtype, x.dtype, "safe"):
            raise DTypeError(f"putmask: cannot cast values of dtype {values.dtype} to the "
                             f"array's dtype {x.dtype} according to the rule 'safe'")
        if values.size == 0:
            raise ValueError("putmask: values must not be empty")
        if values.size != x.size and values.ndim:
            values = self.reshape(_repeat_to(self, self.ravel(values), x.size), x.shape)
        self._assign("putmask", a, self.where(mask, self.astype(values, x.dtype), x))

    def place(self, arr, mask, vals):
        """``arr[mask] = vals`` in place, ``vals`` used in order and repeated (a
        mask computed in the graph needs one value). Example: ``N.place(a, a > 2, 0.0)``"""
        x = self._lift(arr)
        vals = self.ravel(self._lift(vals, like=x))
        known = self._known(self._lift(mask)) if self._is_value(mask) or not isinstance(
            mask, (list, np.ndarray)) else np.asarray(mask)
        if vals.size == 1 or known is None:
            if vals.size != 1:
                raise ShapeError(f"place: a mask computed in the graph takes one value, got "
                                 f"{vals.size}; with a constant mask any number may be given")
            self._assign("place", arr, self.where(mask, self.astype(vals[0], x.dtype), x))
            return
        known = np.broadcast_to(np.asarray(known, bool), x.shape)
        count = int(known.sum())
        if count == 0:
            return
        if vals.size == 0:
            raise ValueError("place: cannot place from an empty vals")
        self._assign("place", arr, self._updated(x, known, _repeat_to(self, vals, count),
                                                 opname="place"))

    def copyto(self, dst, src, casting="same_kind", where=True):
        """``dst[...] = src`` in place (broadcast, cast under ``casting``, only where
        ``where`` holds). Example: ``N.copyto(out, x * 2.0)``"""
        x = self._lift(dst)
        src = self._lift(src, like=x)
        if not np.can_cast(src.dtype, x.dtype, casting):
            raise DTypeError(f"copyto: cannot cast {src.dtype} to {x.dtype} with casting rule "
                             f"{casting!r}")
        new = self.broadcast_to(self.astype(src, x.dtype), x.shape)
        if where is not True:
            new = self.where(where, new, x)
        self._assign("copyto", dst, new)

    def fill_diagonal(self, a, val, wrap=False):
        """The main diagonal of ``a`` (all axes equal, or a tall 2-D matrix) set to
        ``val`` in place. Example: ``N.fill_diagonal(m, 1.0)``"""
        x = self._lift(a)
        if x.ndim < 2:
            raise ShapeError(f"fill_diagonal: the array must be at least 2-d, got shape "
                             f"{x.shape}")
        if x.ndim > 2 and len(set(x.shape)) != 1:
            raise ShapeError(f"fill_diagonal: all dimensions of a {x.ndim}-d array must be "
                             f"equal, got shape {x.shape}")
        step = 1 + sum(int(np.prod(x.shape[k + 1:])) for k in range(x.ndim - 1))
        end = x.size if x.ndim > 2 or wrap else x.shape[1] * x.shape[1]
        cells = np.arange(0, min(end, x.size), step, dtype=np.int64)
        val = self.ravel(self._lift(val, like=x))
        if val.size != cells.size:
            val = _repeat_to(self, val, cells.size)
        flat = self._updated(self.ravel(x), (self._constant(cells),), val, opname="fill_diagonal")
        self._assign("fill_diagonal", a, self.reshape(flat, x.shape))


def _cells_rank(encoded, arrays, ndim) -> int:
    """How many axes ``x[key]`` has (a broadcast index-array block counts once)."""
    block = len(np.broadcast_shapes(*[a.shape for a in arrays])) if arrays else 0
    return sum(1 for e in encoded if e[0] in "sn") + block


def _repeat_to(ns, flat, size):
    """A 1-D value repeated cyclically to ``size`` elements (NumPy's ``resize``)."""
    reps = -(-size // max(flat.size, 1))
    return ns.getitem(ns.tile(flat, reps), slice(0, size))


def _along_axis_key(ns, shape, indices, axis):
    """The index arrays of ``x[key]`` = ``take_along_axis(x, indices, axis)``."""
    key = []
    for k, dim in enumerate(shape):
        if k == axis:
            key.append(indices)
        else:
            grid = [1] * len(shape)
            grid[k] = dim
            key.append(ns._constant(np.arange(dim, dtype=np.int64).reshape(grid)))
    return tuple(key)


class At:
    """``x.at[key]``: JAX's functional updates, each a new value (``x`` is unchanged).

    >>> import graphc.ndarray as N
    >>> x = N.var("x", (5,))
    >>> y = x.at[1:3].add(1.0)
    >>> y.op.kind, y.op["mode"], y.shape
    ('scatter', 'add', (5,))
    """

    __slots__ = ("_ns", "_array")

    def __init__(self, ns, array):
        self._ns, self._array = ns, array

    def __getitem__(self, key):
        return AtKey(self._ns, self._array, key)


class AtKey:
    """The updates of ``x.at[key]``: ``set``, ``add``, ``subtract``, ``multiply``,
    ``divide``, ``power``, ``min``, ``max`` (repeated indices combine one by one,
    as ``numpy.add.at``), and ``get`` (``x[key]``)."""

    __slots__ = ("_ns", "_array", "_key")

    def __init__(self, ns, array, key):
        self._ns, self._array, self._key = ns, array, key

    def get(self):
        """``x[key]``. Example: ``x.at[0].get()``"""
        return self._ns.getitem(self._array, self._key)



def _update_method(mode):
    def update(self, values):
        return self._ns._updated(self._array, self._key, values, mode, f"at[].{mode}")
    update.__name__ = update.__qualname__ = mode
    update.__doc__ = (f"``x`` with ``x[key]`` {'set to' if mode == 'set' else mode + ' by'} "
                      f"``values`` (a new value). Example: ``x.at[1:3].{mode}(2.0)``")
    return update


for _mode_name in MODES:
    setattr(AtKey, _mode_name, _update_method(_mode_name))
