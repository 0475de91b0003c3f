"""The generated engine's erf and exp (engine/numba_prelude.py): on float32 arithmetic
evaluated in float64 and rounded once (so the loops that call them vectorise), within
one ulp of scipy's float32 erf and of the correctly rounded exp; on float64 the C
library's. And the fused programs they are for (GELU, SiLU, a sigmoid) against the
NumPy engine."""
import math

import numpy as np
import pytest
import scipy.special
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import graphc
import graphc.ndarray as N
from graphc.engine import numba_kernels
from graphc.type import Op

pytestmark = pytest.mark.skipif(numba_kernels.available() is not None,
                                reason="Numba is not installed")

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-38, 1e-30, -1e-8, 0.5,
           -0.5, 1.0, 2.0, 3.9, -3.9, 3.99999, 4.0, -4.0, 4.00001, 5.0, 1e30, -1e30]


def _generated(kind, x):
    out = np.empty_like(x)
    kernel = numba_kernels.generated_kernel(Op.make(kind), [x], out, parallel=False)
    assert kernel is not None
    with np.errstate(all="ignore"):
        kernel()
    return out


def _generated_erf(x):
    return _generated("erf", x)


def _rounded_exp(x):
    """exp of float32 ``x`` computed in float64 and rounded once: the correctly rounded
    float32 exp but for rare double-rounding ties."""
    with np.errstate(all="ignore"):
        return np.exp(x.astype(np.float64)).astype(np.float32)


def _ulps(got, want):
    """Units in the last place between two float32 arrays (NaN against NaN: 0)."""
    a, b = got.view(np.int32).astype(np.int64), want.view(np.int32).astype(np.int64)
    a = np.where(a < 0, -(a & 0x7FFFFFFF), a)      # sign-magnitude -> a monotone line
    b = np.where(b < 0, -(b & 0x7FFFFFFF), b)
    return np.where(np.isnan(got) & np.isnan(want), 0, np.abs(a - b))


def test_float32_special_values():
    x = np.array(SPECIAL, np.float32)
    got, want = _generated_erf(x), scipy.special.erf(x)
    assert got.dtype == np.float32
    assert _ulps(got, want).max() <= 1, (x, got, want)
    # the exact ones: NaN stays NaN, erf(+-inf) = +-1, erf(-0) = -0, beyond 4: +-1
    assert np.isnan(got[0]) and got[1] == 1 and got[2] == -1
    assert got[4] == 0 and np.signbit(got[4]) and not np.signbit(got[3])
    assert np.all(np.abs(got[x.__abs__() >= 4]) == 1)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=60),
                  elements=st.floats(-8, 8, width=32)))
def test_float32_within_one_ulp_of_scipy(x):
    assert _ulps(_generated_erf(x), scipy.special.erf(x)).max() <= 1


def test_float32_dense_sweep_of_the_fitted_range():
    # every 97th float32 from 0 to 6 (the fit's whole range and past its clamp), odd
    # symmetry included
    bits = np.arange(0, np.float32(6).view(np.int32), 97, dtype=np.int32)
    x = bits.view(np.float32)
    x = np.concatenate([x, -x])
    assert _ulps(_generated_erf(x), scipy.special.erf(x)).max() <= 1


def test_float64_is_the_c_library_s():
    x = np.array([v for v in SPECIAL if not math.isnan(v)] + [0.3, -2.2], np.float64)
    got = _generated_erf(x)
    np.testing.assert_array_equal(got, np.array([math.erf(v) for v in x]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_matches_the_numpy_engine(dtype):
    x = np.random.default_rng(1).normal(0, 3, (7, 197, 33)).astype(dtype)
    v = N.var("x", x.shape, dtype)
    gelu = v * 0.5 * (1.0 + N.erf(v / math.sqrt(2.0)))
    exe = graphc.compile([v], [gelu], kernels="generated")
    # one fused program; float64 erf is the C library's, element by element, so that
    # program keeps NumPy's vectorised loops (strategy.generated_wanted)
    assert exe.stats()["generated_steps"] == (dtype == "float32")
    got = exe.run(x=x)
    want = graphc.compile([v], [gelu], kernels="numpy").run(x=x)
    # 1 + erf(x) cancels for negative x: an ulp of erf there is eps * |x| / 2 of the
    # result, so the bound is absolute, on the scale of the inputs
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == "float32" else 1e-13,
                               atol=2 * eps * np.abs(x).max())


EXP_SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1.0, -1.0, 88.72, 88.7228,
               88.73, 89.0, 1e30, -87.3, -87.34, -100.0, -103.9, -103.98, -104.0, -110.0,
               -1e30, 0.34657359, -0.34657359, 0.5 * np.log(2.0)]


