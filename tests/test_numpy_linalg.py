"""``N.linalg``: every function against ``numpy.linalg`` in graph mode (both memory plans)
and eager mode (tests/opcheck.py), over batch shapes, sizes and dtypes, on matrices made
well conditioned on purpose (``B B^T + n I``, or a random matrix plus ``n I``); gradients
against central finite differences in float64 (tests/gradcheck.py); errors at build time
and LAPACK's at run time. LAPACK may round differently on another path, so values are
compared with tolerances, never bit for bit.
"""
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

import graphc
import graphc.eager as E
import graphc.ndarray as N
from gradcheck import check_gradient
from graphc.operator import NS
from graphc.operator.linalg_functions import ATTRIBUTES, rebuild
from opcheck import check_op, examples, expect_error

FLOATS = (np.float32, np.float64)
INEXACT = FLOATS + (np.complex64, np.complex128)
TOLERANCE = {np.dtype(np.float32): dict(rtol=2e-4, atol=2e-4),
             np.dtype(np.complex64): dict(rtol=2e-4, atol=2e-4),
             np.dtype(np.float64): dict(rtol=1e-9, atol=1e-9),
             np.dtype(np.complex128): dict(rtol=1e-9, atol=1e-9)}


def tolerance(dtype):
    return TOLERANCE.get(np.dtype(dtype), TOLERANCE[np.dtype(np.float64)])


def random(rng, shape, dtype):
    values = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    return values.astype(dtype)


