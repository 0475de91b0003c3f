"""The public API of a compiled graph: run, assign, value and updates; output
copies and read-only views; inputs never mutated; seeded random ops; stats,
DOT and networkx exports; and a very long chain."""
from __future__ import annotations

import re

import networkx as nx
import numpy as np
import pytest

import graphc
import graphc.ndarray as N

# These tests state exact facts about the graph as written (node counts, plans worked
# out by hand), so the optimiser, which rewrites it, is off; tests/test_optimiser.py
# covers the optimised graphs.
def compile_as_written(*args, **kwargs):
    return graphc.compile(*args, optimise=False, **kwargs)

from graphc.engine.naive import evaluate_naive
from graphc.symbol import to_networkx

PLANS = ["blocks", "offsets"]
F32 = np.float32


def arange(shape, dtype=F32, start=0):
    return (np.arange(np.prod(shape)) + start).astype(dtype).reshape(shape)


# -- run, assign, value, updates -----------------------------------------------------
@pytest.mark.parametrize("plan", PLANS)
def test_run_returns_a_list_for_a_list_and_an_array_for_one_node(plan):
    x = N.var("x", (2, 3))
    y = N.sum(x, axis=1)
    X = arange((2, 3))
    single = compile_as_written([x], y, plan=plan)
    out = single.run(x=X)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, X.sum(axis=1))
    listed = compile_as_written([x], [y], plan=plan).run(x=X)
    assert isinstance(listed, list) and len(listed) == 1
    np.testing.assert_array_equal(listed[0], X.sum(axis=1))
    pair = compile_as_written([x], (y, x), plan=plan).run(x=X)
    assert isinstance(pair, list) and len(pair) == 2
    np.testing.assert_array_equal(pair[1], X)
    # a 0-d output is still an ndarray, not a NumPy scalar
    scalar = compile_as_written([x], N.sum(x), plan=plan).run(x=X)
    assert isinstance(scalar, np.ndarray) and scalar.shape == () and scalar == X.sum()


def test_feeds_by_keyword_by_dict_or_both():
    x, y = N.var("x", (2,)), N.var("y", (2,))
    g = compile_as_written([x, y], x - y)
    X, Y = arange(2), arange(2, start=10)
    for result in (g.run(x=X, y=Y), g.run({"x": X, "y": Y}), g.run({"x": X}, y=Y)):
        np.testing.assert_array_equal(result, X - Y)
    assert g.input_names == ["x", "y"]


def test_one_variable_may_be_given_as_the_inputs():
    x = N.var("x", (3,))
    s = N.var("s", ())
    np.testing.assert_array_equal(compile_as_written(x, x * 2.0).run(x=arange(3)), [0, 2, 4])
    assert compile_as_written(s, s * 2.0).run(s=1.5) == 3.0


def test_scalar_inputs_accept_python_numbers():
    s = N.var("s", ())
    n = N.var("n", (), np.int64)
    g = compile_as_written([s, n], s * n)
    out = g.run(s=1.5, n=3)
    assert out.dtype == np.float64 and out == 4.5


@pytest.mark.parametrize("plan", PLANS)
def test_updates_carry_state_between_runs(plan):
    x = N.var("x", (3,))
    w = N.var("w", (3,))
    loss = N.sum(x * w)
    step = compile_as_written([x, w], [loss, w], {w: w - 0.5 * x}, plan=plan, check=True)
    W0 = np.array([1.0, 2.0, 3.0], F32)
    W0_copy = W0.copy()
    step.assign(w=W0)
    np.testing.assert_array_equal(step.value("w"), W0)
    X = np.array([1.0, 0.0, -1.0], F32)
    w_np = W0.copy()
    for _ in range(4):
        got_loss, got_w = step.run(x=X)
        np.testing.assert_allclose(got_loss, np.sum(X * w_np), rtol=1e-6)
        np.testing.assert_array_equal(got_w, w_np)        # the value during the run
        w_np = w_np - F32(0.5) * X
        np.testing.assert_array_equal(step.value("w"), w_np)
    np.testing.assert_array_equal(W0, W0_copy)           # assign copied it
    # feeding a state variable overrides its value for this run
    got_loss, _ = step.run(x=X, w=W0)
    np.testing.assert_allclose(got_loss, np.sum(X * W0), rtol=1e-6)
    np.testing.assert_array_equal(step.value("w"), W0 - F32(0.5) * X)