def test_exp_float32_special_values():
    x = np.array(EXP_SPECIAL, np.float32)
    got = _generated("exp", x)
    assert got.dtype == np.float32
    assert _ulps(got, _rounded_exp(x)).max() <= 1, (x, got)
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == 0 and got[3] == got[4] == 1
    assert np.all(got[x > 89] == np.inf) and np.all(got[x < -104] == 0)   # over, underflow
    assert 0 < got[x == np.float32(-103.9)][0] < np.finfo(np.float32).tiny   # subnormal


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=60),
                  elements=st.floats(-120, 100, width=32)))
def test_exp_float32_within_one_ulp_of_the_rounded_exp(x):
    assert _ulps(_generated("exp", x), _rounded_exp(x)).max() <= 1


def test_exp_float32_dense_sweep():
    # every 211th float32 from 0 to 95 and to -110 (overflow, the subnormals, underflow)
    up = np.arange(0, np.float32(95).view(np.int32), 211, dtype=np.int32).view(np.float32)
    down = -np.arange(0, np.float32(110).view(np.int32), 211,
                      dtype=np.int32).view(np.float32)
    x = np.concatenate([up, down])
    assert _ulps(_generated("exp", x), _rounded_exp(x)).max() <= 1


def test_exp_of_nonpositive_values_gives_the_general_exp_s_bits():
    """``graphc_exp_nonpositive_f32`` (a softmax's shifted values) against
    ``graphc_exp_f32`` on every 97th float32 from -0 to -110 and the special values:
    the same bits, NaN where it is NaN."""
    from numba import njit

    from graphc.engine.numba_prelude import graphc_exp_f32, graphc_exp_nonpositive_f32

    @njit
    def both(x, general, nonpositive):
        for i in range(x.size):
            general[i] = graphc_exp_f32(x[i])
            nonpositive[i] = graphc_exp_nonpositive_f32(x[i])
    down = -np.arange(0, np.float32(110).view(np.int32), 97, dtype=np.int32).view(np.float32)
    special = np.array([v for v in EXP_SPECIAL if not v > 0], np.float32)
    x = np.concatenate([down, special])
    general, nonpositive = np.empty_like(x), np.empty_like(x)
    both(x, general, nonpositive)
    assert np.array_equal(np.isnan(general), np.isnan(x))
    np.testing.assert_array_equal(nonpositive.view(np.int32)[~np.isnan(x)],
                                  general.view(np.int32)[~np.isnan(x)])
    assert np.isnan(nonpositive[np.isnan(x)]).all()
    assert _ulps(general, _rounded_exp(x)).max() <= 1


def test_exp_float64_is_the_c_library_s():
    x = np.array([v for v in EXP_SPECIAL if not math.isnan(v)] + [700.0, -740.0, 0.3],
                 np.float64)
    with np.errstate(all="ignore"):
        want = np.array([math.exp(v) if v < 709.8 else np.inf for v in x])
    np.testing.assert_array_equal(_generated("exp", x), want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_silu_and_softmax_match_the_numpy_engine(dtype):
    x = np.random.default_rng(2).normal(0, 6, (3, 96, 40)).astype(dtype)
    v = N.var("x", x.shape, dtype)
    silu = v * N.sigmoid(v)
    shifted = v - N.max(v, axis=-1, keepdims=True)
    softmax = N.exp(shifted) / N.sum(N.exp(shifted), axis=-1, keepdims=True)
    exe = graphc.compile([v], [silu, softmax], kernels="generated")
    # float64's exp is the C library's, element by element: those stay on NumPy
    assert (exe.stats()["generated_steps"] >= 1) == (dtype == "float32")
    got = exe.run(x=x)
    want = graphc.compile([v], [silu, softmax], kernels="numpy").run(x=x)
    rtol = 4e-6 if dtype == "float32" else 1e-13
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=np.finfo(dtype).tiny)


def test_maxnum_ignores_nan_and_reduces_as_fmax():
    # graphc_maxnum is C's fmax (LLVM maxnum): the other operand where one is NaN, so a
    # reduction with it vectorises; the softmax kernel's row shift relies on that
    row_max = _row_max()
    rng = np.random.default_rng(4)
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal(1000).astype(dtype)
        assert row_max(x) == x.max()
        x[[0, 17, 999]] = np.nan
        assert row_max(x) == np.nanmax(x)
        assert row_max(np.full(5, np.nan, dtype)) == -np.inf    # nothing but NaN: the start
        assert row_max(np.array([-np.inf, 2.0, np.inf], dtype)) == np.inf


_ROW_MAX = []


def _row_max():
    """A jitted row maximum through graphc_maxnum, made once and kept for the process
    (a dispatcher dropped after a test leaves dead weak proxies in Numba's caches)."""
    if not _ROW_MAX:
        from numba import njit

        from graphc.engine.numba_prelude import graphc_maxnum

        @njit
        def row_max(x):
            m = x.dtype.type(-np.inf)
            for j in range(x.shape[0]):
                m = graphc_maxnum(m, x[j])
            return m
        _ROW_MAX.append(row_max)
    return _ROW_MAX[0]
