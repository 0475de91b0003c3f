"""numpy.random.Generator's methods on N.random and E.random (one kind, ``random_draw``):
shape and dtype, the same draws as ``numpy.random.default_rng(seed)`` in eager and graph
mode, fresh draws on every run, the same sequence after ``g.seed``, parameters that are
arrays or graph values, NumPy's refusals while building, and a loose check of mean and
variance on a large sample drawn with a fixed seed."""
import numpy as np
import pytest
import scipy.stats as stats

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.operator.random_functions import RandomArgumentError

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)

#: method -> (positional parameters, (mean, variance) of the distribution or None,
#: whether it draws integers)
CASES = {
    "random": ((), (0.5, 1 / 12), False),
    "standard_normal": ((), (0.0, 1.0), False),
    "standard_exponential": ((), (1.0, 1.0), False),
    "standard_cauchy": ((), None, False),
    "standard_gamma": ((2.5,), (2.5, 2.5), False),
    "exponential": ((2.0,), (2.0, 4.0), False),
    "gamma": ((2.0, 1.5), (3.0, 4.5), False),
    "beta": ((2.0, 3.0), stats.beta(2, 3).stats(), False),
    "laplace": ((1.0, 2.0), (1.0, 8.0), False),
    "logistic": ((1.0, 0.5), stats.logistic(1, 0.5).stats(), False),
    "lognormal": ((0.0, 0.5), stats.lognorm(0.5).stats(), False),
    "gumbel": ((1.0, 2.0), stats.gumbel_r(1, 2).stats(), False),
    "rayleigh": ((2.0,), stats.rayleigh(scale=2).stats(), False),
    "weibull": ((2.0,), stats.weibull_min(2).stats(), False),
    "pareto": ((5.0,), stats.lomax(5).stats(), False),
    "power": ((3.0,), stats.powerlaw(3).stats(), False),
    "chisquare": ((4.0,), (4.0, 8.0), False),
    "noncentral_chisquare": ((4.0, 1.0), (5.0, 12.0), False),
    "f": ((5.0, 10.0), stats.f(5, 10).stats(), False),
    "noncentral_f": ((5.0, 10.0, 1.0), stats.ncf(5, 10, 1).stats(), False),
    "standard_t": ((5.0,), (0.0, 5 / 3), False),
    "triangular": ((0.0, 1.0, 3.0), stats.triang(1 / 3, 0, 3).stats(), False),
    "vonmises": ((0.5, 4.0), stats.vonmises(4, 0.5).stats(), False),
    "wald": ((2.0, 3.0), (2.0, 8 / 3), False),
    "normal": ((1.0, 2.0), (1.0, 4.0), False),
    "uniform": ((-1.0, 3.0), (1.0, 16 / 12), False),
    "poisson": ((3.0,), (3.0, 3.0), True),
    "binomial": ((10, 0.3), (3.0, 2.1), True),
    "negative_binomial": ((5, 0.5), (5.0, 10.0), True),
    "geometric": ((0.25,), (4.0, 12.0), True),
    "hypergeometric": ((10, 5, 6), stats.hypergeom(15, 10, 6).stats(), True),
    "logseries": ((0.5,), stats.logser(0.5).stats(), True),
    "zipf": ((4.0,), stats.zipf(4).stats(), True),
}
SIZE = (3, 4)


def _draw(R, name, size, **kwargs):
    args = CASES[name][0]
    if name in ("normal", "uniform"):   # the first two kinds: their parameters are arrays
        args = tuple(np.full(2, a) for a in args)
    return getattr(R, name)(*args, size=size, **kwargs)


def _numpy(name, seed, size, dtype=None):
    """What numpy's own generator draws: in ``dtype`` where the method takes one."""
    args = CASES[name][0]
    if name in ("normal", "uniform"):
        args = tuple(np.full(2, a) for a in args)
    method = getattr(np.random.default_rng(seed), name)
    if name in ("random", "standard_normal", "standard_exponential", "standard_gamma"):
        return method(*args, size=size, dtype=dtype or F32)
    values = method(*args, size=size)
    return values if CASES[name][2] else values.astype(dtype or F32)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [None, np.float64])
