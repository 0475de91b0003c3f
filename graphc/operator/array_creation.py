"""NumPy's creation functions made of existing kinds: conversions (``array``,
``asarray``), filled and patterned arrays (``empty``, ``eye``, ``tri``, windows),
ranges (``linspace``, ``logspace``, ``geomspace``), triangles and diagonals
(``tril``, ``triu``, ``diag``, ``diagonal``), grids (``meshgrid``, ``indices``,
``fromfunction``) and ``vander``.

Arrays that depend on nothing but static arguments are constants, computed by NumPy
itself (bit for bit NumPy's values); those of graph values are compositions of
slices, gathers, ``where`` and arithmetic, so they get gradients for free.

Like ``N.zeros``, a creation function without a dtype makes float32 where NumPy
would make float64 from Python numbers (``linspace(0, 1)``, ``eye(3)``, windows);
integer results stay int64, and values computed from arrays follow NumPy's rules.

>>> import graphc.eager as E
>>> E.linspace(0, 1, 5).dtype, E.eye(2, k=1).tolist()
(dtype('float32'), [[0.0, 1.0], [0.0, 0.0]])
"""
from __future__ import annotations

import operator

import numpy as np

from ..shape.axes import normalize_axis
from ..type.errors import ShapeError
from .namespace import DEFAULT_DTYPE

def _weak(x) -> bool:
    """Python numbers (and lists of them): NumPy makes float64 of them, graphc float32."""
    if isinstance(x, (list, tuple)):
        return all(_weak(v) for v in x)
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def _graphc_default(result: np.ndarray, dtype, *args) -> np.ndarray:
    """``result`` as float32 when no dtype was asked and NumPy made float64 only
    because the arguments were Python numbers (graphc's creation default)."""
    if dtype is None and result.dtype == np.float64 and all(_weak(a) for a in args):
        return result.astype(DEFAULT_DTYPE)
    return result


