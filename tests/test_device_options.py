"""The device program's options and kinds beyond elementwise: CUDA-graph replay
(``compile(capture=True)``), TF32 matrix products, fused reductions, random draws
and device-array feeds. On a CPU machine they run on the stand-in backend of
tests/test_device_program.py (NumPy for CuPy, gcc for the kernels, a recorder for
stream capture); with ``GRAPHC_TEST_GPU=1`` on CuPy and a real GPU."""
import dataclasses

import numpy as np
import pytest

import graphc
import graphc.ndarray as N
import graphc.neural as nn
import graphc.engine.devices as devices
from graphc import DeviceError
from graphc.engine.cuda_graphs import GemmStep, is_library_call
from graphc.engine.cuda_reduce import reduction_stages

from c_kernels import GCC, GPU
from test_device_program import _close, fake_cuda  # noqa: F401  (the fixture)

needs_gcc = pytest.mark.skipif(GCC is None and not GPU, reason="gcc is not installed")


def _mlp():
    x, w, b = N.var("x", (64, 32)), N.var("w", (32, 16)), N.var("b", (16,))
    h = N.maximum(x @ w + b, 0.0)
    logits = h @ N.transpose(w[:16, :])
    soft = N.exp(logits - N.max(logits, axis=1, keepdims=True))
    return [x, w, b], [soft / N.sum(soft, axis=1, keepdims=True), N.mean(h * h)]


def _feeds(rng):
    return {"x": rng.standard_normal((64, 32)).astype(np.float32),
            "w": rng.standard_normal((32, 16)).astype(np.float32) * 0.3,
            "b": rng.standard_normal(16).astype(np.float32)}


@needs_gcc
def test_capture_replays_what_plain_launches_compute(fake_cuda):
    inputs, outputs = _mlp()
    plain = graphc.compile(inputs, outputs, device="cuda")
    captured = graphc.compile(inputs, outputs, device="cuda", capture=True)
    cpu = graphc.compile(inputs, outputs)
    rng = np.random.default_rng(0)
    for run in range(4):             # run 1 plain, 2 captured, then replayed; new data each
        feeds = _feeds(rng)
        want = cpu.run(**feeds)
        for got in (plain.run(**feeds), captured.run(**feeds)):
            for g, w in zip(got, want):
                _close(g, w, f"run {run}")
    stats = captured.stats()
    assert stats["captured_graphs"] >= 1 and stats["graph_replays"] >= 3
    # the matrix products are captured too (through graphc's own cuBLAS handle): a
    # replay is one launch
    assert stats["replay_launches"] == 1
    assert sum(isinstance(k, GemmStep) for k in captured.program.steps) == 2
    assert plain.stats()["captured_graphs"] == 0


@needs_gcc
def test_products_go_between_graphs_where_capturing_them_fails(fake_cuda, monkeypatch):
    """Where a product cannot be captured (CuPy's refusal of cuBLAS, say), the steps
    around the products are captured and the products launched between them."""
    backend = devices.cuda_backend()

    def refusing(kernels):
        if any(isinstance(k, GemmStep) for k in kernels):
            raise NotImplementedError("calling cuBLAS API during stream capture")
        return backend.capture(kernels)
    monkeypatch.setattr(devices, "cuda_backend",
                        lambda: dataclasses.replace(backend, capture=refusing))
    inputs, outputs = _mlp()
    g = graphc.compile(inputs, outputs, device="cuda", capture=True)
    cpu = graphc.compile(inputs, outputs)
    rng = np.random.default_rng(0)
    with pytest.warns(RuntimeWarning, match="products run between the captured graphs"):
        for _ in range(3):
            feeds = _feeds(rng)
            for got, want in zip(g.run(**feeds), cpu.run(**feeds)):
                _close(got, want)
    assert 1 < g.stats()["replay_launches"] < g.stats()["steps"]


@needs_gcc
@pytest.mark.parametrize("reduce", ["sum", "mean", "prod"])   # the ones the optimiser fuses
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [(1, 2), (0, 2)])     # one stage; two (batch norm's kind)
def test_fused_reductions_are_one_generated_kernel(fake_cuda, reduce, keepdims, axis):
    x, m = N.var("x", (6, 5, 70)), N.var("m", (6, 1, 70))
    y = getattr(N, reduce)(N.exp((x - m) * 0.01), axis=axis, keepdims=keepdims)
    dev = graphc.compile([x, m], y, device="cuda")
    assert [n.op.kind for n in dev.liveness.steps] == ["fused_reduce"]
    assert dev.program.generated == 1
    two_stages = reduction_stages(dev.liveness.steps[0].op)[1] != ()
    assert two_stages == (axis == (0, 2))         # 70 trailing elements: worth a stage
    rng = np.random.default_rng(2)
    X = rng.standard_normal((6, 5, 70)).astype(np.float32)
    M = rng.standard_normal((6, 1, 70)).astype(np.float32)
    _close(dev.run(x=X, m=M), graphc.compile([x, m], y).run(x=X, m=M))