def test_draws_are_numpys_with_the_same_seed_in_both_modes(name, dtype):
    integer = CASES[name][2]
    size = (4, 2) if name in ("normal", "uniform") else SIZE
    kwargs = {} if integer else {"dtype": dtype}
    if integer and dtype is not None:
        pytest.skip("integer draws take no dtype")
    expected = _numpy(name, 5, size, dtype)
    E.random.seed(5)
    eager = _draw(E.random, name, size, **kwargs)
    np.testing.assert_array_equal(eager, expected, strict=True)
    node = _draw(N.random, name, size, **kwargs)
    assert node.shape == size and node.dtype == expected.dtype
    for plan in ("blocks", "offsets"):
        g = graphc.compile(inputs=[], outputs=node, seed=5, plan=plan, check=True)
        first, second = g.run(), g.run()
        np.testing.assert_array_equal(first, expected, strict=True)
        assert not np.array_equal(first, second) or integer
        g.seed(5)
        np.testing.assert_array_equal(g.run(), first, strict=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_statistics_of_a_large_sample_with_a_fixed_seed(name):
    moments = CASES[name][1]
    node = _draw(N.random, name, (100000, 2) if name in ("normal", "uniform") else (200000,),
                 **({} if CASES[name][2] else {"dtype": np.float64}))
    sample = graphc.compile(inputs=[], outputs=node, seed=11).run().ravel()
    if moments is None:     # Cauchy: no moments; its median and quartiles
        assert abs(np.median(sample)) < 0.02
        assert abs(np.percentile(sample, 75) - 1.0) < 0.03
        return
    mean, variance = (float(m) for m in moments)
    assert abs(sample.mean() - mean) < 0.02 * max(1.0, abs(mean)) + 4 * np.sqrt(variance / 2e5)
    assert abs(sample.var() - variance) < 0.05 * variance


def test_parameters_may_be_arrays_and_graph_values():
    scale = N.var("scale", (3,), np.float64)
    shape = np.array([[1.0], [2.0]])
    node = N.random.gamma(shape, scale, size=(2, 3), dtype=np.float64)
    g = graphc.compile([scale], node, seed=3)
    values = np.array([1.0, 2.0, 3.0])
    expected = np.random.default_rng(3).gamma(shape, values, size=(2, 3))
    np.testing.assert_array_equal(g.run(values), expected, strict=True)
    assert N.random.normal(scale, 1.0).shape == (3,)         # size None: the broadcast shape
    loc = N.var("loc", (2, 1))
    assert N.random.normal(loc, scale, size=(4, 2, 3)).shape == (4, 2, 3)
    with pytest.raises(graphc.ShapeError, match="random.gamma"):
        N.random.gamma(shape, scale, size=(3,))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_integers_choice_and_permutations_match_numpy(seed):
    rng = lambda: np.random.default_rng(seed)  # noqa: E731
    x = np.arange(24.0).reshape(4, 6)
    cases = [
        (lambda R: R.integers(3, 9, size=(5,)), lambda g: g.integers(3, 9, size=(5,))),
        (lambda R: R.integers(9, size=7, dtype=np.int32, endpoint=True),
         lambda g: g.integers(9, size=7, dtype=np.int32, endpoint=True)),
        (lambda R: R.choice(10, 4, replace=False), lambda g: g.choice(10, 4, replace=False)),
        (lambda R: R.choice(x, 3, p=[0.1, 0.2, 0.3, 0.4]),
         lambda g: g.choice(x, 3, p=[0.1, 0.2, 0.3, 0.4])),
        (lambda R: R.choice(x, (2, 2), axis=1, replace=False),
         lambda g: g.choice(x, (2, 2), axis=1, replace=False)),
        (lambda R: R.choice(x[0]), lambda g: g.choice(x[0])),
        (lambda R: R.permutation(8), lambda g: g.permutation(8)),
        (lambda R: R.permutation(x), lambda g: g.permutation(x)),
        (lambda R: R.permutation(x, axis=1), lambda g: g.permutation(x, axis=1)),
        (lambda R: R.permuted(x), lambda g: g.permuted(x)),
        (lambda R: R.permuted(x, axis=1), lambda g: g.permuted(x, axis=1)),
        (lambda R: R.permuted(x, axis=-2), lambda g: g.permuted(x, axis=-2)),
        (lambda R: R.dirichlet([1.0, 2.0, 3.0], 4, dtype=np.float64),
         lambda g: g.dirichlet([1.0, 2.0, 3.0], 4)),
        (lambda R: R.multivariate_normal([0.0, 1.0], [[2.0, 0.5], [0.5, 1.0]], (3,),
                                         dtype=np.float64),
         lambda g: g.multivariate_normal([0.0, 1.0], [[2.0, 0.5], [0.5, 1.0]], (3,))),
        (lambda R: R.multinomial(20, [0.2, 0.3, 0.5], 4),
         lambda g: g.multinomial(20, [0.2, 0.3, 0.5], 4)),
        (lambda R: R.multinomial([5, 10], [0.2, 0.8]),
         lambda g: g.multinomial([5, 10], [0.2, 0.8])),
        (lambda R: R.multivariate_hypergeometric([4, 2, 3], 5, size=3),
         lambda g: g.multivariate_hypergeometric([4, 2, 3], 5, size=3)),
    ]
    for make, reference in cases:
        expected = np.asarray(reference(rng()))
        E.random.seed(seed)
        np.testing.assert_array_equal(make(E.random), expected, strict=True)
        g = graphc.compile(inputs=[], outputs=make(N.random), seed=seed, check=True)
        np.testing.assert_array_equal(g.run(), expected, strict=True)


def test_arrays_drawn_from_may_be_graph_values():
    x = N.var("x", (5, 3), np.float64)
    outputs = [N.random.permutation(x), N.random.permuted(x, axis=0), N.random.choice(x, 4),
               N.random.choice(x[:, 0], 2, replace=False, p=N.softmax(x[:, 1]))]
    g = graphc.compile([x], outputs, seed=4, check=True)
    data = np.arange(15.0).reshape(5, 3)
    for drawn in (g.run(data), g.run(data)):
        permuted, columns, rows, picks = drawn
        assert sorted(permuted[:, 0]) == sorted(data[:, 0]) and permuted.shape == (5, 3)
        assert all(sorted(columns[:, j]) == sorted(data[:, j]) for j in range(3))
        assert rows.shape == (4, 3) and all(any((r == d).all() for d in data) for r in rows)
        assert len(set(picks)) == 2 and set(picks) <= set(data[:, 0])
    g.seed(4)
    again = graphc.compile([x], outputs, seed=4).run(data)
    for a, b in zip(g.run(data), again):
        np.testing.assert_array_equal(a, b, strict=True)


@pytest.mark.parametrize("call,match", [
    (lambda: N.random.gamma(-1.0), "random.gamma"),
    (lambda: N.random.binomial(5, 1.5), "random.binomial"),
    (lambda: N.random.choice(3, 5, replace=False), "random.choice"),
    (lambda: N.random.choice(3, p=[0.5, 0.6, 0.1]), "random.choice"),
    (lambda: N.random.dirichlet(1.0), "random.dirichlet"),
    (lambda: N.random.permutation(N.zeros(())), "random.permutation"),
])
def test_bad_parameters_are_refused_while_building(call, match):
    with pytest.raises((RandomArgumentError, graphc.ShapeError), match=match):
        call()


def test_dtypes_are_checked():
    with pytest.raises(graphc.DTypeError, match="random.gamma"):
        N.random.gamma(1.0, dtype=np.int32)
    with pytest.raises(graphc.DTypeError, match="random.integers"):
        N.random.integers(0, 3, dtype=np.float32)
    with pytest.raises(TypeError, match="N.random.gamma"):
        N.random.gamma()


def test_draws_have_no_gradient_and_no_onnx_form():
    from graphc.algodiff.rules import NON_DIFFERENTIABLE
    from graphc.onnx.export_ops import REFUSED
    assert "random_draw" in NON_DIFFERENTIABLE and "random draw" in REFUSED["random_draw"]
    x = N.var("x", (3,))
    (gx,) = N.grad(N.sum(N.random.gamma(2.0, size=(3,)) * x), [x])
    assert gx.shape == (3,)
