"""NumPy's products and statistics made of existing kinds: ``outer``, ``inner``,
``vdot``, ``vecdot``, ``matvec``, ``vecmat``, ``trace``, ``cross``, ``kron``,
``convolve``/``correlate``, ``cov``, ``corrcoef``, ``average``, ``ptp`` and
``einsum_path`` (NumPy's own plan: it is about planning, not values).

``convolve`` and ``correlate`` sum shifted slices for short kernels (one fused pass
each, no copies) and multiply a window matrix by the kernel for long ones (one matmul
instead of hundreds of nodes).

>>> import graphc.eager as E, numpy as np
>>> E.convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5])).tolist()
[0.0, 1.0, 2.5, 4.0, 1.5]
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..shape.axes import normalize_axis
from ..type.errors import DTypeError, ShapeError

#: kernels up to this long are summed as shifted slices; longer ones use a matmul
SHIFTED_SUM_MAX = 16


def _along(ndim, axis, index):
    """The key selecting ``index`` (a slice or int) along ``axis`` of ``ndim`` axes."""
    return (slice(None),) * axis + (index,) + (slice(None),) * (ndim - axis - 1)


class ProductsMixin:
    """Products and statistics of :class:`~graphc.operator.mathematics.MathMixin`."""

    # -- products ----------------------------------------------------------------------
    def outer(self, a, b):
        """``a[i] * b[j]`` of the flattened arrays. Example: ``N.outer(u, v)``"""
        a, b = self._lift_all(a, b)
        return self.multiply(self.reshape(a, (-1, 1)), self.reshape(b, (1, -1)))

    def inner(self, a, b):
        """Sum of products over the last axes (``a.shape[:-1] + b.shape[:-1]``).

        Example: ``N.inner(x, y)``
        """
        a, b = self._lift_all(a, b)
        if a.ndim == 0 or b.ndim == 0:
            return self.multiply(a, b)
        if a.shape[-1] != b.shape[-1]:
            raise ShapeError(f"inner: the last axes differ: shapes {a.shape} and {b.shape}")
        return self.tensordot(a, b, axes=([a.ndim - 1], [b.ndim - 1]))

    def vdot(self, a, b):
        """The dot product of the flattened arrays (same size). Example: ``N.vdot(x, y)``"""
        a, b = self._lift_all(a, b)
        if math.prod(a.shape) != math.prod(b.shape):
            raise ShapeError(f"vdot: the arrays have different sizes: shapes {a.shape} "
                             f"and {b.shape}")
        return self.dot(self.ravel(self.conj(a)), self.ravel(b))

    def _core(self, name, a, b, axis_a, axis_b):
        if a.ndim == 0 or b.ndim == 0 or a.shape[axis_a] != b.shape[axis_b]:
            raise ShapeError(f"{name}: core dimensions differ: shapes {a.shape} and {b.shape}")

    def vecdot(self, x1, x2, axis: int = -1):
        """The dot product of vectors along ``axis``, broadcast over the others.

        Example: ``N.vecdot(u, v)``
        """
        x1, x2 = self._lift_all(x1, x2)
        self._core("vecdot", x1, x2, axis, axis)
        x1 = self.moveaxis(x1, axis, -1)
        x2 = self.moveaxis(x2, axis, -1)
        products = self.multiply(self.conj(x1), x2)
        total = self.sum(products, axis=-1)
        # a gufunc keeps the operands' dtype (sum widens int32 to int64; the low bits agree)
        return total if total.dtype == products.dtype else self.astype(total, products.dtype)

    def matvec(self, x1, x2):
        """Matrix times vector: ``(..., m, n) @ (..., n) -> (..., m)``.

        Example: ``N.matvec(A, v)``
        """
        x1, x2 = self._lift_all(x1, x2)
        if x1.ndim < 2:
            raise ShapeError(f"matvec: the matrix needs 2 axes, got shape {x1.shape}")
        self._core("matvec", x1, x2, -1, -1)
        return self.getitem(self.matmul(x1, self.expand_dims(x2, -1)), (Ellipsis, 0))

    def vecmat(self, x1, x2):
        """Vector times matrix: ``(..., n) @ (..., n, m) -> (..., m)``.

        Example: ``N.vecmat(v, A)``
        """
        x1, x2 = self._lift_all(x1, x2)
        if x2.ndim < 2:
            raise ShapeError(f"vecmat: the matrix needs 2 axes, got shape {x2.shape}")
        self._core("vecmat", x1, x2, -1, -2)
        product = self.matmul(self.expand_dims(self.conj(x1), -2), x2)
        return self.getitem(product, (Ellipsis, 0, slice(None)))

    def _diagonal(self, name, a, offset, axis1, axis2):
        """NumPy's ``diagonal``: the (offset) diagonal of the plane (axis1, axis2) as
        the last axis, as a strided slice of the flattened plane (no gather)."""
        a = self._lift(a)
        if a.ndim < 2:
            raise ShapeError(f"{name}: expected at least 2 axes, got shape {a.shape}")
        axis1, axis2 = normalize_axis(name, axis1, a.ndim), normalize_axis(name, axis2, a.ndim)
        if axis1 == axis2:
            raise ShapeError(f"{name}: axis1 and axis2 cannot be the same ({axis1})")
        plane = self.moveaxis(a, (axis1, axis2), (-2, -1))
        n, m = plane.shape[-2:]
        start = offset if offset >= 0 else -offset * m
        length = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
        flat = self.reshape(plane, plane.shape[:-2] + (n * m,))
        stop = start + (length - 1) * (m + 1) + 1 if length else start
        return self.getitem(flat, (Ellipsis, slice(start, stop, m + 1)))

    def trace(self, a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None):
        """The sum along a diagonal, as ``numpy.trace``.

        Example: ``N.trace(A)``, ``N.trace(x, axis1=1, axis2=2)``
        """
        diagonal = self._diagonal("trace", a, operator.index(offset), axis1, axis2)
        if dtype is not None:
            diagonal = self.astype(diagonal, dtype)
        return self.sum(diagonal, axis=-1)

    def cross(self, a, b, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis=None):
        """The cross product of 2- or 3-vectors along ``axisa``/``axisb`` (``axis``
        sets all three), broadcast over the rest, as ``numpy.cross``.

        Example: ``N.cross(u, v)``
        """
        a, b = self._lift_all(a, b)
        if axis is not None:
            axisa = axisb = axisc = axis
        a = self.moveaxis(a, normalize_axis("cross", axisa, a.ndim), -1)
        b = self.moveaxis(b, normalize_axis("cross", axisb, b.ndim), -1)
        if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
            raise ShapeError(f"cross: incompatible dimensions for cross product (dimension "
                             f"must be 2 or 3): {a.shape[-1]} and {b.shape[-1]}")
        if np.result_type(a.dtype, b.dtype) == np.bool_:
            raise DTypeError("cross: not defined for booleans (it subtracts)")
        a_ = [self.getitem(a, (Ellipsis, i)) for i in range(a.shape[-1])]
        b_ = [self.getitem(b, (Ellipsis, i)) for i in range(b.shape[-1])]
        mul, sub = self.multiply, self.subtract
        if len(a_) == 2 and len(b_) == 2:
            return sub(mul(a_[0], b_[1]), mul(a_[1], b_[0]))
        if len(a_) == 3 and len(b_) == 3:
            parts = [sub(mul(a_[1], b_[2]), mul(a_[2], b_[1])),
                     sub(mul(a_[2], b_[0]), mul(a_[0], b_[2])),
                     sub(mul(a_[0], b_[1]), mul(a_[1], b_[0]))]
        elif len(a_) == 2:   # a's third component is 0
            parts = [mul(a_[1], b_[2]), self.negative(mul(a_[0], b_[2])),
                     sub(mul(a_[0], b_[1]), mul(a_[1], b_[0]))]
        else:                # b's third component is 0
            parts = [self.negative(mul(a_[2], b_[1])), mul(a_[2], b_[0]),
                     sub(mul(a_[0], b_[1]), mul(a_[1], b_[0]))]
        shape = np.broadcast_shapes(*[p.shape for p in parts])
        result = self.stack([self.broadcast_to(p, shape) for p in parts], axis=-1)
        return self.moveaxis(result, -1, normalize_axis("cross", axisc, result.ndim))

    def kron(self, a, b):
        """The Kronecker product: blocks ``a[i, j] * b``. Example: ``N.kron(A, B)``"""
        a, b = self._lift_all(a, b)
        ndim = max(a.ndim, b.ndim)
        sa, sb = (1,) * (ndim - a.ndim) + a.shape, (1,) * (ndim - b.ndim) + b.shape
        wide_a = self.reshape(a, tuple(d for s in sa for d in (s, 1)))
        wide_b = self.reshape(b, tuple(d for s in sb for d in (1, s)))
        return self.reshape(self.multiply(wide_a, wide_b), tuple(x * y for x, y in zip(sa, sb)))

    # -- convolution -------------------------------------------------------------------
    def _correlate(self, name, a, v, mode):
        a, v = self._lift_all(a, v)
        if a.ndim != 1 or v.ndim != 1:
            raise ShapeError(f"{name}: expected two 1-d arrays, got shapes {a.shape} and "
                             f"{v.shape}")
        if a.shape[0] == 0 or v.shape[0] == 0:
            raise ShapeError(f"{name}: the arrays cannot be empty (shapes {a.shape} and "
                             f"{v.shape})")
        modes = {"full": 2, "same": 1, "valid": 0, 2: 2, 1: 1, 0: 0}
        if mode not in modes:
            raise ShapeError(f"{name}: mode must be 'full', 'same' or 'valid', got {mode!r}")
        dtype = np.result_type(a.dtype, v.dtype)
        if a.shape[0] < v.shape[0]:  # NumPy swaps and reverses: the same sums
            return self.flip(self._correlate(name, v, a, mode), 0)
        n, m = a.shape[0], v.shape[0]
        left = {2: m - 1, 1: m // 2, 0: 0}[modes[mode]]
        right = {2: m - 1, 1: m - 1 - m // 2, 0: 0}[modes[mode]]
        a = self.astype(a, dtype) if a.dtype != dtype else a
        v = self.astype(v, dtype) if v.dtype != dtype else v
        padded = self.pad(a, [(left, right)]) if left or right else a
        count = n + left + right - m + 1
        if m <= SHIFTED_SUM_MAX:
            total = None
            for k in range(m):
                term = self.multiply(self.getitem(padded, slice(k, k + count)),
                                     self.getitem(v, k))
                total = term if total is None else self.add(total, term)
            return total
        windows = np.arange(count)[:, None] + np.arange(m)[None, :]
        return self.matmul(self.take(padded, windows, axis=0), v)

    def correlate(self, a, v, mode: str = "valid"):
        """The cross-correlation ``c[k] = sum_n a[n + k] * v[n]`` of two 1-d arrays
        (mode 'valid', 'same' or 'full'), as ``numpy.correlate``.

        Example: ``N.correlate(signal, template, mode="same")``
        """
        return self._correlate("correlate", a, v, mode)

    def convolve(self, a, v, mode: str = "full"):
        """The discrete linear convolution of two 1-d arrays, as ``numpy.convolve``.

        Example: ``N.convolve(signal, kernel, mode="same")``
        """
        a, v = self._lift_all(a, v)
        if v.ndim == 1 and a.ndim == 1 and v.shape[0] > a.shape[0]:
            a, v = v, a
        if v.ndim == 1:
            v = self.flip(v, 0)
        return self._correlate("convolve", a, v, mode)

    # -- statistics ----------------------------------------------------------------------
    def average(self, a, axis=None, weights=None, returned: bool = False, *,
                keepdims: bool = False):
        """The (weighted) mean over ``axis``; with ``returned``, also the sum of
        the weights. A zero weight sum gives inf/NaN (NumPy raises; a graph cannot
        know while building).

        Example: ``N.average(x, axis=0, weights=w)``
        """
        a = self._lift(a)
        if weights is None:
            avg = self.mean(a, axis, keepdims)
            size, avg_size = math.prod(a.shape), math.prod(avg.shape)
            scale = avg.dtype.type(size / avg_size) if avg_size else avg.dtype.type(0)
            scale = self.full(avg.shape, scale, avg.dtype)
            return (avg, scale) if returned else avg
        w = self._lift(weights)
        if a.dtype.kind in "biu":
            dtype = np.result_type(a.dtype, w.dtype, np.float64)
        else:
            dtype = np.result_type(a.dtype, w.dtype)
        if a.shape != w.shape:
            w = self._weights_along(a, w, axis)
        scale = self.sum(self.astype(w, dtype), axis, keepdims)
        total = self.sum(self.multiply(self.astype(a, dtype), self.astype(w, dtype)),
                         axis, keepdims)
        avg = self.divide(total, scale)
        if returned:
            return avg, self.broadcast_to(scale, avg.shape)
        return avg

    def _weights_along(self, a, w, axis):
        if axis is None:
            raise ShapeError(f"average: axis must be given when the shapes of a {a.shape} "
                             f"and weights {w.shape} differ")
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        axes = [normalize_axis("average", ax, a.ndim) for ax in axes]
        if w.shape != tuple(a.shape[ax] for ax in axes):
            raise ShapeError(f"average: the weights' shape {w.shape} differs from that of a "
                             f"{a.shape} along axis {axis}")
        order = sorted(range(len(axes)), key=lambda i: axes[i])
        w = self.transpose(w, order) if order != list(range(len(axes))) else w
        shape = tuple(a.shape[i] if i in axes else 1 for i in range(a.ndim))
        return self.reshape(w, shape)

    def ptp(self, a, axis=None, keepdims: bool = False):
        """Range of values (max - min) over ``axis``. Example: ``N.ptp(x, axis=0)``"""
        a = self._lift(a)
        return self.subtract(self.max(a, axis, keepdims), self.min(a, axis, keepdims))

    def cov(self, m, y=None, rowvar: bool = True, bias: bool = False, ddof=None,
            fweights=None, aweights=None, *, dtype=None):
        """The covariance matrix of the variables in ``m`` (rows if ``rowvar``),
        as ``numpy.cov`` (float64 at least); weights may be graph values.

        Example: ``N.cov(samples, rowvar=False)``
        """
        m = self._lift(m)
        if m.ndim > 2:
            raise ShapeError(f"cov: m has more than 2 dimensions: shape {m.shape}")
        dtype = np.result_type(m.dtype, *( [self._lift(y).dtype] if y is not None else []),
                               np.float64) if dtype is None else np.dtype(dtype)
        X = self._as_rows(m, not rowvar and m.ndim != 1, dtype)
        if X.shape[0] == 0:
            return self.zeros((0, 0), np.float64)
        if y is not None:
            y = self._lift(y)
            rows = self._as_rows(y, False, dtype)
            X = self.concatenate([X, self._as_rows(y, not rowvar and rows.shape[0] != 1,
                                                   dtype)], axis=0)
        if ddof is None:
            ddof = 0 if bias else 1
        n = X.shape[1]
        w = None
        for given, name in ((fweights, "fweights"), (aweights, "aweights")):
            if given is not None:
                given = self._lift(given)
                given = self.astype(given, np.float64) if given.dtype != np.float64 else given
                if given.shape != (n,):
                    raise ShapeError(f"cov: {name} must be 1-d of the number of observations "
                                     f"{n}, got shape {given.shape}")
                w = given if w is None else self.multiply(w, given)
        avg, w_sum = self.average(X, axis=1, weights=w, returned=True)
        if w is None:
            fact = float(max(n - ddof, 0))
        else:
            w_sum = self.getitem(w_sum, 0)
            if ddof == 0:
                fact = w_sum
            elif aweights is None:
                fact = self.subtract(w_sum, ddof)
            else:
                spread = self.sum(self.multiply(w, self.astype(self._lift(aweights),
                                                               np.float64)))
                fact = self.subtract(w_sum, self.divide(self.multiply(spread, ddof), w_sum))
            fact = self.where(self.less_equal(fact, 0), 0.0, fact)
        X = self.subtract(X, self.expand_dims(avg, 1))
        X_T = self.transpose(X if w is None else self.multiply(X, self.astype(w, dtype)))
        c = self.matmul(X, X_T)
        c = self.multiply(c, self.divide(self._lift(np.asarray(1, dtype)), fact))
        return self.squeeze(c) if c.shape.count(1) else c

    def _as_rows(self, m, transposed, dtype):
        """``m`` as a matrix of ``dtype`` (NumPy's ``array(m, ndmin=2)``), transposed
        if asked (variables in columns)."""
        X = self.astype(m, dtype) if m.dtype != dtype else m
        if X.ndim < 2:
            X = self.reshape(X, (1,) * (2 - X.ndim) + X.shape)
        return self.transpose(X) if transposed else X

    def corrcoef(self, x, y=None, rowvar: bool = True, *, dtype=None):
        """Pearson correlation coefficients (``cov`` normalised, clipped to
        [-1, 1]), as ``numpy.corrcoef``.

        Example: ``N.corrcoef(samples, rowvar=False)``
        """
        c = self.cov(x, y, rowvar, dtype=dtype)
        if c.ndim == 0:
            return self.divide(c, c)
        stddev = self.sqrt(self._diagonal("corrcoef", c, 0, 0, 1))
        c = self.divide(c, self.expand_dims(stddev, 1))
        c = self.divide(c, self.expand_dims(stddev, 0))
        return self.clip(c, -1, 1)

    def einsum_path(self, subscripts, *operands, optimize="greedy"):
        """NumPy's contraction order for ``einsum`` on operands of these shapes (its
        own answer: planning, not values): ``(path, description)``.

        Example: ``path, text = N.einsum_path("ij,jk,kl->il", a, b, c)``
        """
        shaped = [np.broadcast_to(np.zeros((), self._lift(x).dtype), self._lift(x).shape)
                  for x in operands]
        return np.einsum_path(subscripts, *shaped, optimize=optimize)


__all__ = ["ProductsMixin", "SHIFTED_SUM_MAX"]
