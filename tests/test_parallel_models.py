"""The models under the parallel schedule: inference and training steps repeat
the serial schedule's results bit for bit, run after run (races show up only
now and then, so every case runs several times), with plans that pass the
concurrency checker; parallelism costs memory, and the stats say how much.

A parallel run caps BLAS at ``cores // workers`` threads (:mod:`graphc.engine.blas_threads`),
and BLAS's sums depend on its thread count (a GEMV splits its dot products by thread):
the serial reference runs under the same cap, so the comparison is about the schedule,
not BLAS."""
import numpy as np
import pytest

import graphc.neural as nn
from graphc.engine.blas_threads import blas_shared
from graphc.engine.checker import check_concurrent_plan
from graphc.neural import compile_inference, compile_training

pytestmark = pytest.mark.cpu_engine   # the CPU thread schedules

REPEATS = 6


def _images(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("make, shape", [
    (lambda: nn.resnet50(classes=10), (2, 3, 32, 32)),
    (lambda: nn.inception_v3(classes=10), (1, 3, 75, 75))], ids=["resnet50", "inception_v3"])
@pytest.mark.parametrize("schedule", ["parallel", "parallel_reuse"])
def test_inference_in_parallel_repeats_the_serial_results(make, shape, schedule):
    model = make()
    params = model.init(0)
    serial = compile_inference(model, params, shape)
    parallel = compile_inference(model, params, shape, schedule=schedule, workers=4,
                                 check=True)
    stats = parallel.stats()
    if schedule == "parallel":
        check_concurrent_plan(parallel.liveness, parallel.plan)
    else:
        assert stats["parallel_extra_bytes"] == 0
    assert stats["schedule"] == schedule and stats["workers"] == 4
    assert stats["serial_planned_bytes"] == serial.stats()["planned_bytes"]
    assert stats["parallel_extra_bytes"] == stats["planned_bytes"] - stats["serial_planned_bytes"]
    assert stats["critical_path_steps"] <= stats["steps"] + stats["elided_steps"]
    for k in range(REPEATS):
        x = _images(shape, seed=k % 2)
        with blas_shared(workers=4):
            want = serial.run(x=x)
        np.testing.assert_array_equal(parallel.run(x=x), want, err_msg=f"run {k}")


@pytest.mark.parametrize("make, shape", [
    (lambda: nn.ResNet((1, 1, 1, 1), classes=5, width=4), (3, 3, 32, 32)),
    (lambda: nn.MnistCNN(image_size=8, hidden=16, dropout=0.5), (4, 1, 8, 8))],
    ids=["resnet-tiny", "mnist-dropout"])
@pytest.mark.parametrize("schedule", ["parallel", "parallel_reuse"])
def test_training_in_parallel_repeats_the_serial_steps(make, shape, schedule):
    """Dropout draws from the graph's generator, a variable of the dependency
    engine: the masks come out in the planned order, as in the serial run."""
    model = make()
    params = model.init(2)
    opt = nn.SGD(0.05, momentum=0.9)
    serial = compile_training(model, opt, shape, params=params, seed=7)
    parallel = compile_training(model, opt, shape, params=params, seed=7, schedule=schedule,
                                workers=4, check=True)
    rng = np.random.default_rng(0)
    for k in range(REPEATS):
        x = np.abs(rng.standard_normal(shape)).astype(np.float32)
        y = rng.integers(0, model.classes, shape[0])
        with blas_shared(workers=4):
            want = serial.step(x, y)
        assert parallel.step(x, y) == want, f"step {k}"
    got, want = parallel.params(), serial.params()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    for name, value in serial.optimiser_state().items():
        np.testing.assert_array_equal(parallel.optimiser_state()[name], value, err_msg=name)