def test_a_state_variable_may_be_fed_on_the_first_run_instead_of_assigned():
    w = N.var("w", (2,))
    g = compile_as_written([w], N.sum(w), {w: w * 2.0})
    assert g.run(w=np.ones(2, F32)) == 2.0
    assert g.run() == 4.0
    assert g.run() == 8.0
    np.testing.assert_array_equal(g.value("w"), [8.0, 8.0])


@pytest.mark.parametrize("plan", PLANS)
def test_simultaneous_updates_swap_and_rotate(plan):
    a, b, c = N.var("a", (2,)), N.var("b", (2,)), N.var("c", (2,))
    g = compile_as_written([a, b, c], [a + 0.0], {a: b, b: c, c: a}, plan=plan, check=True)
    g.assign(a=np.full(2, 1, F32), b=np.full(2, 2, F32), c=np.full(2, 3, F32))
    seen = [float(g.run()[0][0]) for _ in range(4)]
    assert seen == [1.0, 2.0, 3.0, 1.0]
    assert [float(g.value(n)[0]) for n in "abc"] == [2.0, 3.0, 1.0]


def test_updates_read_values_before_any_update_is_applied():
    a, b = N.var("a", ()), N.var("b", ())
    g = compile_as_written([a, b], [a * b], {a: a + b, b: a - b})
    g.assign(a=F32(5), b=F32(3))
    assert g.run()[0] == 15.0
    assert (g.value("a"), g.value("b")) == (8.0, 2.0)


def test_value_is_a_copy_and_unknown_names_raise():
    w = N.var("w", (2,))
    g = compile_as_written([w], w * 2.0, {w: w + 1.0})
    g.assign(w=np.zeros(2, F32))
    v = g.value("w")
    v[...] = 99.0
    np.testing.assert_array_equal(g.value("w"), [0.0, 0.0])
    with pytest.raises(graphc.InputError, match="'nope'.*\\['w'\\]"):
        g.value("nope")


def test_an_output_that_is_an_input_or_a_constant():
    x = N.var("x", (2,))
    c = N.const(np.array([7.0, 8.0], F32))
    g = compile_as_written([x], [x, c, x + c])
    X = arange(2)
    rx, rc, rs = g.run(x=X)
    np.testing.assert_array_equal(rx, X)
    np.testing.assert_array_equal(rc, [7.0, 8.0])
    assert not np.shares_memory(rx, X)
    rc[...] = 0.0                          # a copy: the constant is untouched
    np.testing.assert_array_equal(g.run(x=X)[1], [7.0, 8.0])


# -- outputs: copies and views -------------------------------------------------------
@pytest.mark.parametrize("plan", PLANS)
def test_copied_outputs_are_not_overwritten_by_later_runs(plan):
    x = N.var("x", (4,))
    a = N.exp(x)
    outs = [a, N.sin(a), N.sum(a)]
    g = compile_as_written([x], outs, plan=plan)
    first = g.run(x=np.zeros(4, F32))
    kept = [r.copy() for r in first]
    g.run(x=np.ones(4, F32))
    for r, k in zip(first, kept):
        np.testing.assert_array_equal(r, k)
        assert r.flags.writeable and r.flags.owndata


