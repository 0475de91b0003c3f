"""Gradient checking for tests/test_algodiff.py: a function differentiated in
graph mode (``N.grad``, compiled and run) and eager mode (``E.grad``), the two
compared exactly, and both against central finite differences in float64; plus
value makers that keep away from kinks, and strategies for shapes, axes and keys.

The loss of ``fn`` with output ``y`` is ``sum(y * W)`` for a fixed random ``W``,
so every output element gets its own weight.
"""
import math

import hypothesis.strategies as st
import numpy as np
from numpy.testing import assert_allclose, assert_array_equal

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.operator import NS
from opcheck import assert_same, feeds, make_vars, quiet, shapes

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
        lazy = graphc.compile(xs, nodes, optimise=False, kernels="numpy").run(**feeds(arrays))
        eager = E.grad(lambda *a: loss(E, *a), argnums=tuple(wrt))(*arrays)
        if optimised:
            best = graphc.compile(xs, nodes, check=True, kernels="numpy").run(**feeds(arrays))
    for i, lz, ea in zip(wrt, lazy, eager):
        assert ea.shape == arrays[i].shape and ea.dtype == arrays[i].dtype
        # exact, but within a few ulp where the graph runs on the GPU engine (opcheck)
        assert_same(lz, ea, what=f"graph vs eager gradient of argument {i}")
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


# -- strategies ------------------------------------------------------------------
@st.composite
def array_axis_keepdims(draw, min_side=1):
    shape = draw(shapes(min_dims=0, max_dims=3, min_side=min_side, max_side=3))
    ndim = len(shape)
    axis = draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1) if ndim else st.none(),
                          st.lists(st.integers(0, max(ndim - 1, 0)), unique=True,
                                   max_size=ndim).map(tuple)))
    return shape, axis, draw(st.booleans())


@st.composite
def matmul_shapes(draw):
    m, k, n = (draw(st.integers(1, 3)) for _ in range(3))
    batch_a, batch_b = broadcastable_pair(draw, max_dims=2)
    sa = (k,) if draw(st.integers(0, 4)) == 0 else batch_a + (m, k)
    sb = (k,) if draw(st.integers(0, 4)) == 0 else batch_b + (k, n)
    return sa, sb


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
