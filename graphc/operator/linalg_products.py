"""``N.linalg``'s products and the functions built on the solvers: ``matrix_power``,
``multi_dot`` (the cheapest order, from the static shapes), ``lstsq``, ``tensorinv``,
``tensorsolve``, and the array API's aliases (``matmul``, ``tensordot``, ``outer``,
``vecdot``, ``cross``, ``diagonal``, ``trace``, ``matrix_transpose``).

>>> import graphc.eager as E, numpy as np
>>> E.linalg.matrix_power(np.array([[1, 1], [0, 1]]), 3)
array([[1, 3],
       [0, 1]])
"""
from __future__ import annotations

import math
import operator
from functools import reduce
from typing import NamedTuple

import numpy as np

from ..shape.axes import normalize_axis
from ..shape.linalg_rules import check_matrices, linalg_dtype
from ..type.errors import DTypeError, ShapeError


class LstsqResult(NamedTuple):
    x: object
    residuals: object
    rank: object
    s: object


def _chain_order(shapes):
    """Where to split each sub-chain of matrices of ``shapes`` (2-D) for the fewest
    scalar multiplications (Cormen et al., as NumPy's ``_multi_dot_matrix_chain_order``)."""
    n = len(shapes)
    dims = [s[0] for s in shapes] + [shapes[-1][1]]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