@pytest.mark.cpu_engine   # host views of outputs: the CPU's
@pytest.mark.parametrize("plan", PLANS)
def test_uncopied_outputs_are_read_only_views_valid_until_the_next_run(plan):
    x = N.var("x", (4,))
    a = N.exp(x)
    g = compile_as_written([x], [N.sin(a), a * 2.0], plan=plan, copy_outputs=False)
    r1, r2 = g.run(x=np.zeros(4, F32))
    for r in (r1, r2):
        assert not r.flags.writeable
        assert any(np.shares_memory(r, buf) for buf in g.program.buffers)
        with pytest.raises(ValueError, match="read-only"):
            r[0] = 1.0
    np.testing.assert_array_equal(r2, 2.0)
    g.run(x=np.full(4, np.log(3.0), F32))
    np.testing.assert_allclose(r2, 6.0, rtol=1e-6)     # the same memory, new values
    # single output: a view as well
    single = compile_as_written([x], N.exp(x), copy_outputs=False)
    out = single.run(x=np.zeros(4, F32))
    assert isinstance(out, np.ndarray) and not out.flags.writeable


@pytest.mark.cpu_engine   # host views of outputs: the CPU's
@pytest.mark.parametrize("copy_outputs", [True, False])
def test_an_updated_variable_output_shows_its_value_during_the_run(copy_outputs):
    w = N.var("w", (3,))
    g = compile_as_written([w], [w, w * 1.0], {w: w + 1.0}, copy_outputs=copy_outputs)
    g.assign(w=np.zeros(3, F32))
    before, same = g.run()
    np.testing.assert_array_equal(before, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(same, before)
    np.testing.assert_array_equal(g.value("w"), [1.0, 1.0, 1.0])
    if not copy_outputs:
        assert not before.flags.writeable


@pytest.mark.cpu_engine   # host views of outputs: the CPU's
def test_uncopied_outputs_do_not_let_the_caller_write_into_the_graph():
    x = N.var("x", (3,))
    g = compile_as_written([x], [x, N.exp(x)], copy_outputs=False)
    rx, re_ = g.run(x=np.zeros(3, F32))
    with pytest.raises(ValueError):
        rx += 1.0
    np.testing.assert_array_equal(g.value("x"), 0.0)


# -- the caller's arrays are never written -------------------------------------------
@pytest.mark.parametrize("plan", PLANS)
def test_inputs_are_copied_in_and_never_mutated(plan):
    x = N.var("x", (64,))
    w = N.var("w", (64,))
    # every op here could work in place on its first argument if it were planned
    y = N.tanh(N.exp(x) * 2.0 + x) - x
    g = compile_as_written([x, w], [y, N.sum(w)], {w: w * 0.5 + x}, plan=plan)
    X, W = arange((64,)) / 64, arange((64,), start=1)
    X0, W0 = X.copy(), W.copy()
    g.assign(w=W)
    g.run(x=X)
    g.run(x=X)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(W, W0)
    # the graph holds copies: changing the caller's arrays afterwards changes nothing
    X[...] = 1e6
    np.testing.assert_array_equal(g.value("x"), X0)
    expected = np.tanh(np.exp(X0) * 2 + X0) - X0
    np.testing.assert_allclose(g.run(x=X0)[0], expected, rtol=1e-6)


def test_constants_are_copied_when_built():
    data = np.array([1.0, 2.0], F32)
    c = N.const(data)
    data[...] = -1.0
    g = compile_as_written([], c * 2.0)
    np.testing.assert_array_equal(g.run(), [2.0, 4.0])
    assert not c.value.flags.writeable


def test_non_contiguous_and_non_owned_inputs_are_accepted_unchanged():
    x = N.var("x", (3, 2))
    g = compile_as_written([x], N.exp(x) + x)
    big = arange((2, 6)).T.copy()      # (6, 2)
    view = big[::2]                    # non-contiguous (3, 2)
    before = big.copy()
    np.testing.assert_allclose(g.run(x=view), np.exp(view) + view, rtol=1e-6)
    np.testing.assert_array_equal(big, before)
    frozen = arange((3, 2))
    frozen.flags.writeable = False
    np.testing.assert_allclose(g.run(x=frozen), np.exp(frozen) + frozen, rtol=1e-6)


# -- random ops ----------------------------------------------------------------------
def random_graph(seed):
    x = N.var("x", (5,))
    noise = N.random.normal(0.0, 1.0, (5,))
    mask = N.random.bernoulli(0.5, (5,))
    u = N.random.uniform(-1, 1, (2, 5))
    return compile_as_written([x], [x + noise, mask, u], seed=seed), x


def test_random_ops_with_a_seed_are_reproducible_and_g_seed_restarts():
    X = np.zeros(5, F32)
    g1, _ = random_graph(123)
    g2, _ = random_graph(123)
    runs1 = [g1.run(x=X) for _ in range(3)]
    runs2 = [g2.run(x=X) for _ in range(3)]
    for r1, r2 in zip(runs1, runs2):
        for a, b in zip(r1, r2):
            np.testing.assert_array_equal(a, b)
    assert not np.array_equal(runs1[0][0], runs1[1][0])   # fresh draws on every run
    g1.seed(123)
    for expected in runs1:
        for a, b in zip(g1.run(x=X), expected):
            np.testing.assert_array_equal(a, b)
    g1.seed(7)
    other = g1.run(x=X)
    assert not np.array_equal(other[0], runs1[0][0])
    g3, _ = random_graph(124)
    assert not np.array_equal(g3.run(x=X)[0], runs1[0][0])


def test_random_draws_have_the_declared_distribution_and_dtype():
    g = compile_as_written([], [N.random.uniform(2.0, 3.0, (20000,)),
                            N.random.normal(1.0, 0.5, (20000,), dtype=np.float64),
                            N.random.bernoulli(0.25, (20000,))], seed=0)
    u, n, b = g.run()
    assert u.dtype == F32 and n.dtype == np.float64 and b.dtype == F32
    assert 2.0 <= u.min() and u.max() < 3.0 and abs(u.mean() - 2.5) < 0.02
    assert abs(n.mean() - 1.0) < 0.02 and abs(n.std() - 0.5) < 0.02
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.25) < 0.02


