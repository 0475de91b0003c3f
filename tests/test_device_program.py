"""The device program (graphc/engine/device.py) on the CPU: ``device="cuda"``
with NumPy standing in for CuPy and every generated elementwise kernel compiled
by gcc (tests/c_kernels.py) standing in for ``cupy.ElementwiseKernel``. So the
planning on device memory, the one-kernel-per-fused-node wiring, the transfers
and the Executable around it run for real; only CuPy itself is not exercised
(no GPU here). Without CuPy, ``device="cuda"`` is a clear error."""
import os

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import graphc
import graphc.engine.devices as devices
import graphc.ndarray as N
import graphc.neural as nn
from graphc import DeviceError

from c_kernels import GCC, GPU, gpu_backend, run_kernel, run_raw
from test_plan_random import build_graph, programs, random_inputs

needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc is not installed")


class FakeCupy:
    """What the device program asks of CuPy, served by NumPy; counts transfers."""

    def __init__(self):
        self.allocations = 0

    def empty(self, shape, dtype):
        self.allocations += 1
        return np.empty(shape, dtype)

    def asarray(self, array):
        return np.array(array, copy=True)

    def asnumpy(self, array):
        return np.array(array, copy=True)

    ascontiguousarray = staticmethod(np.ascontiguousarray)

    def __getattr__(self, name):      # the rest of the array module: NumPy's
        return getattr(np, name)


def _elementwise(source):
    """cupy.ElementwiseKernel's part: broadcast the inputs, run the body per element."""
    def kernel(*arrays):
        *ins, out = arrays
        out[...] = run_kernel(source, ins, out.shape)
    return kernel


def _raw(source):
    """cupy.RawKernel's part: the body once per work item."""
    def kernel(*arrays):
        *ins, out = arrays
        assert out.flags.c_contiguous and all(a.flags.c_contiguous for a in ins)
        run_raw(source, ins, out)
    return kernel


class CountingXp:
    """Real CuPy (``GRAPHC_TEST_GPU=1``), its allocations counted as FakeCupy's are."""

    def __init__(self, xp):
        self._xp, self.allocations = xp, 0

    def empty(self, shape, dtype):
        self.allocations += 1
        return self._xp.empty(shape, dtype)

    def __getattr__(self, name):
        return getattr(self._xp, name)


def _reduction(source):
    """cupy.ReductionKernel's part: the map program per element, then NumPy's reduction."""
    def kernel(*arrays):
        *ins, out = arrays
        value = run_kernel(source.map, ins, np.broadcast_shapes(*[a.shape for a in ins]))
        out[...] = getattr(np, source.reduce)(value, axis=source.axis, keepdims=source.keepdims)
    return kernel


def _backend():
    """CuPy's own backend on the GPU (``GRAPHC_TEST_GPU=1``), else the stand-in."""
    if GPU:
        real = gpu_backend()
        return devices.Backend(CountingXp(real.xp), real.elementwise, real.raw, real.rng,
                               real.capture, real.tf32, real.reduction)
    return devices.Backend(FakeCupy(), _elementwise, _raw, reduction=_reduction,
                           capture=_capture)


def _capture(kernels):
    """A stand-in for stream capture: the kernels recorded, replayed in order."""
    recorded = list(kernels)
    return (lambda: [k() for k in recorded]), 0


@pytest.fixture
def fake_cuda(monkeypatch):
    backend = _backend()
    monkeypatch.setattr(devices, "cuda_backend", lambda: backend)
    return backend.xp


def _close(got, want, where=""):
    """glibc's libm and NumPy's SIMD maths differ by an ulp or two, which a chain
    of ops may amplify (float32 steps feeding float64 ones, cancellation); a wiring
    mistake is off by far more."""
    assert got.dtype == want.dtype and got.shape == want.shape, where
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, equal_nan=True, err_msg=where)


@pytest.mark.skipif(GPU or os.environ.get("GRAPHC_TEST_FAKE_CUDA") == "1",
                    reason="CuPy (or its stand-in) is there")
def test_without_cupy_device_cuda_says_what_is_missing():
    x = N.var("x", (3,))
    with pytest.raises(DeviceError, match="CuPy is not installed.*graphc\\[gpu\\]"):
        graphc.compile([x], N.exp(x), device="cuda")


def test_a_cupy_without_a_gpu_is_named():
    class NoGpu:
        __version__ = "14.0"

        class cuda:
            class runtime:
                @staticmethod
                def getDeviceCount():
                    raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")

    with pytest.raises(DeviceError, match="CuPy 14.0 found no usable CUDA driver or GPU"):
        devices.import_cupy(importer=lambda name: NoGpu)