class ProductsMixin:
    """The products and solver-based functions of :class:`LinalgFunctions`."""

    def matrix_power(self, a, n):
        """``a`` (a stack of square matrices) to the integer power ``n`` by repeated
        squaring, as NumPy multiplies; ``n < 0`` inverts first, ``n == 0`` gives
        identities of ``a``'s dtype. Example: ``N.linalg.matrix_power(a, 5)``"""
        ns = self._ns
        a = ns._lift(a)
        check_matrices("linalg.matrix_power", a.shape, square=True)
        try:
            n = operator.index(n)
        except TypeError:
            raise DTypeError(f"linalg.matrix_power: exponent must be an integer, got "
                             f"{n!r}") from None
        if n == 0:
            eye = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
            return ns._lift(np.array(eye))
        if n < 0:
            a, n = self.inv(a), -n
        if n <= 3:
            return reduce(ns.matmul, [a] * n)
        power = result = None
        while n > 0:
            power = a if power is None else ns.matmul(power, power)
            n, bit = divmod(n, 2)
            if bit:
                result = power if result is None else ns.matmul(result, power)
        return result

    def multi_dot(self, arrays, *, out=None):
        """The product of two or more arrays (the first may be 1-D, as may the last), in
        the order that costs fewest multiplications. Example:
        ``N.linalg.multi_dot([a, b, c])``"""
        ns = self._ns
        if out is not None:
            raise DTypeError("linalg.multi_dot: out= is not supported; graph values are "
                             "immutable, use the result")
        arrays = [ns._lift(a) for a in arrays]
        if len(arrays) < 2:
            raise ShapeError("linalg.multi_dot: Expecting at least two arrays.")
        if len(arrays) == 2:
            return ns.dot(*arrays)
        first, last = arrays[0].ndim, arrays[-1].ndim
        if first == 1:
            arrays[0] = ns.reshape(arrays[0], (1, -1))
        if last == 1:
            arrays[-1] = ns.reshape(arrays[-1], (-1, 1))
        for i, a in enumerate(arrays):
            if a.ndim != 2:
                raise ShapeError(f"linalg.multi_dot: array {i} has {a.ndim} dimensions; "
                                 "expected 2 (1 for the first and the last)")
        split = _chain_order([a.shape for a in arrays])

        def product(i, j):
            if i == j:
                return arrays[i]
            return ns.dot(product(i, split[i][j]), product(split[i][j] + 1, j))
        result = product(0, len(arrays) - 1)
        shape = result.shape[1 if first == 1 else 0:] if last != 1 else \
            result.shape[1 if first == 1 else 0:-1]
        return ns.reshape(result, shape)

    def lstsq(self, a, b, rcond=None):
        """The least-squares solution of ``a @ x = b`` (``a`` 2-D, ``b`` 1-D or 2-D) as
        ``LstsqResult(x, residuals, rank, s)``: ``x`` from the pseudo-inverse with
        singular values at most ``rcond * max(s)`` dropped (default ``max(M, N) * eps``).
        The residuals have a static shape: the squared residual norms per column when
        ``M > N`` (also for rank-deficient ``a``, where NumPy gives an empty array),
        else empty. Example: ``x, res, rank, s = N.linalg.lstsq(a, b)``"""
        ns = self._ns
        a, b = ns._lift(a), ns._lift(b)
        if a.ndim != 2 or b.ndim not in (1, 2):
            raise ShapeError(f"linalg.lstsq: expected a 2-D a and a 1-D or 2-D b, got "
                             f"shapes {a.shape} and {b.shape}")
        m, n = a.shape
        if b.shape[0] != m:
            raise ShapeError(f"linalg.lstsq: Incompatible dimensions: a of shape {a.shape}, "
                             f"b of shape {b.shape}")
        dtype = linalg_dtype("linalg.lstsq", a.dtype, b.dtype)
        a, b = ns.astype(a, dtype), ns.astype(b, dtype)
        if rcond is None:
            rcond = float(np.finfo(dtype).eps) * max(m, n)
        rcond = self._number("lstsq", "rcond", rcond)
        x = ns.matmul(self.pinv(a, rcond=rcond), b)
        s = self.svd(a, compute_uv=False)
        cutoff = ns.multiply(ns.max(s, axis=-1, keepdims=True), rcond) if s.size else s
        rank = ns.sum(ns.greater(s, cutoff), axis=-1)
        if m > n:
            columns = b if b.ndim == 2 else ns.reshape(b, (m, 1))
            fitted = ns.matmul(a, x if b.ndim == 2 else ns.reshape(x, (n, 1)))
            difference = ns.subtract(columns, fitted)
            squared = ns.square(ns.abs(difference)) if dtype.kind == "c" else \
                ns.multiply(difference, difference)
            residuals = ns.sum(squared, axis=0)
        else:
            residuals = ns.zeros((0,), np.finfo(dtype).dtype)
        return LstsqResult(x, residuals, rank, s)

    def tensorinv(self, a, ind=2):
        """The inverse of ``a`` as a tensor operator over its first ``ind`` axes:
        ``tensordot(tensorinv(a, ind), a, ind)`` is the identity. Example:
        ``N.linalg.tensorinv(a, ind=2)`` for ``a`` of shape (4, 6, 8, 3)"""
        ns = self._ns
        a = ns._lift(a)
        ind = operator.index(ind)
        if ind <= 0:
            raise ShapeError(f"linalg.tensorinv: Invalid ind argument {ind} (expected > 0)")
        rows = math.prod(a.shape[ind:])
        if rows == 0 or a.size % rows or a.size // rows != rows:
            raise ShapeError(f"linalg.tensorinv: shape {a.shape} does not split at {ind} into "
                             "two parts of the same size")
        inverse = self.inv(ns.reshape(a, (rows, rows)))
        return ns.reshape(inverse, a.shape[ind:] + a.shape[:ind])

    def tensorsolve(self, a, b, axes=None):
        """``x`` with ``tensordot(a, x, axes=x.ndim) == b``; ``axes`` of ``a`` are moved to
        its end first. Example: ``N.linalg.tensorsolve(a, b)``"""
        ns = self._ns
        a, b = ns._lift(a), ns._lift(b)
        if axes is not None:
            order = list(range(a.ndim))
            for k in axes:
                k = normalize_axis("linalg.tensorsolve", k, a.ndim)
                order.remove(k)
                order.append(k)
            a = ns.transpose(a, order)
        unknown = a.shape[b.ndim:]
        size = math.prod(unknown)
        if a.size != size ** 2 or a.shape[:b.ndim] != b.shape:
            raise ShapeError(f"linalg.tensorsolve: Input arrays must satisfy the requirement "
                             f"prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim]), with "
                             f"a.shape[:b.ndim] == b.shape; got shapes {a.shape} and {b.shape}")
        x = self.solve(ns.reshape(a, (size, size)), ns.reshape(b, (-1,)))
        return ns.reshape(x, unknown)

    # -- the array API's aliases ---------------------------------------------------
    def matmul(self, x1, x2, /):
        """``N.matmul``. Example: ``N.linalg.matmul(a, b)``"""
        return self._ns.matmul(x1, x2)

    def tensordot(self, x1, x2, /, *, axes=2):
        """``N.tensordot``. Example: ``N.linalg.tensordot(a, b, axes=1)``"""
        return self._ns.tensordot(x1, x2, axes=axes)

    def matrix_transpose(self, x, /):
        """Each matrix of a stack transposed. Example: ``N.linalg.matrix_transpose(a)``"""
        x = self._ns._lift(x)
        check_matrices("linalg.matrix_transpose", x.shape)
        return self._ns.swapaxes(x, -1, -2)

    def outer(self, x1, x2, /):
        """The outer product of two vectors. Example: ``N.linalg.outer(u, v)``"""
        ns = self._ns
        x1, x2 = ns._lift_all(x1, x2)
        if x1.ndim != 1 or x2.ndim != 1:
            raise ShapeError(f"linalg.outer: Input arrays must be one-dimensional, got shapes "
                             f"{x1.shape} and {x2.shape}")
        return ns.multiply(ns.expand_dims(x1, 1), ns.expand_dims(x2, 0))

    def vecdot(self, x1, x2, /, *, axis=-1):
        """The dot products of vectors along ``axis`` (the first conjugated), batch axes
        broadcast. Example: ``N.linalg.vecdot(u, v)``"""
        ns = self._ns
        x1, x2 = ns._lift_all(x1, x2)
        if x1.dtype.kind == "c":
            x1 = self._conjugate(x1)
        product = ns.multiply(x1, x2)
        axis = normalize_axis("linalg.vecdot", axis, product.ndim)
        if x1.ndim == 0 or x2.ndim == 0 or x1.shape[axis - product.ndim] != \
                x2.shape[axis - product.ndim]:
            raise ShapeError(f"linalg.vecdot: the vectors along axis {axis} of shapes "
                             f"{x1.shape} and {x2.shape} differ in length")
        return ns.sum(product, axis=axis)

    def _conjugate(self, x):
        conj = getattr(self._ns, "conj", None)
        if conj is None:
            raise DTypeError("linalg.vecdot: complex vectors need N.conj, not available yet")
        return conj(x)

    def cross(self, x1, x2, /, *, axis=-1):
        """The cross product of 3-element vectors along ``axis``, batch axes broadcast.
        Example: ``N.linalg.cross(u, v)``"""
        ns = self._ns
        x1, x2 = ns._lift_all(x1, x2)
        if x1.ndim == 0 or x2.ndim == 0:
            raise ShapeError("linalg.cross: 0-dimensional arrays have no vectors")
        ax1 = normalize_axis("linalg.cross", axis, x1.ndim)
        ax2 = normalize_axis("linalg.cross", axis, x2.ndim)
        if x1.shape[ax1] != 3 or x2.shape[ax2] != 3:
            raise ShapeError(f"linalg.cross: both input arrays must be (arrays of) "
                             f"3-dimensional vectors along axis {axis}, got shapes "
                             f"{x1.shape} and {x2.shape}")
        a, b = ns.moveaxis(x1, ax1, -1), ns.moveaxis(x2, ax2, -1)

        def c(x, i):
            return ns.getitem(x, (Ellipsis, i))
        components = [ns.subtract(ns.multiply(c(a, i), c(b, j)), ns.multiply(c(a, j), c(b, i)))
                      for i, j in ((1, 2), (2, 0), (0, 1))]
        result = ns.stack(components, axis=-1)
        return ns.moveaxis(result, -1, axis if axis >= 0 else result.ndim + axis)

    def diagonal(self, x, /, *, offset=0):
        """The diagonal at ``offset`` of each matrix of a stack. Example:
        ``N.linalg.diagonal(a, offset=1)``"""
        ns = self._ns
        x = ns._lift(x)
        m, n = check_matrices("linalg.diagonal", x.shape)
        offset = operator.index(offset)
        length = max(0, min(m + min(offset, 0), n - max(offset, 0)))
        rows = np.arange(length) - min(offset, 0)
        if length == 0:
            return ns.zeros(x.shape[:-2] + (0,), x.dtype)
        return ns.getitem(x, (Ellipsis, rows, rows + offset))

    def trace(self, x, /, *, offset=0, dtype=None):
        """The sum of the diagonal at ``offset`` of each matrix of a stack (NumPy's sum
        dtype unless ``dtype``). Example: ``N.linalg.trace(a)``"""
        ns = self._ns
        total = ns.sum(self.diagonal(x, offset=offset), axis=-1)
        return total if dtype is None else ns.astype(total, dtype)