def test_naive_evaluation_with_the_same_seed_draws_the_same_values():
    g, _ = random_graph(99)
    X = arange(5)
    naive = evaluate_naive(g.graph, {"x": X}, seed=99)
    for a, b in zip(g.run(x=X), naive):
        np.testing.assert_array_equal(a, b)


# -- stats ---------------------------------------------------------------------------
STATS_KEYS = {"nodes", "edges", "inputs", "outputs", "updates", "input_bytes", "const_bytes",
              "ops", "plan", "blocks", "planned_bytes", "lower_bound_bytes",
              "lower_bound_no_inplace_bytes", "naive_bytes", "plan_ratio", "inplace_values",
              "steps", "elided_steps", "build_seconds", "updates_into_variables"}


@pytest.mark.parametrize("plan", PLANS)
def test_stats_keys_and_values(plan):
    x = N.var("x", (1024,))
    w = N.var("w", (1024,))
    c = N.const(np.full(1024, 2.0, F32))
    a = x * w             # 4096 bytes, buffer A
    b = N.exp(a)          # in place over a
    s = N.sum(b * c)      # b * c in place over b; s: 4 bytes, pinned
    g = compile_as_written([x, w], [s], {w: w - b}, plan=plan, check=True, order="dfs")
    st = g.stats()
    assert set(st) >= STATS_KEYS
    # order (dfs): x, w, a, b, c, b*c, s ... then the update w - b. b is still needed by the
    # update, so b * c cannot overwrite it.
    assert st["nodes"] == 8 and st["edges"] == 8
    assert (st["inputs"], st["outputs"], st["updates"]) == (2, 1, 1)
    assert st["input_bytes"] == 2 * 4096 and st["const_bytes"] == 4096
    assert st["ops"] == {"const": 1, "exp": 1, "multiply": 2, "subtract": 1, "sum": 1,
                         "var": 2}
    assert st["plan"] == plan
    # nothing reads w after the update w - b, so the update is computed straight
    # into w: it has no planned bytes and needs no copy after the run
    assert st["updates_into_variables"] == 1
    assert st["naive_bytes"] == 4096 * 3 + 4
    # peak while s is computed: b (kept for the update), b * c and s
    assert g.liveness.live_bytes_per_step(inplace=False) == [4096, 8192, 8192, 8196, 4100]
    assert g.liveness.live_bytes_per_step() == [4096, 4096, 8192, 8196, 4100]
    assert st["lower_bound_no_inplace_bytes"] == st["lower_bound_bytes"] == 2 * 4096 + 4
    assert st["steps"] == 5 and st["elided_steps"] == 0
    assert st["inplace_values"] == len(g.plan.aliases) >= 1
    assert st["planned_bytes"] == g.plan.planned_bytes >= st["lower_bound_bytes"]
    assert st["blocks"] == len(g.plan.buffers) == (1 if plan == "offsets" else 3)
    assert st["plan_ratio"] == pytest.approx(st["planned_bytes"] / st["lower_bound_bytes"])
    assert 0 < st["build_seconds"] < 10
    assert repr(g) == (f"<graphc.Executable 8 nodes, 5 steps, {st['planned_bytes']} bytes "
                       f"planned ({plan})>")


