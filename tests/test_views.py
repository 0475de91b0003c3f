"""Slices, transposes, broadcasts, flips and reshapes as views (compile(views=True),
the default): no planned bytes and no step of their own, read strided by the kernels
of their readers. Every graph here is compared with the same graph compiled with
views=False (every view a copy: exact bits, the same kernels on the same numbers) and
with NumPy itself."""
from __future__ import annotations

import numpy as np
import pytest

import graphc
import graphc.ndarray as N
from graphc.engine.strategy import STREAM_MIN

pytestmark = pytest.mark.cpu_engine   # views of every kind are the CPU program's

F64 = np.float64
RNG = np.random.default_rng(15)
KERNELS = ["numpy", "generated"]


def data(*shape):
    return RNG.standard_normal(shape)


def both(inputs, outputs, updates=None, **options):
    """The graph compiled with views and without (checked plans)."""
    return [graphc.compile(inputs, outputs, updates, check=True, views=views, **options)
            for views in (True, False)]


def same_runs(graphs, feeds_list):
    """Run every graph on each feed in turn; every run's outputs agree bit for bit
    across the graphs. Returns the outputs of the first graph, one list per run."""
    results = []
    for feeds in feeds_list:
        runs = [[np.array(o, copy=True) for o in g.run(**feeds)] for g in graphs]
        for other in runs[1:]:
            for got, want in zip(runs[0], other):
                np.testing.assert_array_equal(got, want)
        results.append(runs[0])
    return results


@pytest.mark.parametrize("kernels", KERNELS)
def test_slices_with_steps_and_negative_steps_are_views(kernels):
    x = N.var("x", (40, 30), F64)
    a = N.exp(x)
    y = a[::2, 1:-1] * 3.0 + a[::-2, -2:0:-1]
    with_views, copies = both([x], [y], kernels=kernels)
    X = data(40, 30)
    (got,), = same_runs([with_views, copies], [{"x": X}])
    A = np.exp(X)
    np.testing.assert_allclose(got, A[::2, 1:-1] * 3.0 + A[::-2, -2:0:-1], rtol=1e-13)
    assert with_views.stats()["view_values"] == 2 and copies.stats()["view_values"] == 0
    assert with_views.stats()["steps"] < copies.stats()["steps"]


def test_a_transpose_feeding_matmul_plans_exactly_its_bytes_fewer():
    x = N.var("x", (64, 64), F64)
    a = N.exp(x)                               # 32768 bytes
    y = N.matmul(N.transpose(a), a)            # a.T: a copy of 32768 bytes, or a view
    with_views, copies = both([x], [y], optimise=False)
    X = data(64, 64) * 0.1
    (got,), = same_runs([with_views, copies], [{"x": X}])
    np.testing.assert_allclose(got, np.exp(X).T @ np.exp(X), rtol=1e-12)
    # a and the output (a matmul cannot write over its input), and a.T only as a copy
    assert with_views.stats()["planned_bytes"] == 2 * 32768
    assert copies.stats()["planned_bytes"] == 3 * 32768
    assert with_views.stats()["lower_bound_bytes"] == 2 * 32768
    assert with_views.stats()["naive_bytes"] == 2 * 32768


@pytest.mark.parametrize("kernels", KERNELS)
def test_covariance_reads_the_centred_samples_transposed(kernels):
    s = N.var("s", (200, 16), F64)
    centred = s - N.mean(s, axis=0, keepdims=True)
    cov = (N.transpose(centred) @ centred) * (1.0 / 199)
    graphs = both([s], [cov], kernels=kernels, optimise=False)   # no matmul(trans_a=True)
    S = data(200, 16)
    (got,), = same_runs(graphs, [{"s": S}])
    np.testing.assert_allclose(got, np.cov(S, rowvar=False), rtol=1e-10, atol=1e-12)
    assert graphs[0].stats()["planned_bytes"] < graphs[1].stats()["planned_bytes"]


