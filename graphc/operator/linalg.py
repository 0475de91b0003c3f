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
        """Einstein summation of two operands (``"ij,jk->ik"``); the output
        subscripts may be implicit. Example: ``N.einsum("bij,bjk->bik", a, b)``"""
        if len(operands) != 2:
            raise ShapeError(f"einsum: exactly two operands are supported, got {len(operands)}")
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