def positive_definite(rng, shape, dtype):
    """``B B^H + n I``: Hermitian, eigenvalues at least ``n``."""
    b = random(rng, shape, np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
    n = shape[-1]
    return (b @ np.conj(np.swapaxes(b, -1, -2)) + n * np.eye(n)).astype(dtype)


def well_conditioned(rng, shape, dtype):
    """A random square matrix plus ``2 n I``: far from singular."""
    n = shape[-1]
    return (random(rng, shape, np.float64 if np.dtype(dtype).kind == "f" else np.complex128)
            + 2 * n * np.eye(n)).astype(dtype)


@st.composite
def stacks(draw, square=True, dtypes=INEXACT, max_side=4):
    """(seed, shape, dtype) of a stack of matrices: up to two batch axes."""
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    m = draw(st.integers(1, max_side))
    n = m if square else draw(st.integers(1, max_side))
    return draw(st.integers(0, 2**16)), batch + (m, n), draw(st.sampled_from(dtypes))


def as_complex(results, dtype):
    cplx = np.result_type(dtype, np.complex64)
    return [np.asarray(r).astype(cplx) for r in results]


# -- factorisations and solvers -------------------------------------------------------
#: name -> (graphc function, NumPy reference, matrix maker)
SQUARE_CASES = {
    "inv": (lambda M, a: M.linalg.inv(a), np.linalg.inv, well_conditioned),
    "det": (lambda M, a: M.linalg.det(a), np.linalg.det, well_conditioned),
    "slogdet": (lambda M, a: list(M.linalg.slogdet(a)), lambda a: list(np.linalg.slogdet(a)),
                well_conditioned),
    "cholesky": (lambda M, a: M.linalg.cholesky(a), np.linalg.cholesky, positive_definite),
    "cholesky_upper": (lambda M, a: M.linalg.cholesky(a, upper=True),
                       lambda a: np.linalg.cholesky(a, upper=True), positive_definite),
    "eigh": (lambda M, a: list(M.linalg.eigh(a)), lambda a: list(np.linalg.eigh(a)),
             positive_definite),
    "eigh_upper": (lambda M, a: list(M.linalg.eigh(a, UPLO="U")),
                   lambda a: list(np.linalg.eigh(a, UPLO="U")), positive_definite),
    "eigvalsh": (lambda M, a: M.linalg.eigvalsh(a), np.linalg.eigvalsh, positive_definite),
    "eig": (lambda M, a: list(M.linalg.eig(a)),
            lambda a: as_complex(np.linalg.eig(a), a.dtype), well_conditioned),
    "eigvals": (lambda M, a: M.linalg.eigvals(a),
                lambda a: as_complex([np.linalg.eigvals(a)], a.dtype)[0], well_conditioned),
    "svd_hermitian": (lambda M, a: list(M.linalg.svd(a, hermitian=True)),
                      lambda a: list(np.linalg.svd(a, hermitian=True)), positive_definite),
    "solve_matrix": (lambda M, a: M.linalg.solve(a, a[..., :1] * 2.0 + 1.0),
                     lambda a: np.linalg.solve(a, a[..., :1] * 2.0 + 1.0), well_conditioned),
    "matrix_power": (lambda M, a: [M.linalg.matrix_power(a, n) for n in (-2, 0, 1, 2, 3, 5)],
                     lambda a: [np.linalg.matrix_power(a, n) for n in (-2, 0, 1, 2, 3, 5)],
                     well_conditioned),
}

RECTANGULAR_CASES = {
    "qr": (lambda M, a: list(M.linalg.qr(a)), lambda a: list(np.linalg.qr(a))),
    "qr_complete": (lambda M, a: list(M.linalg.qr(a, mode="complete")),
                    lambda a: list(np.linalg.qr(a, mode="complete"))),
    "qr_r": (lambda M, a: M.linalg.qr(a, mode="r"), lambda a: np.linalg.qr(a, mode="r")),
    "qr_raw": (lambda M, a: list(M.linalg.qr(a, mode="raw")),
               lambda a: list(np.linalg.qr(a, mode="raw"))),
    "svd": (lambda M, a: list(M.linalg.svd(a)), lambda a: list(np.linalg.svd(a))),
    "svd_reduced": (lambda M, a: list(M.linalg.svd(a, full_matrices=False)),
                    lambda a: list(np.linalg.svd(a, full_matrices=False))),
    "svdvals": (lambda M, a: M.linalg.svdvals(a), np.linalg.svdvals),
    "pinv": (lambda M, a: M.linalg.pinv(a), np.linalg.pinv),
    "pinv_rtol": (lambda M, a: M.linalg.pinv(a, rtol=None), lambda a: np.linalg.pinv(a, rtol=None)),
    "matrix_rank": (lambda M, a: M.linalg.matrix_rank(a), np.linalg.matrix_rank),
    "matrix_transpose": (lambda M, a: M.linalg.matrix_transpose(a), np.linalg.matrix_transpose),
    "diagonal": (lambda M, a: [M.linalg.diagonal(a, offset=k) for k in (-1, 0, 2)],
                 lambda a: [np.linalg.diagonal(a, offset=k) for k in (-1, 0, 2)]),
    "trace": (lambda M, a: [M.linalg.trace(a), M.linalg.trace(a, offset=1)],
              lambda a: [np.linalg.trace(a), np.linalg.trace(a, offset=1)]),
}


@pytest.mark.parametrize("name", sorted(SQUARE_CASES))
@examples(8)
@given(case=stacks())
def test_square_matrix_functions_match_numpy(name, case):
    seed, shape, dtype = case
    fn, ref, make = SQUARE_CASES[name]
    a = make(np.random.default_rng(seed), shape, dtype)
    check_op(fn, ref, a, **tolerance(dtype))


@pytest.mark.parametrize("name", sorted(RECTANGULAR_CASES))
@examples(8)
@given(case=stacks(square=False))
def test_rectangular_matrix_functions_match_numpy(name, case):
    seed, shape, dtype = case
    fn, ref = RECTANGULAR_CASES[name]
    check_op(fn, ref, random(np.random.default_rng(seed), shape, dtype), **tolerance(dtype))


@examples(10)
@given(case=stacks(dtypes=FLOATS), k=st.integers(1, 3), vector=st.booleans(),
       b_batch=st.sampled_from([(), (1,), (2, 1)]))
def test_solve_broadcasts_batches_and_takes_vectors_when_1d(case, k, vector, b_batch):
    seed, shape, dtype = case
    rng = np.random.default_rng(seed)
    a = well_conditioned(rng, shape, dtype)
    b = random(rng, (shape[-1],) if vector else b_batch + (shape[-1], k), dtype)
    check_op(lambda M, a, b: M.linalg.solve(a, b), np.linalg.solve, a, b, **tolerance(dtype))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_integers_and_booleans_compute_in_float64(dtype):
    a = (np.eye(3) * 2 + np.triu(np.ones((3, 3)), 1)).astype(dtype)
    for fn, ref in ((lambda M, a: M.linalg.inv(a), np.linalg.inv),
                    (lambda M, a: M.linalg.det(a), np.linalg.det),
                    (lambda M, a: list(M.linalg.svd(a)), lambda a: list(np.linalg.svd(a))),
                    (lambda M, a: M.linalg.norm(a), np.linalg.norm)):
        check_op(fn, ref, a, rtol=1e-12, atol=1e-12)


# -- norms, condition numbers, ranks --------------------------------------------------
VECTOR_ORDERS = [None, np.inf, -np.inf, 0, 1, -1, 2, -2, 3, 0.5]
MATRIX_ORDERS = [None, "fro", "nuc", np.inf, -np.inf, 1, -1, 2, -2]


@examples(30)
@given(case=stacks(square=False, dtypes=INEXACT + (np.int64,)), data=st.data())
def test_norm_matches_numpy_for_every_order_axis_and_keepdims(case, data):
    seed, shape, dtype = case
    x = random(np.random.default_rng(seed), shape, dtype) if dtype != np.int64 else \
        np.random.default_rng(seed).integers(-5, 5, shape)
    ndim = len(shape)
    keepdims = data.draw(st.booleans())
    if data.draw(st.booleans()):
        axis = data.draw(st.integers(-ndim, ndim - 1))
        ord = data.draw(st.sampled_from(VECTOR_ORDERS))
    else:
        rows = data.draw(st.integers(0, ndim - 1))
        cols = data.draw(st.integers(0, ndim - 1).filter(lambda c: c != rows))
        axis, ord = (rows - ndim if data.draw(st.booleans()) else rows, cols), \
            data.draw(st.sampled_from(MATRIX_ORDERS))
    check_op(lambda M, x: M.linalg.norm(x, ord, axis, keepdims),
             lambda x: np.linalg.norm(x, ord, axis, keepdims), x, **tolerance(x.dtype))


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("ord", [None, "fro", 2, 1, np.inf])
def test_norm_without_axis_takes_vectors_and_matrices_whole(shape, ord):
    x = np.random.default_rng(3).standard_normal(shape)
    check_op(lambda M, x: M.linalg.norm(x, ord, keepdims=True),
             lambda x: np.linalg.norm(x, ord, keepdims=True), x, rtol=1e-12, atol=1e-12)


@examples(20)
@given(case=stacks(square=False, dtypes=FLOATS), data=st.data())
def test_vector_and_matrix_norms_match_numpy(case, data):
    seed, shape, dtype = case
    x = random(np.random.default_rng(seed), shape, dtype)
    ndim = len(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1),
                               st.lists(st.integers(0, ndim - 1), min_size=1, unique=True)
                               .map(tuple)))
    ord = data.draw(st.sampled_from([2, 1, np.inf, -np.inf, 0, 3]))
    keepdims = data.draw(st.booleans())
    check_op(lambda M, x: M.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord),
             lambda x: np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord), x,
             **tolerance(dtype))
    matrix_ord = data.draw(st.sampled_from(MATRIX_ORDERS[1:]))
    check_op(lambda M, x: M.linalg.matrix_norm(x, keepdims=keepdims, ord=matrix_ord),
             lambda x: np.linalg.matrix_norm(x, keepdims=keepdims, ord=matrix_ord), x,
             **tolerance(dtype))


