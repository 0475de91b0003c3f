"""Creation functions match NumPy in graph mode (both memory plans) and eager mode:
zeros, ones, full and their ``_like`` forms (float32 by default), arange; random
draws (shape, dtype, range and statistics with a fixed seed, reproducible with the
same seed, fresh on every run); ``delay``."""
import itertools

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

import graphc
import graphc.eager as E
import graphc.ndarray as N
from opcheck import (ALL_DTYPES, PLANS, arrays, check_op, check_values, dtypes, examples,
                     shapes)

DTYPE_OR_NONE = st.sampled_from([None] + list(ALL_DTYPES))


@given(shape=shapes(), dtype=DTYPE_OR_NONE)
def test_zeros_and_ones_match_numpy_with_float32_default(shape, dtype):
    for name in ("zeros", "ones"):
        expected = getattr(np, name)(shape, dtype=dtype or np.float32)
        check_values(lambda M: getattr(M, name)(shape, dtype=dtype), expected)


@given(shape=shapes(), fill=st.one_of(st.integers(-5, 5), st.floats(-5, 5), st.booleans()),
       dtype=DTYPE_OR_NONE)
def test_full_matches_numpy(shape, fill, dtype):
    """Without a dtype: float32 for a float fill (not float64), as NumPy otherwise."""
    default = np.float32 if isinstance(fill, float) else None
    expected = np.full(shape, fill, dtype=dtype or default)
    check_values(lambda M: M.full(shape, fill, dtype=dtype), expected)


@given(data=st.data(), dtype=dtypes(), shape=shapes(), new_dtype=DTYPE_OR_NONE,
       fill=st.integers(-3, 3))
def test_like_functions_match_numpy(data, dtype, shape, new_dtype, fill):
    x = data.draw(arrays(dtype, shape))
    check_op(lambda M, a: M.zeros_like(a, dtype=new_dtype),
             lambda a: np.zeros_like(a, dtype=new_dtype), x)
    check_op(lambda M, a: M.ones_like(a, dtype=new_dtype),
             lambda a: np.ones_like(a, dtype=new_dtype), x)
    check_op(lambda M, a: M.full_like(a, fill, dtype=new_dtype),
             lambda a: np.full_like(a, fill, dtype=new_dtype), x)


@given(start=st.integers(-10, 10), stop=st.one_of(st.none(), st.integers(-10, 10)),
       step=st.integers(1, 4).flatmap(lambda s: st.sampled_from([s, -s])),
       dtype=st.sampled_from([None, np.int32, np.int64, np.float32, np.float64]),
       as_float=st.booleans())
def test_arange_matches_numpy(start, stop, step, dtype, as_float):
    if as_float:
        start, step = start / 2, step / 2
    expected = np.arange(start, stop, step, dtype=dtype) if stop is not None else \
        np.arange(start, step=step, dtype=dtype)
    if stop is None:
        check_values(lambda M: M.arange(start, step=step, dtype=dtype), expected)
    else:
        check_values(lambda M: M.arange(start, stop, step, dtype=dtype), expected)


def test_creation_refuses_bad_shapes_and_dtypes():
    with pytest.raises(graphc.ShapeError, match="negative"):
        N.zeros((2, -1))
    with pytest.raises(graphc.DTypeError):
        N.ones((2,), dtype=object)
    with pytest.raises(graphc.DTypeError):
        N.full((2,), 1, dtype="U3")


@given(data=st.data(), dtype=dtypes(np.float32, np.float64), shape=shapes())
def test_created_values_combine_without_promotion(data, dtype, shape):
    """float32 creation functions do not promote a float32 model to float64."""
    x = data.draw(arrays(dtype, shape))
    check_op(lambda M, a: a + M.ones(a.shape) * M.full(a.shape, 0.5),
             lambda a: a + np.ones(a.shape, np.float32) * np.full(a.shape, 0.5, np.float32), x)


# -- random -----------------------------------------------------------------------------
RANDOM = {
    "uniform": lambda R, size, dtype: R.uniform(-2.0, 3.0, size, dtype=dtype),
    "normal": lambda R, size, dtype: R.normal(1.5, 0.5, size, dtype=dtype),
    "bernoulli": lambda R, size, dtype: R.bernoulli(0.3, size, dtype=dtype),
}


def _compiled_draw(name, size, dtype=None, seed=None, plan="blocks"):
    node = RANDOM[name](N.random, size, dtype)
    return graphc.compile(inputs=[], outputs=node, plan=plan, check=True, seed=seed)


@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize("name", sorted(RANDOM))
@examples(15)
@given(size=shapes(max_dims=3), dtype=st.sampled_from([None, np.float32, np.float64]),
       seed=st.integers(0, 2**32 - 1))
