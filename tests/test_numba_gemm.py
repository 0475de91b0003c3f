"""GEMMs on the generated kernels' threads (graphc.engine.numba_gemm) against NumPy's
matmul: stacks, broadcasting, transposed and column-block operands, both dtypes, the
cases left to NumPy, and the graph and 1x1-convolution paths that use it.

Products are compared with a tolerance: a block's edge may be summed in another
order by BLAS's kernel, and no test depends on BLAS's summation order."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc
import graphc.ndarray as N
from graphc.engine import numba_gemm, numba_kernels
from graphc.ops.conv_kernels import decomposed_kernel, generated_decomposed

pytestmark = pytest.mark.skipif(
    numba_gemm.unavailable() is not None,
    reason=f"no team GEMM here: {numba_gemm.unavailable()}")


def assert_product(a, b, out):
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    scale = np.abs(a).max(initial=0) * np.abs(b).max(initial=0) * a.shape[-1] + 1e-30
    tol = (1e-5 if out.dtype == np.float32 else 1e-12) * scale
    np.testing.assert_allclose(out, want, rtol=0, atol=tol)


def product(a, b, threaded=True):
    """``a @ b`` through :func:`gemm_kernel` (which must serve), with ``a`` and ``b``
    left untouched."""
    out = np.full(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]),
                  np.nan, a.dtype)
    before = a.copy(), b.copy()
    kernel = numba_gemm.gemm_kernel(a, b, out, threaded=threaded)
    assert kernel is not None
    kernel()
    np.testing.assert_array_equal(a, before[0])
    np.testing.assert_array_equal(b, before[1])
    return out


@settings(max_examples=40, deadline=None)
@given(m=st.integers(2, 70), k=st.integers(1, 40), n=st.integers(2, 70),
       batch_a=st.sampled_from([(), (1,), (3,), (2, 1)]),
       batch_b=st.sampled_from([(), (1,), (3,), (1, 3)]),
       trans_a=st.booleans(), trans_b=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
def test_matches_numpy(m, k, n, batch_a, batch_b, trans_a, trans_b, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch_a + ((k, m) if trans_a else (m, k))).astype(dtype)
    b = rng.standard_normal(batch_b + ((n, k) if trans_b else (k, n))).astype(dtype)
    a = a.swapaxes(-1, -2) if trans_a else a       # strided views, read in place
    b = b.swapaxes(-1, -2) if trans_b else b
    assert_product(a, b, product(a, b))


@pytest.mark.parametrize("shape", [(197, 192, 768), (96, 16, 12544), (1280, 320, 49),
                                   (3, 197, 64, 197)])
def test_large_products_split_across_threads(shape):
    *batch, m, k, n = shape
    rng = np.random.default_rng(1)
    a = rng.standard_normal((*batch, m, k)).astype(np.float32)
    b = rng.standard_normal((*batch, k, n)).astype(np.float32)
    out = np.empty((*batch, m, n), np.float32)
    kernel = numba_gemm.gemm_kernel(a, b, out, threaded=True)
    kernel()
    assert_product(a, b, out)
    tasks = kernel.call.args[0]
    if numba_kernels.threading_layer() and numba_kernels._numba.get_num_threads() > 1:
        assert len(tasks) >= 2        # the work is cut in blocks
    # the blocks cover every output element exactly once
    covered = np.zeros(out.shape, np.int64).reshape(-1)
    flat = out.reshape(-1)
    for rows, cols, _, _, c_off, first_row, first_col in tasks:
        start = c_off // out.itemsize
        for r in range(rows):
            covered[start + r * n:start + r * n + cols] += 1
        # the block's first row among the stacked rows and its first column
        assert start == first_row * n + first_col
    assert covered.sum() == flat.size and covered.min() == 1


def test_column_block_operands_read_in_place():
    rng = np.random.default_rng(2)
    big_a = rng.standard_normal((40, 90)).astype(np.float32)
    big_b = rng.standard_normal((90, 120)).astype(np.float32)
    a, b = big_a[:, 10:60], big_b[10:60, 7:100]        # leading dimensions 90 and 120
    assert_product(a, b, product(a, b))
    out_big = np.zeros((40, 130), np.float32)
    out = out_big[:, 5:98]
    numba_gemm.gemm_kernel(a, b, out, threaded=True)()
    assert_product(a, b, out)
    assert not out_big[:, :5].any() and not out_big[:, 98:].any()   # nothing beside it


@pytest.mark.parametrize("a, b, why", [
    (np.ones((4, 3), np.int64), np.ones((3, 2), np.int64), "integers"),
    (np.ones((4, 3), np.complex64), np.ones((3, 2), np.complex64), "complex"),
    (np.ones(3, np.float32), np.ones((3, 2), np.float32), "a vector"),
    (np.ones((4, 3), np.float32), np.ones((3, 2), np.float64), "mixed dtypes"),
    (np.ones((4, 6), np.float32)[:, ::2], np.ones((3, 2), np.float32), "no contiguous axis"),
    (np.ones((4, 0), np.float32), np.ones((0, 2), np.float32), "K = 0"),
])
def test_cases_left_to_numpy(a, b, why):
    out = np.empty(np.matmul(a, b).shape, np.result_type(a, b))
    assert numba_gemm.gemm_kernel(a, b, out, threaded=True) is None, why


@pytest.mark.parametrize("a, b", [(np.ones((1, 3), np.float32), np.ones((3, 2), np.float32)),
                                  (np.ones((4, 3), np.float32), np.ones((3, 1), np.float32))])
def test_matrix_vector_products_go_to_blas_gemv_or_to_onednn(a, b):
    """BLAS's GEMV (NumPy's call), but on oneDNN's sgemm where its convolutions run
    (graphc.engine.onednn_gemv: one thread pool during a run)."""
    from graphc.engine import onednn_conv
    out = np.empty(np.matmul(a, b).shape, np.float32)
    kernel = numba_gemm.gemm_kernel(a, b, out, threaded=True)
    assert (kernel is None) == (onednn_conv.wanted() != "" or not onednn_conv.in_use())
    if kernel is not None:
        kernel()
        assert_product(a, b, out)


def test_unthreaded_programs_keep_numpy():
    """A parallel schedule's steps share BLAS's threads (blas_threads): no team GEMM."""
    a, b = np.ones((64, 64), np.float32), np.ones((64, 64), np.float32)
    assert numba_gemm.gemm_kernel(a, b, np.empty((64, 64), np.float32), threaded=False) is None


def _matmul_kernels(graph):
    exe = getattr(graph, "executable", graph)
    kernels = [getattr(k, "kernel", k) for s, k in zip(exe.liveness.steps, exe.program.kernels)
               if s.op.kind in ("matmul", "fused_matmul")]   # a GEMM, or one with its epilogue
    return [getattr(k, "gemm", k) for k in kernels]   # an epilogue run apart: its GEMM


@pytest.mark.parametrize("trans", [False, True])
def test_graph_matmul_runs_on_the_team_and_equals_numpy_engine(trans):
    x = N.var("x", (2, 50, 64))
    w = N.var("w", (48, 64) if trans else (64, 48))
    y = N.tanh(x @ (N.transpose(w) if trans else w))
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((2, 50, 64)).astype(np.float32),
             "w": rng.standard_normal(w.shape).astype(np.float32)}
    generated = graphc.compile([x, w], [y], kernels="generated")
    reference = graphc.compile([x, w], [y], kernels="numpy")
    assert any(isinstance(k, numba_gemm._Gemm) for k in _matmul_kernels(generated))
    for _ in range(2):     # a second run reuses the bound kernel
        (got,), (want,) = generated.run(**feeds), reference.run(**feeds)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_parallel_schedule_keeps_numpy_matmul():
    x, w = N.var("x", (64, 64)), N.var("w", (64, 64))
    g = graphc.compile([x, w], [x @ w, w @ x], kernels="generated", schedule="parallel",
                       workers=2)
    assert not any(isinstance(k, numba_gemm._Gemm) for k in _matmul_kernels(g))


@pytest.mark.parametrize("kind, shapes", [
    ("conv2d", ((2, 32, 9, 9), (24, 32, 1, 1))),
    ("conv2d", ((1, 8, 7, 7), (16, 8, 3, 3))),
])
def test_convolution_decomposition_with_generated_steps(kind, shapes):
    x_shape, w_shape = shapes
    pad = w_shape[-1] // 2
    op = N.conv2d(N.var("x", x_shape), N.var("w", w_shape), padding=pad).op
    rng = np.random.default_rng(4)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    out_shape = (x_shape[0], w_shape[0]) + x_shape[2:]
    got, want = np.empty(out_shape, np.float32), np.empty(out_shape, np.float32)
    generated_decomposed(op, [x, w], got, None, True)()
    decomposed_kernel(op, [x, w], want, None)()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_wait_policy_follows_the_gemm_pool():
    policy = numba_kernels.wait_policy()
    assert policy["OMP_WAIT_POLICY"] == "ACTIVE"       # this module runs only with the team GEMM
    assert int(policy["GOMP_SPINCOUNT"]) == numba_kernels.SPIN_COUNT


def test_a_users_wait_policy_is_kept():
    code = ("import os; from graphc.engine import numba_kernels as k; k.available(); "
            "print(os.environ['OMP_WAIT_POLICY'], os.environ.get('GOMP_SPINCOUNT'))")
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    env.pop("GOMP_SPINCOUNT", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["PASSIVE", "None"]


def test_a_decomposition_without_generated_steps_is_left_to_numpy():
    op = N.conv2d(N.var("x", (1, 4, 5, 5), np.float16),
                  N.var("w", (3, 4, 1, 1), np.float16)).op
    x, w = np.ones((1, 4, 5, 5), np.float16), np.ones((3, 4, 1, 1), np.float16)
    assert generated_decomposed(op, [x, w], np.empty((1, 3, 5, 5), np.float16), None,
                                True) is None