@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, np.inf, -np.inf, "fro", "nuc"])
def test_cond_matches_numpy_and_is_inf_for_singular_matrices(p):
    rng = np.random.default_rng(5)
    stack = np.stack([well_conditioned(rng, (3, 3), np.float64),
                      np.array([[1.0, 2, 3], [2, 4, 6], [0, 1, 1]])])   # singular
    # the singular one's smallest singular value is rounding noise, and NumPy's own SVD
    # of its NaN inverse fails ('nuc')
    if p in (None, 2, -2, "nuc"):
        stack = stack[:1]
    expected = np.linalg.cond(stack, p)
    check_op(lambda M, x: M.linalg.cond(x, p), lambda x: np.linalg.cond(x, p), stack,
             rtol=1e-7, atol=0)
    assert len(stack) == 1 or np.isinf(expected[1])


@examples(15)
@given(case=stacks(square=False, dtypes=FLOATS), rank=st.integers(0, 4))
def test_matrix_rank_counts_independent_columns(case, rank):
    seed, shape, dtype = case
    rng = np.random.default_rng(seed)
    rank = min(rank, *shape[-2:])
    a = (rng.standard_normal(shape[:-1] + (rank,)) @
         rng.standard_normal(shape[:-2] + (rank, shape[-1]))).astype(dtype)
    for fn, ref in ((lambda M, a: M.linalg.matrix_rank(a), np.linalg.matrix_rank),
                    (lambda M, a: M.linalg.matrix_rank(a, tol=0.5),
                     lambda a: np.linalg.matrix_rank(a, tol=0.5)),
                    (lambda M, a: M.linalg.matrix_rank(a, rtol=1e-3),
                     lambda a: np.linalg.matrix_rank(a, rtol=1e-3))):
        assert (check_op(fn, ref, a)[0] <= rank).all()