def test_random_shape_dtype_range_and_reproducibility(name, plan, size, dtype, seed):
    g = _compiled_draw(name, size, dtype, seed=seed, plan=plan)
    first = g.run()
    assert first.shape == size and first.dtype == (dtype or np.float32)
    if name == "uniform":
        assert ((first >= -2.0) & (first < 3.0)).all()
    elif name == "bernoulli":
        assert np.isin(first, [0.0, 1.0]).all()
    else:
        assert np.isfinite(first).all()
    second = g.run()
    again = _compiled_draw(name, size, dtype, seed=seed, plan=plan)
    np.testing.assert_array_equal(again.run(), first, strict=True)  # same seed, same draws
    np.testing.assert_array_equal(again.run(), second, strict=True)
    g.seed(seed)  # restarting the generator repeats the sequence
    np.testing.assert_array_equal(g.run(), first, strict=True)


@pytest.mark.parametrize("name", sorted(RANDOM))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_random_draws_differ_between_runs_and_seeds(name, dtype):
    g = _compiled_draw(name, (64,), dtype, seed=1)
    first, second = g.run(), g.run()
    assert not np.array_equal(first, second)
    other = _compiled_draw(name, (64,), dtype, seed=2).run()
    assert not np.array_equal(first, other)


@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_random_statistics_with_a_fixed_seed(plan, dtype):
    n = 20000
    u = _compiled_draw("uniform", (n,), dtype, seed=7, plan=plan).run()
    assert abs(u.mean() - 0.5) < 0.05 and abs(u.var() - 25 / 12) < 0.1
    assert u.min() < -1.9 and u.max() > 2.9
    z = _compiled_draw("normal", (n,), dtype, seed=7, plan=plan).run()
    assert abs(z.mean() - 1.5) < 0.02 and abs(z.std() - 0.5) < 0.02
    b = _compiled_draw("bernoulli", (n,), dtype, seed=7, plan=plan).run()
    assert abs(b.mean() - 0.3) < 0.02


def test_random_draws_in_one_graph_are_independent():
    a, b = N.random.normal(size=(1000,)), N.random.normal(size=(1000,))
    g = graphc.compile(inputs=[], outputs=[a, b, a - b], check=True, seed=3)
    x, y, d = g.run()
    assert not np.array_equal(x, y)
    np.testing.assert_array_equal(d, x - y, strict=True)  # one draw per run, used twice
    assert abs(np.corrcoef(x, y)[0, 1]) < 0.1


@pytest.mark.parametrize("name", sorted(RANDOM))
def test_eager_random_is_seedable(name):
    E.random.seed(11)
    first = RANDOM[name](E.random, (3, 4), None)
    E.random.seed(11)
    again = RANDOM[name](E.random, (3, 4), None)
    assert first.shape == (3, 4) and first.dtype == np.float32
    np.testing.assert_array_equal(first, again, strict=True)
    assert not np.array_equal(first, RANDOM[name](E.random, (3, 4), None))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
@pytest.mark.parametrize("name", sorted(RANDOM))
def test_random_refuses_non_float_dtypes(name, dtype):
    with pytest.raises(graphc.DTypeError, match="float"):
        RANDOM[name](N.random, (2,), dtype)


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_bernoulli_refuses_p_outside_unit_interval(p):
    with pytest.raises(ValueError, match="bernoulli"):
        N.random.bernoulli(p, (2,))


# -- delay -----------------------------------------------------------------------------
@given(data=st.data(), dtype=dtypes(), shape=shapes(min_dims=1))
def test_delay_matches_its_function(data, dtype, shape):
    x = data.draw(arrays(dtype, shape))
    check_op(lambda M, a: M.delay(np.sort, [a], a.shape, a.dtype), np.sort, x)
    check_op(lambda M, a: M.delay(np.cumsum, [a], (a.size,), np.cumsum(np.ones(1, a.dtype))
                                  .dtype), np.cumsum, x)


@given(data=st.data(), shape=shapes(max_dims=2))
def test_delay_with_several_inputs_inside_a_graph(data, shape):
    a = data.draw(arrays(np.float64, shape, specials=False))
    b = data.draw(arrays(np.float64, shape, specials=False))
    check_op(lambda M, x, y: M.exp(M.delay(np.fmax, [x * 2.0, y], x.shape, np.float64)) + 1.0,
             lambda x, y: np.exp(np.fmax(x * 2.0, y)) + 1.0, a, b)


def test_delay_runs_on_every_evaluation():
    counter = itertools.count()

    def tick(x):
        return x + next(counter)
    x = N.var("x", (3,), np.int64)
    g = graphc.compile(inputs=[x], outputs=N.delay(tick, [x], (3,), np.int64), check=True)
    runs = [g.run(x=np.zeros(3, np.int64)) for _ in range(3)]
    assert [r[0] for r in runs] == [0, 1, 2]


def test_delay_that_returns_the_wrong_shape_fails_clearly():
    x = N.var("x", (3,))
    g = graphc.compile(inputs=[x], outputs=N.delay(lambda a: a[:2], [x], (3,), np.float32))
    with pytest.raises(graphc.GraphcError, match="delay.*shape"):
        g.run(x=np.zeros(3, np.float32))


def test_delay_refuses_a_non_callable():
    with pytest.raises(TypeError, match="callable"):
        N.delay(42, [N.var("x", (3,))], (3,))