def test_stats_of_a_graph_with_nothing_to_compute():
    x = N.var("x", (3,))
    st = compile_as_written([x], x).stats()
    assert (st["nodes"], st["edges"], st["steps"], st["blocks"]) == (1, 0, 0, 0)
    assert st["planned_bytes"] == st["lower_bound_bytes"] == st["naive_bytes"] == 0
    assert st["plan_ratio"] == 1.0


# -- DOT -----------------------------------------------------------------------------
NODE_LINE = re.compile(r'^  n(\d+) \[label="((?:[^"\\]|\\.)*)", fillcolor="(#[0-9a-f]{6})"'
                       r'(, penwidth=2)?\];$')
EDGE_LINE = re.compile(r'^  n(\d+) -> n(\d+)( \[style=dashed, label="update"\])?;$')


def parse_dot(text):
    lines = text.splitlines()
    assert lines[0] == "digraph graphc {" and lines[-1] == "}" and text.endswith("}\n")
    assert text.count("{") == text.count("}")
    nodes, edges, updates = {}, [], []
    for line in lines[1:-1]:
        m, e = NODE_LINE.match(line), EDGE_LINE.match(line)
        if m:
            nodes[int(m.group(1))] = (m.group(2), m.group(3), bool(m.group(4)))
        elif e:
            (updates if e.group(3) else edges).append((int(e.group(1)), int(e.group(2))))
        else:
            assert line.startswith(("  rankdir", "  node [", "  label=")), line
    return nodes, edges, updates


@pytest.mark.parametrize("plan", PLANS)
def test_to_dot_is_valid_and_nodes_sharing_a_buffer_share_a_colour(plan):
    x = N.var("x", (256,))
    w = N.var("w", (256,))
    a = N.exp(x)
    b = N.sin(a)
    c = N.cos(a)
    d = b * c                                  # in place over b or c
    m = N.sum(d) + N.max(a * a)
    g = compile_as_written([x, w], [m, d], {w: w - d}, plan=plan)
    text = g.to_dot()
    nodes, edges, updates = parse_dot(text)
    order = g.graph.order
    assert set(nodes) == {n.id for n in order}
    assert sorted(edges) == sorted((p.id, n.id) for n in order for p in n.parents)
    assert updates == [(g.graph.updates[0][1].id, w.id)]
    assert (f'label="graphc (optimised): {len(g.graph.order)} nodes, {plan} plan, '
            f'{g.plan.planned_bytes} bytes planned"') in text
    groups = g.memory_groups()
    colour = {n.id: nodes[n.id][1] for n in order}
    for n in order:
        label = nodes[n.id][0]
        assert n.op.kind in label
        if id(n) in groups:
            assert f"buffer {groups[id(n)]}" in label
        assert nodes[n.id][2] == (n is m or n is d or n is g.graph.updates[0][1])
    planned = [n for n in order if id(n) in groups]
    for p in planned:
        for q in planned:
            same = groups[id(p)] == groups[id(q)]
            if same:
                assert colour[p.id] == colour[q.id]
            elif len(set(groups.values())) <= 12:
                assert colour[p.id] != colour[q.id]
    # the in-place value shares its parent's colour
    assert colour[d.id] in (colour[b.id], colour[c.id])
    assert colour[x.id] == "#ffffff"


