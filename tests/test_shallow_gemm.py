"""The generated float32 GEMM block for shallow products (graphc.engine.numba_shallow_gemm)
through numba_gemm's plans: every panel width (64, 32, 16, 8 columns and single ones),
tiles of six rows and the rows left over, row- and column-major ``A``, blocks cut by rows
and by columns, stacks. Small integers make every sum exact in float32, so results equal
NumPy's bit for bit whatever the order; random floats are checked against float64 within
the rounding of a dot product."""
from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from opcheck import examples

from graphc.engine import gemm_libraries, numba_gemm

pytestmark = pytest.mark.skipif(
    numba_gemm.unavailable() is not None or not gemm_libraries.shallow_wanted(),
    reason="no team GEMM here, or GRAPHC_GEMM names a library for every block")


def _product(a, b):
    out = np.full(np.matmul(a, b).shape, np.nan, np.float32)
    kernel = numba_gemm.gemm_kernel(a, b, out, threaded=True)   # small ones: one thread
    assert kernel is not None
    kernel()
    return out


@examples(40)
@given(st.integers(2, 70), st.integers(1, 40), st.integers(2, 150), st.booleans(),
       st.integers(0, 2**16))
def test_integer_products_equal_numpy(m, k, n, a_transposed, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (k, m) if a_transposed else (m, k)).astype(np.float32)
    a = a.T if a_transposed else a
    b = rng.integers(-3, 4, (k, n)).astype(np.float32)
    a_before = a.copy()
    assert np.array_equal(_product(a, b), a @ b)
    assert np.array_equal(a, a_before)


@pytest.mark.parametrize("m,k,n", [(12544, 8, 24), (3136, 48, 16), (199, 256, 72),
                                   (49, 96, 576), (601, 27, 3)])
def test_float_products_within_a_dot_products_rounding(m, k, n):
    rng = np.random.default_rng(m)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    bound = k * np.finfo(np.float32).eps * (np.abs(a) @ np.abs(b)) + 1e-30
    assert (np.abs(_product(a, b) - want) <= bound).all()


def test_stacks_and_column_blocks():
    """A stack of products, and a wide one cut by columns (each block's ``B`` and ``C``
    start part-way along a row)."""
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, (3, 40, 20)).astype(np.float32)
    b = rng.integers(-3, 4, (3, 20, 90)).astype(np.float32)
    assert np.array_equal(_product(a, b), a @ b)
    wide_a = rng.integers(-3, 4, (20, 30)).astype(np.float32)
    wide_b = rng.integers(-3, 4, (30, 3000)).astype(np.float32)
    split, args = numba_gemm._plan(wide_a, wide_b, np.empty((20, 3000), np.float32), True)
    assert (args[0][:, 6] > 0).any()            # some blocks start at a later column
    assert np.array_equal(_product(wide_a, wide_b), wide_a @ wide_b)


def test_deep_or_transposed_b_products_keep_the_library():
    from graphc.engine.numba_shallow_gemm import SHALLOW_DEPTH
    source = "\n".join(gemm_libraries.block_call("float32"))
    assert f"if tb == {gemm_libraries.NO_TRANS} and k <= {SHALLOW_DEPTH}:" in source
    rng = np.random.default_rng(2)
    a = rng.integers(-3, 4, (64, SHALLOW_DEPTH + 8)).astype(np.float32)
    b = rng.integers(-3, 4, (48, SHALLOW_DEPTH + 8)).astype(np.float32).T
    assert np.array_equal(_product(a, b), a @ b)
