"""``N.linalg``'s norms, condition numbers and ranks, composed of reductions,
elementwise functions and ``svdvals``/``inv`` (so they have gradients, fusion and ONNX
export wherever their parts do), following NumPy's definitions order by order.

>>> import graphc.eager as E, numpy as np
>>> float(E.linalg.norm(np.array([3.0, 4.0])))
5.0
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ..shape.axes import normalize_axis
from ..shape.linalg_rules import check_matrices, linalg_dtype
from ..type.errors import DTypeError, ShapeError

_INF = float("inf")


def _order(name, ord):
    """``ord`` as NumPy compares it: a number, a string or ``None``."""
    if ord is None or isinstance(ord, str):
        return ord
    if isinstance(ord, numbers.Number) and not isinstance(ord, (bool, np.bool_)):
        return ord
    raise DTypeError(f"linalg.{name}: ord must be a number, a string or None, got {ord!r}")


class NormsMixin:
    """norm, vector_norm, matrix_norm, cond, matrix_rank (of :class:`LinalgFunctions`)."""

    def _inexact(self, name, x):
        """``x`` lifted; integers and booleans as float64, as NumPy's norms take them."""
        x = self._ns._lift(x)
        if x.dtype.kind in "biu":
            x = self._ns.astype(x, np.float64)
        elif x.dtype.kind not in "fc":
            raise DTypeError(f"linalg.{name}: expected a numeric array, got {x.dtype}")
        return x

    def _abs_squared(self, x):
        ns = self._ns
        return ns.square(ns.abs(x)) if x.dtype.kind == "c" else ns.multiply(x, x)

    def _vector_norm(self, x, ord, axes, keepdims):
        """NumPy's vector norms over ``axes`` (a tuple of normalised axes)."""
        ns = self._ns
        if ord == _INF:
            return ns.max(ns.abs(x), axis=axes, keepdims=keepdims)
        if ord == -_INF:
            return ns.min(ns.abs(x), axis=axes, keepdims=keepdims)
        if ord == 0:
            real = np.finfo(x.dtype).dtype
            return ns.sum(ns.astype(ns.not_equal(x, 0), real), axis=axes, keepdims=keepdims)
        if ord == 1:
            return ns.sum(ns.abs(x), axis=axes, keepdims=keepdims)
        if ord is None or ord == 2:
            return ns.sqrt(ns.sum(self._abs_squared(x), axis=axes, keepdims=keepdims))
        if isinstance(ord, str):
            raise ShapeError(f"linalg.norm: Invalid norm order '{ord}' for vectors")
        total = ns.sum(ns.power(ns.abs(x), ord), axis=axes, keepdims=keepdims)
        return ns.power(total, float(np.reciprocal(np.float64(ord))))

    def _svd_norm(self, x, rows, cols, reduce):
        moved = self._ns.moveaxis(x, (rows, cols), (-2, -1))
        return reduce(self.svd(moved, compute_uv=False), axis=-1)

    def _matrix_norm(self, x, ord, rows, cols):
        """NumPy's matrix norms over the axes ``rows`` and ``cols`` (normalised)."""
        ns = self._ns
        if ord == 2:
            return self._svd_norm(x, rows, cols, ns.max)
        if ord == -2:
            return self._svd_norm(x, rows, cols, ns.min)
        if ord in (None, "fro", "f"):
            return ns.sqrt(ns.sum(self._abs_squared(x), axis=(rows, cols)))
        if ord == "nuc":
            return self._svd_norm(x, rows, cols, ns.sum)
        # 1 / -1: the largest / smallest column sum; inf / -inf: the same of row sums
        sums = {1: rows, -1: rows, _INF: cols, -_INF: cols}
        if isinstance(ord, str) or ord not in sums:
            raise ShapeError(f"linalg.norm: Invalid norm order {ord!r} for matrices")
        summed = sums[ord]
        other = (cols if summed == rows else rows)
        other -= other > summed
        reduce = ns.max if ord > 0 else ns.min
        return reduce(ns.sum(ns.abs(x), axis=summed), axis=other)

    def norm(self, x, ord=None, axis=None, keepdims=False):
        """A vector norm (one axis) or a matrix norm (two axes), as ``numpy.linalg.norm``:
        ``ord`` in None, inf, -inf, 0, 1, -1, 2, -2, other numbers (vectors), 'fro',
        'nuc' (matrices); ``axis=None`` takes a 1-D or 2-D ``x`` whole.

        Example: ``N.linalg.norm(x, axis=-1)``, ``N.linalg.norm(a, "nuc")``
        """
        ord = _order("norm", ord)
        x = self._inexact("norm", x)
        ndim = x.ndim
        if axis is None:
            if ord is None or (ord in ("f", "fro") and ndim == 2) or (ord == 2 and ndim == 1):
                result = self._vector_norm(x, None, None, False)
                return self._ns.reshape(result, (1,) * ndim) if keepdims else result
            axes = tuple(range(ndim))
        elif isinstance(axis, tuple):
            axes = axis
        else:
            axes = (axis,)
        axes = tuple(normalize_axis("linalg.norm", a, ndim) for a in axes)
        if len(axes) == 1:
            return self._vector_norm(x, ord, axes, keepdims)
        if len(axes) != 2:
            raise ShapeError(f"linalg.norm: Improper number of dimensions to norm: axes "
                             f"{axes} of an array of shape {x.shape}")
        if axes[0] == axes[1]:
            raise ShapeError("linalg.norm: Duplicate axes given.")
        result = self._matrix_norm(x, ord, *axes)
        if keepdims:
            shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
            result = self._ns.reshape(result, shape)
        return result

    def vector_norm(self, x, /, *, axis=None, keepdims=False, ord=2):
        """The vector norm of order ``ord`` over ``axis`` (None: every axis, a tuple:
        those axes as one). Example: ``N.linalg.vector_norm(x, axis=(0, 1), ord=1)``"""
        ord = _order("vector_norm", ord)
        if isinstance(ord, str):
            raise ShapeError(f"linalg.vector_norm: Invalid norm order '{ord}' for vectors")
        x = self._inexact("vector_norm", x)
        if axis is None:
            axes = tuple(range(x.ndim))
        else:
            axes = tuple(normalize_axis("linalg.vector_norm", a, x.ndim)
                         for a in (axis if isinstance(axis, tuple) else (axis,)))
            if len(set(axes)) != len(axes):
                raise ShapeError("linalg.vector_norm: repeated axis")
        if x.ndim == 0:
            x = self._ns.reshape(x, (1,))
            return self._ns.reshape(self._vector_norm(x, ord, (0,), False), ())
        return self._vector_norm(x, ord, axes, keepdims)

    def matrix_norm(self, x, /, *, keepdims=False, ord="fro"):
        """The matrix norm of each matrix of a stack (its last two axes). Example:
        ``N.linalg.matrix_norm(a, ord=2)``"""
        x = self._ns._lift(x)
        check_matrices("linalg.matrix_norm", x.shape)
        return self.norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)

    def cond(self, x, p=None):
        """The condition number of each matrix in the norm ``p`` (None, 2, -2: from the
        singular values; 1, -1, inf, -inf, 'fro', 'nuc' of square matrices:
        ``norm(x) * norm(inv(x))``, inf for a singular one, as NumPy gives).

        Example: ``N.linalg.cond(a)``
        """
        ns = self._ns
        p = _order("cond", p)
        x = ns._lift(x)
        check_matrices("linalg.cond", x.shape, square=p not in (None, 2, -2))
        if x.size == 0:
            raise ShapeError(f"linalg.cond: cond is not defined on empty arrays (shape "
                             f"{x.shape})")
        dtype = linalg_dtype("linalg.cond", x.dtype)
        if p is None or p == 2 or p == -2:
            s = self.svd(x, compute_uv=False)
            first, last = ns.getitem(s, (Ellipsis, 0)), ns.getitem(s, (Ellipsis, -1))
            result = ns.divide(last, first) if p == -2 else ns.divide(first, last)
        else:
            inverse = ns._op("inv", [x], singular="nan")
            result = ns.multiply(self.norm(x, p, axis=(-2, -1)),
                                 self.norm(inverse, p, axis=(-2, -1)))
            result = ns.astype(result, np.finfo(dtype).dtype)
        # NaN (a singular matrix) becomes inf unless x itself had NaN entries
        x_nan = ns.any(ns.not_equal(x, x), axis=(-2, -1))
        nan = ns.logical_and(ns.not_equal(result, result), ns.logical_not(x_nan))
        return ns.where(nan, math.inf, result)

    def matrix_rank(self, A, tol=None, hermitian=False, *, rtol=None):
        """The number of singular values of each matrix above ``tol`` (default
        ``S.max() * max(M, N) * eps``, or ``S.max() * rtol``); a vector's rank is 1 unless
        it is all zeros. Example: ``N.linalg.matrix_rank(a)``"""
        ns = self._ns
        A = ns._lift(A)
        if A.ndim < 2:
            return ns.astype(ns.any(ns.not_equal(A, 0)), np.int64)
        s = self.svd(A, compute_uv=False, hermitian=hermitian)
        if tol is None:
            largest = ns.max(s, axis=-1, keepdims=True)
            if rtol is None:
                eps = float(np.finfo(s.dtype).eps)
                tol = ns.multiply(largest, max(A.shape[-2:]) * eps)
            else:
                tol = ns.multiply(largest, ns.expand_dims(ns._lift(rtol), -1))
        else:
            tol = ns.expand_dims(ns._lift(tol), -1)
        return ns.sum(ns.greater(s, tol), axis=-1)
