"""NumPy's differences, derivatives and integrals, and its polynomials, made of
existing kinds: ``diff``, ``ediff1d``, ``gradient``, ``trapezoid``, ``unwrap``,
``polyval``, ``polyadd``, ``polysub``, ``polymul``, ``polyder``, ``polyint``, ``poly``.

Each follows NumPy's formula step by step (the same slices, the same operations in
the same order), so results have NumPy's bits.

>>> import graphc.eager as E, numpy as np
>>> E.diff(np.array([1, 4, 9, 16]), n=2).tolist()
[2, 2]
"""
from __future__ import annotations

import numpy as np

from ..shape.axes import normalize_axis
from ..type.errors import DTypeError, ShapeError
from .math_products import _along


class CalculusMixin:
    """Differences, derivatives, integrals and polynomials of
    :class:`~graphc.operator.mathematics.MathMixin`."""

    def _cut(self, x, axis, index):
        return self.getitem(x, _along(x.ndim, axis, index))

    # -- differences -------------------------------------------------------------------
    def diff(self, a, n: int = 1, axis: int = -1, prepend=None, append=None):
        """The ``n``-th discrete difference along ``axis`` (``not_equal`` for
        booleans), with ``prepend``/``append`` joined first, as ``numpy.diff``.

        Example: ``N.diff(x)``, ``N.diff(x, n=2, axis=0, prepend=0)``
        """
        a = self._lift(a)
        if n < 0:
            raise ShapeError(f"diff: order must be non-negative but got {n}")
        if n == 0:
            return a
        if a.ndim == 0:
            raise ShapeError("diff: requires input that is at least one dimensional")
        axis = normalize_axis("diff", axis, a.ndim)
        parts = []
        for extra, last in ((prepend, False), (append, True)):
            if extra is None:
                continue
            extra = self._lift(extra)
            if extra.ndim == 0:
                shape = a.shape[:axis] + (1,) + a.shape[axis + 1:]
                extra = self.broadcast_to(extra, shape)
            parts.append((last, extra))
        if parts:
            a = self.concatenate([e for last, e in parts if not last] + [a] +
                                 [e for last, e in parts if last], axis=axis)
        step = self.not_equal if a.dtype == np.bool_ else self.subtract
        for _ in range(n):
            a = step(self._cut(a, axis, slice(1, None)), self._cut(a, axis, slice(None, -1)))
        return a

    def ediff1d(self, ary, to_end=None, to_begin=None):
        """Differences of the flattened array, with ``to_begin``/``to_end`` joined
        (cast to its dtype), as ``numpy.ediff1d``.

        Example: ``N.ediff1d(x, to_begin=0)``
        """
        ary = self.ravel(self._lift(ary))
        parts = [self.diff(ary) if ary.dtype != np.bool_ else
                 self.subtract(self.getitem(ary, slice(1, None)),
                               self.getitem(ary, slice(None, -1)))]
        for extra, last in ((to_begin, False), (to_end, True)):
            if extra is None:
                continue
            extra = self.ravel(self._lift(extra))
            if not np.can_cast(extra.dtype, ary.dtype, casting="same_kind"):
                raise DTypeError(f"ediff1d: dtype of {'to_end' if last else 'to_begin'} "
                                 f"({extra.dtype}) must be compatible with the input's "
                                 f"({ary.dtype})")
            extra = self.astype(extra, ary.dtype)
            parts = parts + [extra] if last else [extra] + parts
        return parts[0] if len(parts) == 1 else self.concatenate(parts)

    # -- derivatives and integrals -----------------------------------------------------
    def gradient(self, f, *varargs, axis=None, edge_order: int = 1):
        """Second-order central differences inside, one-sided first- or second-order
        (``edge_order``) at the ends, along each axis (or ``axis``); spacings are
        scalars or 1-d coordinates, as ``numpy.gradient``. One array per axis (a
        tuple when more than one).

        Example: ``gx, gy = N.gradient(u, dx, dy)``, ``N.gradient(y, x, edge_order=2)``
        """
        f = self._lift(f)
        axes = range(f.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
        axes = [normalize_axis("gradient", ax, f.ndim) for ax in axes]
        if len(set(axes)) != len(axes):
            raise ShapeError(f"gradient: repeated axis in {axis}")
        if edge_order not in (1, 2):
            raise ShapeError(f"gradient: edge_order must be 1 or 2, got {edge_order}")
        if len(varargs) == 0:
            spacings = [1.0] * len(axes)
        elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
            spacings = list(varargs) * len(axes)
        elif len(varargs) == len(axes):
            spacings = list(varargs)
        else:
            raise ShapeError(f"gradient: expected 0, 1 or {len(axes)} spacings, got "
                             f"{len(varargs)}")
        out_dtype = f.dtype
        if f.dtype.kind in "iu":
            f, out_dtype = self.astype(f, np.float64), np.dtype(np.float64)
        results = [self._gradient_along(f, ax, dx, edge_order, out_dtype)
                   for ax, dx in zip(axes, spacings)]
        return results[0] if len(results) == 1 else tuple(results)

    def _spacing(self, dx, n, ax):
        """A scalar spacing, or the differences of coordinates (a scalar when known
        and uniform, as NumPy decides)."""
        if np.ndim(dx) == 0 and not (self._is_value(dx) and dx.ndim):
            return dx, True
        x = self._lift(dx)
        if x.ndim != 1:
            raise ShapeError(f"gradient: distances must be either scalars or 1d, got shape "
                             f"{x.shape}")
        if x.shape[0] != n:
            raise ShapeError(f"gradient: when 1d, distances must match the length of the "
                             f"corresponding dimension: {x.shape[0]} and {n} (axis {ax})")
        known = self._known(x)
        if known is not None:
            distances = np.diff(np.asarray(known))
            if distances.dtype.kind in "iu":
                distances = distances.astype(np.float64)
            if distances.size and (distances == distances[0]).all():
                return distances[0], True
            return self._lift(distances), False
        if x.dtype.kind in "iu":
            x = self.astype(x, np.float64)
        return self.diff(x), False

    def _gradient_along(self, f, ax, dx, edge_order, out_dtype):
        n = f.shape[ax]
        if n < edge_order + 1:
            raise ShapeError(f"gradient: shape of the array {f.shape} too small to calculate "
                             f"a numerical gradient along axis {ax}: at least "
                             f"{edge_order + 1} elements are required")
        dx, uniform = self._spacing(dx, n, ax)
        cut = lambda v, index: self._cut(v, ax, index)   # noqa: E731
        mul, add, sub, div = self.multiply, self.add, self.subtract, self.divide

        def along(v):  # a 1-d array of spacings lined up with f's axis
            return self.reshape(v, tuple(-1 if i == ax else 1 for i in range(f.ndim)))

        if uniform:
            inner = div(sub(cut(f, slice(2, None)), cut(f, slice(None, -2))), mul(2.0, dx))
        else:
            dx1 = along(self.getitem(dx, slice(0, -1)))
            dx2 = along(self.getitem(dx, slice(1, None)))
            a = self.negative(div(dx2, mul(dx1, add(dx1, dx2))))
            b = div(sub(dx2, dx1), mul(dx1, dx2))
            c = div(dx1, mul(dx2, add(dx1, dx2)))
            inner = add(add(mul(a, cut(f, slice(None, -2))), mul(b, cut(f, slice(1, -1)))),
                        mul(c, cut(f, slice(2, None))))
        first, last = self._gradient_edges(f, cut, dx, uniform, edge_order)
        parts = [self.astype(p, out_dtype) for p in (first, inner, last)]
        return self.concatenate(parts, axis=ax)

    def _gradient_edges(self, f, cut, dx, uniform, edge_order):
        mul, add, sub, div = self.multiply, self.add, self.subtract, self.divide
        at = lambda i: cut(f, slice(i, i + 1) if i != -1 else slice(-1, None))  # noqa: E731
        if edge_order == 1:
            d0 = dx if uniform else self.getitem(dx, 0)
            d1 = dx if uniform else self.getitem(dx, -1)
            return div(sub(at(1), at(0)), d0), div(sub(at(-1), at(-2)), d1)
        if uniform:
            a, b, c = -1.5 / dx, 2.0 / dx, -0.5 / dx
            first = add(add(mul(a, at(0)), mul(b, at(1))), mul(c, at(2)))
            a, b, c = 0.5 / dx, -2.0 / dx, 1.5 / dx
            last = add(add(mul(a, at(-3)), mul(b, at(-2))), mul(c, at(-1)))
            return first, last
        dx1, dx2 = self.getitem(dx, 0), self.getitem(dx, 1)
        a = self.negative(div(add(mul(2.0, dx1), dx2), mul(dx1, add(dx1, dx2))))
        b = div(add(dx1, dx2), mul(dx1, dx2))
        c = self.negative(div(dx1, mul(dx2, add(dx1, dx2))))
        first = add(add(mul(a, at(0)), mul(b, at(1))), mul(c, at(2)))
        dx1, dx2 = self.getitem(dx, -2), self.getitem(dx, -1)
        a = div(dx2, mul(dx1, add(dx1, dx2)))
        b = self.negative(div(add(dx2, dx1), mul(dx1, dx2)))
        c = div(add(mul(2.0, dx2), dx1), mul(dx2, add(dx1, dx2)))
        last = add(add(mul(a, at(-3)), mul(b, at(-2))), mul(c, at(-1)))
        return first, last

    def trapezoid(self, y, x=None, dx=1.0, axis: int = -1):
        """The integral of ``y`` along ``axis`` by the trapezoidal rule, at
        coordinates ``x`` (1-d, or shaped as ``y``) or spacing ``dx``.

        Example: ``N.trapezoid(y, x)``
        """
        y = self._lift(y)
        axis = normalize_axis("trapezoid", axis, y.ndim)
        if x is None:
            d = dx
        else:
            x = self._lift(x)
            if x.ndim == 1:
                d = self.diff(x)
                d = self.reshape(d, tuple(-1 if i == axis else 1 for i in range(y.ndim)))
            else:
                d = self.diff(x, axis=axis)
        pairs = self.add(self._cut(y, axis, slice(1, None)), self._cut(y, axis, slice(None, -1)))
        return self.sum(self.divide(self.multiply(d, pairs), 2.0), axis=axis)

    def _cumulative_sum(self, x, axis):
        """A running sum along ``axis``: NumPy's ``cumsum`` where the namespace has
        it, else a log-step scan of shifted adds."""
        if hasattr(self, "cumsum"):
            return self.cumsum(x, axis=axis)
        n, shift = x.shape[axis], 1
        while shift < n:
            head = self._cut(x, axis, slice(0, shift))
            moved = self.add(self._cut(x, axis, slice(shift, None)),
                             self._cut(x, axis, slice(0, n - shift)))
            x = self.concatenate([head, moved], axis=axis)
            shift *= 2
        return x

    def unwrap(self, p, discont=None, axis: int = -1, *, period=2 * np.pi):
        """``p`` with jumps larger than ``discont`` (default ``period / 2``) taken
        modulo ``period`` along ``axis``, as ``numpy.unwrap``.

        Example: ``N.unwrap(phase)``
        """
        p = self._lift(p)
        axis = normalize_axis("unwrap", axis, p.ndim)
        dd = self.diff(p, axis=axis)
        if discont is None:
            discont = period / 2
        dtype = np.result_type(dd.dtype, period)
        if dtype.kind in "iu":
            interval_high, rem = divmod(period, 2)
            boundary_ambiguous = rem == 0
        else:
            interval_high, boundary_ambiguous = period / 2, True
        interval_low = -interval_high
        ddmod = self.add(self.remainder(self.subtract(dd, interval_low), period), interval_low)
        if boundary_ambiguous:
            at_low = self.logical_and(self.equal(ddmod, interval_low), self.greater(dd, 0))
            ddmod = self.where(at_low, self._lift(np.asarray(interval_high, ddmod.dtype)), ddmod)
        correction = self.subtract(ddmod, dd)
        correction = self.where(self.less(self.absolute(dd), discont), 0, correction)
        up = self.astype(p, dtype)
        rest = self.add(self._cut(p, axis, slice(1, None)),
                        self._cumulative_sum(correction, axis))
        return self.concatenate([self._cut(up, axis, slice(0, 1)),
                                 self.astype(rest, dtype)], axis=axis)

    # -- polynomials (coefficients highest power first) --------------------------------
    def polyval(self, p, x):
        """The polynomial with coefficients ``p`` at ``x`` by Horner's rule.

        Example: ``N.polyval([3.0, 0.0, 1.0], x)``
        """
        p, x = self._lift(p), self._lift(x)
        y = self.zeros_like(x)
        for i in range(p.shape[0] if p.ndim else 1):
            y = self.add(self.multiply(y, x), self.getitem(p, i) if p.ndim else p)
        return y

    def _poly_pair(self, name, a1, a2, combine):
        a1, a2 = (self._lift(a) for a in (a1, a2))
        a1, a2 = (self.reshape(a, (1,)) if a.ndim == 0 else a for a in (a1, a2))
        if a1.ndim != 1 or a2.ndim != 1:
            raise ShapeError(f"{name}: expected 1-d coefficient arrays, got shapes "
                             f"{a1.shape} and {a2.shape}")
        gap = a2.shape[0] - a1.shape[0]
        if gap > 0:
            a1 = self.concatenate([self.zeros((gap,), a1.dtype), a1])
        elif gap < 0:
            a2 = self.concatenate([self.zeros((-gap,), a2.dtype), a2])
        return combine(a1, a2)

    def polyadd(self, a1, a2):
        """The sum of two polynomials. Example: ``N.polyadd(p, q)``"""
        return self._poly_pair("polyadd", a1, a2, self.add)

    def polysub(self, a1, a2):
        """The difference of two polynomials. Example: ``N.polysub(p, q)``"""
        return self._poly_pair("polysub", a1, a2, self.subtract)

    def polymul(self, a1, a2):
        """The product of two polynomials (``convolve``). Example: ``N.polymul(p, q)``"""
        a1, a2 = (self._lift(a) for a in (a1, a2))
        a1, a2 = (self.reshape(a, (1,)) if a.ndim == 0 else a for a in (a1, a2))
        return self.convolve(a1, a2)

    def polyder(self, p, m: int = 1):
        """The ``m``-th derivative of a polynomial. Example: ``N.polyder(p)``"""
        if m < 0:
            raise ShapeError(f"polyder: order of derivative must be positive, got {m}")
        p = self._lift(p)
        for _ in range(m):
            n = p.shape[0] - 1
            p = self.multiply(self.getitem(p, slice(None, -1)), np.arange(n, 0, -1))
        return p

    def polyint(self, p, m: int = 1, k=None):
        """The ``m``-th antiderivative of a polynomial, with integration constants
        ``k`` (one, or ``m`` of them; default 0).

        Example: ``N.polyint(p, k=1.0)``
        """
        if m < 0:
            raise ShapeError(f"polyint: order of integral must be positive, got {m}")
        constants = [0] * m if k is None else list(np.atleast_1d(k))
        if len(constants) == 1 and m > 1:
            constants = constants * m
        if len(constants) < m:
            raise ShapeError(f"polyint: k must be a scalar or a rank-1 array of length 1 or "
                             f"m={m}, got {k!r}")
        p = self._lift(p)
        for i in range(m):
            scaled = self.divide(p, np.arange(p.shape[0], 0, -1))
            p = self.concatenate([scaled, np.asarray([constants[i]])])
        return p

    def poly(self, seq_of_zeros):
        """The coefficients of the monic polynomial with these roots (a 1-d array),
        as ``numpy.poly``.

        Example: ``N.poly(roots)``
        """
        roots = self._lift(seq_of_zeros)
        if roots.ndim != 1:
            raise ShapeError(f"poly: expected a 1-d array of roots, got shape {roots.shape} "
                             "(for a matrix, pass its eigenvalues)")
        if roots.dtype.kind in "biu":
            roots = self.astype(roots, np.float64)
        if roots.shape[0] == 0:
            return self.full((), 1.0, np.float64)   # NumPy's 1.0
        a = self.ones((1,), roots.dtype)
        for i in range(roots.shape[0]):
            # convolve(a, [1, -z]) term by term: a[k] + a[k-1] * (-z)
            minus_z = self.negative(self.getitem(roots, i))
            a = self.concatenate([
                self.getitem(a, slice(0, 1)),
                self.add(self.getitem(a, slice(1, None)),
                         self.multiply(self.getitem(a, slice(None, -1)), minus_z)),
                self.multiply(self.getitem(a, slice(-1, None)), minus_z)])
        return a
