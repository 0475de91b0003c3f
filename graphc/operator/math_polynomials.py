"""Polynomial fitting, division and roots (``polyfit``, ``polydiv``, ``roots``) by
NumPy's own algorithms on graph values: a scaled least-squares fit, long division
with static lengths, and the eigenvalues of the companion matrix.

>>> import graphc.eager as E, numpy as np
>>> x = np.linspace(-1, 1, 9); y = 3 * x ** 2 - x + 0.5
>>> np.round(E.polyfit(x, y, 2), 6).tolist()
[3.0, -1.0, 0.5]
"""
from __future__ import annotations

import operator

import numpy as np

from ..type.errors import ShapeError


class PolynomialMixin:
    """``polyfit``, ``polydiv`` and ``roots``, for every backend."""

    def polyfit(self, x, y, deg, rcond=None, full=False, w=None, cov=False):
        """The least-squares polynomial of degree ``deg`` through ``(x, y)`` (``y``
        may hold several columns), highest power first, by NumPy's scaled ``lstsq``;
        ``w`` weights the points. ``full`` and ``cov`` are not supported.

        Example: ``N.polyfit(t, v, 3)``
        """
        if full or cov:
            raise ValueError("polyfit: full=True and cov=True are not supported; fit with "
                             "N.linalg.lstsq for the residuals")
        deg = operator.index(deg)
        x, y = self._lift(x), self._lift(y)
        if deg < 0 or x.ndim != 1 or y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
            raise ShapeError(f"polyfit: needs deg >= 0, a 1-d x and a y of as many rows; got "
                             f"deg {deg}, x {x.shape}, y {y.shape}")
        dtype = np.result_type(x.dtype, y.dtype, np.float64 if x.dtype.kind in "biu" else x.dtype)
        x, y = self.astype(x, dtype), self.astype(y, dtype)
        lhs = self.vander(x, deg + 1)
        rhs = y
        if w is not None:
            w = self.astype(self._lift(w), dtype)
            lhs = self.multiply(lhs, w[:, None])
            rhs = self.multiply(rhs, w if y.ndim == 1 else w[:, None])
        if rcond is None:
            rcond = x.shape[0] * np.finfo(dtype).eps
        scale = self.sqrt(self.sum(self.multiply(lhs, lhs), axis=0))
        coefficients = self.linalg.lstsq(self.divide(lhs, scale), rhs, rcond)[0]
        return self.divide(coefficients, scale if y.ndim == 1 else scale[:, None])

    def polydiv(self, u, v):
        """Quotient and remainder of polynomial ``u`` by ``v`` (highest power first).
        The remainder keeps ``len(v) - 1`` coefficients: NumPy also drops leading ones
        that come out zero, which a graph cannot know. Example: ``q, r = N.polydiv(u, v)``
        """
        u, v = self._lift(u), self._lift(v)
        if u.ndim != 1 or v.ndim != 1 or v.shape[0] == 0:
            raise ShapeError(f"polydiv: needs 1-d coefficient arrays, got {u.shape} and "
                             f"{v.shape}")
        dtype = np.result_type(u.dtype, v.dtype, np.float64)
        u, v = self.astype(u, dtype), self.astype(v, dtype)
        m, n = u.shape[0] - 1, v.shape[0] - 1
        scale = self.divide(1.0, v[0])
        quotient, rest = [], u
        for k in range(max(m - n + 1, 0)):
            d = self.multiply(scale, rest[k])
            quotient.append(d)
            rest = self._updated(rest, slice(k, k + n + 1), self.multiply(d, v), "subtract")
        q = self.stack(quotient) if quotient else self.zeros((1,), dtype)
        r = rest[max(m - n + 1, 0):] if n else self.zeros((1,), dtype)
        return q, r

    def roots(self, p):
        """The roots of polynomial ``p`` (highest power first), as the eigenvalues of
        its companion matrix; always complex, and leading or trailing zero
        coefficients must not be there (NumPy strips them: a graph cannot).

        Example: ``N.roots(N.asarray([1.0, -3.0, 2.0]))``
        """
        p = self._lift(p)
        if p.ndim != 1:
            raise ShapeError(f"roots: needs a 1-d coefficient array, got shape {p.shape}")
        n = p.shape[0] - 1
        if n < 1:
            return self.zeros((0,), np.complex128)
        dtype = np.result_type(p.dtype, np.float64)
        p = self.astype(p, dtype)
        top = self.divide(self.negative(p[1:]), p[0])[None, :]
        shift = self._constant(np.eye(n - 1, n, dtype=dtype)) if n > 1 else None
        companion = top if shift is None else self.concatenate([top, shift], axis=0)
        return self.linalg.eigvals(companion)
