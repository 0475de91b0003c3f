"""Update values computed straight into their variable's memory (no planned bytes,
no copy after the run) must give exactly the results of simultaneous updates."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import graphc
import graphc.ndarray as N
from opcheck import examples

from graphc.engine.strategy import STREAM_MIN

F32 = np.float32


def reference_steps(fn, values, feeds, steps):
    """``steps`` simultaneous updates in NumPy: ``fn(np, values, feeds) -> (outs, new)``."""
    values = {k: v.copy() for k, v in values.items()}
    outs = []
    for _ in range(steps):
        out, new = fn(np, values, feeds)
        outs.append(out)
        values = {k: np.asarray(new.get(k, values[k]), F32) for k in values}
    return outs, values


def sgd_momentum(ns, v, f):
    loss = ns.sum(ns.square(f["x"] * v["w"] - 1.0))
    grad = 2.0 * (f["x"] * v["w"] - 1.0) * f["x"]
    m = 0.9 * v["m"] + grad
    return loss, {"w": v["w"] - 0.1 * m, "m": m}


@pytest.mark.parametrize("size", [64, STREAM_MIN])
def test_sgd_momentum_matches_simultaneous_updates(size):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(size).astype(F32)
    init = {"w": rng.standard_normal(size).astype(F32), "m": np.zeros(size, F32)}
    xv, wv, mv = N.var("x", (size,)), N.var("w", (size,)), N.var("m", (size,))
    loss, new = sgd_momentum(N, {"w": wv, "m": mv}, {"x": xv})
    for plan, optimise in [("blocks", False), ("offsets", False), ("blocks", True),
                           ("offsets", True)]:
        g = graphc.compile([xv, wv, mv], loss, {wv: new["w"], mv: new["m"]}, plan=plan,
                           optimise=optimise, check=True)
        # as written both updates qualify; optimised, m's update is an fma over m (it
        # qualifies) and w's a fused program that reads w after writing its first
        # result unless it is large enough to be streamed chunk by chunk
        expected = 2 if not optimise or size >= STREAM_MIN else 1
        assert g.stats()["updates_into_variables"] == expected
        g.assign(**init)
        got = [g.run(x=x) for _ in range(4)]
        want, final = reference_steps(sgd_momentum, init, {"x": x}, 4)
        np.testing.assert_allclose(got, want, rtol=1e-4)
        for name in final:
            np.testing.assert_allclose(g.value(name), final[name], rtol=1e-4, atol=1e-6)


def test_variable_read_after_its_update_keeps_planned_memory():
    w = N.var("w", (16,))
    new_w = w * 2.0
    later = N.sum(new_w + N.exp(w))   # exp(w) runs after new_w: new_w may not overwrite w
    # (in the depth-first order; the memory order runs exp(w) first: tests/test_ordering.py)
    g = graphc.compile([w], later, {w: new_w}, optimise=False, check=True, order="dfs")
    assert g.stats()["updates_into_variables"] == 0
    w0 = np.linspace(0, 1, 16, dtype=F32)
    g.assign(w=w0)
    np.testing.assert_allclose(g.run(), np.sum(np.exp(w0) + 2 * w0), rtol=1e-6)
    np.testing.assert_array_equal(g.value("w"), 2 * w0)


@pytest.mark.parametrize("case", ["swap", "output_var", "shared_value"])
def test_unsafe_cases_are_left_to_the_copy(case):
    a, b = N.var("a", (8,)), N.var("b", (8,))
    a0, b0 = np.arange(8, dtype=F32), -np.arange(8, dtype=F32)
    if case == "swap":          # each variable is the other's update source
        outputs, updates = N.sum(a), {a: b + 0.0, b: a + 0.0}
        want = {"a": b0, "b": a0}
    elif case == "output_var":  # the variable itself is an output: it must show the old value
        outputs, updates = [a, N.sum(b)], {a: a + 1.0}
        want = {"a": a0 + 1, "b": b0}
    else:                       # one value feeds two updates
        v = a * b
        outputs, updates = N.sum(a), {a: v, b: v}
        want = {"a": a0 * b0, "b": a0 * b0}
    g = graphc.compile([a, b], outputs, updates, optimise=False, check=True)
    g.assign(a=a0, b=b0)
    result = g.run()
    if case == "output_var":
        np.testing.assert_array_equal(result[0], a0)
    for name, value in want.items():
        np.testing.assert_array_equal(g.value(name), value)
    if case == "swap":
        # a + 0.0 reads a at the step that computes it, b reads it later: not into a
        assert g.stats()["updates_into_variables"] <= 1


@examples(20)
@given(st.integers(1, 4), st.integers(2, 30), st.sampled_from(["blocks", "offsets"]))
def test_chains_of_updates_equal_the_unoptimised_copy_semantics(n_vars, size, plan):
    rng = np.random.default_rng(size * 7 + n_vars)
    vs = [N.var(f"v{i}", (size,)) for i in range(n_vars)]
    x = N.var("x", (size,))
    h = x
    for v in vs:
        h = N.tanh(h * v)
    loss = N.sum(h)
    updates = {v: v * 0.5 + h * float(i + 1) for i, v in enumerate(vs)}
    init = {f"v{i}": rng.standard_normal(size).astype(F32) for i in range(n_vars)}
    feeds = {"x": rng.standard_normal(size).astype(F32)}
    values = {k: v.copy() for k, v in init.items()}
    want_losses = []
    for _ in range(3):   # NumPy: every update reads the values from before the run
        h = feeds["x"]
        for i in range(n_vars):
            h = np.tanh(h * values[f"v{i}"])
        want_losses.append(np.sum(h))
        values = {f"v{i}": (values[f"v{i}"] * 0.5 + h * float(i + 1)).astype(F32)
                  for i in range(n_vars)}
    for optimise in (False, True):
        g = graphc.compile([x, *vs], loss, updates, plan=plan, optimise=optimise, check=True)
        g.assign(**init)
        losses = [g.run(**feeds) for _ in range(3)]
        np.testing.assert_allclose(losses, want_losses, rtol=1e-4, atol=1e-5)
        for name, value in values.items():
            np.testing.assert_allclose(g.value(name), value, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size", [5, 70_001])
def test_accumulator_fma_is_computed_into_its_variable(size):
    # v + g * g becomes fma(g, g, v): written over its addend v, the kernel streams
    # chunk by chunk through the shared scratch (70,001 float64: three chunks, the
    # last one partial)
    g_var, v_var = N.var("g", (size,), np.float64), N.var("v", (size,), np.float64)
    new_v = v_var + g_var * g_var
    exe = graphc.compile([g_var, v_var], N.sum(new_v), {v_var: new_v}, check=True)
    assert [n.op.kind for n in exe.liveness.steps if n is exe.graph.updates[0][1]] == ["fma"]
    assert exe.stats()["updates_into_variables"] == 1
    rng = np.random.default_rng(size)
    g0, v0 = rng.standard_normal(size), rng.random(size)
    exe.assign(v=v0)
    expected = v0.copy()
    for _ in range(3):
        total = exe.run(g=g0)
        expected = expected + g0 * g0
        np.testing.assert_allclose(total, expected.sum(), rtol=1e-12)
    np.testing.assert_array_equal(exe.value("v"), expected)
