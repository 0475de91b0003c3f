"""The memory-aware evaluation order (``compile(order="memory")``, the default):
a topological order of every node, deterministic, giving exactly the results of
the depth-first order, and never a larger live-bytes lower bound than it."""
import math

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import graphc
import graphc.ndarray as N
import graphc.neural as nn
from graphc.engine.liveness import last_fallible_step
from graphc.engine.ordering import memory_order
from graphc.engine.strategy import STREAM_MIN
from graphc.graph import Graph
from graphc.type.kinds import KINDS
from test_plan_random import build_graph, programs, random_inputs

F32 = np.float32


def assert_topological(order, graph):
    """Every node of ``graph.order`` once, each after its parents."""
    assert sorted(map(id, order)) == sorted(map(id, graph.order))
    position = {id(n): i for i, n in enumerate(order)}
    for n in order:
        for p in n.parents:
            assert position[id(p)] < position[id(n)], (n, p)


def compile_both(inputs, outputs, updates, **options):
    return {order: graphc.compile(inputs, outputs, updates, order=order, check=True, **options)
            for order in ("memory", "dfs")}


def small_training_step(make, shape, optimiser):
    model = make()
    inputs, loss, updates, state = nn.training_graph(model, optimiser, shape)
    graphs = compile_both(inputs, loss, updates, seed=0)
    params = model.init(1)
    for g in graphs.values():
        g.assign(**params)
        g.assign(**{var.name: value for var, value in state.items()})
    return model, graphs


# -- the order itself ---------------------------------------------------------------------
@given(programs(max_ops=20))
def test_memory_order_is_a_deterministic_topological_order(program):
    note(repr(program["instrs"]))
    graph = Graph(*build_graph(program))
    order = memory_order(graph)
    assert_topological(order, graph)
    assert [id(n) for n in memory_order(graph)] == [id(n) for n in order]
    # the same program built again is ordered the same way (no dependence on ids)
    again = Graph(*build_graph(program))
    assert [n.op for n in memory_order(again)] == [n.op for n in order]


def test_memory_order_of_a_training_step_is_topological():
    inputs, loss, updates, _ = nn.training_graph(nn.ResNet((1, 1, 1, 1), classes=5, width=4),
                                                 nn.SGD(0.1, momentum=0.9), (2, 3, 16, 16))
    graph = Graph(inputs, [loss], updates)
    assert_topological(memory_order(graph), graph)


def test_random_draws_keep_their_order():
    """The generator is one sequence: the draws come in the depth-first order even
    where the memory order would run the second one first (``small`` is needed
    sooner: ``late`` waits for the product it multiplies)."""
    x = N.var("x", (64, 64))
    late = N.random.uniform(size=(64, 64), dtype=F32)        # drawn first
    small = N.random.normal(size=(64, 64), dtype=F32)
    out = N.sum(late * (N.exp(x) * small))
    graphs = compile_both([x], [out, N.sum(small)], None, seed=3, optimise=False)
    draws = {order: [n.op.kind for n in g.liveness.steps if KINDS[n.op.kind].stateful]
             for order, g in graphs.items()}
    assert draws["memory"] == draws["dfs"] == ["random_uniform", "random_normal"]
    feed = np.random.default_rng(0).standard_normal((64, 64)).astype(F32)
    for _ in range(2):
        memory, dfs = (graphs[o].run(x=feed) for o in ("memory", "dfs"))
        for got, want in zip(memory, dfs):
            np.testing.assert_array_equal(got, want)


# -- results: exactly the depth-first order's -------------------------------------------------
@given(programs(max_ops=16), st.integers(0, 2**32 - 1))
def test_random_programs_give_the_results_of_the_dfs_order(program, seed):
    note(repr(program["instrs"]))
    rng = np.random.default_rng(seed)
    names = [program["instrs"][v][1] for v in program["variables"]]
    graphs = compile_both(*build_graph(program))
    memory, dfs = graphs["memory"].stats(), graphs["dfs"].stats()
    assert memory["lower_bound_bytes"] <= dfs["lower_bound_bytes"]
    feeds = random_inputs(program, rng, names)
    for _ in range(2):         # the second run starts from the updated variables
        with np.errstate(all="ignore"):
            got, want = graphs["memory"].run(**feeds), graphs["dfs"].run(**feeds)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
        for name in names:
            np.testing.assert_array_equal(graphs["memory"].value(name),
                                          graphs["dfs"].value(name))