@pytest.mark.cpu_engine   # the CPU's refusal
def test_device_options_are_refused_on_the_cpu():
    x = N.var("x", (3,))
    with pytest.raises(DeviceError, match="capture=True is an option of device='cuda'"):
        graphc.compile([x], N.exp(x), capture=True)
    with pytest.raises(DeviceError, match="tf32=True is an option of device='cuda'"):
        graphc.compile([x], N.exp(x), tf32=True)


@pytest.mark.skipif(GPU, reason="the stand-in backend has no TF32 switch; CuPy has")
def test_tf32_without_a_switch_says_so(fake_cuda):
    x = N.var("x", (3, 3))
    with pytest.raises(DeviceError, match="no switch for TF32"):
        graphc.compile([x], x @ x, device="cuda", tf32=True)


@pytest.mark.skipif(not GPU, reason="TF32 needs CuPy and a GPU (GRAPHC_TEST_GPU=1)")
@pytest.mark.parametrize("capture", [False, True])
def test_tf32_products_are_close_to_float64(capture):
    """TF32 products (CuPy's compute type plainly, the handle's math mode captured):
    about 3e-4 from float64, where float32 products are about 1e-7 away."""
    x, w = N.var("x", (256, 512)), N.var("w", (512, 128))
    rng = np.random.default_rng(3)
    X, W = rng.standard_normal((256, 512), np.float32), rng.standard_normal((512, 128), np.float32)
    want = X.astype(np.float64) @ W.astype(np.float64)
    errors = {}
    for tf32 in (False, True):
        g = graphc.compile([x, w], x @ w, device="cuda", tf32=tf32, capture=capture)
        got = [g.run(x=X, w=W) for _ in range(3)][-1]      # the last one replayed
        errors[tf32] = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert errors[False] < 1e-5 and 1e-5 < errors[True] < 3e-3, errors


@pytest.mark.skipif(not GPU, reason="device arrays need CuPy and a GPU (GRAPHC_TEST_GPU=1)")
def test_device_arrays_are_fed_without_a_host_trip():
    import cupy as cp
    x = N.var("x", (1000,))
    g = graphc.compile([x], N.tanh(x) * 2.0, device="cuda")
    X = np.linspace(-3, 3, 1000, dtype=np.float32)
    np.testing.assert_allclose(g.run(x=cp.asarray(X)), np.tanh(X) * 2.0, rtol=1e-6, atol=1e-6)
    cpu = graphc.compile([x], N.tanh(x) * 2.0)
    with pytest.raises(graphc.InputError, match="GPU array .* runs on the CPU"):
        cpu.run(x=cp.asarray(X))


@needs_gcc
def test_dropout_training_draws_on_the_device(fake_cuda):
    """Owl's MNIST CNN with dropout: the random mask is drawn on the device; a seeded
    graph repeats its losses, and training lowers the loss."""
    model = nn.MnistCNN(image_size=8, hidden=32, dropout=0.3)
    params = model.init(0)
    rng = np.random.default_rng(4)
    x = np.abs(rng.standard_normal((16, 1, 8, 8))).astype(np.float32) * 50
    y = rng.integers(0, 10, 16)
    losses = []
    for _ in range(2):
        trainer = nn.compile_training(model, nn.SGD(0.01, momentum=0.9), x.shape,
                                      params=params, device="cuda", seed=5)
        losses.append([trainer.step(x, y) for _ in range(8)])
    assert losses[0] == losses[1]
    assert losses[0][-1] < losses[0][0]


