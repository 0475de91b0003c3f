"""Generated elementwise kernels read an input that is constant along the innermost
dimension (a per-channel bias of an NCHW tensor) once per row: the source hoists it,
and the results are the NumPy engine's, bit for bit."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import graphc
import graphc.ndarray as N
from graphc.engine import numba_codegen as codegen
from graphc.engine import numba_kernels
from graphc.type import Op

needs_numba = pytest.mark.skipif(numba_kernels.available() is not None,
                                 reason="Numba is not installed")


def test_the_row_input_is_read_outside_the_inner_loop():
    source = codegen.kernel_source(Op.make("add"), ["float32", "float32"], "float32", 3,
                                   (), (1,))
    serial = source.split("def serial")[1].split("def parallel")[0]
    inner = serial.index("for i2 in range(n2):")
    assert serial.index("a1 = x1[i0, i1, 0]") < inner
    assert "a0 = x0[i0, i1, i2]" in serial[inner:]
    assert "x1[i0, i1, i2]" not in serial


def test_rank_one_and_scalars_have_no_rows():
    # a rank-1 kernel has no outer loop to hoist into; a single element is read once
    plain = codegen.kernel_source(Op.make("add"), ["float32"] * 2, "float32", 1, (1,), ())
    assert codegen.kernel_source(Op.make("add"), ["float32"] * 2, "float32", 1, (1,),
                                 (1,)) == plain


@needs_numba
@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 3), c=st.integers(2, 9), h=st.integers(1, 7), w=st.integers(2, 19),
       dtype=st.sampled_from(["float32", "float64", "int32"]))
def test_bias_and_clip_match_the_numpy_engine(n, c, h, w, dtype):
    rng = np.random.default_rng(n * 100 + c * 10 + h)
    x = (rng.normal(0, 4, (n, c, h, w)) * 3).astype(dtype)
    b = (rng.normal(0, 4, (1, c, 1, 1)) * 3).astype(dtype)
    r = (rng.normal(0, 4, (n, 1, h, 1)) * 3).astype(dtype)      # constant along w too
    vx, vb, vr = (N.var(k, a.shape, dtype) for k, a in (("x", x), ("b", b), ("r", r)))
    y = N.minimum(N.maximum(vx + vb, 0), 6) * vr - vb
    feeds = {"x": x, "b": b, "r": r}
    exe = graphc.compile([vx, vb, vr], [y], kernels="generated")
    assert exe.stats()["generated_steps"] >= 1
    got = exe.run(**feeds)
    want = graphc.compile([vx, vb, vr], [y], kernels="numpy").run(**feeds)
    np.testing.assert_array_equal(got, want)
