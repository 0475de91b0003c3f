"""Gradient rules of the reductions and products (given to their kinds by
:mod:`graphc.ops`): ``sum``, ``mean``, ``prod``,
``max``, ``min`` (ties share the gradient evenly), ``matmul`` (1-D promotion,
batch broadcasting, ``trans_a``/``trans_b``), ``dot`` and two-operand ``einsum``.

>>> import numpy as np, graphc.eager as E
>>> from graphc.type import Op
>>> x = np.array([1.0, 3.0, 3.0])
>>> extreme_grad(E._NS, Op.make("max", axis=None, keepdims=False), [x], np.float64(3.0),
...              np.float64(1.0))
[array([0. , 0.5, 0.5])]
"""
from __future__ import annotations

import math
import string

import numpy as np

from .common import expand_reduced, fit, wants


def sum_grad(ns, op, inputs, output, g, needs=None):
    (x,) = inputs
    return [ns.broadcast_to(expand_reduced(ns, g, x.shape, op["axis"]), x.shape)]


def mean_grad(ns, op, inputs, output, g, needs=None):
    (x,) = inputs
    axes = op["axis"]
    count = math.prod(x.shape) if axes is None else math.prod(x.shape[a] for a in axes)
    g = ns.divide(g, float(max(count, 1)))
    return [ns.broadcast_to(expand_reduced(ns, g, x.shape, axes), x.shape)]


def prod_grad(ns, op, inputs, output, g, needs=None):
    """The product of the other elements, computed without dividing by zero:
    with one zero in a slice only that element gets a gradient, with two none."""
    (x,) = inputs
    axes = op["axis"]
    nonzero = ns.not_equal(x, 0)
    filled = ns.where(nonzero, x, 1.0)
    product = ns.prod(filled, axis=axes, keepdims=True)
    zeros = ns.sum(ns.astype(ns.logical_not(nonzero), np.int64), axis=axes, keepdims=True)
    others = ns.where(nonzero, ns.where(ns.equal(zeros, 0), ns.divide(product, filled), 0.0),
                      ns.where(ns.equal(zeros, 1), product, 0.0))
    return [fit(ns, ns.multiply(expand_reduced(ns, g, x.shape, axes), others), x)]


def extreme_grad(ns, op, inputs, output, g, needs=None):
    """``max``/``min``: the gradient split evenly among the elements equal to the
    result (NaN results give none)."""
    (x,) = inputs
    axes = op["axis"]
    winners = ns.equal(x, expand_reduced(ns, output, x.shape, axes))
    count = ns.sum(ns.astype(winners, x.dtype), axis=axes, keepdims=True)
    share = ns.divide(expand_reduced(ns, g, x.shape, axes), ns.maximum(count, 1.0))
    return [ns.where(winners, share, 0.0)]


# -- products -----------------------------------------------------------------------
def _swap_last(shape, flag):
    return shape[:-2] + (shape[-1], shape[-2]) if flag else shape


def _mm(ns, a, b, trans_a=False, trans_b=False):
    flags = {k: True for k, v in (("trans_a", trans_a), ("trans_b", trans_b)) if v}
    return ns._op("matmul", [a, b], **flags)


def matmul_grad(ns, op, inputs, output, g, needs=None):
    """With ``A``, ``B`` the operands as multiplied (transposed where flagged,
    1-D promoted to a row or a column): ``dA = g B^T``, ``dB = A^T g``, each
    computed as one matmul with transpose flags and summed over broadcast batch
    axes."""
    a, b = inputs
    ta, tb = bool(op.get("trans_a")), bool(op.get("trans_b"))
    a2 = ns.reshape(a, (1,) + a.shape) if a.ndim == 1 else a
    b2 = ns.reshape(b, b.shape + (1,)) if b.ndim == 1 else b
    sa, sb = _swap_last(a2.shape, ta), _swap_last(b2.shape, tb)
    batch = np.broadcast_shapes(sa[:-2], sb[:-2])
    g2 = ns.reshape(g, batch + (sa[-2], sb[-1]))
    grads = [None, None]
    if wants(needs, 0):
        da = _mm(ns, b2, g2, tb, True) if ta else _mm(ns, g2, b2, False, not tb)
        grads[0] = ns.reshape(fit(ns, da, a2), a.shape)
    if wants(needs, 1):
        db = _mm(ns, g2, a2, True, ta) if tb else _mm(ns, a2, g2, not ta, False)
        grads[1] = ns.reshape(fit(ns, db, b2), b.shape)
    return grads


def einsum_operand_grad(ns, spec: str, other_spec: str, out_spec: str, g, other, shape):
    """The gradient of one operand of ``einsum(spec, other_spec -> out_spec)``.

    Letters of the operand that appear in the output or the other operand come
    from one einsum of ``g`` and ``other``; letters only in this operand were
    summed, so the gradient is constant along them (broadcast); a letter
    repeated in the operand (a diagonal) gets the gradient on the diagonal only.

    Example: for ``einsum("ij,jk->ik", a, b)``,
    ``einsum_operand_grad(ns, "ij", "jk", "ik", g, b, a.shape)`` is ``g @ b.T``.
    """
    unique = "".join(dict.fromkeys(spec))
    keep = "".join(c for c in unique if c in out_spec or c in other_spec)
    part = ns.einsum(f"{out_spec},{other_spec}->{keep}", g, other)
    sizes = dict(zip(spec, shape))
    # one axis per position of the operand: a letter's first position carries
    # it (size 1 where it was summed away), a repeat gets size 1
    first = [spec.index(c) == i for i, c in enumerate(spec)]
    spread = tuple(sizes[c] if f and c in keep else 1 for c, f in zip(spec, first))
    result = ns.broadcast_to(ns.reshape(part, spread), tuple(shape))
    if all(first):
        return result
    diagonal = np.ones(tuple(shape), dtype=bool)
    grids = np.indices(tuple(shape), sparse=True)
    for i, c in enumerate(spec):
        diagonal = diagonal & (grids[i] == grids[spec.index(c)])
    return ns.where(ns.const(diagonal), result, 0.0)


def einsum_grad(ns, op, inputs, output, g, needs=None):
    specs, out_spec = op["subscripts"].split("->")
    sa, sb = specs.split(",")
    a, b = inputs
    return [fit(ns, einsum_operand_grad(ns, sa, sb, out_spec, g, b, a.shape), a)
            if wants(needs, 0) else None,
            fit(ns, einsum_operand_grad(ns, sb, sa, out_spec, g, a, b.shape), b)
            if wants(needs, 1) else None]


def dot_subscripts(ndim_a: int, ndim_b: int) -> str:
    """``numpy.dot`` of operands of these ranks as einsum subscripts.

    >>> dot_subscripts(2, 3)
    'ak,bkc->abc'
    """
    letters = iter(string.ascii_letters.replace("k", ""))
    free_a = "".join(next(letters) for _ in range(ndim_a - 1))
    if ndim_b == 1:
        return f"{free_a}k,k->{free_a}"
    free_b = "".join(next(letters) for _ in range(ndim_b - 2))
    last = next(letters)
    return f"{free_a}k,{free_b}k{last}->{free_a}{free_b}{last}"


def dot_grad(ns, op, inputs, output, g, needs=None):
    a, b = inputs
    spec = dot_subscripts(a.ndim, b.ndim)
    return einsum_grad(ns, type(op).make("einsum", subscripts=spec), inputs, output, g, needs)


__all__ = ["sum_grad", "mean_grad", "prod_grad", "extreme_grad", "matmul_grad", "dot_grad",
           "einsum_grad", "einsum_operand_grad", "dot_subscripts"]
