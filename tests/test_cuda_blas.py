"""graphc's own cuBLAS calls (graphc/engine/cuda_blas.py), proved on the CPU: every
product ``gemm_plan`` accepts, run the way cuBLAS reads column-major memory
(``emulate``), equals NumPy's ``matmul``; what it cannot express is refused."""
import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from graphc.engine.cuda_blas import OP_N, OP_T, emulate, gemm_plan


def _place(memory, offset, shape, dtype, transposed):
    """An array of ``shape`` inside ``memory`` (row-major, or a transposed view of a
    row-major array of the reversed last two axes), starting ``offset`` bytes in."""
    stored = shape[:-2] + (shape[-1], shape[-2]) if transposed else shape
    size = int(np.prod(stored)) * np.dtype(dtype).itemsize
    array = memory[offset:offset + size].view(dtype).reshape(stored)
    return (array.swapaxes(-1, -2) if transposed else array), offset + size + 64


@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 6), st.sampled_from([0, 1, 3]),
       st.booleans(), st.booleans(), st.sampled_from(["float32", "float64"]),
       st.sampled_from(["both", "a", "b"]), st.integers(0, 2**32 - 1))
def test_planned_products_equal_numpy(m, k, n, stack, trans_a, trans_b, dtype, stacked, seed):
    rng = np.random.default_rng(seed)
    memory = np.zeros(1 << 16, np.uint8)
    batch = (stack,) if stack else ()
    a, offset = _place(memory, 0, (batch if stacked in ("both", "a") else ()) + (m, k), dtype,
                       trans_a)
    b, offset = _place(memory, offset, (batch if stacked in ("both", "b") else ()) + (k, n),
                       dtype, trans_b)
    out, _ = _place(memory, offset, (batch if stack else ()) + (m, n), dtype, False)
    a[...] = rng.standard_normal(a.shape)
    b[...] = rng.standard_normal(b.shape)
    out[...] = np.nan                       # every element must be written
    plan = gemm_plan(a, b, out)
    note(repr(plan))
    if stack == 0 and (a.ndim == 3 or b.ndim == 3):
        assert plan is None                 # a stack of 0 matrices: nothing to call
        return
    assert plan is not None
    emulate(plan, memory, dtype)
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-5 if dtype == "float32" else 1e-12)


def test_what_one_call_cannot_express_is_refused():
    x = np.ones((4, 6), np.float32)
    assert gemm_plan(x[:, ::2], np.ones((3, 2), np.float32), np.empty((4, 2), np.float32)) \
        is None                                       # no unit stride in the left operand
    assert gemm_plan(np.ones((2, 3), np.int32), np.ones((3, 2), np.int32),
                     np.empty((2, 2), np.int32)) is None            # no integer GEMM
    wide = np.broadcast_to(np.ones(3, np.float32), (4, 3))          # rows overlap
    assert gemm_plan(wide, np.ones((3, 2), np.float32), np.empty((4, 2), np.float32)) is None
    assert gemm_plan(np.ones((2, 3, 4), np.float32), np.ones((2, 4, 5), np.float32),
                     np.empty((3, 5), np.float32)) is None          # mismatched ranks
    assert gemm_plan(np.ones((3, 0), np.float32), np.ones((0, 2), np.float32),
                     np.empty((3, 2), np.float32)) is None          # K = 0: out is zeros
    assert gemm_plan(np.ones((3, 4), np.float32), np.ones((4, 2), np.float32),
                     np.empty((3, 2), np.float32)) is not None


@pytest.mark.parametrize("transposed", [False, True])
def test_one_row_and_one_column_operands(transposed):
    memory = np.zeros(4096, np.uint8)
    a, offset = _place(memory, 0, (1, 5), "float64", transposed)
    b, offset = _place(memory, offset, (5, 1), "float64", transposed)
    out, _ = _place(memory, offset, (1, 1), "float64", False)
    a[...], b[...] = np.arange(5.0), np.arange(5.0)[:, None]
    emulate(gemm_plan(a, b, out), memory, "float64")
    assert out[0, 0] == 30.0