@needs_gcc
def test_reshapes_are_views_on_the_device_and_every_product_is_captured(fake_cuda):
    """A small ResNet's inference on the device: every convolution is lowered (the 1x1
    ones to a GEMM on a reshape), its reshapes of computed values are views (no step,
    no bytes), the only views the device reads, and every product is a step a CUDA
    graph holds: nothing is launched between graphs."""
    model = nn.ResNet((1, 1, 1, 1), classes=5, width=4)
    params = nn.fold_batchnorm(model, model.init(0))
    x = np.random.default_rng(6).standard_normal((2, 3, 32, 32)).astype(np.float32)
    dev = nn.compile_inference(model, params, x.shape, device="cuda", capture=True)
    kinds = [n.op.kind for n in dev.liveness.steps]
    views = {dev.liveness.steps[i].op.kind for i, k in enumerate(dev.program.kernels)
             if k is None}
    assert views == {"reshape"} and dev.stats()["view_values"] == kinds.count("reshape") > 0
    assert "conv2d" not in kinds
    for node, kernel in zip(dev.liveness.steps, dev.program.kernels):
        if kernel is not None:
            assert isinstance(kernel, GemmStep) == (node.op.kind == "matmul"), node
            assert not is_library_call(kernel), node
    want = nn.compile_inference(model, params, x.shape).run(x=x)
    for _ in range(3):
        np.testing.assert_allclose(dev.run(x=x), want, rtol=1e-4, atol=1e-5)
    assert dev.stats()["captured_graphs"] == 1 and dev.stats()["replay_launches"] == 1


@needs_gcc
def test_device_bytes_are_the_plan_the_variables_and_the_constants(fake_cuda):
    """``stats()["device_bytes"]``: exactly the planned buffers, one array per
    variable and the constants, and then the buffer a refed input's old value is kept
    in for a failed run."""
    x, w = N.var("x", (64, 32)), N.var("w", (32,))
    g = graphc.compile([x, w], N.tanh(x * w + np.arange(32, dtype=np.float32)) * 2.0,
                       device="cuda")
    constants = sum(n.nbytes for n in g.graph.order if n.op.kind == "const")
    made = g.stats()["planned_bytes"] + (64 * 32 + 32) * 4 + constants
    assert g.stats()["device_bytes"] == made
    feeds = {"x": np.ones((64, 32), np.float32), "w": np.ones(32, np.float32)}
    g.run(**feeds)
    g.run(**feeds)
    assert g.stats()["device_bytes"] == made + g.stats()["rollback_bytes"] > made


@needs_gcc
def test_decompositions_run_numpys_lapack_on_host_copies(fake_cuda):
    """inv, solve, svd, eigh... on the device: NumPy's LAPACK on host copies of their
    inputs, uploaded, so the device gives the CPU's results bit for bit, captured runs
    too (launched between the graphs). The matrices are fed, not computed, so nothing
    before LAPACK (a product's summation order) can differ."""
    s, a, b = (N.var("s", (4, 4), np.float64), N.var("a", (4, 3), np.float64),
               N.var("b", (4, 2), np.float64))
    outputs = [N.linalg.inv(s), N.linalg.solve(s, b), N.linalg.svd(a)[1],
               N.linalg.eigh(s)[0], N.linalg.det(s) * 2.0]
    dev = graphc.compile([s, a, b], outputs, device="cuda", capture=True)
    cpu = graphc.compile([s, a, b], outputs)
    rng = np.random.default_rng(8)
    for _ in range(3):
        m = rng.standard_normal((4, 4))
        feeds = {"s": m @ m.T + 4.0 * np.eye(4), "a": rng.standard_normal((4, 3)),
                 "b": rng.standard_normal((4, 2))}
        for got, want in zip(dev.run(**feeds), cpu.run(**feeds)):
            np.testing.assert_array_equal(got, want)
    assert sum(is_library_call(k) for k in dev.program.steps) >= 4


@needs_gcc
def test_a_checkpoint_saves_the_generator_random_draw_uses(fake_cuda, monkeypatch, tmp_path):
    """A device graph has two generators: the device's (dropout-style draws; here a
    NumPy one stands in for CuPy's) and the host's PCG64, which ``random_draw`` uses
    and a checkpoint saves: after loading, the draws repeat."""
    backend = devices.cuda_backend()
    monkeypatch.setattr(devices, "cuda_backend", lambda: dataclasses.replace(
        backend, rng=lambda seed: np.random.default_rng(seed)))
    x = N.var("x", (4,), np.float64)
    g = graphc.compile([x], [x + N.random.gumbel(size=(4,), dtype=np.float64)],
                       device="cuda", seed=3)
    X = np.zeros(4)
    g.run(x=X)
    g.save_values(tmp_path / "step.npz")
    after = [g.run(x=X)[0] for _ in range(2)]
    g.load_values(tmp_path / "step.npz")
    np.testing.assert_array_equal([g.run(x=X)[0] for _ in range(2)], after)