class CreationFunctions:
    """Conversions, patterned arrays, ranges, triangles, diagonals and grids."""

    # -- helpers ---------------------------------------------------------------
    def _static(self, x):
        """``x`` when it is no value of this backend (a number, a list, a NumPy array
        in graph mode): NumPy computes with it while building. ``None`` for values,
        which are composed (eager arrays too, so that gradients flow through them)."""
        if self._is_value(x) or getattr(type(x), "__graphc_value__", None) is not None:
            return None
        return x

    def _bounds(self, values, static):
        """``values`` lifted, known ones as arrays; Python numbers stay weak (they take
        the dtype of the array bounds, as NumPy's ranges do)."""
        like = next((self._lift(v if s is None else np.asarray(s))
                     for v, s in zip(values, static)
                     if not (s is not None and np.ndim(s) == 0 and _weak(s))), None)
        return [self._lift(v if s is None else s if _weak(s) else np.asarray(s), like)
                for v, s in zip(values, static)]

    def _holds_value(self, x) -> bool:
        """Whether ``x`` (a nested list or tuple) holds a graph value anywhere."""
        if isinstance(x, (list, tuple)):
            return any(self._holds_value(v) for v in x)
        return self._is_value(x) or getattr(type(x), "__graphc_value__", None) is not None

    def _nested(self, x, dtype):
        """A nested list of values and numbers as one stacked value of ``dtype``."""
        if not isinstance(x, (list, tuple)):
            return self.astype(self._lift(np.asarray(x) if not self._holds_value(x) else x),
                               dtype)
        parts = [self._nested(v, dtype) for v in x]
        if not parts:
            raise ShapeError("array: an empty list among graph values has no shape")
        return self.stack(parts)

    def _leaf_dtypes(self, x):
        if isinstance(x, (list, tuple)):
            return [d for v in x for d in self._leaf_dtypes(v)]
        return [self._lift(x).dtype if self._holds_value(x) else np.asarray(x).dtype]

    # -- conversions -----------------------------------------------------------
    def array(self, object, dtype=None, *, copy=True, order="K", ndmin=0, like=None):
        """``object`` as an array: a graph value passes through (cast to ``dtype``);
        an array-like becomes a constant, with NumPy's dtype (``[1.0, 2.0]`` is
        float64); a list that holds graph values is stacked.

        Example: ``N.array([[1, 2], [3, 4]], dtype=N.float32)``
        """
        if self._holds_value(object):
            if isinstance(object, (list, tuple)):
                common = dtype if dtype is not None else np.result_type(
                    *self._leaf_dtypes(object))
                value = self._nested(object, self._dtype("array", common))
            else:
                value = self._lift(object)
                if dtype is not None:
                    value = self.astype(value, dtype)
        else:
            try:
                value = self._constant(np.array(object, dtype=dtype, copy=True))
            except (TypeError, ValueError) as exc:
                raise ShapeError(f"array: cannot make an array of {type(object).__name__}: "
                                 f"{exc}") from None
        ndmin = operator.index(ndmin)
        if value.ndim < ndmin:
            value = self.reshape(value, (1,) * (ndmin - value.ndim) + value.shape)
        return value

    def asarray(self, a, dtype=None, order=None, *, device=None, copy=None, like=None):
        """``a`` as an array (see :meth:`array`). Example: ``N.asarray([0.5, 1.5])``"""
        return self.array(a, dtype)

    def asanyarray(self, a, dtype=None, order=None, *, device=None, copy=None, like=None):
        """``a`` as an array (see :meth:`array`). Example: ``N.asanyarray(x)``"""
        return self.array(a, dtype)

    def ascontiguousarray(self, a, dtype=None, *, like=None):
        """``a`` as an array of at least one dimension (graph values have no memory
        layout to change). Example: ``N.ascontiguousarray(x.T)``"""
        return self.array(a, dtype, ndmin=1)

    # -- filled and patterned arrays ---------------------------------------------
    def empty(self, shape, dtype=None, order="C", *, device=None, like=None):
        """A new array of ``shape``; graphc fills it with zeros (a graph has no
        uninitialised memory to hand out). float32 by default.

        Example: ``N.empty((3, 4))``
        """
        return self.zeros(shape, dtype)

    def empty_like(self, prototype, dtype=None, order="K", subok=True, shape=None, *,
                   device=None):
        """An array like ``prototype`` (its shape and dtype unless given), filled with
        zeros. Example: ``N.empty_like(x)``"""
        prototype = self._lift(prototype)
        return self.full(prototype.shape if shape is None else shape, 0,
                         prototype.dtype if dtype is None else dtype)

    def eye(self, N, M=None, k=0, dtype=None, order="C", *, device=None, like=None):
        """A 2-D array with ones on diagonal ``k`` (float32 by default).

        Example: ``N.eye(3, 4, k=1)``
        """
        dtype = self._dtype("eye", dtype)
        return self._constant(np.eye(operator.index(N), None if M is None else
                                     operator.index(M), operator.index(k), dtype=dtype))

    def identity(self, n, dtype=None, *, like=None):
        """The ``n`` x ``n`` identity matrix (float32 by default). Example: ``N.identity(3)``"""
        return self.eye(n, dtype=dtype)

    def tri(self, N, M=None, k=0, dtype=None, *, like=None):
        """Ones at and below diagonal ``k``, zeros above (float32 by default).

        Example: ``N.tri(3, 4, k=-1)``
        """
        dtype = self._dtype("tri", dtype)
        return self._constant(np.tri(operator.index(N), None if M is None else
                                     operator.index(M), operator.index(k), dtype=dtype))

    def _window(self, name, M, dtype, *args):
        values = getattr(np, name)(operator.index(M), *args)
        return self._constant(values.astype(self._dtype(name, dtype)))

    def bartlett(self, M, *, dtype=None):
        """The Bartlett window of ``M`` points (float32 unless ``dtype``).
        Example: ``N.bartlett(8)``"""
        return self._window("bartlett", M, dtype)

    def blackman(self, M, *, dtype=None):
        """The Blackman window of ``M`` points (float32 unless ``dtype``).
        Example: ``N.blackman(8)``"""
        return self._window("blackman", M, dtype)

    def hamming(self, M, *, dtype=None):
        """The Hamming window of ``M`` points (float32 unless ``dtype``).
        Example: ``N.hamming(8)``"""
        return self._window("hamming", M, dtype)

    def hanning(self, M, *, dtype=None):
        """The Hann window of ``M`` points (float32 unless ``dtype``).
        Example: ``N.hanning(8)``"""
        return self._window("hanning", M, dtype)

    def kaiser(self, M, beta, *, dtype=None):
        """The Kaiser window of ``M`` points and shape ``beta`` (float32 unless
        ``dtype``). Example: ``N.kaiser(8, 14.0)``"""
        return self._window("kaiser", M, dtype, float(beta))

    # -- ranges ------------------------------------------------------------------
    def linspace(self, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0,
                 *, device=None):
        """``num`` evenly spaced values from ``start`` to ``stop`` (included unless
        ``endpoint=False``), along a new ``axis`` when the bounds are arrays; with
        ``retstep`` also the step. float32 from Python numbers unless ``dtype``; graph
        values as bounds follow NumPy's arithmetic.

        Example: ``N.linspace(0.0, 1.0, 11)``
        """
        num = operator.index(num)
        if num < 0:
            raise ShapeError(f"linspace: number of samples, {num}, must be non-negative")
        static = [self._static(v) for v in (start, stop)]
        if all(s is not None for s in static):
            values, step = np.linspace(static[0], static[1], num, endpoint, retstep=True,
                                       dtype=dtype, axis=axis)
            value = self._constant(_graphc_default(values, dtype, start, stop))
            return (value, step) if retstep else value
        start, stop = self._bounds((start, stop), static)
        value, step = self._linspace_values(start, stop, num, endpoint, dtype, axis)
        return (value, step) if retstep else value

    def _linspace_values(self, start, stop, num, endpoint, dtype, axis):
        """NumPy's linspace, step by step, on graph values."""
        div = num - 1 if endpoint else num
        dt = np.result_type(start.dtype, stop.dtype, float(num))
        dt = dt if dt.kind in "fc" else np.dtype(np.float64)
        start, stop = self.astype(start, dt), self.astype(stop, dt)
        delta = self.subtract(stop, start)
        ramp = self._constant(np.arange(0, num, dtype=dt).reshape((-1,) + (1,) * delta.ndim))
        if div > 0:
            step = self.divide(delta, dt.type(div))
            # NumPy scales by delta after dividing where a step underflows to zero
            y = self.where(self.equal(step, 0), self.multiply(
                self.divide(ramp, dt.type(div)), delta), self.multiply(ramp, step))
        else:
            step = self._constant(np.full(delta.shape, np.nan, dt))
            y = self.multiply(ramp, delta)
        y = self.add(y, start)
        if endpoint and num > 1:
            last = self.reshape(self.broadcast_to(stop, y.shape[1:]), (1,) + y.shape[1:])
            y = self.concatenate([self.getitem(y, slice(0, -1)), last], axis=0)
        axis = normalize_axis("linspace", axis, y.ndim)
        if axis:
            y = self.moveaxis(y, 0, axis)
        if dtype is not None:
            dtype = self._dtype("linspace", dtype)
            if dtype.kind in "iu":
                y = self.floor(y)
            y = self.astype(y, dtype)
        return y, step

    def logspace(self, start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
        """``base ** linspace(start, stop, num)``: values evenly spaced on a log scale
        (float32 from Python numbers unless ``dtype``).

        Example: ``N.logspace(0, 3, 4)`` is ``[1, 10, 100, 1000]``
        """
        static = [self._static(v) for v in (start, stop, base)]
        if all(s is not None for s in static):
            values = np.logspace(*static[:2], operator.index(num), endpoint, static[2],
                                 dtype=dtype, axis=axis)
            return self._constant(_graphc_default(values, dtype, start, stop, base))
        start, stop = self._bounds((start, stop), static[:2])
        if isinstance(base, (float, int)) or np.ndim(base) == 0 and not self._is_value(base):
            y = self.linspace(start, stop, num=num, endpoint=endpoint, axis=axis)
            power = self.power(base if isinstance(base, (float, int)) else
                               self._lift(np.asarray(base)), y)
            return power if dtype is None else self.astype(power, dtype)
        # an array base broadcasts with the bounds, which may change what axis means
        base = self._lift(np.asarray(base) if static[2] is not None else base)
        ndmax = max(start.ndim, stop.ndim, base.ndim)
        start, stop, base = (self.array(v, ndmin=ndmax) for v in (start, stop, base))
        y = self.linspace(start, stop, num=num, endpoint=endpoint, axis=axis)
        power = self.power(self.expand_dims(base, normalize_axis("logspace", axis, y.ndim)), y)
        return power if dtype is None else self.astype(power, dtype)

    def geomspace(self, start, stop, num=50, endpoint=True, dtype=None, axis=0):
        """``num`` values from ``start`` to ``stop`` spaced evenly on a log scale (a
        geometric progression; float32 from Python numbers unless ``dtype``).

        Example: ``N.geomspace(1, 1000, 4)`` is ``[1, 10, 100, 1000]``
        """
        static = [self._static(v) for v in (start, stop)]
        if all(s is not None for s in static):
            try:
                values = np.geomspace(*static, operator.index(num), endpoint, dtype, axis)
            except ValueError as exc:
                raise ShapeError(f"geomspace: {exc}") from None
            return self._constant(_graphc_default(values, dtype, start, stop))
        start, stop = self._bounds((start, stop), static)
        dt = np.result_type(start.dtype, stop.dtype, float(num), np.float64)
        start, stop = self.astype(start, dt), self.astype(stop, dt)
        sign = self.sign(start)
        start, stop = self.divide(start, sign), self.divide(stop, sign)
        result = self.logspace(self.log10(start), self.log10(stop), num=num,
                               endpoint=endpoint, base=10.0, dtype=dt)
        # the ends exactly, as NumPy sets them
        ends = [self.expand_dims(start, 0)] if num > 0 else []
        middle_end = num - 1 if num > 1 and endpoint else num
        parts = ends + [self.getitem(result, slice(len(ends), middle_end))]
        if num > 1 and endpoint:
            parts.append(self.expand_dims(stop, 0))
        result = self.multiply(sign, self.concatenate(parts, axis=0) if num else result)
        axis = normalize_axis("geomspace", axis, result.ndim)
        if axis:
            result = self.moveaxis(result, 0, axis)
        return result if dtype is None else self.astype(result, dtype)

    # -- triangles and diagonals ---------------------------------------------------
    def _triangle(self, opname, m, mask):
        m = self._lift(m)
        if m.ndim == 0:
            raise ShapeError(f"{opname}: expected an array of at least one dimension, got a "
                             f"0-d array")
        keep = mask(*m.shape[-2:])
        return self.where(self._constant(keep), m, self._constant(np.zeros(1, m.dtype)))

    def tril(self, m, k=0):
        """``m`` with the elements above diagonal ``k`` zeroed (over its last two
        axes). Example: ``N.tril(x, k=-1)``"""
        k = operator.index(k)
        return self._triangle("tril", m, lambda *s: np.tri(*s, k=k, dtype=bool))

    def triu(self, m, k=0):
        """``m`` with the elements below diagonal ``k`` zeroed (over its last two
        axes). Example: ``N.triu(x, k=1)``"""
        k = operator.index(k)
        return self._triangle("triu", m, lambda *s: ~np.tri(*s, k=k - 1, dtype=bool))

    def diag(self, v, k=0):
        """A 1-D ``v`` on diagonal ``k`` of a square matrix of zeros; the diagonal
        ``k`` of a 2-D ``v``. Example: ``N.diag(N.diag(x))``"""
        v = self._lift(v)
        k = operator.index(k)
        if v.ndim == 2:
            return self.diagonal(v, k)
        if v.ndim != 1:
            raise ShapeError(f"diag: input must be 1- or 2-d, got shape {v.shape}")
        size = v.shape[0]
        n = size + abs(k)
        # each cell takes one element of v, or the zero appended after them
        where = np.full((n, n), size, dtype=np.int64)
        rows = np.arange(size) + max(-k, 0)
        where[rows, rows + k] = np.arange(size)
        padded = self.concatenate([v, self._constant(np.zeros(1, v.dtype))])
        return self.getitem(padded, self._constant(where))

    def diagflat(self, v, k=0):
        """The flattened ``v`` on diagonal ``k`` of a square matrix of zeros.
        Example: ``N.diagflat([[1, 2], [3, 4]])``"""
        return self.diag(self.ravel(self._lift(v)), k)

    def diagonal(self, a, offset=0, axis1=0, axis2=1):
        """The diagonal ``offset`` of the 2-D slices over ``axis1`` and ``axis2``,
        as a new last axis (as ``numpy.diagonal``). Example: ``N.diagonal(x, 1)``"""
        a = self._lift(a)
        if a.ndim < 2:
            raise ShapeError(f"diagonal: array of shape {a.shape} has fewer than 2 axes")
        i = normalize_axis("diagonal", axis1, a.ndim)
        j = normalize_axis("diagonal", axis2, a.ndim)
        if i == j:
            raise ShapeError(f"diagonal: axis1 and axis2 cannot be the same ({axis1}, {axis2})")
        offset = operator.index(offset)
        rest = [d for d in range(a.ndim) if d not in (i, j)]
        moved = self.transpose(a, rest + [i, j])
        rows, cols = a.shape[i], a.shape[j]
        count = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
        first = np.arange(count, dtype=np.int64)
        row_index = first + max(-offset, 0)
        col_index = first + max(offset, 0)
        return self.getitem(moved, (Ellipsis, self._constant(row_index),
                                    self._constant(col_index)))

    # -- grids -------------------------------------------------------------------
    def meshgrid(self, *xi, copy=True, sparse=False, indexing="xy"):
        """Coordinate arrays from 1-D coordinate vectors (``indexing="xy"``:
        Cartesian, the first two swapped; ``"ij"``: matrix), broadcast to the full
        grid unless ``sparse``. A tuple, as NumPy 2 returns.

        Example: ``X, Y = N.meshgrid(x, y)``
        """
        if indexing not in ("xy", "ij"):
            raise ShapeError(f"meshgrid: valid values for `indexing` are 'xy' and 'ij', got "
                             f"{indexing!r}")
        ndim = len(xi)
        ones = (1,) * ndim
        output = [self.reshape(self._lift(x), ones[:i] + (-1,) + ones[i + 1:])
                  for i, x in enumerate(xi)]
        if indexing == "xy" and ndim > 1:
            output[0] = self.reshape(output[0], (1, -1) + ones[2:])
            output[1] = self.reshape(output[1], (-1, 1) + ones[2:])
        if not sparse:
            output = list(self.broadcast_arrays(*output))
        return tuple(output)

    def indices(self, dimensions, dtype=int, sparse=False):
        """The index of every position of a grid of shape ``dimensions``: one array
        of shape ``(len(dimensions), *dimensions)``, or with ``sparse`` a tuple of
        broadcastable ones (int64 by default). Example: ``rows, cols = N.indices((2, 3))``"""
        dims = self._shape("indices", dimensions)
        grids = np.indices(dims, dtype=self._dtype("indices", dtype), sparse=sparse)
        if sparse:
            return tuple(self._constant(g) for g in grids)
        return self._constant(grids)

    def fromfunction(self, function, shape, *, dtype=None, like=None, **kwargs):
        """``function(*index_arrays, **kwargs)``, called once with one constant array
        of indices per axis of ``shape`` (float32 by default, unlike NumPy's float64).

        Example: ``N.fromfunction(lambda i, j: i + j, (3, 3))``
        """
        dims = self._shape("fromfunction", shape)
        grids = np.indices(dims, dtype=self._dtype("fromfunction", dtype))
        return function(*(self._constant(g) for g in grids), **kwargs)

    def vander(self, x, N=None, increasing=False):
        """The Vandermonde matrix of a 1-D ``x``: its columns are powers of ``x``
        (decreasing unless ``increasing``), made by repeated products as NumPy does.

        Example: ``N.vander(x, 3)``
        """
        x = self._lift(x)
        if x.ndim != 1:
            raise ShapeError(f"vander: x must be a one-dimensional array or sequence, got "
                             f"shape {x.shape}")
        n = x.shape[0] if N is None else operator.index(N)
        dtype = np.promote_types(x.dtype, np.int64)
        if n <= 0:
            return self.zeros((x.shape[0], max(n, 0)), dtype)
        x = self.astype(x, dtype)
        columns = [self.ones((x.shape[0],), dtype)]
        for _ in range(1, n):
            columns.append(x if len(columns) == 1 else self.multiply(columns[-1], x))
        return self.stack(columns if increasing else columns[::-1], axis=1)
