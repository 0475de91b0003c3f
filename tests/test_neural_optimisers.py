"""Optimisers: a compiled graph step, an eager step (NumPy and graphc.eager)
and an independent float64 transcription of each update formula agree."""
import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.neural.optimisers import SGD, AdaGrad, Adam
from opcheck import examples


def reference(opt, p, grads):
    """The textbook formulas in float64, one step per gradient in ``grads``."""
    p = p.astype(np.float64)
    a = np.zeros_like(p)
    b = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        if isinstance(opt, SGD) and opt.momentum:
            a = opt.momentum * a + g
            p = p - opt.lr * a
        elif isinstance(opt, SGD):
            p = p - opt.lr * g
        elif isinstance(opt, AdaGrad):
            a = a + g ** 2
            p = p - opt.lr * g / np.sqrt(a + opt.eps)
        else:
            a = opt.b1 * a + (1 - opt.b1) * g
            b = opt.b2 * b + (1 - opt.b2) * g ** 2
            m_hat, v_hat = a / (1 - opt.b1 ** t), b / (1 - opt.b2 ** t)
            p = p - opt.lr * m_hat / (np.sqrt(v_hat) + opt.eps)
    return p


def graph_steps(opt, p0, grads, plan="blocks"):
    w = N.var("w", p0.shape)
    g = N.var("g", p0.shape)
    state, updates = opt.graph_updates({"w": w}, {"w": g})
    step = graphc.compile([w, g, *state], N.sum(w), updates, plan=plan, check=True)
    step.assign(w=p0, **{v.name: value for v, value in state.items()})
    for grad in grads:
        step.run(g=grad)
    return step.value("w"), step


def eager_steps(opt, p0, grads, ns=np):
    params = {"w": p0.copy()}
    state = opt.init_eager(params)
    for grad in grads:
        opt.eager_step(params, {"w": grad}, state, ns=ns)
    return params["w"], state


OPTIMISERS = [SGD(0.1), SGD(0.05, momentum=0.9), AdaGrad(0.1, eps=1e-6),
              Adam(0.01), Adam(0.003, b1=0.8, b2=0.99, eps=1e-4)]


@pytest.mark.parametrize("opt", OPTIMISERS, ids=lambda o: f"{type(o).__name__}")
@examples(10)
@given(data=st.data())
def test_graph_eager_and_formula_agree(opt, data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
    floats = st.floats(-3, 3, width=32)
    p0 = data.draw(hnp.arrays(np.float32, shape, elements=floats))
    steps = data.draw(st.integers(1, 3))
    grads = [data.draw(hnp.arrays(np.float32, shape, elements=floats)) for _ in range(steps)]
    plan = data.draw(st.sampled_from(["blocks", "offsets"]))
    graph, _ = graph_steps(opt, p0, grads, plan)
    eager, _ = eager_steps(opt, p0, grads)
    via_graphc_eager, _ = eager_steps(opt, p0, grads, ns=E)
    assert graph.dtype == eager.dtype == np.float32
    np.testing.assert_allclose(graph, eager, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(via_graphc_eager, eager, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(eager, reference(opt, p0, grads), rtol=1e-4, atol=1e-5)


def test_state_variables_and_their_initial_values():
    w = N.var("layer.w", (3, 2))
    state, updates = Adam().graph_updates({"layer.w": w}, {"layer.w": w * 2.0})
    names = sorted(v.name for v in state)
    assert names == ["adam.m:layer.w", "adam.step", "adam.v:layer.w"]
    for var, value in state.items():
        assert value.shape == var.shape and value.dtype == var.dtype and not value.any()
    assert set(updates) == set(state) | {w}
    assert SGD(0.1).graph_updates({"w": w}, {"w": w})[0] == {}


def test_adam_step_counter_counts():
    p0 = np.ones(4, np.float32)
    _, step = graph_steps(Adam(), p0, [p0] * 3)
    assert step.value("adam.step") == 3
    _, state = eager_steps(Adam(), p0, [p0] * 3)
    assert state["adam.step"] == 3


def test_adagrad_is_fused_by_the_optimiser():
    p0 = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    _, step = graph_steps(AdaGrad(0.1), p0, [p0])
    assert step.stats()["optimiser_changes"].get("adagrad", 0) >= 1
    assert any(n.op.kind == "fused_adagrad" or (
        n.op.kind == "fused" and any(i.kind == "fused_adagrad" for i, _ in n.op["program"]))
        for n in step.graph.order)


def test_eager_step_updates_in_place_only_parameters_with_gradients():
    params = {"a": np.ones(3, np.float32), "b": np.ones(2, np.float32)}
    a, b = params["a"], params["b"]
    opt = SGD(0.5, momentum=0.5)
    state = opt.init_eager(params)
    opt.eager_step(params, {"a": np.ones(3, np.float32)}, state)
    assert params["a"] is a and params["b"] is b
    np.testing.assert_array_equal(a, 0.5)
    np.testing.assert_array_equal(b, 1.0)
    np.testing.assert_array_equal(state["sgd.velocity:a"], 1.0)
