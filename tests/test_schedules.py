"""The options around schedules and devices: clear errors for bad values, the
stats every schedule reports, one scratch slot per worker, the CuPy wiring of
``cuda_backend`` (with a recording stand-in for CuPy), and ``evaluate_accuracy``
on a compiled model."""
import os

import numpy as np
import pytest

import graphc
import graphc.engine.devices as devices
import graphc.ndarray as N
import graphc.neural as nn
from graphc.engine.cpu_kernels import SCRATCH_BYTES
from graphc.engine.cuda_codegen import elementwise_kernel
from graphc.engine.cuda_window import window_kernel
from graphc.type import Op

pytestmark = pytest.mark.cpu_engine   # the CPU thread schedules


@pytest.mark.parametrize("options, message", [
    (dict(schedule="threads"), "unknown schedule 'threads'"),
    (dict(schedule="parallel", workers=0), "workers must be a positive int"),
    (dict(schedule="parallel", workers=2.5), "workers must be a positive int"),
    (dict(schedule="parallel", workers=True), "workers must be a positive int"),
])
def test_bad_schedule_options_are_named(options, message):
    x = N.var("x", (3,))
    with pytest.raises(ValueError, match=message):
        graphc.compile([x], N.exp(x), **options)


@pytest.mark.parametrize("schedule", ["serial", "parallel", "parallel_reuse"])
def test_every_schedule_reports_what_it_costs(schedule):
    x = N.var("x", (1000,))
    branches = [N.sum(N.exp(x * float(k))) for k in range(4)]
    g = graphc.compile([x], branches[0] + branches[1] + branches[2] + branches[3],
                       schedule=schedule, workers=2)
    s = g.stats()
    serial = graphc.compile([x], branches[0] + branches[1] + branches[2] + branches[3])
    assert s["schedule"] == schedule
    assert s["serial_planned_bytes"] == serial.stats()["planned_bytes"]
    assert s["planned_bytes"] == s["serial_planned_bytes"] + s["parallel_extra_bytes"]
    if schedule == "serial":
        assert s["workers"] == 1 and s["critical_path_steps"] is None
    else:
        assert s["workers"] == 2
        # four independent branches: the longest chain is one branch plus the joins
        assert s["critical_path_steps"] < s["steps"] + s["elided_steps"]
    if schedule == "parallel":   # the branches' temporaries may not share bytes
        assert s["parallel_extra_bytes"] > 0
    else:
        assert s["parallel_extra_bytes"] == 0
    np.testing.assert_array_equal(g.run(x=np.ones(1000, np.float32)),
                                  serial.run(x=np.ones(1000, np.float32)))


def test_streamed_kernels_get_one_scratch_slot_per_worker():
    """Fused chains over large arrays stream through a scratch buffer; under the
    parallel schedule each worker has its own, so two branches can stream at once."""
    x = N.var("x", (1 << 18,))
    # two outputs: joined by an elementwise op, the branches would fuse into one program
    y = [N.tanh(N.sin(x) * 0.5 + 1.0), N.tanh(N.cos(x) * 0.25 - 1.0) * x]
    serial = graphc.compile([x], y)
    parallel = graphc.compile([x], y, schedule="parallel", workers=2)
    slots = [s for s in parallel.program.scratch_slots if s]
    assert len(slots) >= 2 and {k for s in slots for k in s} == {0, 1}
    assert serial.stats()["scratch_bytes"] == SCRATCH_BYTES
    assert parallel.stats()["scratch_bytes"] == 2 * SCRATCH_BYTES
    X = np.linspace(-2, 2, 1 << 18, dtype=np.float32)
    for got, want in zip(parallel.run(x=X), serial.run(x=X)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.skipif(os.environ.get("GRAPHC_TEST_FAKE_CUDA") == "1",
                    reason="the stand-in backend replaces cuda_backend")
def test_cuda_backend_hands_the_generated_sources_to_cupy(monkeypatch):
    calls = []

    class RecordingCupy:
        class ElementwiseKernel:
            def __init__(self, *args, **kwargs):
                calls.append(("elementwise", args, kwargs))

        class RawKernel:
            def __init__(self, code, name):
                calls.append(("raw", code, name))

            def __call__(self, grid, block, args):
                calls.append(("launch", grid, block, args))

    monkeypatch.setattr(devices, "import_cupy", lambda: RecordingCupy)
    backend = devices.cuda_backend()
    assert backend.xp is RecordingCupy
    src = elementwise_kernel(Op.make("exp"), ["float32"], "float32")
    backend.elementwise(src)
    assert calls[-1] == ("elementwise", (src.in_params, src.out_params, src.operation,
                                         src.name), {"preamble": src.preamble})
    op = Op.make("max_pool2d", kernel=(2, 2), stride=(2, 2), padding=((0, 0), (0, 0)),
                 ceil_mode=False)
    raw = window_kernel(op, [(1, 1, 4, 4)], ["float32"], (1, 1, 2, 2), "float32")
    launch = backend.raw(raw)
    assert calls[-1] == ("raw", raw.code, raw.name)
    launch("in", "out")
    assert calls[-1] == ("launch", raw.grid, (raw.block,), ("in", "out"))


def test_evaluate_accuracy_takes_a_compiled_model():
    model = nn.MnistCNN(image_size=8, hidden=16)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((10, 1, 8, 8)).astype(np.float32)
    model.compile([x[:4]], is_train=False)
    want = np.mean(np.argmax(np.concatenate([model(x[:4]), model(x[4:8])]), axis=1)
                   == np.arange(8) % 10)
    labels = np.arange(10) % 10
    got = nn.evaluate_accuracy(model, x, labels, batch=4)     # last batch padded
    last = np.argmax(model(np.concatenate([x[8:], np.zeros((2, 1, 8, 8), np.float32)])),
                     axis=1)[:2]
    assert got == pytest.approx((want * 8 + np.sum(last == labels[8:])) / 10)
    with pytest.raises(ValueError, match="batch size"):
        nn.evaluate_accuracy(model, x, labels)
