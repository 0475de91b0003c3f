"""Gradient rules of the ``numpy.linalg`` kinds: the standard matrix-calculus results
for real matrices (Giles 2008, "Collected matrix derivative results"; Townsend 2016 for
the SVD; Walter & Lehmann 2018 for QR); ``eig``'s, whose results are complex, is written
for complex cotangents (:mod:`.rules`) as PyTorch's is.

``cholesky`` and ``eigh`` read one triangle of their operand (NumPy's: the lower one,
the upper one with ``upper=True`` / ``UPLO="U"``), so the gradient of an entry of the
triangle read is that of both symmetric entries and the other triangle gets none: the
exact derivative of what NumPy computes, which finite differences confirm on any
matrix. ``eigh`` and ``svd`` assume distinct eigen/singular values (the derivative of
an eigenvector is undefined otherwise). Results of factorisations packed into one node
(:mod:`graphc.shape.linalg_rules`) get their gradients sliced out of the packed one.

>>> import numpy as np, graphc.eager as E
>>> a = np.array([[2.0, 1.0], [1.0, 3.0]])
>>> ga = E.grad(lambda x: E.linalg.det(x))(a)
>>> np.allclose(ga, np.linalg.det(a) * np.linalg.inv(a).T)
True
"""
from __future__ import annotations

import numpy as np

from ..type.errors import GraphError
from .common import fit, wants


# -- small matrix helpers, in any namespace ------------------------------------------
def _t(ns, x):
    return ns.swapaxes(x, -1, -2)


def _mm(ns, *xs):
    result = xs[0]
    for x in xs[1:]:
        result = ns.matmul(result, x)
    return result


def _mask(ns, n, k, dtype, lower=True):
    """The 0/1 matrix of the lower (upper) triangle from diagonal ``k`` on."""
    ones = np.ones((n, n), dtype)
    return ns._lift(np.tril(ones, k) if lower else np.triu(ones, k))


def _eye(ns, n, dtype):
    return ns._lift(np.eye(n, dtype=dtype))


def _diag_part(ns, x):
    """The diagonal of each matrix, as a vector."""
    return ns.sum(ns.multiply(x, _eye(ns, x.shape[-1], x.dtype)), axis=-1)


def _diag_matrix(ns, v):
    """Each vector ``v[..., :]`` on the diagonal of a matrix."""
    return ns.multiply(ns.expand_dims(v, -1), _eye(ns, v.shape[-1], v.dtype))


def _triangle_read(ns, m, lower):
    """The gradient of a matrix whose ``lower`` (or upper) triangle alone was read,
    given ``m`` with ``d loss = <m, dA>`` for symmetric ``dA``."""
    full = ns.add(m, _t(ns, m))
    return ns.subtract(ns.multiply(full, _mask(ns, m.shape[-1], 0, m.dtype, lower)),
                       ns.multiply(m, _eye(ns, m.shape[-1], m.dtype)))


def _scaled(ns, g, value):
    """``g * value`` broadcast over the last two axes of a stack of matrices."""
    return ns.expand_dims(ns.expand_dims(ns.multiply(g, value), -1), -1)


def _inv(ns, a):
    return ns._op("inv", [a], singular="raise")


def _unpack(ns, value, op, a):
    from ..operator.linalg_functions import unpack
    return unpack(ns, value, op, a.shape, a.dtype)


# -- the rules ---------------------------------------------------------------------
def inv_grad(ns, op, inputs, output, g, needs=None):
    """``d(A^-1) = -A^-1 dA A^-1``, so ``gA = -Y^T g Y^T``."""
    yt = _t(ns, output)
    return [ns.negative(_mm(ns, yt, g, yt))]


def solve_grad(ns, op, inputs, output, g, needs=None):
    """``X = A^-1 B``: ``gB = A^-T g``, ``gA = -gB X^T`` (summed over broadcast batch
    axes); a 1-D ``b`` is a column."""
    a, b = inputs
    vector = b.ndim == 1
    x, g = (ns.expand_dims(output, -1), ns.expand_dims(g, -1)) if vector else (output, g)
    gb = ns._op("solve", [_t(ns, a), g])
    grads = [None, None]
    if wants(needs, 0):
        grads[0] = fit(ns, ns.negative(ns.matmul(gb, _t(ns, x))), a)
    if wants(needs, 1):
        grads[1] = fit(ns, ns.squeeze(gb, -1) if vector else gb, b)
    return grads


def det_grad(ns, op, inputs, output, g, needs=None):
    """``d det(A) = det(A) tr(A^-1 dA)``."""
    (a,) = inputs
    return [ns.multiply(_scaled(ns, g, output), _t(ns, _inv(ns, a)))]


def slogdet_grad(ns, op, inputs, output, g, needs=None):
    """The sign is piecewise constant; ``d log|det A| = tr(A^-1 dA)``."""
    (a,) = inputs
    g_log = _unpack(ns, g, op, a)["logabsdet"]
    return [ns.multiply(ns.expand_dims(ns.expand_dims(g_log, -1), -1), _t(ns, _inv(ns, a)))]


