"""Rematerialisation (``compile(remat=...)``, graphc/engine/remat.py): cheap forward
values recomputed for their late (backward) readers give the same bits as the
graph without it, with a strictly lower live-bytes lower bound on a training
step with batch norm; a budget is met where reachable and reported where not;
random draws and steps that may fail are never recomputed."""
import warnings

import numpy as np
import pytest

import graphc
import graphc.ndarray as N
import graphc.neural as nn
from graphc.engine.ordering import choose_order
from graphc.engine.remat import candidates, remat_order
from graphc.graph import Graph

F32 = np.float32


def resnet_step(kernels="numpy", **options):
    """A small ResNet's training step (convolutions, batch norm, ReLU, residual
    adds; SGD with momentum), compiled with ``options``, and its model."""
    model = nn.ResNet((1, 1, 1, 1), classes=5, width=16)
    inputs, loss, updates, state = nn.training_graph(model, nn.SGD(0.05, momentum=0.9),
                                                     (4, 3, 32, 32))
    g = graphc.compile(inputs, loss, updates, seed=0, check=True, kernels=kernels, **options)
    g.assign(**model.init(1))
    g.assign(**{var.name: value for var, value in state.items()})
    return model, g


def assert_same_training(model, graphs, shape, steps=3):
    """Every loss and every variable (weights, momenta, running statistics) the
    same bits in each graph of ``graphs``, over ``steps`` steps."""
    rng = np.random.default_rng(0)
    first, *others = graphs
    for _ in range(steps):
        x = rng.standard_normal(shape).astype(F32)
        labels = rng.integers(0, model.classes, shape[0])
        losses = [g.run(x=x, labels=labels) for g in graphs]
        for loss in losses[1:]:
            np.testing.assert_array_equal(loss, losses[0])
    for g in others:
        for var in first.graph.inputs:
            np.testing.assert_array_equal(g.value(var.name), first.value(var.name),
                                          err_msg=var.name)


@pytest.mark.parametrize("kernels", ["numpy", "generated"])
def test_a_training_step_with_remat_gives_the_same_bits(kernels):
    """A recomputed value is the same kernel on the same operands: the losses and
    the updated variables are those without remat, bit for bit, step after step."""
    if kernels == "generated":
        pytest.importorskip("numba")
    model, plain = resnet_step(kernels)
    _, remat = resnet_step(kernels, remat="auto")
    assert remat.stats()["rematerialised_values"] > 0
    assert_same_training(model, [plain, remat], (4, 3, 32, 32))


def test_remat_strictly_lowers_the_lower_bound_of_a_training_step():
    _, plain = resnet_step()
    _, remat = resnet_step(remat="auto")
    before, after = plain.stats(), remat.stats()
    assert after["lower_bound_bytes"] < before["lower_bound_bytes"]
    assert after["remat_saved_bytes"] == (before["lower_bound_bytes"]
                                          - after["lower_bound_bytes"])
    # the clones are new steps: the recomputation the saving costs
    assert after["steps"] > before["steps"]
    assert before["rematerialised_values"] == before["remat_saved_bytes"] == 0


def test_clones_run_just_before_their_late_readers():
    """The memory order runs a clone as late as the depth-first order allows, not
    where its parents become ready (it frees nothing)."""
    x = N.var("x", (256, 256)); w = N.var("w", (256, 256))
    h = N.relu(x)
    b = N.tanh(N.tanh(h @ w) @ w)
    graph = Graph([x, w], [N.sum(h * b)])
    twin, planned, live, report = remat_order(graph, "auto", views=True)
    assert report.values == 1 and report.after < report.before
    steps = [n for n in planned.order if n.parents]
    relus = [i for i, n in enumerate(steps) if n.op.kind == "relu"]
    multiply = next(i for i, n in enumerate(steps) if n.op.kind == "multiply")
    assert relus[0] == 0 and relus[1] == multiply - 1
    # the graph given is left as it was
    assert len(graph.order) == len(twin.order) - 1
    X = np.random.default_rng(0).standard_normal((256, 256)).astype(F32)
    W = (np.random.default_rng(1).standard_normal((256, 256)) / 16).astype(F32)
    outs = [graphc.compile([x, w], N.sum(h * b), remat=r, check=True,
                           kernels="numpy").run(x=X, w=W) for r in (None, "auto")]
    np.testing.assert_array_equal(outs[0], outs[1])