@pytest.mark.parametrize("kernels", KERNELS)
def test_broadcasts_and_flips_feeding_elementwise_ops(kernels):
    x, z = N.var("x", (1, 50), F64), N.var("z", (60, 50), F64)
    b = N.broadcast_to(N.sin(x), (60, 50))
    y = N.tanh(b * z + N.flip(N.cos(z), axis=0)) + N.flip(z)
    graphs = both([x, z], [y], kernels=kernels)
    X, Z = data(1, 50), data(60, 50)
    (got,), = same_runs(graphs, [{"x": X, "z": Z}])
    want = np.tanh(np.sin(X) * Z + np.flip(np.cos(Z), axis=0)) + np.flip(Z)
    np.testing.assert_allclose(got, want, rtol=1e-13)
    assert graphs[0].stats()["view_values"] >= 2


@pytest.mark.parametrize("kernels", KERNELS)
def test_a_chain_of_views_reads_its_root(kernels):
    x = N.var("x", (30, 40), F64)
    a = N.exp(x)
    chain = N.flip(N.transpose(a)[::3], axis=1)[:, 5:]      # three views of a
    y = N.sum(chain * 2.0, axis=0) + N.reshape(a, (40, 30))[0, :25]
    graphs = both([x], [y], optimise=False, kernels=kernels)
    X = data(30, 40)
    (got,), = same_runs(graphs, [{"x": X}])
    A = np.exp(X)
    want = np.sum(np.flip(A.T[::3], axis=1)[:, 5:] * 2.0, axis=0) + A.reshape(40, 30)[0, :25]
    np.testing.assert_allclose(got, want, rtol=1e-13)
    live = graphs[0].liveness
    assert {id(root) for root in live.views.values()} == {id(a)}
    assert len(live.views) == 6      # transpose, slice, flip, slice, reshape, slice


def test_a_view_of_an_input_variable_copies_nothing():
    x = N.var("x", (1000,), F64)
    y = x[1:] - x[:-1]
    with_views, copies = both([x], [y], optimise=False)
    feeds = [{"x": data(1000)} for _ in range(3)]
    for (got,), f in zip(same_runs([with_views, copies], feeds), feeds):
        np.testing.assert_array_equal(got, np.diff(f["x"]))
    assert with_views.stats()["planned_bytes"] == 999 * 8
    assert copies.stats()["planned_bytes"] == 2 * 999 * 8   # the difference over a copy


def test_a_viewed_value_is_overwritten_in_place_only_after_its_views_are_read():
    x = N.var("x", (4096,), F64)
    a = N.exp(x)
    evens = a[::2]                 # a view of a
    later = N.sin(a)               # may overwrite a in place: after every reader of evens
    product = evens * later[: 2048]
    y = N.sum(later) + N.sum(product)
    graphs = both([x], [y], optimise=False)
    X = data(4096) * 0.1
    (got,), = same_runs(graphs, [{"x": X}])
    A = np.exp(X)
    np.testing.assert_allclose(got, np.sum(np.sin(A)) + np.sum(A[::2] * np.sin(A)[:2048]),
                               rtol=1e-12)
    live = graphs[0].liveness
    assert id(evens) in live.views and live.last_use[id(a)] >= live.step_of[id(product)]
    assert all(p is not a for p in live.inplace.get(id(later), []))   # product reads a later


def test_a_value_read_both_directly_and_through_a_view_is_not_overwritten():
    x = N.var("x", (64,), F64)
    a = N.exp(x)
    y = a + N.flip(a)              # a dies here, but its flip is read here too
    graphs = both([x], [y], optimise=False)
    X = data(64)
    (got,), = same_runs(graphs, [{"x": X}])
    np.testing.assert_array_equal(got, np.exp(X) + np.flip(np.exp(X)))
    assert graphs[0].liveness.inplace.get(id(y), []) == []


