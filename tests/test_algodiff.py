"""Reverse-mode differentiation (graphc/algodiff): every gradient rule against
central finite differences in float64, in graph mode (``N.grad``, the
gradient graph compiled and run) and eager mode (``E.grad`` on the tape), and
the two modes against each other; the registry covers every op kind; errors;
the optimiser leaves gradients unchanged. The checker is tests/gradcheck.py.

Values come from a seeded NumPy generator (hypothesis draws the seed, the shapes, axes and keys):
continuous values for smooth ops, and values on a grid offset from the kinks
for ops with kinks (relu, abs, maximum, clip...), so finite differences never
straddle one.
"""
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from numpy.testing import assert_allclose, assert_array_equal

import graphc
import graphc.eager as E
import graphc.ndarray as N
from gradcheck import (F64, advanced_keys, array_axis_keepdims, basic_keys, broadcastable_pair,
                       check_gradient, grid, matmul_shapes, ns_of, smooth)
from graphc.algodiff import GRADIENTS, NON_DIFFERENTIABLE
from graphc.optimiser.passes import optimise
from graphc.symbol.traverse import topological_order
from graphc.type import Op
from graphc.type.kinds import KINDS
from opcheck import examples, quiet, shapes


# -- coverage -----------------------------------------------------------------------------
def test_every_kind_has_a_gradient_decision():
    """A new op kind without a rule (or an explicit 'no gradient') fails here."""
    missing = sorted(set(KINDS) - set(GRADIENTS) - NON_DIFFERENTIABLE)
    assert not missing, f"kinds with neither a gradient rule nor NON_DIFFERENTIABLE: {missing}"
    assert not set(GRADIENTS) & NON_DIFFERENTIABLE
    assert set(GRADIENTS) | NON_DIFFERENTIABLE <= set(KINDS)


