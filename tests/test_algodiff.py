"""Reverse-mode differentiation (graphc/algodiff): every gradient rule against
central finite differences in float64, in graph mode (``N.grad``, the
gradient graph compiled and run) and eager mode (``E.grad`` on the tape), and
the two modes against each other; the registry covers every op kind; errors;
the optimiser leaves gradients unchanged.

The loss of a function ``fn`` with output ``y`` is ``sum(y * W)`` for a fixed
random ``W``, so every output element gets its own weight. Values come from a
seeded NumPy generator (hypothesis draws the seed, the shapes, axes and keys):
continuous values for smooth ops, and values on a grid offset from the kinks
for ops with kinks (relu, abs, maximum, clip...), so finite differences never
straddle one.
"""
import math

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from numpy.testing import assert_allclose, assert_array_equal

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.algodiff import GRADIENTS, NON_DIFFERENTIABLE
from graphc.operator import NS
from graphc.optimiser.passes import optimise
from graphc.type.kinds import KINDS
from opcheck import examples, feeds, make_vars, quiet, shapes

F64 = np.float64


def ns_of(M):
    """The namespace behind a module (for ops only the optimiser makes)."""
    return NS if M is N else E._NS


# -- the checker ----------------------------------------------------------------------
def smooth(rng, shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, shape)


def grid(rng, shape, offset=0.1):
    """Distinct values 0.25 apart, ``offset`` away from the multiples of 0.25 (so
    from 0 too): kinks at 0 and at ties between two such arrays (different offsets)
    stay far from every finite-difference step."""
    n = math.prod(shape)
    return (rng.permutation(max(n, 1))[:n] - n // 2).reshape(shape) * 0.25 + offset


def finite_difference(loss, arrays, i, h):
    x = arrays[i]
    result = np.zeros(x.shape)
    for index in np.ndindex(x.shape):
        values = []
        for sign in (1, -1):
            moved = x.copy()
            moved[index] += sign * h
            values.append(loss(*[moved if j == i else a for j, a in enumerate(arrays)]))
        result[index] = (values[0] - values[1]) / (2 * h)
    return result


def check_gradient(fn, *arrays, wrt=None, h=1e-6, rtol=1e-5, atol=1e-6, optimised=False):
    """``fn(M, *xs)`` differentiated in both modes, compared with each other and with
    central differences; returns the eager gradients."""
    arrays = [np.asarray(a) for a in arrays]
    wrt = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"] if wrt is None else wrt
    with quiet():
        out = np.asarray(fn(E, *arrays))
    weights = np.random.default_rng(7).uniform(0.5, 1.5, out.shape) * \
        np.where(np.random.default_rng(8).random(out.shape) < 0.5, -1.0, 1.0)
    weights = weights.astype(out.dtype)

    def loss(M, *xs):
        return M.sum(M.multiply(fn(M, *xs), weights))

    xs = make_vars(arrays)
    nodes = N.grad(loss(N, *xs), [xs[i] for i in wrt])
    for node, i in zip(nodes, wrt):
        assert (node.shape, node.dtype) == (arrays[i].shape, arrays[i].dtype)
    with quiet():
        lazy = graphc.compile(xs, nodes, optimise=False).run(**feeds(arrays))
        eager = E.grad(lambda *a: loss(E, *a), argnums=tuple(wrt))(*arrays)
        if optimised:
            best = graphc.compile(xs, nodes, check=True).run(**feeds(arrays))
    for i, lz, ea in zip(wrt, lazy, eager):
        assert ea.shape == arrays[i].shape and ea.dtype == arrays[i].dtype
        assert_array_equal(lz, ea, err_msg=f"graph vs eager gradient of argument {i}")
        if optimised:
            assert_allclose(best[wrt.index(i)], ea, rtol=1e-12, atol=1e-12)
        with quiet():
            numeric = finite_difference(lambda *a: float(loss(E, *a)), arrays, i, h)
        assert_allclose(ea, numeric, rtol=rtol, atol=atol,
                        err_msg=f"gradient of argument {i} vs finite differences")
    return eager


def broadcastable_pair(draw, max_dims=3):
    """Two shapes that broadcast together (size-1 and missing leading axes)."""
    shape = draw(shapes(min_dims=0, max_dims=max_dims, min_side=1, max_side=3))
    def variant():
        dims = [1 if draw(st.booleans()) else d for d in shape]
        return tuple(dims[draw(st.integers(0, len(dims))):])
    return variant(), variant()


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
@examples(5)
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
@examples(6)
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
@st.composite
def array_axis_keepdims(draw, min_side=1):
    shape = draw(shapes(min_dims=0, max_dims=3, min_side=min_side, max_side=3))
    ndim = len(shape)
    axis = draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1) if ndim else st.none(),
                          st.lists(st.integers(0, max(ndim - 1, 0)), unique=True,
                                   max_size=ndim).map(tuple)))
    return shape, axis, draw(st.booleans())


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "min"])
@examples(10)
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
@st.composite
def matmul_shapes(draw):
    m, k, n = (draw(st.integers(1, 3)) for _ in range(3))
    batch_a, batch_b = broadcastable_pair(draw, max_dims=2)
    sa = (k,) if draw(st.integers(0, 4)) == 0 else batch_a + (m, k)
    sb = (k,) if draw(st.integers(0, 4)) == 0 else batch_b + (k, n)
    return sa, sb