@pytest.mark.parametrize("copy_outputs", [True, False])
def test_outputs_that_are_views_are_computed_into_their_own_memory(copy_outputs):
    x = N.var("x", (20, 10), F64)
    a = N.exp(x)
    t, s = N.transpose(a), a[::-3]
    graphs = both([x], [t, s, N.sum(a)], copy_outputs=copy_outputs)
    feeds = [{"x": data(20, 10)}, {"x": data(20, 10)}]
    for (got_t, got_s, _), f in zip(same_runs(graphs, feeds), feeds):
        np.testing.assert_array_equal(got_t, np.exp(f["x"]).T)
        np.testing.assert_array_equal(got_s, np.exp(f["x"])[::-3])
    assert graphs[0].stats()["view_values"] == 0


def test_updates_of_a_variable_read_through_a_view():
    w = N.var("w", (256,), F64)
    flipped = N.flip(w)
    new_w = w * 0.5 + flipped        # reads w through its flip: not computed into w
    graphs = both([w], [N.sum(flipped[::4])], {w: new_w}, optimise=False)
    W = data(256)
    for g in graphs:
        g.assign(w=W)
    expected = W.copy()
    for _ in range(3):
        (got,), = same_runs(graphs, [{}])
        np.testing.assert_allclose(got, np.sum(np.flip(expected)[::4]), rtol=1e-13)
        expected = expected * 0.5 + np.flip(expected)
        for g in graphs:
            np.testing.assert_array_equal(g.value("w"), expected)
    assert graphs[0].stats()["updates_into_variables"] == 0


def test_an_update_computed_into_its_variable_waits_for_readers_of_its_views():
    w, x = N.var("w", (300,), F64), N.var("x", (300,), F64)
    seen = N.sum(w[::-1] * x)          # reads w through a view
    new_w = N.exp(x) * 0.5             # reads no w: may go straight into w, after `seen`
    graphs = both([w, x], [seen], {w: new_w}, optimise=False)
    W, X = data(300), data(300)
    for g in graphs:
        g.assign(w=W)
    (got,), = same_runs(graphs, [{"x": X}])
    np.testing.assert_allclose(got, np.sum(W[::-1] * X), rtol=1e-13)
    for g in graphs:
        np.testing.assert_array_equal(g.value("w"), np.exp(X) * 0.5)
    assert graphs[0].stats()["updates_into_variables"] == 1


@pytest.mark.parametrize("schedule", ["parallel", "parallel_reuse"])
@pytest.mark.parametrize("kernels", KERNELS)
def test_parallel_schedules_with_views(schedule, kernels):
    x, w = N.var("x", (48, 32), F64), N.var("w", (32, 32), F64)
    a, b = N.exp(x * 0.1), N.sin(x)
    left = N.transpose(a[::2]) @ b[1::2]         # two branches, each reading views
    right = N.sum(N.flip(b, axis=0)[:, ::-1] * a, axis=1)
    updates = {w: w * 0.9 + N.transpose(left) * 0.1}
    graphs = [graphc.compile([x, w], [left, right], updates, check=True, views=v,
                             schedule=s, workers=2, kernels=kernels)
              for v, s in ((True, schedule), (False, schedule), (True, "serial"))]
    W = data(32, 32)
    for g in graphs:
        g.assign(w=W)
    for _ in range(2):
        same_runs(graphs, [{"x": data(48, 32)}])
        np.testing.assert_array_equal(graphs[0].value("w"), graphs[2].value("w"))
    assert graphs[0].stats()["view_values"] >= 3


def test_incremental_runs_recompute_a_root_whose_bytes_were_reused():
    x, w = N.var("x", (64,), F64), N.var("w", (64,), F64)
    a = N.exp(w)                     # depends on w only
    y = N.sum(a[::-1] * x) + N.sum(N.sin(x) * N.cos(x))
    graphs = both([x, w], [y], optimise=False)
    X, W = data(64), data(64)
    same_runs(graphs, [{"x": X, "w": W}])
    for _ in range(2):               # w unchanged: exp(w) may or may not be recomputed
        X = data(64)
        (got,), = same_runs(graphs, [{"x": X}])
        np.testing.assert_allclose(got, np.sum(np.exp(W)[::-1] * X)
                                   + np.sum(np.sin(X) * np.cos(X)), rtol=1e-13)
    (got,), = same_runs(graphs, [{"w": 2 * W}])
    np.testing.assert_allclose(got, np.sum(np.exp(2 * W)[::-1] * X)
                               + np.sum(np.sin(X) * np.cos(X)), rtol=1e-13)


