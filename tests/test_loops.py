"""Loops without unrolling: ``N.fori_loop``, ``N.scan`` and ``N.while_loop`` against the
same loop written in Python over NumPy, in graph mode (both plans) and eager mode."""
from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from numpy.testing import assert_allclose, assert_array_equal

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.type.errors import DTypeError, GraphError, ShapeError
from opcheck import check_op, examples

F32 = np.float32


@examples(20)
@given(st.integers(0, 6), st.integers(-3, 3), st.integers(1, 5), st.integers(0, 2 ** 16))
def test_fori_loop_matches_a_python_loop(steps, lower, size, seed):
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(size).astype(F32), rng.standard_normal(size).astype(F32)

    def python(x, w):
        for i in range(lower, lower + steps):
            x = np.tanh(x * w + F32(i))
        return x

    check_op(lambda M, x, w: M.fori_loop(lower, lower + steps,
                                         lambda i, v: M.tanh(v * w + M.astype(i, F32)), x),
             python, x, w)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_carries_and_stacks_trees(reverse):
    rng = np.random.default_rng(1)
    xs = {"a": rng.standard_normal((5, 3)).astype(F32), "b": np.arange(5, dtype=np.int64)}

    def step(M):
        def f(carry, x):
            total, count = carry
            total = total + x["a"] * M.astype(x["b"], F32)
            return (total, count + 1), [total, M.sum(x["a"])]
        return f

    def ours(M, a, b):
        (total, count), (partial, sums) = M.scan(step(M), (M.zeros(3, F32), np.int64(0)),
                                                  {"a": a, "b": b}, reverse=reverse)
        return [total, count, partial, sums]

    def python(a, b):
        total, count, partial, sums = np.zeros(3, F32), np.int64(0), [None] * 5, [None] * 5
        for t in (range(4, -1, -1) if reverse else range(5)):
            total = total + a[t] * b[t].astype(F32)
            count = count + 1
            partial[t], sums[t] = total, np.sum(a[t])
        return [total, count, np.stack(partial), np.stack(sums)]
    check_op(ours, python, xs["a"], xs["b"])


def test_while_loop_runs_until_its_condition_fails():
    def ours(M, s):
        return list(M.while_loop(lambda c: c[1] > 1.0, lambda c: (c[0] + 1, c[1] / 2),
                                 (np.int64(0), s)))

    def python(s):
        n = np.int64(0)
        while s > 1.0:
            n, s = n + 1, s / F32(2)
        return [n, s]
    for start in (F32(100.0), F32(0.5), F32(1.0)):
        check_op(ours, python, start)


def test_a_loop_is_one_node_however_many_steps():
    u = N.var("u", (32, 32))

    def smooth(i, u):
        inner = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        return N.pad(inner, 1)
    g = graphc.compile([u], [N.fori_loop(0, 200, smooth, u)])
    assert g.stats()["nodes"] <= 3
    start = np.random.default_rng(0).random((32, 32)).astype(F32)
    want = start.copy()
    for _ in range(200):
        want = np.pad(0.25 * (want[:-2, 1:-1] + want[2:, 1:-1] + want[1:-1, :-2]
                              + want[1:-1, 2:]), 1)
    assert_allclose(g.run(u=start)[0], want, rtol=1e-5, atol=1e-6)


def test_the_body_reads_values_from_outside_the_loop():
    x, w = N.var("x", (4,)), N.var("w", (4,))
    scale = N.exp(w)                       # computed once, outside the body
    y = N.fori_loop(0, 3, lambda i, v: v * scale + N.sum(w), x)
    a, b = np.ones(4, F32), np.linspace(-1, 1, 4).astype(F32)
    want = a
    for _ in range(3):
        want = want * np.exp(b) + np.sum(b)
    assert_allclose(graphc.compile([x, w], [y]).run(x=a, w=b)[0], want, rtol=1e-6)


def test_random_draws_in_the_body_are_fresh_each_step_and_follow_the_seed():
    x = N.var("x", (1000,))
    y = N.fori_loop(0, 2, lambda i, v: v + N.random.normal(0.0, 1.0, (1000,)), x)
    first = graphc.compile([x], [y], seed=5).run(x=np.zeros(1000, F32))[0]
    again = graphc.compile([x], [y], seed=5).run(x=np.zeros(1000, F32))[0]
    assert_array_equal(first, again)
    assert 1.5 < np.var(first) < 2.5       # two independent unit draws add


def test_bad_loops_are_refused_while_building():
    x = N.var("x", (3,))
    with pytest.raises(ShapeError, match=r"fori_loop: carried value 0 has shape \(3,\) but "
                                         r"the body returned shape \(1, 3\)"):
        N.fori_loop(0, 2, lambda i, v: v[None], x)
    with pytest.raises(DTypeError, match="fori_loop: carried value 0 has dtype int64"):
        N.fori_loop(0, 2, lambda i, v: v * 0.5, N.var("k", (3,), np.int64))
    with pytest.raises(ShapeError, match="the structure they were given"):
        N.fori_loop(0, 2, lambda i, v: (v, v), x)
    with pytest.raises(GraphError, match="the condition must be a boolean scalar"):
        N.while_loop(lambda v: v > 0, lambda v: v - 1.0, x)
    with pytest.raises(ShapeError, match="scan: xs and length must agree"):
        N.scan(lambda c, x: (c, x), x, N.var("xs", (4, 2)), length=3)
    with pytest.raises(GraphError, match=r"differentiating through N\.fori_loop is not "
                                         r"implemented"):
        N.grad(N.sum(N.fori_loop(0, 2, lambda i, v: v * v, x)), [x])
    assert E.fori_loop(0, 0, lambda i, v: v * 2, np.ones(2))[0] == 1.0


def test_a_body_that_writes_into_its_carry_as_numpy_code_does():
    def body(i, u):
        u[1:-1] = 0.5 * (u[:-2] + u[2:])
        u += 1.0
        return u

    def python(u):
        for _ in range(4):
            body(None, u)
        return u
    check_op(lambda M, u: M.fori_loop(0, 4, body, u if M is N else u.copy()),
             lambda u: python(u.copy()), np.arange(7, dtype=F32))