@needs_gcc
@given(programs(max_ops=14), st.integers(0, 2**32 - 1), st.booleans())
def test_random_programs_on_the_device_program_equal_the_cpu(program, seed, copy_outputs):
    note(repr(program["instrs"]))
    backend = _backend()
    xp = backend.xp
    devices_backend = devices.cuda_backend
    devices.cuda_backend = lambda: backend
    try:
        pair = []
        for device in ("cpu", "cuda"):
            inputs, outputs, updates = build_graph(program)
            # the device program copies what the CPU reads as views (views=False there):
            # the CPU graph without views must plan exactly the same bytes
            pair.append(graphc.compile(inputs, outputs, updates, device=device, check=True,
                                       copy_outputs=copy_outputs, views=False))
    finally:
        devices.cuda_backend = devices_backend
    cpu, dev = pair
    # memory: the same plan but for fused reductions (the device's optimiser fuses a
    # reduction with its elementwise input, which is then never stored), one
    # allocation per buffer and per variable, made once
    fused = sum(n.op.kind == "fused_reduce" for n in dev.liveness.steps)
    assert (dev.stats()["planned_bytes"] == cpu.stats()["planned_bytes"] if not fused
            else dev.stats()["planned_bytes"] <= cpu.stats()["planned_bytes"])
    made = xp.allocations
    staged = sum(u.op.kind == "var" for _, u in dev.graph.updates)   # simultaneous updates
    assert made == len(dev.plan.buffers) + len(dev.graph.inputs) + staged
    names = [program["instrs"][v][1] for v in program["variables"]]
    rng = np.random.default_rng(seed)
    feeds = random_inputs(program, rng, names)
    refed = set()      # fed again: a buffer keeps the old value for a failed run
    for run in range(2):
        refed.update(n for n in feeds if run > 0)
        with np.errstate(all="ignore"):
            want, got = cpu.run(**feeds), dev.run(**feeds)
        for k, (g, w) in enumerate(zip(got, want)):
            assert g.flags.writeable            # device outputs come back as host copies
            _close(g, w, f"run {run} output {k}")
        for name in names:
            _close(dev.value(name), cpu.value(name), f"state {name}")
        feeds = random_inputs(program, rng, [n for n in names if rng.random() < 0.5])
    # a run allocates nothing on the device but, once per input fed again, the
    # buffer that can put its old value back
    assert xp.allocations == made + len(refed)
    assert dev.stats()["rollback_bytes"] == sum(dev.program.variables[n].nbytes for n in refed)


@needs_gcc
def test_fused_nodes_are_one_generated_kernel_each(fake_cuda):
    x, w = N.var("x", (64, 32)), N.var("w", (32,))
    y = N.tanh(x * w + 1.0) * 0.5 - N.exp(-x)
    g = graphc.compile([x, w], y, device="cuda")
    kinds = [n.op.kind for n in g.liveness.steps]
    assert "fused" in kinds
    assert g.program.generated == len(kinds)     # every step here is elementwise
    X = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    W = np.linspace(-1, 1, 32, dtype=np.float32)
    _close(g.run(x=X, w=W), graphc.compile([x, w], y).run(x=X, w=W))


@needs_gcc
@pytest.mark.parametrize("capture", [False, True])
def test_a_training_step_on_the_device_program_equals_the_cpu(fake_cuda, capture):
    """Plain launches, and replayed as CUDA graphs (``capture=True``) from the second
    step on: the same losses and weights as the CPU."""
    model = nn.MnistCNN(image_size=8, hidden=16, dropout=0.0)
    params = model.init(0)
    rng = np.random.default_rng(1)
    x = np.abs(rng.standard_normal((4, 1, 8, 8))).astype(np.float32)
    y = rng.integers(0, 10, 4)
    cpu = nn.compile_training(model, nn.SGD(0.05, momentum=0.9), x.shape, params=params)
    dev = nn.compile_training(model, nn.SGD(0.05, momentum=0.9), x.shape, params=params,
                              device="cuda", capture=capture)
    assert dev.executable.program.generated > 0
    for step in range(4):
        assert dev.step(x, y) == pytest.approx(cpu.step(x, y), rel=1e-5), f"step {step}"
    assert (dev.executable.stats()["graph_replays"] >= 2) == capture
    for name, value in cpu.params().items():
        np.testing.assert_allclose(dev.params()[name], value, rtol=1e-4, atol=1e-6,
                                   err_msg=name)


@needs_gcc
def test_loops_run_their_body_on_host_copies(fake_cuda):
    """A loop's body is a graph of its own, compiled for the host: on the device the
    loop node hands it host copies and uploads its results, which ``loop_part``
    nodes then read on the device."""
    x, xs = N.var("x", (3,)), N.var("xs", (4, 3))
    carry, ys = N.scan(lambda c, row: (c * 0.5 + row, N.exp(c)), x, xs)
    dev = graphc.compile([x, xs], [carry, ys * 2.0], device="cuda")
    cpu = graphc.compile([x, xs], [carry, ys * 2.0])
    rng = np.random.default_rng(5)
    feeds = {"x": rng.standard_normal(3).astype(np.float32),
             "xs": rng.standard_normal((4, 3)).astype(np.float32)}
    for got, want in zip(dev.run(**feeds), cpu.run(**feeds)):
        _close(got, want)


