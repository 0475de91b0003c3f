"""The float32 channels-last depthwise kernels that hold their taps in vector registers
(graphc.engine.numba_depthwise_vectors, on graphc.engine.numba_vectors): bit for bit
the NumPy kernel's sums and the scalar generated kernel's, over geometries, channel
counts that leave 8-lane and scalar blocks, threads, and special values; and the
vector operations themselves against NumPy's float32 arithmetic."""
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from neural_reference import paddings, ref_padding
from opcheck import examples

from graphc.engine.cpu_kernels import GENERATED_KERNELS, KERNELS
from graphc.engine.numba_kernels import available
from graphc.ops.channels_last import NAME, geometry
from graphc.type import Op

pytestmark = pytest.mark.skipif(available() is not None, reason="Numba is not installed")


@st.composite
def cases(draw):
    kh = kw = draw(st.sampled_from([3, 5]))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    hw = (draw(st.integers(1, 12)), draw(st.integers(1, 12)))
    padding = ref_padding(draw(paddings()), hw, (kh, kw), stride, dilation)
    span = [(kh - 1) * d + 1 for d in dilation]
    if any(h + sum(p) < s for h, p, s in zip(hw, padding, span)):
        hw = tuple(max(h, s) for h, s in zip(hw, span))
    channels = draw(st.sampled_from([1, 5, 8, 13, 16, 24, 40, 57]))
    op = Op.make(NAME, stride=stride, padding=padding, dilation=dilation)
    return op, (draw(st.integers(1, 3)),) + hw + (channels,), (kh, kw, channels)


def _result_shape(op, x_shape, w_shape):
    (sh, sw), ((top, bottom), (left, right)), (dh, dw) = (op["stride"], op["padding"],
                                                          op["dilation"])
    n, h, width, c = x_shape
    kh, kw, _ = w_shape
    return (n, (h + top + bottom - (kh - 1) * dh - 1) // sh + 1,
            (width + left + right - (kw - 1) * dw - 1) // sw + 1, c)


def _run_both(op, x, w, parallel):
    want = np.empty(_result_shape(op, x.shape, w.shape), np.float32)
    got = np.full_like(want, np.nan)
    KERNELS[NAME](op, [x, w], want, None)()
    run = GENERATED_KERNELS[NAME](op, [x, w], got, None, parallel)
    assert run.func.__name__ == "depthwise"        # the vector kernel, not the scalar one
    run()
    return want, got


@examples(60)
@given(cases(), st.integers(0, 2**16), st.booleans())
def test_vector_kernel_gives_the_numpy_kernels_bits(case, seed, parallel):
    op, x_shape, w_shape = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    x_before = x.copy()
    want, got = _run_both(op, x, w, parallel)
    assert got.tobytes() == want.tobytes()
    assert np.array_equal(x, x_before)


@pytest.mark.parametrize("kernel", [3, 5])
def test_vector_kernel_matches_the_scalar_generated_kernel(kernel):
    """Against :mod:`numba_channels_last`'s kernel directly, on a MobileNet-sized layer
    with every block width (16, 8 and scalar channels) and a batch of two."""
    from graphc.engine.numba_channels_last import depthwise_nhwc
    from graphc.engine.numba_depthwise_vectors import kernel as vector_kernel
    pad = kernel // 2
    op = Op.make(NAME, stride=(2, 1), padding=((pad, pad), (pad, pad)), dilation=(1, 1))
    rng = np.random.default_rng(kernel)
    x = rng.standard_normal((2, 15, 14, 16 + 8 + 3)).astype(np.float32)
    w = rng.standard_normal((kernel, kernel, x.shape[3])).astype(np.float32)
    out_shape = _result_shape(op, x.shape, w.shape)
    shape = geometry(op, x.shape, out_shape)
    scalar, vector = np.empty(out_shape, np.float32), np.empty(out_shape, np.float32)
    depthwise_nhwc(x, w, scalar, shape, np.float32(0), 2)
    vector_kernel(kernel, kernel)(x, w, vector, shape, 2)
    assert vector.tobytes() == scalar.tobytes()


def test_special_values_propagate_as_in_the_numpy_kernel():
    op = Op.make(NAME, stride=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 6, 6, 24)).astype(np.float32)
    x[0, 2, 3, :4] = [np.inf, -np.inf, np.nan, 3e38]
    x[0, 0, 0, 5] = 1e-45
    w = rng.standard_normal((3, 3, 24)).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):      # inf * w, inf - inf
        want, got = _run_both(op, x, w, False)
    np.testing.assert_array_equal(got, want)      # NaN where NaN, the rest bit for bit
    assert np.isnan(got[0, 1:4, 2:5, 2]).all() and np.isinf(got[0, 1:4, 2:5, 3]).any()


def test_other_windows_and_float64_keep_the_scalar_kernel():
    from graphc.engine.numba_depthwise_vectors import WINDOWS, kernel
    assert kernel(7, 7) is None and kernel(3, 5) is None and (3, 3) in WINDOWS
    op = Op.make(NAME, stride=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1))
    x, w = np.ones((1, 4, 4, 8)), np.ones((3, 3, 8))
    run = GENERATED_KERNELS[NAME](op, [x, w], np.empty((1, 4, 4, 8)), None, False)
    assert run.func.__name__ == "depthwise_nhwc"


def test_the_generated_source_holds_each_tap_once_per_block():
    from graphc.engine.numba_depthwise_vectors import source
    text = source(3, 3)
    compile(text, "<depthwise 3x3>", "exec")
    assert text.count("w1_1 = load16(w,") == 2       # the interior and the edge functions
    assert "muladd(acc, w2_2, load16(r2, at + 2 * apart))" in text


@given(st.integers(0, 40), st.integers(0, 2**16))
def test_vector_operations_round_as_numpy_float32(offset, seed):
    rng = np.random.default_rng(seed)
    a, b, c = (rng.standard_normal(64).astype(np.float32) * 1e3 for _ in range(3))
    b[offset] = -0.0                   # +0 + (a * -0) is +0, as in NumPy
    out = np.full(64, np.nan, np.float32)
    _muladd_24(a, b, c, out, offset)
    span = slice(offset, offset + 24)
    want = c[span] + a[span] * b[span]
    want[:16] = np.float32(0) + a[offset:offset + 16] * b[offset:offset + 16]
    assert out[span].tobytes() == want.tobytes()
    assert np.isnan(out[:offset]).all() and np.isnan(out[offset + 24:]).all()


def _compiled_muladd_24():
    from numba import njit

    from graphc.engine.numba_vectors import load8, load16, muladd, store8, store16, zero16

    @njit(cache=False)
    def muladd_24(a, b, c, out, i):     # 16 lanes from +0, then 8 lanes from c
        store16(out, i, muladd(zero16(), load16(a, i), load16(b, i)))
        store8(out, i + 16, muladd(load8(c, i + 16), load8(a, i + 16), load8(b, i + 16)))
    return muladd_24


_muladd_24 = _compiled_muladd_24()     # module-level: a jitted closure must outlive the tests