@pytest.mark.parametrize("make, shape, optimiser", [
    (lambda: nn.MnistCNN(image_size=8, hidden=16, dropout=0.5), (4, 1, 8, 8),
     nn.AdaGrad(0.05, eps=1e-3)),
    (lambda: nn.ResNet((1, 1, 1, 1), classes=5, width=4), (2, 3, 16, 16),
     nn.SGD(0.05, momentum=0.9)),
], ids=["mnist-small", "resnet-tiny"])
def test_training_steps_give_the_results_of_the_dfs_order(make, shape, optimiser):
    """The same kernels on the same operands in another order: the same bits, the
    dropout masks included, over steps that use the optimiser state."""
    model, graphs = small_training_step(make, shape, optimiser)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = np.abs(rng.standard_normal(shape)).astype(F32)
        labels = rng.integers(0, model.classes, shape[0])
        losses = {order: g.run(x=x, labels=labels) for order, g in graphs.items()}
        np.testing.assert_array_equal(losses["memory"], losses["dfs"])
        for var in graphs["dfs"].graph.inputs:
            np.testing.assert_array_equal(graphs["memory"].value(var.name),
                                          graphs["dfs"].value(var.name), err_msg=var.name)


# -- memory facts ----------------------------------------------------------------------------
@pytest.mark.parametrize("make, shape, optimiser", [
    (lambda: nn.MnistCNN(), (16, 1, 28, 28), nn.AdaGrad(0.005)),
    (lambda: nn.ResNet((1, 1, 1, 1), classes=5, width=8), (4, 3, 32, 32),
     nn.SGD(0.05, momentum=0.9)),
], ids=["mnist", "resnet-small"])
def test_training_steps_plan_less_memory_than_the_dfs_order(make, shape, optimiser):
    """A weight's gradient runs once the activation's other readers ran, not when
    the depth-first search reaches that weight's update at the end of the step."""
    _, graphs = small_training_step(make, shape, optimiser)
    memory, dfs = graphs["memory"].stats(), graphs["dfs"].stats()
    assert memory["lower_bound_bytes"] < dfs["lower_bound_bytes"]
    assert memory["planned_bytes"] < dfs["planned_bytes"]
    assert memory["updates_into_variables"] >= dfs["updates_into_variables"]


def test_an_update_waits_for_its_variables_last_reader():
    """Two layers with the second layer's update listed first: the depth-first
    order computes it before the first layer's gradient reads w2, so it cannot go
    into w2; the memory order runs it after that read, into w2. (Weights of
    STREAM_MIN elements: a fused ``w - lr * g`` then streams, so it may write over w.)"""
    side = math.isqrt(STREAM_MIN)
    x, w1, w2 = N.var("x", (8, side)), N.var("w1", (side, side)), N.var("w2", (side, side))
    h = N.tanh(x @ w1)
    y = h @ w2
    dy = 2.0 * y
    dw2 = N.transpose(h) @ dy
    dh = (dy @ N.transpose(w2)) * (1.0 - h * h)
    dw1 = N.transpose(x) @ dh
    updates = {w2: w2 - 0.01 * dw2, w1: w1 - 0.01 * dw1}
    graphs = compile_both([x, w1, w2], [N.sum(y * y)], updates)
    memory, dfs = graphs["memory"].stats(), graphs["dfs"].stats()
    assert memory["updates_into_variables"] > dfs["updates_into_variables"]
    assert memory["planned_bytes"] < dfs["planned_bytes"]
    rng = np.random.default_rng(0)
    feeds = {name: rng.standard_normal(v.shape).astype(F32) * 0.1
             for name, v in (("x", x), ("w1", w1), ("w2", w2))}
    for _ in range(2):
        got = {order: g.run(**feeds) for order, g in graphs.items()}
        np.testing.assert_array_equal(got["memory"], got["dfs"])
        feeds = {"x": feeds["x"]}
    for name in ("w1", "w2"):
        np.testing.assert_array_equal(graphs["memory"].value(name), graphs["dfs"].value(name))