def test_matrix_rank_of_vectors():
    for v in (np.zeros(3), np.array([0.0, 1.0, 0.0])):
        check_op(lambda M, v: M.linalg.matrix_rank(v),
                 lambda v: np.asarray(np.linalg.matrix_rank(v), np.int64), v)


# -- products and solver-based functions ----------------------------------------------
@examples(15)
@given(seed=st.integers(0, 2**16), sizes=st.lists(st.integers(1, 5), min_size=3, max_size=6),
       first_vector=st.booleans(), last_vector=st.booleans())
def test_multi_dot_matches_numpy(seed, sizes, first_vector, last_vector):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((sizes[i], sizes[i + 1])) for i in range(len(sizes) - 1)]
    if first_vector:
        arrays[0] = arrays[0][0]
    if last_vector and len(arrays) > 1:
        arrays[-1] = arrays[-1][:, 0]
    check_op(lambda M, *xs: M.linalg.multi_dot(list(xs)),
             lambda *xs: np.linalg.multi_dot(list(xs)), *arrays, rtol=1e-10, atol=1e-10)


@examples(15)
@given(seed=st.integers(0, 2**16), m=st.integers(1, 6), n=st.integers(1, 6),
       k=st.sampled_from([None, 1, 3]), dtype=st.sampled_from(FLOATS))
def test_lstsq_matches_numpy_for_full_rank_matrices(seed, m, n, k, dtype):
    rng = np.random.default_rng(seed)
    a = random(rng, (m, n), dtype)
    b = random(rng, (m,) if k is None else (m, k), dtype)

    def ref(a, b):
        x, residuals, rank, s = np.linalg.lstsq(a, b)
        return [x, residuals.astype(dtype).reshape(-1), np.int64(rank), s]
    check_op(lambda M, a, b: list(M.linalg.lstsq(a, b)), ref, a, b, **tolerance(dtype))


@pytest.mark.parametrize("shape,ind", [((4, 6, 8, 3), 2), ((6, 2, 3), 1), ((2, 3, 6), 2)])
def test_tensorinv_and_tensorsolve_match_numpy(shape, ind):
    rng = np.random.default_rng(1)
    rows = int(np.prod(shape[ind:]))
    a = (rng.standard_normal((rows, rows)) + 2 * rows * np.eye(rows)).reshape(shape)
    check_op(lambda M, a: M.linalg.tensorinv(a, ind=ind),
             lambda a: np.linalg.tensorinv(a, ind=ind), a, rtol=1e-10, atol=1e-12)
    b = rng.standard_normal(shape[:ind])
    check_op(lambda M, a, b: M.linalg.tensorsolve(a, b), np.linalg.tensorsolve, a, b,
             rtol=1e-10, atol=1e-12)


def test_tensorsolve_moves_axes_to_the_end_first():
    rng = np.random.default_rng(6)
    a = (rng.standard_normal((6, 6)) + 12 * np.eye(6)).reshape(2, 3, 6)
    a = np.moveaxis(a, 0, 2)       # (3, 6, 2); axes=(0,) makes it (6, 2, 3)
    b = rng.standard_normal(6)
    check_op(lambda M, a, b: M.linalg.tensorsolve(a, b, axes=(0,)),
             lambda a, b: np.linalg.tensorsolve(a, b, axes=(0,)), a, b, rtol=1e-10, atol=1e-12)