@needs_gcc
def test_numpys_generator_methods_draw_numpys_numbers_on_the_device(fake_cuda):
    """``random_draw`` (every method of NumPy's Generator) draws on the host with the
    graph's seed and is uploaded: the same numbers as on the CPU, run after run; a
    failed run puts the generator back, so the next run draws what it would have."""
    x = N.var("x", (5,), np.float64)

    def check(a):
        if a[0] < 0:
            raise ValueError("negative")
        return a
    drawn = [N.random.gumbel(1.0, 2.0, size=(5,)), N.random.integers(0, 10, size=(5,)),
             N.random.permutation(N.delay(check, [x], (5,), np.float64))]
    dev = graphc.compile([x], drawn, device="cuda", seed=9)
    cpu = graphc.compile([x], drawn, seed=9)
    X = np.arange(5.0)
    np.testing.assert_array_equal(dev.run(x=X)[0],        # in the graph's float32
                                  np.random.default_rng(9).gumbel(1.0, 2.0, 5).astype(np.float32))
    cpu.run(x=X)
    with pytest.raises(ValueError, match="negative"):
        dev.run(x=-X - 1.0)
    for _ in range(2):
        for got, want in zip(dev.run(x=X), cpu.run(x=X)):
            np.testing.assert_array_equal(got, want)


def test_delay_calls_back_on_host_copies(fake_cuda):
    """``N.delay`` on the device: its function gets host arrays, its result goes back
    to the device; a failing callback fails the run and changes no variable."""
    x, w = N.var("x", (3,)), N.var("w", (3,))
    seen = []

    def host(a):
        seen.append(type(a))
        if a[0] < 0:
            raise ValueError("negative")
        return np.sqrt(a)
    g = graphc.compile([x, w], [N.delay(host, [x], (3,)) * 2.0], {w: w + x}, device="cuda")
    np.testing.assert_allclose(g.run(x=np.array([4.0, 9.0, 16.0], np.float32),
                                     w=np.zeros(3, np.float32))[0], [4.0, 6.0, 8.0])
    assert seen == [np.ndarray]
    with pytest.raises(ValueError, match="negative"):
        g.run(x=np.array([-1.0, 1.0, 1.0], np.float32))
    np.testing.assert_array_equal(g.value("w"), [4.0, 9.0, 16.0])
    np.testing.assert_array_equal(g.value("x"), [4.0, 9.0, 16.0])


def test_random_ops_draw_on_the_device_generator(fake_cuda):
    """Seeded draws: the same seed gives the same numbers, runs draw afresh, a
    failed run puts the generator back, and the values follow their laws."""
    x = N.var("x", (4000,))
    drawn = [N.random.uniform(-1.0, 3.0, size=(4000,)), N.random.normal(2.0, 0.5, (4000,)),
             N.random.bernoulli(0.25, (4000,)), x * N.random.uniform(size=(4000,))]
    g = graphc.compile([x], drawn, device="cuda", seed=7)
    X = np.ones(4000, np.float32)
    first, second = g.run(x=X), g.run(x=X)
    assert not np.array_equal(first[0], second[0])            # a fresh draw each run
    g.seed(7)
    np.testing.assert_array_equal(g.run(x=X)[1], first[1])    # seeded: reproducible
    uniform, normal, bernoulli, scaled = first
    assert -1.0 <= uniform.min() and uniform.max() < 3.0 and abs(uniform.mean() - 1.0) < 0.1
    assert abs(normal.mean() - 2.0) < 0.05 and abs(normal.std() - 0.5) < 0.05
    assert set(np.unique(bernoulli)) <= {0.0, 1.0} and abs(bernoulli.mean() - 0.25) < 0.04
    assert 0.0 <= scaled.min() and scaled.max() < 1.0


@needs_gcc
def test_window_nodes_run_as_generated_raw_kernels(fake_cuda):
    """A small ResNet: lowered convolutions (im2col, and col2im in the gradient), max
    pooling and its gradient, each one generated kernel; the step equals the CPU's."""
    model = nn.ResNet((1, 1, 1, 1), classes=5, width=4)
    params = model.init(0)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 32, 32)).astype(np.float32)
    y = rng.integers(0, 5, 2)
    cpu = nn.compile_training(model, nn.SGD(0.05), x.shape, params=params)
    dev = nn.compile_training(model, nn.SGD(0.05), x.shape, params=params, device="cuda")
    kinds = {n.op.kind for n in dev.executable.liveness.steps}
    assert {"im2col", "col2im", "max_pool2d", "max_pool2d_backward"} <= kinds
    assert dev.step(x, y) == pytest.approx(cpu.step(x, y), rel=1e-5)
    # on a GPU, cuBLAS's and the tree reductions' summation orders differ from NumPy's;
    # batch norm over a batch of 2 amplifies that in the first layer's gradient (seen:
    # up to 6e-4 after one step on an H200), where the stand-in's sums are NumPy's own
    atol = 1e-3 if GPU else 1e-6
    for name, value in cpu.params().items():
        np.testing.assert_allclose(dev.params()[name], value, rtol=1e-4, atol=atol,
                                   err_msg=name)
    predict = nn.compile_inference(model, cpu.params(), x.shape, device="cuda")
    want = nn.compile_inference(model, cpu.params(), x.shape).run(x=x)
    np.testing.assert_allclose(predict.run(x=x), want, rtol=1e-4, atol=1e-5)