def test_a_reachable_budget_is_met_with_the_fewest_clones():
    _, plain = resnet_step()
    _, everything = resnet_step(remat="auto")
    lowest = everything.stats()["lower_bound_bytes"]
    start = plain.stats()["lower_bound_bytes"]
    budget = (lowest + start) // 2
    model, within = resnet_step(remat=budget)
    s = within.stats()
    assert s["lower_bound_bytes"] <= budget
    assert 0 < s["rematerialised_values"] <= everything.stats()["rematerialised_values"]
    assert_same_training(model, [plain, within], (4, 3, 32, 32), steps=1)
    # a budget already met changes nothing
    _, loose = resnet_step(remat=start)
    assert loose.stats()["rematerialised_values"] == 0
    assert loose.stats()["lower_bound_bytes"] == start


def test_an_unreachable_budget_warns_and_keeps_the_best_bound():
    _, everything = resnet_step(remat="auto")
    with pytest.warns(RuntimeWarning, match=r"remat budget 1024 bytes is out of reach.*"
                                            r"lower bound from \d+ to \d+ bytes"):
        _, tight = resnet_step(remat=1024)
    assert tight.stats()["lower_bound_bytes"] == everything.stats()["lower_bound_bytes"]


@pytest.mark.parametrize("remat", ["never", 0, -5, True, [1]])
def test_a_bad_remat_option_is_refused_before_any_work(remat):
    x = N.var("x", (2,))
    with pytest.raises(ValueError, match="compile: remat must be None, 'auto' or a memory "
                                         "budget in bytes"):
        graphc.compile([x], N.exp(x), remat=remat)


def test_random_draws_and_fallible_steps_are_never_recomputed():
    """A second draw would differ, and a step that may fail must fail once: a
    dropout-like mask and a gather, both read early and late, are held, while the
    cheap value computed from them is recomputed."""
    x = N.var("x", (256, 256)); w = N.var("w", (256, 256)); i = N.var("i", (256,), "int64")
    mask = N.random.bernoulli(0.5, (256, 256))
    rows = N.take(x, i, axis=0)                       # may fail on a bad index
    h = N.relu(x) * mask + rows
    deep = N.tanh(N.tanh(h @ w) @ w)
    loss = N.sum(deep * h * mask * rows)
    _, live = choose_order(Graph([x, w, i], [loss]), views=True)
    found = candidates(live, min_gap=1)
    picked = {c.node.op.kind for c in found} | {a.op.kind for c in found for a in c.chain}
    assert picked and not picked & {"random_bernoulli", "take"}
    X = np.random.default_rng(0).standard_normal((256, 256)).astype(F32)
    I = np.arange(256)[::-1].copy()
    outs, clones = [], []
    for remat in (None, "auto"):
        g = graphc.compile([x, w, i], loss, seed=3, remat=remat, check=True, kernels="numpy")
        outs.append([g.run(x=X, w=X / 256, i=I) for _ in range(2)])  # two draws each
        clones.append(g.stats()["rematerialised_values"])
    assert clones == [0, 1]
    np.testing.assert_array_equal(outs[0], outs[1])
    assert outs[0][0] != outs[0][1]      # the draws differ from run to run


def test_compile_training_passes_remat_through():
    model = nn.ResNet((1, 1, 1, 1), classes=5, width=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trainer = nn.compile_training(model, nn.SGD(0.05), (4, 3, 32, 32), remat="auto",
                                      kernels="numpy")
    assert trainer.executable.stats()["rematerialised_values"] > 0


def test_model_compile_passes_remat_through():
    """``Model.compile``'s options reach ``graphc.compile``: training with remat
    gives the losses and parameters of training without it."""
    x = np.random.default_rng(0).standard_normal((4, 3, 32, 32)).astype(F32)
    labels = np.arange(4) % 5
    runs = []
    for remat in (None, "auto"):
        model = nn.ResNet((1, 1, 1, 1), classes=5, width=16)
        model.compile([x, labels], is_train=True, use_graph=True, optimiser=nn.SGD(0.05),
                      kernels="numpy", check=True, remat=remat)
        runs.append(([model.train_one_batch(x, labels) for _ in range(2)], model.params()))
    assert runs[0][0] == runs[1][0]
    for name, value in runs[0][1].items():
        np.testing.assert_array_equal(runs[1][1][name], value, err_msg=name)