def cholesky_grad(ns, op, inputs, output, g, needs=None):
    """``A = L L^T``: with ``Phi`` the lower triangle with half its diagonal,
    ``gA_sym = L^-T Phi(L^T gL) L^-1``; ``upper=True`` factors ``A^T``."""
    upper = op["upper"]
    low, g_low = (_t(ns, output), _t(ns, g)) if upper else (output, g)
    n, dtype = low.shape[-1], low.dtype
    p = _mm(ns, _t(ns, low), g_low)
    phi = ns.subtract(ns.multiply(p, _mask(ns, n, 0, dtype)),
                      ns.multiply(p, ns._lift(np.eye(n, dtype=dtype) * 0.5)))
    low_inv = _inv(ns, low)
    m = _mm(ns, _t(ns, low_inv), phi, low_inv)
    return [_triangle_read(ns, m, lower=not upper)]


def _eigenvalue_gaps(ns, w):
    """``F[i, j] = 1 / (w[j] - w[i])`` off the diagonal, 0 on it."""
    n, dtype = w.shape[-1], w.dtype
    eye = _eye(ns, n, dtype)
    gaps = ns.subtract(ns.expand_dims(w, -2), ns.expand_dims(w, -1))
    return ns.multiply(ns.reciprocal(ns.add(gaps, eye)), ns.subtract(1.0, eye))


def eigh_grad(ns, op, inputs, output, g, needs=None):
    """``A = V diag(w) V^T``: ``gA_sym = V (diag(gw) + F o (V^T gV)) V^T``."""
    (a,) = inputs
    full = ns._op("eigh", [a], UPLO=op["UPLO"], compute_v=True)
    values = _unpack(ns, full, op_full(op), a)
    w, v = values["eigenvalues"], values["eigenvectors"]
    if op["compute_v"]:
        grads = _unpack(ns, g, op, a)
        inner = ns.add(_diag_matrix(ns, grads["eigenvalues"]),
                       ns.multiply(_eigenvalue_gaps(ns, w),
                                   _mm(ns, _t(ns, v), grads["eigenvectors"])))
    else:
        inner = _diag_matrix(ns, g)
    m = _mm(ns, v, inner, _t(ns, v))
    return [_triangle_read(ns, m, lower=op["UPLO"] == "L")]


def eig_grad(ns, op, inputs, output, g, needs=None):
    """``A = V diag(w) V^-1`` with the cotangents ``gw``, ``gV`` of complex values
    (:mod:`.rules`): ``gA = V^-H (diag(gw) + conj(F) o P) V^H``, ``P`` being ``V^H gV``
    less its part along each unit-norm eigenvector (``V^H V diag(Re diag(V^H gV))``),
    ``F`` the eigenvalue gaps. Defined for distinct eigenvalues and a loss that does not
    depend on the eigenvectors' phases (NumPy's are arbitrary); a real ``A`` keeps the
    real part."""
    (a,) = inputs
    if op["compute_v"]:
        values, grads = _unpack(ns, output, op, a), _unpack(ns, g, op, a)
        gw, gv = grads["eigenvalues"], grads["eigenvectors"]
    else:
        full = op_full(op)
        values, gw, gv = _unpack(ns, ns._op("eig", [a], compute_v=True), full, a), g, None
    w, v = values["eigenvalues"], values["eigenvectors"]
    vh = ns.conj(_t(ns, v))
    inner = _diag_matrix(ns, gw)
    if gv is not None:
        vh_gv = _mm(ns, vh, gv)
        along = ns.multiply(_mm(ns, vh, v), ns.expand_dims(ns.real(_diag_part(ns, vh_gv)), -2))
        inner = ns.add(inner, ns.multiply(ns.conj(_eigenvalue_gaps(ns, w)),
                                          ns.subtract(vh_gv, along)))
    return [fit(ns, ns._op("solve", [vh, _mm(ns, inner, vh)]), a)]


def op_full(op):
    """``op`` computing every result (the gradient needs the factors)."""
    from ..type.op import Op
    if op.kind == "eigh":
        return Op.make("eigh", UPLO=op["UPLO"], compute_v=True)
    if op.kind == "svd":
        return Op.make("svd", full_matrices=False, compute_uv=True, hermitian=op["hermitian"])
    if op.kind == "eig":
        return Op.make("eig", compute_v=True)
    return Op.make("qr", mode="reduced")


