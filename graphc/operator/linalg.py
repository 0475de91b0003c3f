"""Products: ``matmul`` (``@``), ``dot``, ``tensordot`` and two-operand ``einsum``.

>>> import graphc.eager as E, numpy as np
>>> E.tensordot(np.ones((2, 3)), np.ones((3, 4)), axes=1).shape
(2, 4)
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..shape.axes import normalize_axis
from ..type.errors import ShapeError


class LinalgMixin:
    def matmul(self, a, b):
        """Matrix product with NumPy's rules (1-D promotion, broadcast batch axes).

        Example: ``x @ w`` or ``N.matmul(x, w)``
        """
        return self._op("matmul", self._lift_all(a, b))

    def dot(self, a, b):
        """``numpy.dot``: matrix product for 2-D, sum over the last axis of ``a`` and the
        second-to-last of ``b`` for N-D. Example: ``N.dot(x, w)``"""
        a, b = self._lift_all(a, b)
        if a.ndim == 0 or b.ndim == 0:
            return self.multiply(a, b)
        return self._op("dot", [a, b])

    def tensordot(self, a, b, axes=2):
        """Sum products over ``axes`` (an int, or a pair of axis lists), as
        ``numpy.tensordot``; built from transpose, reshape and matmul.

        Example: ``N.tensordot(x, w, axes=([1], [0]))``
        """
        a, b = self._lift_all(a, b)
        if isinstance(axes, int) or hasattr(axes, "__index__") and np.ndim(axes) == 0:
            n = operator.index(axes)
            if not 0 <= n <= min(a.ndim, b.ndim):
                raise ShapeError(f"tensordot: cannot sum over the last {n} axes of shape "
                                 f"{a.shape} and the first {n} of shape {b.shape}")
            axes_a, axes_b = list(range(a.ndim - n, a.ndim)), list(range(n))
        else:
            axes_a, axes_b = ([x] if isinstance(x, int) else list(x) for x in axes)
        axes_a = [normalize_axis("tensordot", i, a.ndim) for i in axes_a]
        axes_b = [normalize_axis("tensordot", i, b.ndim) for i in axes_b]
        if len(axes_a) != len(axes_b) or any(a.shape[i] != b.shape[j]
                                             for i, j in zip(axes_a, axes_b)):
            raise ShapeError(f"tensordot: shape-mismatch for sum: shapes {a.shape} and "
                             f"{b.shape} over axes {axes_a} and {axes_b}")
        free_a = [i for i in range(a.ndim) if i not in axes_a]
        free_b = [i for i in range(b.ndim) if i not in axes_b]
        k = math.prod(a.shape[i] for i in axes_a)
        left = self.reshape(self.transpose(a, free_a + axes_a),
                            (math.prod(a.shape[i] for i in free_a), k))
        right = self.reshape(self.transpose(b, axes_b + free_b),
                             (k, math.prod(b.shape[i] for i in free_b)))
        return self.reshape(self.matmul(left, right),
                            tuple(a.shape[i] for i in free_a) + tuple(b.shape[i] for i in free_b))

    def einsum(self, subscripts: str, *operands):
        """Einstein summation (``"ij,jk->ik"``); the output subscripts may be implicit.
        Three operands or more are contracted two at a time in the order
        ``numpy.einsum_path`` picks; one is paired with the scalar 1.

        Example: ``N.einsum("bij,bjk->bik", a, b)``, ``N.einsum("ij,ijk,j->ik", r, d, m)``
        """
        if len(operands) != 2:
            return self._einsum_chain(subscripts, operands)
        spec = subscripts.replace(" ", "")
        if "..." in spec:
            raise ShapeError("einsum: ellipsis ('...') subscripts are not supported")
        if "->" not in spec:
            letters = spec.replace(",", "")
            spec += "->" + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        inputs, output = spec.split("->")
        # every subscript a letter (none at all for 0-d operands, as in ",->")
        if inputs.count(",") != 1 or not all(c.isalpha() for c in inputs.replace(",", "")
                                             + output):
            raise ShapeError(f"einsum: cannot parse subscripts {subscripts!r}")
        if any(c not in inputs for c in output) or len(set(output)) != len(output):
            raise ShapeError(f"einsum: output subscripts of {subscripts!r} must appear once "
                             "and in the inputs")
        return self._op("einsum", self._lift_all(*operands), subscripts=spec)

    def _einsum_chain(self, subscripts, operands):
        if not operands:
            raise ShapeError("einsum: needs at least one operand")
        values = [self._lift(v) for v in operands]
        spec = subscripts.replace(" ", "")
        if "->" not in spec:
            letters = spec.replace(",", "")
            spec += "->" + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        inputs, output = spec.split("->")
        terms = inputs.split(",")
        if len(terms) != len(values) or "..." in spec:
            raise ShapeError(f"einsum: {subscripts!r} does not fit {len(values)} operands "
                             "(ellipsis ('...') subscripts are not supported)")
        if len(values) == 1:
            return self.einsum(f"{terms[0]},->{output}", values[0], self._lift(1, like=values[0]))
        # only the shapes matter to the path: zero-stride stand-ins allocate nothing
        stand_ins = [np.broadcast_to(np.zeros((), v.dtype), v.shape) for v in values]
        try:
            path = np.einsum_path(spec, *stand_ins, optimize="greedy")[0][1:]
        except ValueError as exc:
            raise ShapeError(f"einsum: {subscripts!r} on shapes "
                             f"{[tuple(v.shape) for v in values]}: {exc}") from None
        for positions in path:
            picked = [(terms[i], values[i]) for i in positions]
            for i in sorted(positions, reverse=True):
                del terms[i], values[i]
            (term, value), rest = picked[0], picked[1:]
            for k, (other, other_value) in enumerate(rest):
                later = "".join(terms) + output + "".join(t for t, _ in rest[k + 1:])
                keep = "".join(dict.fromkeys(c for c in term + other if c in later))
                value = self.einsum(f"{term},{other}->{keep}", value, other_value)
                term = keep
            terms.append(term)
            values.append(value)
        (term,), (value,) = terms, values
        return value if term == output else self.einsum(f"{term},->{output}", value,
                                                        self._lift(1, like=value))