@examples(25)
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


@st.composite
def basic_keys(draw):
    shape = draw(shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
    key = []
    for d in shape:
        if draw(st.integers(0, 3)) == 0:
            key.append(draw(st.integers(-d, d - 1)))
        else:
            bound = st.one_of(st.none(), st.integers(-d - 1, d + 1))
            key.append(slice(draw(bound), draw(bound),
                             draw(st.sampled_from([None, 1, 2, 3, -1, -2]))))
        if draw(st.integers(0, 4)) == 0:
            key.append(None)
    if draw(st.booleans()):  # leave trailing axes to an Ellipsis
        cut = draw(st.integers(0, len(key)))
        key = key[:cut] + [Ellipsis]
    return shape, tuple(key)


@examples(40)
@given(sk=basic_keys(), seed=st.integers(0, 2**16))
def test_slice_gradient(sk, seed):
    shape, key = sk
    check_gradient(lambda M, x: x[key], smooth(np.random.default_rng(seed), shape))


@st.composite
def advanced_keys(draw):
    shape = draw(shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    index_shape = draw(shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
    key, arrays = [], 0
    for d in shape:
        kind = draw(st.sampled_from(["array", "slice", "int"]))
        if kind == "array" or (arrays == 0 and d == shape[-1] and len(key) == len(shape) - 1):
            # repeated and negative indices included
            key.append(np.array(draw(st.lists(st.integers(-d, d - 1),
                                              min_size=math.prod(index_shape),
                                              max_size=math.prod(index_shape))),
                                dtype=np.int64).reshape(index_shape))
            arrays += 1
        elif kind == "int":
            key.append(draw(st.integers(-d, d - 1)))
        else:
            key.append(slice(None, None, draw(st.sampled_from([1, -1, 2]))))
    return shape, tuple(key)


@examples(30)
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
    """Differentiate the optimised graph itself: fma, fused chains and fused_adagrad."""
    rng = np.random.default_rng(5)
    a, b, c, v = (smooth(rng, (3, 4)), smooth(rng, (3, 4)), smooth(rng, (4,)),
                  smooth(rng, (3, 4), 0.5, 2.0))
    check_gradient(lambda M, x, y, z: ns_of(M)._op("fma", [x, y, z]), a, b, c)
    check_gradient(lambda M, w: ns_of(M)._op("fused_adagrad", [w], lr=0.1, eps=1e-3), v)
    xs = [N.var(n, (3, 4), F64) for n in "abv"]
    x, y, w = xs
    expression = N.tanh(N.exp(x) * y + 1.0) * (0.1 / N.sqrt(w + 1e-3)) + x * y
    loss = N.sum(expression * expression)
    roots = optimise([loss], True, evaluate=E.evaluate).roots
    kinds = {n.op.kind for n in graphc.graph.Graph(xs, roots).order}
    assert {"fused", "fused_adagrad"} <= kinds or "fma" in kinds, kinds
    feed = dict(a=a, b=b, v=v)
    plain = graphc.compile(xs, N.grad(loss, xs), optimise=False).run(**feed)
    fused = graphc.compile(xs, N.grad(roots[0], xs), optimise=False).run(**feed)
    for p, f in zip(plain, fused):
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
    with pytest.raises(TypeError, match="numpy.cumsum"):
        E.grad(lambda a: E.sum(np.cumsum(a)))(x)
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
