"""Incremental evaluation: a run that changes only some inputs recomputes only
what depends on them (plus values whose memory was reused), and gives exactly
what a full run gives. Kernel executions are counted by stats()["steps_last_run"]."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import graphc
import graphc.ndarray as N
from test_plan_random import build_graph, programs, random_inputs

F32 = np.float32
RNG = np.random.default_rng(3)


def arr(*shape):
    return RNG.uniform(-1, 1, shape).astype(F32)


def inference_graph(**options):
    """Weights-only work (a transpose and a scale) feeding a per-input product."""
    x, w = N.var("x", (8, 16)), N.var("w", (32, 16))
    wt = N.transpose(w) * 0.5          # depends only on w
    y = N.tanh(x @ wt)
    return graphc.compile([x, w], [y], optimise=False, **options), (x, w)


def reference(X, W):
    return np.tanh(X @ (W.T * F32(0.5)))


def steps(g):
    return g.stats()["steps_last_run"]


@pytest.mark.parametrize("plan", ["blocks", "offsets"])
def test_unchanged_inputs_are_not_recomputed_when_their_values_survive(plan):
    g, _ = inference_graph(plan=plan, pinned=["w"])
    X, W = arr(8, 16), arr(32, 16)
    np.testing.assert_allclose(g.run(x=X, w=W)[0], reference(X, W), rtol=1e-6)
    full = steps(g)
    assert full == g.stats()["steps"] == 4
    X2 = arr(8, 16)
    np.testing.assert_allclose(g.run(x=X2)[0], reference(X2, W), rtol=1e-6)
    assert steps(g) == 2                       # matmul and tanh only
    g.run()                                     # nothing changed: nothing to compute
    assert steps(g) == 0
    W2 = arr(32, 16)
    np.testing.assert_allclose(g.run(w=W2)[0], reference(X2, W2), rtol=1e-6)
    assert steps(g) == full


def test_pinning_costs_memory_and_the_stats_say_how_much():
    pinned, _ = inference_graph(pinned=["w"])
    plain, _ = inference_graph()
    assert pinned.stats()["pinned_bytes"] == 2 * 32 * 16 * 4      # w.T and w.T * 0.5
    assert plain.stats()["pinned_bytes"] == 0
    assert pinned.stats()["planned_bytes"] >= plain.stats()["planned_bytes"]


def test_without_pinning_reused_memory_is_recomputed_and_results_stay_right():
    g, _ = inference_graph(plan="blocks")
    X, W = arr(8, 16), arr(32, 16)
    g.run(x=X, w=W)
    X2 = arr(8, 16)
    np.testing.assert_allclose(g.run(x=X2)[0], reference(X2, W), rtol=1e-6)
    # w.T * 0.5 may share memory with later values; whatever was reused is redone
    assert 2 <= steps(g) <= 4


def test_random_nodes_are_redrawn_on_every_run():
    x = N.var("x", (1000,))
    y = x * N.random.bernoulli(0.5, (1000,))
    g = graphc.compile([x], y, seed=1)
    X = np.ones(1000, F32)
    first = g.run(x=X)
    second = g.run()
    assert steps(g) >= 1 and not np.array_equal(first, second)


def test_assign_marks_an_input_changed():
    g, _ = inference_graph(pinned=["w"])
    X, W = arr(8, 16), arr(32, 16)
    g.run(x=X, w=W)
    W2 = arr(32, 16)
    g.assign(w=W2)
    np.testing.assert_allclose(g.run()[0], reference(X, W2), rtol=1e-6)
    assert steps(g) == 4


def test_updates_count_as_changes_for_the_next_run():
    w = N.var("w", (4,))
    x = N.var("x", (4,))
    g = graphc.compile([x, w], [N.sum(N.exp(w))], {w: w + x})
    g.run(x=np.ones(4, F32), w=np.zeros(4, F32))
    out = g.run()                          # w changed by its update, x did not
    np.testing.assert_allclose(out[0], 4 * np.e, rtol=1e-6)
    assert steps(g) >= 2


def test_a_failed_run_forgets_what_was_valid():
    calls = []

    def flaky(a):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return a * 2

    x, w = N.var("x", (3,)), N.var("w", (3,))
    d = N.delay(flaky, [N.exp(w)], (3,), np.float32)
    g = graphc.compile([x, w], [d + x], optimise=False)
    g.run(x=np.zeros(3, F32), w=np.zeros(3, F32))
    with pytest.raises(RuntimeError, match="boom"):
        g.run(x=np.ones(3, F32))
    out = g.run(x=np.ones(3, F32))
    np.testing.assert_allclose(out[0], 3.0)


@given(programs(max_ops=14), st.integers(0, 2**32 - 1), st.sampled_from(["blocks", "offsets"]),
       st.lists(st.integers(0, 7), min_size=3, max_size=5))
def test_partial_runs_equal_full_runs_on_random_programs(program, seed, plan, choices):
    """Feed random subsets of the inputs; a fresh graph fed everything each time agrees."""
    note(repr(program["instrs"]))
    rng = np.random.default_rng(seed)
    names = [program["instrs"][v][1] for v in program["variables"]]
    inputs, outputs, updates = build_graph(program)
    g = graphc.compile(inputs, outputs, updates, plan=plan, check=True)
    current = random_inputs(program, rng, names)
    feeds = dict(current)
    for choice in choices:
        fresh = graphc.compile(inputs, outputs, updates, plan=plan)
        with np.errstate(all="ignore"):
            want = fresh.run(**current)
            got = g.run(**feeds)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
        for name in names:          # state after the run, for the next comparison
            current[name] = g.value(name)
            np.testing.assert_array_equal(current[name], fresh.value(name))
        subset = [n for i, n in enumerate(names) if choice >> (i % 3) & 1]
        feeds = random_inputs(program, rng, subset)
        current.update(feeds)


@pytest.mark.parametrize("plan", ["blocks", "offsets"])
def test_a_kept_output_overwritten_by_a_rerun_step_is_computed_again(plan):
    """Found by hypothesis: tanh(x) dies early and an output computed from a
    constant takes its bytes; when x changes, tanh reruns in those bytes, so
    the output (not dirty itself) must be recomputed after it."""
    x = N.var("x", ())
    out1 = N.tanh(x).astype(np.float64)
    out2 = N.reshape(N.const(np.float32(0.25)), (1,))
    g = graphc.compile([x], [out1, out2], plan=plan, optimise=False, check=True)
    for value in (1.0, 2.0, 3.0):
        a, b = g.run(x=np.float32(value))
        np.testing.assert_allclose(a, np.tanh(np.float32(value)), rtol=1e-6)
        np.testing.assert_array_equal(b, [0.25])


@pytest.mark.parametrize("plan", ["blocks", "offsets"])
def test_feeding_a_variable_whose_update_is_computed_into_it_recomputes_the_update(plan):
    """Found by hypothesis: v2 <- reshape(v0) is computed straight into v2; a run
    that feeds only v2 overwrote that value, and the incremental schedule, seeing
    v0 unchanged, skipped the step, so v2 kept the fed value instead of its update."""
    v0, v2 = N.var("v0", ()), N.var("v2", (1,))
    g = graphc.compile([v0, v2], [N.tanh(v0)], {v2: N.reshape(v0, (1,))}, plan=plan)
    assert g.stats()["updates_into_variables"] == 1
    g.run(v0=np.float32(0.5), v2=np.zeros(1, np.float32))
    g.run(v2=np.full(1, -7.0, np.float32))
    np.testing.assert_array_equal(g.value("v2"), [0.5])
