"""A stack of matrices times one matrix runs as one GEMM over all the rows (a view
of the stack), and falls back to NumPy's per-matrix loop where that view would
need a copy; the results are NumPy's either way."""
import numpy as np
import pytest

import graphc
import graphc.ndarray as N
from graphc.engine.cpu_kernels import _rows_view, matmul
from graphc.type import Op


def test_rows_view_is_a_view_or_nothing():
    a = np.arange(24.0).reshape(2, 3, 4)
    rows = _rows_view(a)
    assert rows.shape == (6, 4) and np.shares_memory(rows, a)
    assert _rows_view(a.transpose(1, 0, 2)) is None      # would need a copy
    assert _rows_view(np.empty((1, 0, 0))).shape == (0, 0)


@pytest.mark.parametrize("shape", [(1, 7, 5), (2, 3, 7, 5), (3, 1, 5), (4, 0, 5)])
def test_stacked_times_matrix_equals_numpy(shape):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(shape), rng.standard_normal((5, 6))
    out = np.empty(shape[:-1] + (6,))
    matmul(Op.make("matmul"), [a, b], out, None)()
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-12, atol=1e-12)


def test_the_kernel_reads_the_stack_at_run_time_not_a_copy_from_build_time():
    a, b = np.ones((2, 3, 4)), np.ones((4, 2))
    out = np.empty((2, 3, 2))
    kernel = matmul(Op.make("matmul"), [a, b], out, None)
    a[...] = 2.0
    kernel()
    np.testing.assert_array_equal(out, np.full((2, 3, 2), 8.0))


@pytest.mark.parametrize("kernels", ["numpy", "generated"])
def test_a_transposed_stack_in_a_graph_falls_back_and_agrees(kernels):
    x = N.var("x", (3, 4, 5))
    w = N.var("w", (4, 6))
    out = N.matmul(N.transpose(x, (0, 2, 1)), w)       # a strided view: NumPy's loop
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((3, 4, 5)).astype(np.float32)
    wv = rng.standard_normal((4, 6)).astype(np.float32)
    got = graphc.compile([x, w], [out], kernels=kernels).run(x=xv, w=wv)[0]
    np.testing.assert_allclose(got, np.matmul(xv.transpose(0, 2, 1), wv), rtol=1e-5, atol=1e-5)