def test_array_api_aliases_match_numpy():
    rng = np.random.default_rng(2)
    u, v = rng.standard_normal((2, 3)), rng.standard_normal((4, 2, 3))
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    check_op(lambda M, u, v: M.linalg.cross(u, v), np.linalg.cross, u, v, rtol=1e-12)
    check_op(lambda M, u, v: M.linalg.cross(u, v, axis=0),
             lambda u, v: np.linalg.cross(u, v, axis=0), u.T.copy(), v[0].T.copy(), rtol=1e-12)
    check_op(lambda M, u, v: M.linalg.vecdot(u, v), np.linalg.vecdot, u, v, rtol=1e-12)
    check_op(lambda M, u, v: M.linalg.vecdot(u, v, axis=0),
             lambda u, v: np.linalg.vecdot(u, v, axis=0), u.T.copy(), u.T.copy(), rtol=1e-12)
    check_op(lambda M, u, v: M.linalg.outer(u, v), np.linalg.outer, u[0], v[0, 0])
    check_op(lambda M, a, b: M.linalg.matmul(a, b), np.linalg.matmul, a, b, rtol=1e-12)
    check_op(lambda M, a, b: M.linalg.tensordot(a, b, axes=1),
             lambda a, b: np.linalg.tensordot(a, b, axes=1), a, b, rtol=1e-12)


# -- gradients ------------------------------------------------------------------------
def _spd(rng, shape):
    return positive_definite(rng, shape, np.float64)


def _distinct_symmetric(rng, shape):
    """A symmetric matrix with well separated eigenvalues 1, 2.5, 4, ... (any rotation)."""
    n = shape[-1]
    q, _ = np.linalg.qr(rng.standard_normal(shape))
    w = 1.0 + 1.5 * np.arange(n)
    return (q * w) @ np.swapaxes(q, -1, -2)


def _with_junk_upper(rng, a):
    """``a`` with its strict upper triangle replaced (what NumPy never reads)."""
    return np.tril(a) + np.triu(rng.standard_normal(a.shape), 1)


def _distinct_singular(rng, shape):
    m, n = shape[-2:]
    u, _ = np.linalg.qr(rng.standard_normal(shape[:-2] + (m, m)))
    v, _ = np.linalg.qr(rng.standard_normal(shape[:-2] + (n, n)))
    k = min(m, n)
    s = 1.0 + 1.5 * np.arange(k)[::-1]
    return (u[..., :, :k] * s) @ np.swapaxes(v[..., :, :k], -1, -2)


#: name -> (function of the namespace and the arrays, maker of the arrays from rng, shape)
GRADIENT_CASES = {
    "inv": (lambda M, a: M.linalg.inv(a), lambda r, s: [well_conditioned(r, s, np.float64)]),
    "det": (lambda M, a: M.linalg.det(a), lambda r, s: [well_conditioned(r, s, np.float64)]),
    "slogdet": (lambda M, a: M.linalg.slogdet(a).logabsdet,
                lambda r, s: [well_conditioned(r, s, np.float64)]),
    "solve": (lambda M, a, b: M.linalg.solve(a, b),
              lambda r, s: [well_conditioned(r, s, np.float64),
                            r.standard_normal(s[:-1] + (2,))]),
    "solve_vector": (lambda M, a, b: M.linalg.solve(a, b),
                     lambda r, s: [well_conditioned(r, s, np.float64),
                                   r.standard_normal(s[-1])]),
    "cholesky": (lambda M, a: M.linalg.cholesky(a),
                 lambda r, s: [_with_junk_upper(r, _spd(r, s))]),
    "cholesky_upper": (lambda M, a: M.linalg.cholesky(a, upper=True),
                       lambda r, s: [np.swapaxes(_with_junk_upper(r, _spd(r, s)), -1, -2)]),
    "eigh": (lambda M, a: [M.linalg.eigh(a)[0], M.linalg.eigh(a)[1] ** 2],
             lambda r, s: [_with_junk_upper(r, _distinct_symmetric(r, s))]),
    "eigvalsh_upper": (lambda M, a: M.linalg.eigvalsh(a, UPLO="U"),
                       lambda r, s: [np.swapaxes(_with_junk_upper(r, _distinct_symmetric(r, s)),
                                                 -1, -2)]),
    "svd": (lambda M, a: [M.linalg.svd(a)[0] ** 2, M.linalg.svd(a)[1], M.linalg.svd(a)[2] ** 2],
            lambda r, s: [_distinct_singular(r, s)]),
    "svd_hermitian": (lambda M, a: M.linalg.svd(a, hermitian=True)[1],
                      lambda r, s: [_with_junk_upper(r, _distinct_symmetric(r, s))]),
    "pinv_hermitian": (lambda M, a: M.linalg.pinv(a, hermitian=True),
                       lambda r, s: [_with_junk_upper(r, _distinct_symmetric(r, s))]),
    "matrix_power": (lambda M, a: [M.linalg.matrix_power(a, n) for n in (-2, 3, 5)],
                     lambda r, s: [well_conditioned(r, s, np.float64) / s[-1]]),
    "norms": (lambda M, a: [M.linalg.norm(a), M.linalg.norm(a, axis=-1, ord=3),
                            M.linalg.matrix_norm(a, ord=1)],
              lambda r, s: [r.standard_normal(s)]),
}