def test_to_dot_escapes_names_and_draws_unused_update_targets():
    x = N.var('say "hi"\\', (2,))
    w = N.var("w", (2,))
    g = compile_as_written([x, w], [x * 2.0], {w: x + 1.0})
    nodes, edges, updates = parse_dot(g.to_dot())
    assert w.id in nodes                      # declared although no output reads it
    assert 'say \\"hi\\"\\\\' in nodes[x.id][0]
    assert updates == [(g.graph.updates[0][1].id, w.id)]


# -- networkx ------------------------------------------------------------------------
def test_to_networkx_keeps_every_edge_and_attribute():
    x = N.var("x", (3, 4))
    sq = x * x                                 # two edges from x
    y = N.sum(sq, axis=1) + N.max(x)
    graph = to_networkx([y])
    assert isinstance(graph, nx.MultiDiGraph)
    assert nx.is_directed_acyclic_graph(graph)
    assert graph.number_of_nodes() == 5        # x, x*x, sum, max, add
    assert graph.number_of_edges() == 6
    assert graph.number_of_edges(x.id, sq.id) == 2
    assert sorted(d["slot"] for _, _, d in graph.in_edges(sq.id, data=True)) == [0, 1]
    attrs = graph.nodes[y.id]
    assert attrs["kind"] == "add" and attrs["shape"] == (3,) and attrs["dtype"] == "float32"
    assert attrs["where"].startswith("test_graph_api.py:")
    assert graph.nodes[x.id]["name"] == "x"
    assert list(nx.topological_sort(graph))[0] == x.id
    assert set(nx.descendants(graph, x.id)) == set(graph) - {x.id}
    # the compiled graph's structure agrees
    st = compile_as_written([x], y).stats()
    assert (st["nodes"], st["edges"]) == (graph.number_of_nodes(), graph.number_of_edges())


# -- scale ---------------------------------------------------------------------------
@pytest.mark.cpu_engine   # 100,000 tanh in NumPy's bits
def test_a_100000_node_chain_compiles_and_runs():
    x = N.var("x", (4,))
    y = x
    for _ in range(100_000):
        y = N.tanh(y)
    g = compile_as_written([x], y)
    st = g.stats()
    assert st["nodes"] == 100_001 and st["steps"] == 100_000
    assert st["planned_bytes"] == st["lower_bound_bytes"] == 16    # all in place
    X = np.full(4, 0.5, F32)
    expected = X.copy()
    for _ in range(100_000):
        expected = np.tanh(expected)
    np.testing.assert_array_equal(g.run(x=X), expected)
    assert len(g.to_dot().splitlines()) > 200_000
    assert to_networkx([y]).number_of_nodes() == 100_001


def test_constants_adopt_only_arrays_that_cannot_change():
    """A read-only owner, or a read-only view of immutable bytes, is adopted as a
    constant without a copy; a read-only view of a writeable array is copied (its
    owner could still change it)."""
    owner = np.arange(6, dtype=np.float32)
    owner.flags.writeable = False
    from_bytes = np.frombuffer(np.arange(6, dtype=np.float32).tobytes(), np.float32)
    writeable = np.arange(6, dtype=np.float32)
    view = writeable[:]
    view.flags.writeable = False
    x = N.var("x", (6,))
    for array, adopted in [(owner, True), (from_bytes, True), (view, False)]:
        const = (x + array).parents[1]   # an array passed to an op becomes a constant
        assert const.op.kind == "const"
        assert np.shares_memory(const.value, array) == adopted
        assert not const.value.flags.writeable