def svd_grad(ns, op, inputs, output, g, needs=None):
    """Townsend's rule for the reduced SVD ``A = U S V^T`` (distinct singular values)."""
    (a,) = inputs
    m, n = a.shape[-2:]
    k = min(m, n)
    if op["compute_uv"] and op["full_matrices"] and m != n:
        raise GraphError(f"grad: N.linalg.svd with full_matrices=True has no gradient for "
                         f"non-square matrices (shape {a.shape}): the extra singular vectors "
                         "are not unique; use full_matrices=False")
    full = op_full(op)
    factors = _unpack(ns, ns._op("svd", [a], **full.params()), full, a)
    u, s, vh = factors["U"], factors["S"], factors["Vh"]
    if not op["compute_uv"]:
        grad = _mm(ns, ns.multiply(u, ns.expand_dims(g, -2)), vh)
        return [_triangle_read(ns, grad, lower=True) if op["hermitian"] else grad]
    grads = _unpack(ns, g, op, a)
    gu, gs, gv = grads["U"], grads["S"], _t(ns, grads["Vh"])
    v = _t(ns, vh)
    squares = ns.square(s)
    f = _eigenvalue_gaps(ns, squares)
    ut_gu, vt_gv = _mm(ns, _t(ns, u), gu), _mm(ns, _t(ns, v), gv)
    j = ns.multiply(f, ns.subtract(ut_gu, _t(ns, ut_gu)))
    kk = ns.multiply(f, ns.subtract(vt_gv, _t(ns, vt_gv)))
    inner = ns.add(ns.add(ns.multiply(j, ns.expand_dims(s, -2)), _diag_matrix(ns, gs)),
                   ns.multiply(ns.expand_dims(s, -1), kk))
    grad = _mm(ns, u, inner, vh)
    s_inv = ns.expand_dims(ns.reciprocal(s), -2)
    if m > k:   # the part of gU outside U's columns
        outside = ns.subtract(gu, _mm(ns, u, ut_gu))
        grad = ns.add(grad, _mm(ns, ns.multiply(outside, s_inv), vh))
    if n > k:
        outside = ns.subtract(gv, _mm(ns, v, vt_gv))
        grad = ns.add(grad, _mm(ns, ns.multiply(u, s_inv), _t(ns, outside)))
    # hermitian=True factors the symmetric matrix of the lower triangle (eigh's)
    return [_triangle_read(ns, grad, lower=True) if op["hermitian"] else grad]


def _copy_lower_to_upper(ns, x):
    n, dtype = x.shape[-1], x.dtype
    strict = ns.multiply(x, _mask(ns, n, -1, dtype))
    return ns.add(ns.multiply(x, _mask(ns, n, 0, dtype)), _t(ns, strict))


def _qr_square_grad(ns, q, r, gq, gr):
    """``A = Q R`` with ``R`` square: ``gA = (gQ + Q copyltu(M)) R^-T``,
    ``M = R gR^T - gQ^T Q``."""
    m_ = ns.subtract(_mm(ns, r, _t(ns, gr)), _mm(ns, _t(ns, gq), q))
    b = ns.add(gq, _mm(ns, q, _copy_lower_to_upper(ns, m_)))
    return _t(ns, ns._op("solve", [r, _t(ns, b)]))


def qr_grad(ns, op, inputs, output, g, needs=None):
    """The reduced QR's rule; for wide matrices ``A = [X | Y]``, ``R = [U | Q^T Y]``."""
    (a,) = inputs
    m, n = a.shape[-2:]
    if op["mode"] == "raw":
        raise GraphError("grad: N.linalg.qr with mode='raw' has no gradient rule; use "
                         "mode='reduced'")
    if op["mode"] == "complete" and m > n:
        raise GraphError(f"grad: N.linalg.qr with mode='complete' has no gradient for "
                         f"matrices taller than wide (shape {a.shape}): the extra columns of "
                         "Q are not unique; use mode='reduced'")
    full = op_full(op)
    factors = _unpack(ns, ns._op("qr", [a], mode="reduced"), full, a)
    q, r = factors["Q"], factors["R"]
    if op["mode"] == "r":
        gq, gr = ns.zeros_like(q), g
    else:
        grads = _unpack(ns, g, op, a)
        gq, gr = grads["Q"], grads["R"]
    if m >= n:
        return [_qr_square_grad(ns, q, r, gq, gr)]
    y = ns.getitem(a, (Ellipsis, slice(m, None)))
    gu, gv = ns.getitem(gr, (Ellipsis, slice(None, m))), ns.getitem(gr, (Ellipsis, slice(m, None)))
    gy = _mm(ns, q, gv)
    gx = _qr_square_grad(ns, q, ns.getitem(r, (Ellipsis, slice(None, m))),
                         ns.add(gq, _mm(ns, y, _t(ns, gv))), gu)
    return [ns.concatenate([gx, gy], axis=-1)]


def pinv_grad(ns, op, inputs, output, g, needs=None):
    """Golub & Pereyra's derivative of the pseudo-inverse (constant rank):
    ``gA = -P^T g P^T + (I - A P) g^T P P^T + P^T P g^T (I - P A)``, ``P = A+``."""
    (a,) = inputs
    p = output
    if op["hermitian"]:     # the symmetric matrix of the lower triangle was inverted
        a = _copy_lower_to_upper(ns, a)
    m, n = a.shape[-2:]
    pt, gt = _t(ns, p), _t(ns, g)
    left = ns.subtract(_eye(ns, m, p.dtype), _mm(ns, a, p))
    right = ns.subtract(_eye(ns, n, p.dtype), _mm(ns, p, a))
    grad = ns.negative(_mm(ns, pt, g, pt))
    grad = ns.add(grad, _mm(ns, left, gt, p, pt))
    grad = ns.add(grad, _mm(ns, pt, p, gt, right))
    return [_triangle_read(ns, grad, lower=True) if op["hermitian"] else grad]