RECTANGULAR_GRADIENTS = {
    "svd_reduced": (lambda M, a: [x ** 2 for x in M.linalg.svd(a, full_matrices=False)],
                    lambda r, s: [_distinct_singular(r, s)]),
    "svdvals": (lambda M, a: M.linalg.svdvals(a), lambda r, s: [_distinct_singular(r, s)]),
    "norm_2_nuc": (lambda M, a: [M.linalg.matrix_norm(a, ord=2), M.linalg.norm(a, "nuc",
                                                                                 (-2, -1))],
                   lambda r, s: [_distinct_singular(r, s)]),
    "qr": (lambda M, a: [M.linalg.qr(a)[0] ** 3, M.linalg.qr(a)[1]],
           lambda r, s: [r.standard_normal(s)]),
    "qr_r": (lambda M, a: M.linalg.qr(a, mode="r"), lambda r, s: [r.standard_normal(s)]),
    "pinv": (lambda M, a: M.linalg.pinv(a), lambda r, s: [_distinct_singular(r, s)]),
}


def _gradient_case(table, name, case):
    seed, shape, _ = case
    rng = np.random.default_rng(seed)
    fn, make = table[name]
    arrays = make(rng, shape)
    check_gradient(lambda M, *xs: joined(M, fn(M, *xs)), *arrays, rtol=1e-4, atol=1e-6)


def joined(M, results):
    """Several results as one vector (the gradient checker weighs one output)."""
    if not isinstance(results, (list, tuple)):
        return results
    return M.concatenate([M.reshape(r, (-1,)) for r in results])


@pytest.mark.parametrize("name", sorted(GRADIENT_CASES))
@examples(3)
@given(case=stacks(dtypes=(np.float64,), max_side=3))
def test_square_gradients_match_finite_differences(name, case):
    _gradient_case(GRADIENT_CASES, name, case)


@pytest.mark.parametrize("name", sorted(RECTANGULAR_GRADIENTS))
@examples(4)
@given(case=stacks(square=False, dtypes=(np.float64,), max_side=4))
def test_rectangular_gradients_match_finite_differences(name, case):
    _gradient_case(RECTANGULAR_GRADIENTS, name, case)


def test_lstsq_gradient_matches_finite_differences():
    rng = np.random.default_rng(4)
    a, b = _distinct_singular(rng, (5, 3)), rng.standard_normal((5, 2))
    check_gradient(lambda M, a, b: joined(M, M.linalg.lstsq(a, b)[:2]), a, b,
                   rtol=1e-4, atol=1e-6)


def test_gradients_where_none_is_defined_say_so():
    x = N.var("x", (4, 3), np.float64)
    with pytest.raises(graphc.GraphError, match="full_matrices=False"):
        N.grad(N.sum(N.linalg.svd(x)[0]), [x])
    with pytest.raises(graphc.GraphError, match="mode='reduced'"):
        N.grad(N.sum(N.linalg.qr(x, mode="complete")[0]), [x])
    with pytest.raises(graphc.GraphError, match="mode='raw'"):
        N.grad(N.sum(N.linalg.qr(x, mode="raw")[1]), [x])