def test_no_variable_is_written_before_a_step_that_may_fail():
    """A bad index fed at run time raises before any update is written, whatever
    the order moved forward."""
    table, w = N.var("table", (16, 8)), N.var("w", (8, 8))
    idx = N.var("idx", (4,), np.int64)
    h = N.take(table, idx, axis=0) @ w
    loss = N.sum(h * h)
    updates = {w: w - 0.01 * (N.transpose(N.take(table, idx, axis=0)) @ (2.0 * h)),
               table: table * 0.5}
    g = graphc.compile([table, w, idx], loss, updates, check=True)
    live = g.liveness
    first_write = min((live.step_of[k] for k in live.external), default=live.end)
    assert first_write > last_fallible_step(live.steps)
    rng = np.random.default_rng(0)
    start = {"table": rng.standard_normal((16, 8)).astype(F32),
             "w": rng.standard_normal((8, 8)).astype(F32)}
    g.assign(**start)
    with pytest.raises(IndexError):
        g.run(idx=np.array([0, 1, 2, 99]))
    for name, value in start.items():
        np.testing.assert_array_equal(g.value(name), value)
    g.run(idx=np.array([0, 1, 2, 3]))
    assert not np.array_equal(g.value("table"), start["table"])


def test_inference_graphs_keep_a_plan_no_larger_than_the_dfs_order():
    model = nn.ResNet((1, 1, 1, 1), classes=5, width=8)
    params = nn.fold_batchnorm(model, model.init(0))
    plans = {order: nn.compile_inference(model, params, (1, 3, 32, 32), order=order)
             for order in ("memory", "dfs")}
    memory, dfs = (plans[o].stats() for o in ("memory", "dfs"))
    assert memory["lower_bound_bytes"] <= dfs["lower_bound_bytes"]
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(F32)
    np.testing.assert_array_equal(plans["memory"].run(x=x), plans["dfs"].run(x=x))


def test_pass_report_plans_in_the_compiled_order():
    inputs, loss, updates, _ = nn.training_graph(nn.MnistCNN(), nn.AdaGrad(0.005),
                                                 (8, 1, 28, 28))
    for order in ("memory", "dfs"):
        g = graphc.compile(inputs, loss, updates, order=order)
        assert g.pass_report()[-1]["planned_bytes"] == g.stats()["planned_bytes"]


def test_an_unknown_order_is_refused_before_any_work():
    x = N.var("x", (3,))
    with pytest.raises(ValueError, match=r"unknown order 'bfs'.*\['memory', 'dfs'\]"):
        graphc.compile([x], N.exp(x), order="bfs")


def test_updates_last_or_early():
    """Updates computed into their variables run after every other step ("last"),
    or right after their variable's last reader ("early"); both are topological
    and give the same results; an unknown placement is refused."""
    x, w1, w2 = N.var("x", (4, 4)), N.var("w1", (4, 4)), N.var("w2", (4, 4))
    h = N.tanh(x @ w1)
    y = h @ w2
    dw1 = N.transpose(x) @ (y @ N.transpose(w2))
    g = Graph([x, w1, w2], [N.sum(y)], {w2: w2 - N.transpose(h) @ y, w1: w1 - dw1})
    updates = {id(v) for _, v in g.updates}
    for place in ("last", "early"):
        order = memory_order(g, updates=place)
        assert_topological(order, g)
        positions = [k for k, n in enumerate(order) if id(n) in updates]
        computed = [k for k, n in enumerate(order) if n.parents]
        if place == "last":
            assert positions == computed[-len(positions):]
        else:
            assert positions[0] < computed[-len(positions)]
    with pytest.raises(ValueError, match="updates must be one of"):
        memory_order(g, updates="first")
