"""A reshape of strided memory as a view where NumPy's reshape is one (engine/view_layout.py,
engine/liveness.py): the stride rule against NumPy's own, then graphs (attention's
queries, keys and values sliced from one product and squeezed) compared bit for bit with
views=False and with NumPy, and the cases that must stay copies."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc
import graphc.ndarray as N
from graphc.engine.program import VIEW_OF
from graphc.engine.view_layout import layout, nocopy_strides, reshaped

pytestmark = pytest.mark.cpu_engine   # views of every kind are the CPU program's


def _factorisations(n, draw, parts):
    """A shape of ``parts`` dimensions (ones inserted freely) whose product is ``n``."""
    shape = []
    for _ in range(parts - 1):
        divisors = [d for d in range(1, n + 1) if n % d == 0]
        d = draw(st.sampled_from(divisors))
        shape.append(d)
        n //= d
    return tuple(shape + [n])


@st.composite
def strided_cases(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    base = np.arange(math.prod(shape) * 8, dtype=np.float32).reshape(shape + (8,))
    view = base[..., draw(st.sampled_from([slice(None), slice(0, 1), slice(None, None, 2),
                                           slice(3, 4)]))]
    axes = draw(st.permutations(range(view.ndim)))
    view = view.transpose(axes)
    new = _factorisations(view.size, draw, draw(st.integers(1, 5)))
    return view, new


@settings(max_examples=200, deadline=None)
@given(strided_cases())
def test_the_stride_rule_finds_a_view_exactly_where_numpy_does(case):
    view, new = case
    strides = nocopy_strides(view.shape, view.strides, new)
    numpy_result = view.reshape(new)
    numpy_views = np.shares_memory(numpy_result, view) or view.size == 0
    assert (strides is not None) == numpy_views, (view.shape, view.strides, new)
    if strides is not None:
        mine = reshaped(view, new)
        assert np.shares_memory(mine, view) or view.size == 0
        np.testing.assert_array_equal(mine, numpy_result)


def test_a_reshape_that_needs_a_copy_is_refused():
    x = np.arange(24.0).reshape(4, 6).T          # strides (8, 48): no flat run
    assert nocopy_strides(x.shape, x.strides, (24,)) is None
    with pytest.raises(ValueError, match=r"reshape: \(6, 4\) .* to \(24,\) needs a copy"):
        reshaped(x, (24,))


def _attention_graph(views):
    """qkv = x @ w as (1, 16, 3, 2, 5) -> (3, 1, 2, 16, 5); q, k, v its slices of one
    element on the first axis, each reshaped to (2, 16, 5) (ViT's and MobileViT's)."""
    x = N.var("x", (16, 12), np.float64)
    w = N.var("w", (12, 30), np.float64)
    qkv = N.transpose(N.reshape(x @ w, (1, 16, 3, 2, 5)), (2, 0, 3, 1, 4))
    q, k, v = (N.reshape(qkv[i:i + 1], (2, 16, 5)) for i in range(3))
    scores = N.matmul(q, N.transpose(k, (0, 2, 1)))
    y = N.matmul(scores, v)
    return graphc.compile([x, w], [y], check=True, views=views, optimise=False), (q, k, v)


def test_attention_s_squeezed_slices_are_views_and_give_the_copies_values():
    (with_views, parts), (copies, _) = _attention_graph(True), _attention_graph(False)
    rng = np.random.default_rng(3)
    X, W = rng.standard_normal((16, 12)), rng.standard_normal((12, 30))
    got, want = with_views.run(x=X, w=W)[0], copies.run(x=X, w=W)[0]
    # BLAS reads the strided slices or their copies: the same sums, maybe in another order
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    qkv = (X @ W).reshape(1, 16, 3, 2, 5).transpose(2, 0, 3, 1, 4)
    q, k, v = (qkv[i:i + 1].reshape(2, 16, 5) for i in range(3))
    np.testing.assert_allclose(got, q @ k.transpose(0, 2, 1) @ v, rtol=1e-12)
    live = with_views.liveness
    assert all(id(p) in live.views for p in parts)
    assert with_views.stats()["planned_bytes"] < copies.stats()["planned_bytes"]


def test_a_reshape_of_strided_memory_that_needs_a_copy_stays_a_step():
    x = N.var("x", (6, 4), np.float64)
    flat = N.reshape(N.transpose(N.exp(x)), (24,))       # no run: NumPy copies too
    g = graphc.compile([x], [flat * 2.0], check=True, optimise=False)
    assert id(flat) not in g.liveness.views
    X = np.random.default_rng(4).standard_normal((6, 4))
    np.testing.assert_array_equal(g.run(x=X)[0], np.exp(X).T.reshape(24) * 2.0)


def test_a_squeezed_slice_of_an_input_variable_stays_a_copy():
    """A run may bind the caller's array, of any strides, as the variable: a reshape
    of a view of it might then need a copy, so it is one."""
    x = N.var("x", (3, 4, 5), np.float64)
    part = N.reshape(x[:, 1:2], (3, 5))
    g = graphc.compile([x], [part @ N.ones((5, 2))], check=True, optimise=False)
    assert id(part) not in g.liveness.views
    X = np.random.default_rng(5).standard_normal((3, 4, 5))
    np.testing.assert_allclose(g.run(x=X)[0], X[:, 1] @ np.ones((5, 2)), rtol=1e-13)


def test_a_root_read_through_a_strided_reshape_is_not_overwritten_before_its_reader():
    """``sin(a)`` may take ``a``'s bytes in place only once the matmul reading ``a``
    through the squeezed slice has run."""
    x = N.var("x", (8, 4, 8), np.float64)
    a = N.exp(x)
    part = N.reshape(a[:, 1:2], (8, 8))       # a view of a's strided memory
    later = N.sin(a)
    y = N.sum(N.matmul(part, part)) + N.sum(later)
    with_views = graphc.compile([x], [y], check=True, optimise=False)
    copies = graphc.compile([x], [y], check=True, optimise=False, views=False)
    live = with_views.liveness
    assert id(part) in live.views and live.views[id(part)] is a
    readers = [n for n in live.steps if any(p is part for p in n.parents)]
    assert all(live.last_use[id(a)] >= live.step_of[id(r)] for r in readers)
    assert all(p is not a for p in live.inplace.get(id(later), [])) or all(
        live.step_of[id(later)] > live.step_of[id(r)] for r in readers)
    X = np.random.default_rng(6).standard_normal((8, 4, 8)) * 0.1
    np.testing.assert_allclose(with_views.run(x=X)[0], copies.run(x=X)[0], rtol=1e-12)
    A = np.exp(X)
    np.testing.assert_allclose(with_views.run(x=X)[0],
                               np.sum(A[:, 1] @ A[:, 1]) + np.sum(np.sin(A)), rtol=1e-12)


def test_the_layout_of_a_chain_of_views_is_numpy_s():
    """``layout`` walks a chain of views from its root as NumPy's views of the root's
    array would stride (a planned root is C-contiguous)."""
    x = N.var("x", (4, 6, 8), np.float64)
    a = N.exp(x)
    chain = N.reshape(N.transpose(a, (2, 0, 1))[1:7:2, :, ::3], (3, 4, 2))
    g = graphc.compile([x], [chain * 2.0], check=True, optimise=False)
    views = g.liveness.views
    assert id(chain) in views and views[id(chain)] is a
    want = np.empty((4, 6, 8)).transpose(2, 0, 1)[1:7:2, :, ::3].reshape(3, 4, 2)
    assert layout(chain, views, VIEW_OF) == (want.shape, want.strides)
    X = np.random.default_rng(7).standard_normal((4, 6, 8))
    np.testing.assert_array_equal(g.run(x=X)[0],
                                  np.exp(X).transpose(2, 0, 1)[1:7:2, :, ::3].reshape(3, 4, 2) * 2)