# -- elementwise ---------------------------------------------------------------------------
UNARY = {  # name -> (function, value maker)
    "negative": (lambda M, x: M.negative(x), smooth),
    "absolute": (lambda M, x: M.absolute(x), grid),
    "exp": (lambda M, x: M.exp(x), smooth),
    "log": (lambda M, x: M.log(x), lambda r, s: smooth(r, s, 0.2, 3.0)),
    "log2": (lambda M, x: M.log2(x), lambda r, s: smooth(r, s, 0.2, 3.0)),
    "arcsin": (lambda M, x: M.arcsin(x), lambda r, s: smooth(r, s, -0.8, 0.8)),
    "arccos": (lambda M, x: M.arccos(x), lambda r, s: smooth(r, s, -0.8, 0.8)),
    "arctan": (lambda M, x: M.arctan(x), smooth),
    "sinh": (lambda M, x: M.sinh(x), smooth),
    "cosh": (lambda M, x: M.cosh(x), smooth),
    "arcsinh": (lambda M, x: M.arcsinh(x), smooth),
    "arccosh": (lambda M, x: M.arccosh(x), lambda r, s: smooth(r, s, 1.2, 3.0)),
    "arctanh": (lambda M, x: M.arctanh(x), lambda r, s: smooth(r, s, -0.8, 0.8)),
    "log10": (lambda M, x: M.log10(x), lambda r, s: smooth(r, s, 0.2, 3.0)),
    "exp2": (lambda M, x: M.exp2(x), smooth),
    "log1p": (lambda M, x: M.log1p(x), lambda r, s: smooth(r, s, -0.8, 3.0)),
    "expm1": (lambda M, x: M.expm1(x), smooth),
    "sqrt": (lambda M, x: M.sqrt(x), lambda r, s: smooth(r, s, 0.2, 3.0)),
    "square": (lambda M, x: M.square(x), smooth),
    "reciprocal": (lambda M, x: M.reciprocal(x), lambda r, s: smooth(r, s, 0.3, 3.0)),
    "sin": (lambda M, x: M.sin(x), smooth),
    "cos": (lambda M, x: M.cos(x), smooth),
    "tan": (lambda M, x: M.tan(x), lambda r, s: smooth(r, s, -1.2, 1.2)),
    "tanh": (lambda M, x: M.tanh(x), smooth),
    "erf": (lambda M, x: M.erf(x), smooth),
    "sigmoid": (lambda M, x: M.sigmoid(x), smooth),
    "relu": (lambda M, x: M.relu(x), grid),
    "clip": (lambda M, x: M.clip(x, -0.5, 1.0), grid),
    "clip_low": (lambda M, x: M.clip(x, 0.0, None), grid),
    "copy": (lambda M, x: M.copy(x), smooth),
    "astype": (lambda M, x: M.astype(M.astype(x, np.float32), np.float64), grid,
               dict(h=1e-2, rtol=1e-4)),  # float32 rounding: a wide step
    "pow_scalar": (lambda M, x: x ** 3 if M is N else M.power(x, 3.0), smooth),
    # sqrt has no derivative at 0: keep the variance positive
    "std": (lambda M, x: M.std(M.concatenate([x, x + 1.0], axis=-1), axis=-1), smooth),
    "logsumexp": (lambda M, x: M.logsumexp(x, axis=0), smooth),
    # no gradient anywhere they are defined: zero, in both modes and numerically
    "floor": (lambda M, x: M.floor(x), grid),
    "sign": (lambda M, x: M.sign(x), grid),
    "rint": (lambda M, x: M.rint(x), grid),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@examples(8)
@given(shape=shapes(min_dims=1, max_dims=3, min_side=1), seed=st.integers(0, 2**16))
def test_unary_gradient(name, shape, seed):
    fn, values, *options = UNARY[name]
    check_gradient(fn, values(np.random.default_rng(seed), shape), **(options or [{}])[0])


BINARY = {  # name -> (function, maker of a, maker of b)
    "add": (lambda M, a, b: M.add(a, b), smooth, smooth),
    "subtract": (lambda M, a, b: a - b, smooth, smooth),
    "multiply": (lambda M, a, b: M.multiply(a, b), smooth, smooth),
    "divide": (lambda M, a, b: M.divide(a, b), smooth, lambda r, s: smooth(r, s, 0.5, 2.0)),
    "power": (lambda M, a, b: M.power(a, b), lambda r, s: smooth(r, s, 0.3, 2.0), smooth),
    "remainder": (lambda M, a, b: M.remainder(a, b), lambda r, s: grid(r, s, 0.1),
                  lambda r, s: np.abs(grid(r, s, 0.07)) + 0.6),
    "maximum": (lambda M, a, b: M.maximum(a, b), grid, lambda r, s: grid(r, s, 0.2)),
    "minimum": (lambda M, a, b: M.minimum(a, b), grid, lambda r, s: grid(r, s, 0.2)),
    "arctan2": (lambda M, a, b: M.arctan2(a, b), grid, lambda r, s: grid(r, s, 0.2)),
    "hypot": (lambda M, a, b: M.hypot(a, b), grid, lambda r, s: grid(r, s, 0.2)),
    "floor_divide": (lambda M, a, b: M.floor_divide(a, b), lambda r, s: grid(r, s, 0.1),
                     lambda r, s: np.abs(grid(r, s, 0.07)) + 0.6),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@examples(12)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_binary_gradient_with_broadcasting(name, data, seed):
    fn, make_a, make_b = BINARY[name]
    sa, sb = broadcastable_pair(data.draw)
    rng = np.random.default_rng(seed)
    check_gradient(fn, make_a(rng, sa), make_b(rng, sb), rtol=1e-4)


@examples(10)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_where_gradient_goes_to_the_chosen_operand(data, seed):
    sa, sb = broadcastable_pair(data.draw)
    rng = np.random.default_rng(seed)
    a, b = smooth(rng, sa), smooth(rng, sb)
    cond = rng.random(np.broadcast_shapes(sa, sb)) < 0.5
    check_gradient(lambda M, c, x, y: M.where(c, x, y), cond, a, b)


def test_maximum_and_minimum_split_ties_evenly():
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([1.0, 0.0, 3.0])
    for name in ("maximum", "minimum"):
        da, db = E.grad(lambda x, y: E.sum(getattr(E, name)(x, y)), argnums=(0, 1))(a, b)
        win = (a > b) if name == "maximum" else (a < b)
        assert_array_equal(da, np.where(a == b, 0.5, win * 1.0))
        assert_array_equal(db, np.where(a == b, 0.5, (~win & (a != b)) * 1.0))


def test_mixed_dtypes_give_each_variable_its_own_dtype():
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, (3, 4)).astype(np.float32), rng.uniform(-1, 1, (4,))
    dx, dy = check_gradient(lambda M, a, b: M.tanh(a * b), x, y, rtol=1e-3, atol=1e-3,
                            h=1e-3)
    assert dx.dtype == np.float32 and dy.dtype == np.float64


def test_integer_operands_get_no_gradient_but_carry_one():
    x = np.array([0.5, -1.0, 2.0])
    k = np.array([1, 2, 3])
    (dx,) = check_gradient(lambda M, a, n: M.sin(a * n), x, k)
    assert dx.dtype == F64


# -- reductions ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "min"])
@examples(15)
@given(sak=array_axis_keepdims(), seed=st.integers(0, 2**16))
def test_reduction_gradient(name, sak, seed):
    shape, axis, keepdims = sak
    rng = np.random.default_rng(seed)
    x = grid(rng, shape) if name in ("max", "min") else smooth(rng, shape, 0.5, 1.5) * \
        np.where(rng.random(shape) < 0.3, -1, 1)
    check_gradient(lambda M, a: getattr(M, name)(a, axis=axis, keepdims=keepdims), x)


def test_max_and_min_reductions_split_ties_evenly():
    x = np.array([[1.0, 3.0, 3.0, 3.0], [2.0, 2.0, 0.0, 1.0]])
    dmax = E.grad(lambda a: E.sum(E.max(a, axis=1) * np.array([3.0, 2.0])))(x)
    assert_array_equal(dmax, [[0.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])
    dmin = E.grad(lambda a: E.min(a))(x)
    assert_array_equal(dmin, np.where(x == 0.0, 1.0, 0.0))
    xv = N.var("x", x.shape, F64)
    g = graphc.compile([xv], N.grad(N.sum(N.max(xv, axis=1) * np.array([3.0, 2.0])), xv))
    assert_array_equal(g.run(x=x), dmax)


@examples(15)
@given(shape=shapes(min_dims=1, max_dims=3, min_side=1), seed=st.integers(0, 2**16),
       zeros=st.integers(0, 3))
def test_prod_gradient_with_zeros(shape, seed, zeros):
    """The product of the other elements, exact with zeros (no division by zero)."""
    rng = np.random.default_rng(seed)
    x = smooth(rng, shape, 0.5, 2.0)
    x.flat[rng.choice(x.size, min(zeros, x.size), replace=False)] = 0.0
    dx = E.grad(lambda a: E.sum(E.prod(a, axis=-1)))(x)
    expected = np.empty_like(x)
    for index in np.ndindex(x.shape):
        row = x[index[:-1]]
        expected[index] = np.prod(np.delete(row, index[-1]))
    assert_allclose(dx, expected, rtol=1e-12)
    check_gradient(lambda M, a: M.prod(a, axis=-1), x)


# -- products -------------------------------------------------------------------------------
@examples(40)
@given(sab=matmul_shapes(), trans=st.tuples(st.booleans(), st.booleans()),
       seed=st.integers(0, 2**16))
def test_matmul_gradient(sab, trans, seed):
    """1-D promotion, batch broadcasting and the optimiser's transpose flags."""
    sa, sb = sab
    ta, tb = trans[0] and len(sa) > 1, trans[1] and len(sb) > 1
    swap = lambda s, t: s[:-2] + (s[-1], s[-2]) if t else s
    rng = np.random.default_rng(seed)
    a, b = smooth(rng, swap(sa, ta)), smooth(rng, swap(sb, tb))
    flags = {k: True for k, v in (("trans_a", ta), ("trans_b", tb)) if v}
    check_gradient(lambda M, x, y: ns_of(M)._op("matmul", [x, y], **flags), a, b)


@examples(15)
@given(ranks=st.tuples(st.integers(1, 3), st.integers(1, 3)), seed=st.integers(0, 2**16))
def test_dot_gradient(ranks, seed):
    rng = np.random.default_rng(seed)
    sa = tuple(rng.integers(1, 4, ranks[0] - 1)) + (3,)
    sb = (3,) if ranks[1] == 1 else tuple(rng.integers(1, 4, ranks[1] - 2)) + (3, 2)
    check_gradient(lambda M, x, y: M.dot(x, y), smooth(rng, sa), smooth(rng, sb))


EINSUM = [("ij,jk->ik", (2, 3), (3, 4)), ("bij,bjk->bik", (2, 2, 3), (2, 3, 2)),
          ("ij,jk", (2, 3), (3, 2)), ("ij,kj->", (2, 3), (4, 3)),
          ("ij,k->ik", (2, 3), (4,)),  # j only in the first operand: summed
          ("ii,i->i", (3, 3), (3,)),  # a diagonal
          ("i,i->", (3,), (3,)), (",ij->ij", (), (2, 2)), ("iij,jk->ik", (2, 2, 3), (3, 2))]


@pytest.mark.parametrize("spec,sa,sb", EINSUM)
def test_einsum_gradient(spec, sa, sb):
    rng = np.random.default_rng(len(spec))
    check_gradient(lambda M, x, y: M.einsum(spec, x, y), smooth(rng, sa), smooth(rng, sb))


def test_tensordot_gradient():
    rng = np.random.default_rng(3)
    check_gradient(lambda M, x, y: M.tensordot(x, y, axes=([1, 2], [2, 0])),
                   smooth(rng, (2, 3, 4)), smooth(rng, (4, 2, 3)))


# -- shape ops ------------------------------------------------------------------------------
SHAPING = {  # name -> (function, shape)
    "reshape": (lambda M, x: M.reshape(x, (3, -1)), (2, 3, 2)),
    "transpose": (lambda M, x: M.transpose(x, (2, 0, 1)), (2, 3, 4)),
    "moveaxis": (lambda M, x: M.moveaxis(x, 0, -1), (2, 3, 4)),
    "broadcast_to": (lambda M, x: M.broadcast_to(x, (2, 3, 4)), (3, 1)),
    "concatenate": (lambda M, x: M.concatenate([x, M.exp(x), x[:1]], axis=0), (2, 3)),
    "stack": (lambda M, x: M.stack([x, M.sin(x)], axis=1), (2, 3)),
    "split": (lambda M, x: M.split(x, [1, 3], axis=1)[1] * 2.0, (2, 4)),
    "pad": (lambda M, x: M.pad(x, ((1, 0), (2, 3)), constant_values=1.5), (2, 3)),
    "tile": (lambda M, x: M.tile(x, (2, 1, 3)), (2, 3)),
    "repeat": (lambda M, x: M.repeat(x, 3, axis=1), (2, 3)),
    "repeat_counts": (lambda M, x: M.repeat(x, [2, 0, 1], axis=0), (3, 2)),
    "flip": (lambda M, x: M.flip(x, axis=(0, 2)), (2, 3, 2)),
    "squeeze": (lambda M, x: M.squeeze(M.expand_dims(x, 1), 1), (2, 3)),
    "take": (lambda M, x: M.take(x, np.array([[2, -1], [0, 2]]), axis=1), (2, 3, 2)),
    "take_flat": (lambda M, x: M.take(x, np.array([5, 5, 0])), (2, 3)),
    "swapaxes": (lambda M, x: M.swapaxes(x, 0, 1) @ x, (3, 3)),
}


@pytest.mark.parametrize("name", sorted(SHAPING))
def test_shaping_gradient(name):
    fn, shape = SHAPING[name]
    check_gradient(fn, smooth(np.random.default_rng(len(name)), shape))


@examples(60)
@given(sk=basic_keys(), seed=st.integers(0, 2**16))
def test_slice_gradient(sk, seed):
    shape, key = sk
    check_gradient(lambda M, x: x[key], smooth(np.random.default_rng(seed), shape))


@examples(50)
@given(sk=advanced_keys(), seed=st.integers(0, 2**16))
def test_gather_gradient_accumulates_repeated_indices(sk, seed):
    shape, key = sk
    check_gradient(lambda M, x: x[key], smooth(np.random.default_rng(seed), shape))


def test_embedding_lookup_counts_each_use():
    table = np.arange(12.0).reshape(4, 3)
    ids = np.array([1, 3, 1, 1])
    d = E.grad(lambda t: E.sum(t[ids]))(table)
    assert_array_equal(d[:, 0], [0.0, 3.0, 0.0, 1.0])
    rows, cols = np.array([0, 0, 2]), np.array([1, 1, -1])
    d = E.grad(lambda t: E.sum(t[rows, cols]))(table)
    assert d[0, 1] == 2.0 and d[2, 2] == 1.0 and d.sum() == 3.0


# -- optimiser-made kinds -----------------------------------------------------------------
def test_fma_fused_and_adagrad_gradients():
    """The optimiser's kinds: fma, fused_adagrad, and a fused program (an input read
    by two instructions; the accumulator carries the rest)."""
    rng = np.random.default_rng(5)
    a, b, c, v = (smooth(rng, (3, 4)), smooth(rng, (3, 4)), smooth(rng, (4,)),
                  smooth(rng, (3, 4), 0.5, 2.0))
    check_gradient(lambda M, x, y, z: ns_of(M)._op("fma", [x, y, z]), a, b, c)
    check_gradient(lambda M, w: ns_of(M)._op("fused_adagrad", [w], lr=0.1, eps=1e-3), v)
    acc, first, second = ("acc",), ("in", 0), ("in", 1)
    program = ((Op.make("exp"), (first,)), (Op.make("multiply"), (acc, second)),
               (Op.make("add"), (acc, first)), (Op.make("tanh"), (acc,)))
    fused = Op.make("fused", program=program, shape=(3, 4), dtype=np.dtype(F64), inplace=())
    check_gradient(lambda M, x, y: ns_of(M)._apply(fused, [x, y]), a, b)
    # branches meeting: exp(x) kept in a register and read twice, by two instructions
    program = ((Op.make("exp"), (first,)), (Op.make("sin"), (second,)),
               (Op.make("multiply"), (acc, ("reg", 0))), (Op.make("add"), (acc, ("reg", 0))),
               (Op.make("multiply"), (("reg", 1), acc)))
    fused = Op.make("fused", program=program, shape=(3, 4), dtype=np.dtype(F64))
    check_gradient(lambda M, x, y: ns_of(M)._apply(fused, [x, y]), a, b)


def test_gradient_of_the_optimised_graph_is_the_same():
    rng = np.random.default_rng(6)
    xs = [N.var(n, (3, 4), F64) for n in "abv"]
    x, y, w = xs
    expression = N.tanh(N.exp(x) * y + 1.0) * (0.1 / N.sqrt(w + 1e-3)) + x * y
    loss = N.sum(expression * expression)
    roots = optimise([loss], True, evaluate=E.evaluate).roots
    assert "fused" in {n.op.kind for n in topological_order(roots)}
    feed = dict(a=smooth(rng, (3, 4)), b=smooth(rng, (3, 4)), v=smooth(rng, (3, 4), 0.5, 2.0))
    plain = graphc.compile(xs, N.grad(loss, xs), optimise=False).run(**feed)
    rewritten = graphc.compile(xs, N.grad(roots[0], xs), optimise=False).run(**feed)
    for p, f in zip(plain, rewritten):
        assert_allclose(f, p, rtol=1e-10)


# -- the driver -----------------------------------------------------------------------------
def test_gradient_is_zero_where_the_loss_does_not_depend():
    x, y = N.var("x", (2, 3)), N.var("y", (4,), F64)
    k = N.var("k", (2,), np.int64)
    loss = N.sum(N.exp(x)) + N.sum(N.astype(k, np.float32))
    dx, dy = N.grad(loss, [x, y])
    assert (dy.shape, dy.dtype) == ((4,), F64)
    out = graphc.compile([x, y, k], [dx, dy]).run(
        x=np.zeros((2, 3), np.float32), y=np.ones(4), k=np.array([1, 2]))
    assert_array_equal(out[0], np.ones((2, 3), np.float32))
    assert_array_equal(out[1], np.zeros(4))
    assert_array_equal(E.grad(lambda a, b: E.sum(a), argnums=1)(np.ones(2), np.ones(3)),
                       np.zeros(3))


def test_only_paths_to_the_requested_variables_are_built():
    x, w, z = N.var("x", (5, 3)), N.var("w", (3, 2)), N.var("z", (4,))
    dw = N.grad(N.sum(N.tanh(x @ w)) + N.sum(N.sin(z)), w)
    kinds = [(n.op.kind, n.shape) for n in topological_order([dw])]
    assert ("matmul", (5, 3)) not in kinds  # no gradient for x
    assert all(kind != "cos" for kind, _ in kinds)  # nor for z
    assert ("matmul", (3, 2)) in kinds


def test_gradient_through_integer_values_is_cut():
    x = np.array([0.3, 1.7, -2.2])
    assert_array_equal(E.grad(lambda a: E.sum(E.astype(E.astype(a, np.int64), F64)))(x),
                       np.zeros(3))
    assert_array_equal(E.grad(lambda a: E.sum(E.where(a > 0, a, 0.0)))(x), [1.0, 1.0, 0.0])


def test_seed_gives_vector_jacobian_products():
    x = N.var("x", (3,), F64)
    seed = np.array([1.0, -2.0, 0.5])
    dx = N.grad(N.sin(x), x, seed=seed)
    value = np.array([0.1, 0.2, 0.3])
    assert_allclose(graphc.compile([x], dx).run(x=value), np.cos(value) * seed, rtol=1e-12)


def test_second_derivative_in_graph_mode():
    x = N.var("x", (4,), F64)
    first = N.grad(N.sum(N.sin(x) * x ** 3), x)
    second = N.grad(N.sum(first), x)
    value = np.linspace(-1.0, 1.0, 4)
    expected = -np.sin(value) * value ** 3 + 6 * np.cos(value) * value ** 2 + 6 * value * np.sin(value)
    assert_allclose(graphc.compile([x], second).run(x=value), expected, rtol=1e-10)


def test_grad_errors_are_clear():
    x = N.var("x", (3,))
    with pytest.raises(graphc.ShapeError, match="scalar"):
        N.grad(N.exp(x), x)
    with pytest.raises(graphc.ShapeError, match="seed"):
        N.grad(N.exp(x), x, seed=np.ones(2))
    with pytest.raises(graphc.DTypeError, match="floating-point"):
        N.grad(N.sum(N.var("k", (3,), np.int64)), x)
    with pytest.raises(graphc.DTypeError, match="dtype int64"):
        N.grad(N.sum(x), N.var("k", (3,), np.int64))
    with pytest.raises(graphc.GraphError, match="not a graph node"):
        N.grad(N.sum(x), [x, np.ones(3)])
    with pytest.raises(graphc.GraphError, match="graph node"):
        N.grad(np.float32(1.0), x)
    d = N.delay(np.sort, [x], (3,), np.float32)
    with pytest.raises(graphc.GraphError, match="delay.*sort"):
        N.grad(N.sum(d), x)
    with pytest.raises(graphc.GraphError, match="delay.*sort"):
        E.grad(lambda a: E.sum(E.delay(np.sort, [a], (3,), F64)))(np.ones(3))
    # a delay off the path to the variable is fine
    N.grad(N.sum(N.exp(x)) + N.sum(N.delay(np.sort, [N.var("z", (3,))], (3,), np.float32)), x)


# -- eager specifics ------------------------------------------------------------------------
def test_eager_grad_api():
    w, x = np.array([[0.5, -1.0], [2.0, 0.1]]), np.array([1.0, 2.0])
    f = lambda w, x: E.sum(E.tanh(x @ w) ** 2)
    value, (dw, dx) = E.value_and_grad(f, argnums=(0, 1))(w, x)
    assert value.shape == () and value == f(w, x)
    assert_array_equal(E.grad(f, argnums=-1)(w, x), dx)
    assert_array_equal(E.grad(f)(w, x), dw)
    with pytest.raises(graphc.DTypeError, match="argument 0"):
        E.grad(f)(np.ones((2, 2), np.int64), x)
    with pytest.raises(graphc.ShapeError, match="argnums"):
        E.grad(f, argnums=2)(w, x)
    with pytest.raises(graphc.ShapeError, match="scalar"):
        E.grad(lambda a: a * 2.0)(x)
    with pytest.raises(NotImplementedError, match="N.grad twice"):
        E.grad(lambda a: E.sum(E.grad(lambda b: E.sum(b * a))(a)))(x)


def test_traced_values_act_like_arrays():
    """Operators, methods, NumPy ufuncs and functions all reach the tape."""
    x = np.array([[0.2, -0.4, 0.9], [1.1, 0.3, -0.7]])

    def f(a):
        b = np.exp(a) + np.sum(a, axis=0) * a.T.T - abs(-a) / 2.0
        c = np.concatenate([b, a.reshape(3, 2).T], axis=1).mean(axis=1)
        return (c ** 2).sum() + a[1, ::-1].max() + np.where(a > 0, a, 0.0).sum()

    check_gradient(lambda M, a: f(a) if M is E else _lazy_f(a), x)
    with pytest.raises(TypeError, match=r"\.value"):
        E.grad(lambda a: E.sum(np.asarray(a)))(x)
    with pytest.raises(TypeError, match="numpy.apply_along_axis"):
        E.grad(lambda a: E.sum(np.apply_along_axis(np.sum, 0, a)))(x)
    with pytest.raises(TypeError, match="immutable"):
        E.grad(lambda a: a.__setitem__(0, 1.0))(x)


def _lazy_f(a):
    b = N.exp(a) + N.sum(a, axis=0) * a.T.T - abs(-a) / 2.0
    c = N.concatenate([b, a.reshape(3, 2).T], axis=1).mean(axis=1)
    return (c ** 2).sum() + a[1, ::-1].max() + N.where(a > 0, a, 0.0).sum()


def test_plain_eager_calls_are_not_recorded():
    y = E.exp(np.ones(3))
    assert type(y) is np.ndarray
    grads = []
    E.grad(lambda a: grads.append(a > 0) or E.sum(a))(np.ones(2))
    assert type(grads[0]) is np.ndarray  # non-float results are never traced


# -- a model ----------------------------------------------------------------------------------
def test_mlp_gradient_graph_with_and_without_the_optimiser():
    rng = np.random.default_rng(11)
    shapes_ = {"x": (8, 5), "w1": (5, 6), "b1": (6,), "w2": (6, 3), "b2": (3,)}
    values = {k: rng.normal(0, 0.5, s) for k, s in shapes_.items()}
    labels = np.eye(3)[rng.integers(0, 3, 8)]

    def model(M, x, w1, b1, w2, b2):
        h = M.maximum(x @ w1 + b1, 0.0)
        logits = h @ w2 + b2
        logp = logits - M.logsumexp(logits, axis=1, keepdims=True)
        return -M.mean(M.sum(logp * labels, axis=1)) + 1e-3 * M.sum(w1 * w1)

    xs = [N.var(k, s, F64) for k, s in shapes_.items()]
    loss = model(N, *xs)
    grads = N.grad(loss, xs[1:])
    plain = graphc.compile(xs, [loss] + grads, optimise=False)
    best = graphc.compile(xs, [loss] + grads, check=True)
    assert best.stats()["nodes"] < plain.stats()["nodes"]
    with quiet():
        a, b = plain.run(**values), best.run(**values)
        eager = E.value_and_grad(lambda *p: model(E, values["x"], *p), argnums=(0, 1, 2, 3))(
            *[values[k] for k in ("w1", "b1", "w2", "b2")])
    for p, q, e in zip(a, b, [eager[0], *eager[1]]):
        assert_allclose(q, p, rtol=1e-10, atol=1e-12)
        assert_allclose(e, p, rtol=1e-12, atol=1e-14)
    check_gradient(model, *[values[k] for k in shapes_], wrt=[1, 2, 3, 4], optimised=True)


# -- neural ops (another helper adds them) ---------------------------------------------------
neural = pytest.mark.skipif(not hasattr(N, "conv2d"),
                            reason="graphc/operator/neural.py (conv2d, pooling, lrn) not landed")


@neural
@pytest.mark.parametrize("stride,padding,dilation,groups", [
    (1, 0, 1, 1), (2, 1, 1, 1), (1, "same", 2, 1), (2, ((1, 0), (0, 2)), 1, 2)])
def test_conv2d_gradient(stride, padding, dilation, groups):
    rng = np.random.default_rng(2)
    x, w = smooth(rng, (2, 4, 6, 5)), smooth(rng, (4, 4 // groups, 3, 2))
    check_gradient(lambda M, a, k: M.conv2d(a, k, stride=stride, padding=padding,
                                            dilation=dilation, groups=groups), x, w)


@neural
def test_conv2d_second_derivative():
    """The backward ops are differentiable too (a gradient of a gradient)."""
    rng = np.random.default_rng(3)
    x, w = smooth(rng, (1, 2, 5, 5)), smooth(rng, (3, 2, 3, 3))
    check_gradient(lambda M, a, k: M.conv2d_backward_input(
        M.conv2d(a, k, stride=2, padding=1), k, a.shape, stride=2, padding=1), x, w)
    check_gradient(lambda M, a, k: M.conv2d_backward_kernel(
        a, M.conv2d(a, k, padding=1), k.shape, padding=1), x, w)


@neural
@pytest.mark.parametrize("kernel,stride,padding,ceil_mode", [
    (2, None, 0, False), (3, 2, 1, True), ((2, 3), (1, 2), ((1, 0), (1, 1)), False)])
def test_pooling_gradients(kernel, stride, padding, ceil_mode):
    rng = np.random.default_rng(4)
    x = grid(rng, (2, 3, 6, 7))
    check_gradient(lambda M, a: M.max_pool2d(a, kernel, stride, padding, ceil_mode), x)
    for include in (True, False):
        check_gradient(lambda M, a: M.avg_pool2d(a, kernel, stride, padding, ceil_mode,
                                                 count_include_pad=include), x)
        check_gradient(lambda M, a: M.avg_pool2d_backward(
            a, (2, 3, 6, 7), kernel, stride, padding, ceil_mode, include),
            smooth(rng, np.shape(E.avg_pool2d(x, kernel, stride, padding, ceil_mode))))


@neural
@pytest.mark.parametrize("layout", ["batch", "flat"])
def test_im2col_and_col2im_gradients(layout):
    """The optimiser's lowering ops are each other's transposes."""
    rng = np.random.default_rng(9)
    window = dict(kernel=(3, 2), stride=(2, 1), padding=((1, 0), (0, 1)), dilation=(1, 2))
    x = smooth(rng, (2, 3, 5, 6))
    check_gradient(lambda M, a: ns_of(M)._op("im2col", [a], layout=layout, **window), x)
    cols = smooth(rng, E._NS._op("im2col", [x], layout="batch", **window).shape)
    check_gradient(lambda M, c: ns_of(M)._op("col2im", [c], shape=x.shape, **window), cols)


@neural
def test_lrn_gradient():
    rng = np.random.default_rng(6)
    check_gradient(lambda M, a: M.lrn(a, size=3, alpha=0.1, beta=0.75, k=2.0),
                   smooth(rng, (2, 5, 3, 3)))
