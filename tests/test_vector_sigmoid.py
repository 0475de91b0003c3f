"""The generated engine's sigmoid (NumPy's vectorised exp, engine/vector_sigmoid.py)
against scipy.special.expit, the reference the NumPy engine keeps bit for bit."""
import numpy as np
import pytest
import scipy.special
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import graphc
import graphc.ndarray as N
from graphc.engine.vector_sigmoid import CHUNK, vector_sigmoid

ULPS = 8
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 20.0, -20.0, 88.0, -88.0,
           -100.0, -104.0, -750.0, 750.0, 1e-300, -1e-300]


def _within_ulps(x, got):
    """``got`` (the sigmoid of ``x``) within ``ULPS`` of ``expit``'s value, or, below
    the smallest normal number (where ``expit`` of float32 flushes 1 / (1 + inf) to
    0, and this gives the subnormal it should), within that number of the exact
    value (``expit`` in long double)."""
    want = scipy.special.expit(x)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    err = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).astype(want.dtype))
    tiny = np.finfo(got.dtype).tiny
    exact = scipy.special.expit(x.astype(np.longdouble))
    subnormal = (np.abs(want) < tiny) & (np.abs(got - exact) <= tiny)
    return same | (err <= ULPS) | subnormal


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_special_values_are_expit_s(dtype):
    with np.errstate(over="ignore", under="ignore"):
        x = np.array(SPECIAL, dtype)
    out = np.empty_like(x)
    vector_sigmoid(x, out)()
    assert np.all(_within_ulps(x, out)), (x, out)
    for v, o in zip(x, out):       # NaN stays NaN, the infinities give exactly 0 and 1
        if np.isnan(v) or np.isinf(v) or v == 0:
            np.testing.assert_array_equal(o, scipy.special.expit(v))


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(st.sampled_from([np.float32, np.float64]),
                  hnp.array_shapes(min_dims=1, max_dims=3, max_side=70),
                  elements=st.floats(-120, 120, width=32)))
def test_within_a_few_ulps_of_expit(x):
    out = np.empty_like(x)
    vector_sigmoid(x, out)()
    assert np.all(_within_ulps(x, out))


def test_in_place_over_its_input_across_chunks():
    x = np.random.default_rng(0).normal(0, 8, 3 * CHUNK + 5).astype(np.float32)
    given = x.copy()
    vector_sigmoid(x, x)()
    assert np.all(_within_ulps(given, x))


def test_what_it_leaves_to_expit():
    x = np.ones((4, 6))
    assert vector_sigmoid(x[:, ::2], np.empty((4, 3))) is None       # strided
    assert vector_sigmoid(np.ones(4, np.int64), np.empty(4)) is None  # not float


@pytest.mark.parametrize("schedule", ["serial", "parallel"])
def test_silu_graphs_generated_against_the_numpy_engine(schedule):
    x = N.var("x", (6, 32, 40, 40))
    outputs = [x * N.sigmoid(x), N.sigmoid(x * 2.0) + 1.0]
    value = np.random.default_rng(1).normal(0, 4, (6, 32, 40, 40)).astype(np.float32)
    want = graphc.compile([x], outputs, kernels="numpy").run(x=value)
    got = graphc.compile([x], outputs, kernels="generated", schedule=schedule,
                         workers=2).run(x=value)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=ULPS * np.finfo(np.float32).eps, atol=1e-30)
    # the NumPy engine keeps the reference's bits
    np.testing.assert_array_equal(want[1], scipy.special.expit(value * np.float32(2.0)) + 1)