@pytest.mark.parametrize("kernels", KERNELS)
def test_a_large_fused_stencil_reads_its_shifted_slices_in_place(kernels):
    n = 300                                   # the interior has more than STREAM_MIN cells
    assert (n - 2) ** 2 >= STREAM_MIN
    u = N.var("u", (n, n), F64)
    interior = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    y = N.pad(interior, 1)
    graphs = both([u], [y], kernels=kernels)
    U = data(n, n)
    (got,), = same_runs(graphs, [{"u": U}])
    want = np.pad(0.25 * (U[:-2, 1:-1] + U[2:, 1:-1] + U[1:-1, :-2] + U[1:-1, 2:]), 1)
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)
    s_views, s_copies = (g.stats() for g in graphs)
    assert s_views["view_values"] == 4
    # the interior and the padded result; the copies cost two more interiors (each
    # sum of two slices is written over one of them)
    interior_bytes = (n - 2) ** 2 * 8
    assert s_views["planned_bytes"] == interior_bytes + n * n * 8
    assert s_copies["planned_bytes"] == 3 * interior_bytes + n * n * 8


def test_a_reader_that_cannot_read_strided_memory_gets_a_copy():
    x = N.var("x", (2, 3, 8, 8), F64)
    flipped = N.flip(N.exp(x), axis=3)      # max pooling's kernel needs contiguous input
    y = N.max_pool2d(flipped, 2) + N.sum(flipped)
    graphs = both([x], [y], optimise=False)
    X = data(2, 3, 8, 8)
    (got,), = same_runs(graphs, [{"x": X}])
    F = np.flip(np.exp(X), axis=3)
    pooled = F.reshape(2, 3, 4, 2, 4, 2).max(axis=(3, 5))
    np.testing.assert_allclose(got, pooled + F.sum(), rtol=1e-13)
    assert graphs[0].stats()["view_values"] == 0


def test_views_false_copies_every_slice():
    x = N.var("x", (16,), F64)
    g = graphc.compile([x], [N.exp(x)[::2] * 2.0], views=False, optimise=False)
    assert g.stats()["view_values"] == 0 and not g.liveness.views
    np.testing.assert_array_equal(g.run(x=np.arange(16.0))[0], np.exp(np.arange(16.0))[::2] * 2)


def test_a_known_0d_integer_index_is_a_basic_index_and_a_view():
    """``x[i]`` with ``i`` a constant 0-d integer array (ONNX's Gather of one constant
    index: torchvision's swin_t splits q, k, v so) indexes as the integer does in
    NumPy: a slice, read in place, not a gather copying the slab."""
    x = N.var("x", (3, 4, 5))
    qkv = N.transpose(x * 2.0, (0, 2, 1))
    parts = [qkv[N.asarray(np.int64(i))] for i in (0, 1, -1)]
    assert all(p.op.kind == "slice" and p.shape == (5, 4) for p in parts)
    g = graphc.compile([x], [p @ N.ones((4, 2), np.float32) for p in parts])
    assert "take" not in {n.op.kind for n in g.liveness.steps}
    assert g.stats()["view_values"] >= 3
    X = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    for got, i in zip(g.run(x=X), (0, 1, -1)):
        np.testing.assert_allclose(got, (X * 2.0).transpose(0, 2, 1)[np.array(i)] @ np.ones((4, 2)),
                                   rtol=1e-6)
    with pytest.raises(graphc.IndexOutOfRange, match="index 3 is out of bounds for axis 0"):
        qkv[N.asarray(np.int64(3))]