def test_float32_gradients_stay_float32():
    x = N.var("x", (3, 3), np.float32)
    (g,) = N.grad(N.sum(N.linalg.inv(x)) + N.linalg.det(x), [x])
    a = well_conditioned(np.random.default_rng(0), (3, 3), np.float32)
    (value,) = graphc.compile([x], [g]).run(x=a)
    assert value.dtype == np.float32
    inv = np.linalg.inv(a.astype(np.float64))
    expected = -inv.T @ np.ones((3, 3)) @ inv.T + np.linalg.det(a.astype(np.float64)) * inv.T
    np.testing.assert_allclose(value, expected, rtol=1e-4, atol=1e-4)


# -- errors ---------------------------------------------------------------------------
SQUARE_ONLY = [lambda M, a: M.linalg.inv(a), lambda M, a: M.linalg.det(a),
               lambda M, a: M.linalg.cholesky(a), lambda M, a: M.linalg.eigh(a),
               lambda M, a: M.linalg.eig(a), lambda M, a: M.linalg.slogdet(a)]


@pytest.mark.parametrize("fn", SQUARE_ONLY + [lambda M, a: M.linalg.matrix_power(a, 2)])
def test_square_functions_refuse_other_shapes(fn):
    expect_error(fn, [np.ones((2, 3))], graphc.ShapeError)
    expect_error(fn, [np.ones(3)], graphc.ShapeError)


@pytest.mark.parametrize("fn", SQUARE_ONLY + [lambda M, a: M.linalg.svd(a),
                                             lambda M, a: M.linalg.qr(a),
                                             lambda M, a: M.linalg.pinv(a)])
def test_half_floats_are_refused_as_numpy_refuses_them(fn):
    expect_error(fn, [np.eye(2, dtype=np.float16)], graphc.DTypeError)


def test_errors_name_the_function_and_the_shapes():
    with pytest.raises(graphc.ShapeError, match=r"linalg.inv: .*square.*\(2, 3\)"):
        N.linalg.inv(N.var("a", (2, 3)))
    with pytest.raises(graphc.ShapeError, match=r"linalg.solve: b of shape \(4,\)"):
        N.linalg.solve(N.var("a", (3, 3)), N.var("b", (4,)))
    with pytest.raises(graphc.ShapeError, match=r"linalg.solve: .*\(2, 3, 3\).*\(4, 3, 1\)"):
        N.linalg.solve(N.var("a", (2, 3, 3)), N.var("b", (4, 3, 1)))
    with pytest.raises(graphc.ShapeError, match="mode must be one of"):
        N.linalg.qr(N.var("a", (3, 3)), mode="economic")
    with pytest.raises(graphc.ShapeError, match="UPLO"):
        N.linalg.eigh(N.var("a", (3, 3)), UPLO="X")
    with pytest.raises(graphc.DTypeError, match="linalg.inv: array type float16"):
        N.linalg.inv(N.var("a", (3, 3), np.float16))
    with pytest.raises(graphc.ShapeError, match="Invalid norm order"):
        N.linalg.norm(N.var("a", (3, 3)), "nuc", axis=0)
    with pytest.raises(graphc.DTypeError, match="exponent must be an integer"):
        N.linalg.matrix_power(N.var("a", (3, 3)), 1.5)


@pytest.mark.cpu_engine   # views of every kind: the CPU's
def test_views_of_other_values_are_read_in_place():
    """Transposed and sliced operands reach LAPACK as views (the kinds read strides)."""
    x = N.var("x", (4, 6), np.float64)
    square = x[:, 1:5]
    outs = [N.linalg.inv(square.T), N.linalg.det(square[::-1]), N.linalg.svd(x.T)[1],
            N.linalg.solve(square.T, x[:, ::2])]
    a = np.random.default_rng(9).standard_normal((4, 6)) + 4 * np.eye(4, 6, 1)
    g = graphc.compile([x], outs, check=True)
    b = a[:, 1:5]
    expected = [np.linalg.inv(b.T), np.linalg.det(b[::-1]), np.linalg.svd(a.T)[1],
                np.linalg.solve(b.T, a[:, ::2])]
    for got, want in zip(g.run(x=a), expected):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert g.stats()["view_values"] >= 3


