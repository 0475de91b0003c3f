"""The separable max pooling (graphc/engine/numba_pool.py), the generated kernel of
``max_pool2d`` (two flat passes with stride 1, columns then windows with a stride): the
NumPy kernel's values and NaN windows, and the row kernel's bits (numba_window) where
no window ties +0 with -0 (which zero such a tie keeps, NumPy's own vector and scalar
maximum loops do not agree on either), on drawn geometries, threaded and not."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import graphc
import graphc.ndarray as N
from graphc.engine import numba_kernels, window_builders

pytestmark = pytest.mark.skipif(numba_kernels.available() is not None,
                                reason="Numba is not installed")


def _values(rng, shape, dtype, zero=0.0):
    """Normal values with NaN, -inf and many ties (of ``zero`` and of 1)."""
    x = rng.standard_normal(shape)
    u = rng.random(shape)
    x[u < 0.03] = np.nan
    x[(u >= 0.03) & (u < 0.3)] = zero
    x[(u >= 0.3) & (u < 0.35)] = -np.inf
    x[(u >= 0.35) & (u < 0.5)] = 1.0                                     # more ties
    return x.astype(dtype)


def _row_kernel(y, x):
    """``y`` (a max_pool2d node) of ``x`` by numba_window's row-by-row kernel."""
    out = np.empty(y.shape, x.dtype)
    window_builders.window_kernel(y.op, [x], out, threaded=False)()
    return out


def _same_bits(got, want):
    """Equal bits, signed zeros included; any NaN for a NaN."""
    return ((got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}"))
            | (np.isnan(got) & np.isnan(want))).all()


def _kernel_names(exe):
    return {getattr(getattr(k, "func", None), "py_func", None).__name__
            for k in exe.program.kernels
            if hasattr(getattr(k, "func", None), "py_func")}


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 5), h=st.integers(1, 16), w=st.integers(1, 16),
       kh=st.integers(1, 5), kw=st.integers(1, 5), top=st.integers(0, 2),
       left=st.integers(0, 2), stride=st.sampled_from([(1, 1), (2, 2), (2, 1), (3, 2)]),
       ceil_mode=st.booleans(), dtype=st.sampled_from(["float32", "float64"]),
       seed=st.integers(0, 2 ** 16))
def test_max_pooling_is_the_numpy_kernel_s_bits(n, c, h, w, kh, kw, top, left, stride,
                                                ceil_mode, dtype, seed):
    top, left = min(top, kh - 1), min(left, kw - 1)     # padding smaller than the window
    if h + 2 * top < kh or w + 2 * left < kw:
        return
    v = N.var("x", (n, c, h, w), dtype)
    y = N.max_pool2d(v, (kh, kw), stride=stride, padding=(top, left), ceil_mode=ceil_mode)
    generated = graphc.compile([v], y, kernels="generated")
    numpy_kernels = graphc.compile([v], y, kernels="numpy")
    assert "max_pool2d_planes" in _kernel_names(generated)
    for zero in (0.0, -0.0):       # ties of one zero: the same bits as the row kernel
        x = _values(np.random.default_rng(seed), (n, c, h, w), dtype, zero)
        got = generated.run(x=x)
        assert _same_bits(got, _row_kernel(y, x))
        np.testing.assert_array_equal(got, numpy_kernels.run(x=x))
    x = _values(np.random.default_rng(seed), (n, c, h, w), dtype)
    x[np.random.default_rng(seed + 1).random(x.shape) < 0.2] = -0.0     # +0 ties -0
    np.testing.assert_array_equal(generated.run(x=x), numpy_kernels.run(x=x))


@pytest.mark.parametrize("schedule", ["serial", "parallel"])
def test_large_pools_are_threaded_and_agree(schedule):
    x = _values(np.random.default_rng(4), (2, 96, 28, 28), np.float32)
    v = N.var("x", x.shape, np.float32)
    y = N.max_pool2d(v, 3, stride=1, padding=1)
    got = graphc.compile([v], y * 2.0, kernels="generated", schedule=schedule,
                         workers=2).run(x=x)
    want = graphc.compile([v], y * 2.0, kernels="numpy").run(x=x)
    np.testing.assert_array_equal(got, want)
    assert _same_bits(got, _row_kernel(y, x) * np.float32(2.0))
    assert np.isnan(got).any() and (got == 0).any()


@pytest.mark.parametrize("kernel, stride, padding", [(3, 2, 1), (2, 2, 0), (3, 2, 0)])
def test_a_network_s_strided_pools_are_threaded_and_agree(kernel, stride, padding):
    """ResNet's 3x3 stride-2 stem pool, VGG's 2x2 and SqueezeNet's 3x3: threads deal the
    planes, each in a scratch row no cache line of which another thread writes."""
    x = _values(np.random.default_rng(5), (2, 64, 29, 29), np.float32)
    v = N.var("x", x.shape, np.float32)
    y = N.max_pool2d(v, kernel, stride=stride, padding=padding)
    generated = graphc.compile([v], y, kernels="generated")
    assert "max_pool2d_planes" in _kernel_names(generated)
    got = generated.run(x=x)
    np.testing.assert_array_equal(got, graphc.compile([v], y, kernels="numpy").run(x=x))
    assert _same_bits(got, _row_kernel(y, x))


def test_scratch_rows_apart_share_no_cache_line():
    from graphc.engine.conv_builders import CACHE_LINE, scratch_array
    rows = scratch_array(None, 3, 166, np.dtype(np.float32), apart=True)
    assert rows.shape[0] == 3 and rows.shape[1] * 4 >= 166 * 4 + CACHE_LINE
    assert scratch_array(None, 3, 166, np.dtype(np.float32)).shape == (3, 166)