def test_a_singular_matrix_raises_numpys_error_when_the_graph_runs():
    a = N.var("a", (2, 2), np.float64)
    w = N.var("w", (2, 2), np.float64)
    g = graphc.compile([a, w], [N.linalg.inv(a)], updates={w: w + N.linalg.cholesky(a)})
    g.assign(w=np.zeros((2, 2)))
    with pytest.raises(np.linalg.LinAlgError):
        g.run(a=np.array([[1.0, 2.0], [2.0, 4.0]]))
    np.testing.assert_array_equal(g.value("w"), np.zeros((2, 2)))   # no half update
    with pytest.raises(N.linalg.LinAlgError):  # NumPy's, by the name ported code uses
        E.linalg.solve(np.zeros((2, 2)), np.ones(2))
    assert N.linalg.LinAlgError is np.linalg.LinAlgError
    (value,) = g.run(a=np.array([[4.0, 2.0], [2.0, 3.0]]))
    np.testing.assert_allclose(value, np.linalg.inv([[4.0, 2.0], [2.0, 3.0]]))


def test_rebuild_makes_the_same_nodes_from_saved_attributes():
    a = N.var("a", (3, 3))
    nodes = [N.linalg.inv(a), N.linalg.pinv(a, rcond=1e-3), N.linalg.qr(a, mode="r"),
             N.linalg.svd(a, compute_uv=False), N.linalg.eigvalsh(a, UPLO="U"),
             N.linalg.eigvals(a), N.linalg.cholesky(a, upper=True), N.linalg.det(a)]
    for node in nodes:
        assert set(ATTRIBUTES[node.op.kind]) == set(node.op.params())
        again = rebuild(NS, node.op.kind, list(node.parents), node.op.params())
        assert (again.op, again.parents, again.shape, again.dtype) == \
            (node.op, node.parents, node.shape, node.dtype)
    with pytest.raises(graphc.ShapeError, match="mode"):
        rebuild(NS, "qr", [a], {"mode": "economic"})
    with pytest.raises(graphc.DTypeError, match="upper"):
        rebuild(NS, "cholesky", [a], {"upper": "yes"})


# -- ONNX -----------------------------------------------------------------------------
def test_det_exports_to_onnx_and_the_factorisations_are_refused(tmp_path):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx_reference import onnxruntime_run

    x = N.var("x", (2, 3, 3))
    g = graphc.compile([x], [N.linalg.det(x) * 2.0 + N.linalg.norm(x)])
    graphc.onnx.save(g, tmp_path / "det.onnx")
    model = onnx.load(str(tmp_path / "det.onnx"))
    onnx.checker.check_model(model, full_check=True)
    assert "Det" in [n.op_type for n in model.graph.node]
    a = well_conditioned(np.random.default_rng(0), (2, 3, 3), np.float32)
    (got,) = onnxruntime_run(model, {"x": a})
    np.testing.assert_allclose(got, g.run(x=a)[0], rtol=1e-4, atol=1e-4)
    refused = graphc.compile([x], [N.linalg.inv(x)])
    with pytest.raises(graphc.onnx.OnnxUnsupported, match="no matrix inverse operator"):
        graphc.onnx.save(refused, tmp_path / "inv.onnx")


def test_linalg_and_fft_graphs_survive_save_and_load(tmp_path):
    x = N.var("x", (3, 3), np.float64)
    u, s, vh = N.linalg.svd(x)
    outs = [N.linalg.inv(x), N.linalg.solve(x, x[0]), N.linalg.det(x), N.linalg.cond(x, 1),
            N.linalg.cholesky(x @ x.T + 3.0, upper=True), N.linalg.pinv(x, hermitian=True),
            N.linalg.slogdet(x).logabsdet, N.linalg.qr(x, mode="r"), u, s, vh,
            N.linalg.eigh(x, UPLO="U").eigenvectors, N.linalg.eigvals(x),
            N.fft.rfft2(x, s=(2, 4))]
    g = graphc.compile([x], outs)
    g.save(tmp_path / "linalg.npz")
    loaded = graphc.load(tmp_path / "linalg.npz")
    a = well_conditioned(np.random.default_rng(0), (3, 3), np.float64)
    for got, want in zip(loaded.run(x=a), g.run(x=a)):
        np.testing.assert_array_equal(got, want)
