"""Consecutive oneDNN convolutions run by one compiled loop (graphc/engine/onednn_batch.py):
what is batched and what is not, the same bits as the convolutions called one by one,
another team size, and a failing primitive's error."""
import numpy as np
import pytest

import graphc
import graphc.ndarray as N
from graphc.engine import onednn_batch, onednn_conv
from graphc.engine.numba_kernels import available

needs_onednn = pytest.mark.skipif(available() is not None or onednn_conv.wanted() != "",
                                  reason="no oneDNN convolutions here")


def _chain(rng, blocks=3):
    """1x1 and 3x3 convolutions with ReLUs, one after the other, and a residual sum."""
    x = N.var("x", (1, 64, 8, 8))
    y = x
    for _ in range(blocks):
        w1 = N.const(rng.standard_normal((64, 64, 1, 1), np.float32) * 0.1)
        w3 = N.const(rng.standard_normal((64, 64, 3, 3), np.float32) * 0.05)
        y = N.relu(N.conv2d(N.relu(N.conv2d(y, w1)), w3, padding=1)) + y
    return x, N.mean(y, axis=(2, 3))


def _runner_kernels(exe):
    return exe._runner._batched[1]


@needs_onednn
def test_consecutive_convolutions_run_as_one_batch_with_the_same_bits():
    rng = np.random.default_rng(0)
    x, y = _chain(rng)
    exe = graphc.compile([x], [y], kernels="generated")
    image = rng.standard_normal(x.shape).astype(np.float32)
    got = exe.run(x=image)
    kernels = _runner_kernels(exe)
    batches = [k for k in kernels if isinstance(k, onednn_batch.Batch)]
    assert batches and all(len(b.convs) >= onednn_batch.MIN_BATCH for b in batches)
    # the same convolutions called one by one give the same bits
    plain = graphc.compile([x], [y], kernels="generated")
    plain._runner._batches = lambda kernels: kernels
    np.testing.assert_array_equal(got, plain.run(x=image))
    np.testing.assert_array_equal(got, exe.run(x=image))       # the cached batches again


@needs_onednn
def test_a_batch_on_another_team_size_calls_each_convolution():
    rng = np.random.default_rng(1)
    x, y = _chain(rng, blocks=2)
    exe = graphc.compile([x], [y], kernels="generated")
    image = rng.standard_normal(x.shape).astype(np.float32)
    want = exe.run(x=image)
    batch = next(k for k in _runner_kernels(exe) if isinstance(k, onednn_batch.Batch))
    calls = []
    for conv in batch.convs:
        conv.__class__ = type("Counted", (onednn_conv.BoundConv,),
                              {"__call__": lambda self: (calls.append(self),
                                                         onednn_conv.BoundConv.__call__(self))})
    omp = onednn_conv._library().omp
    before = omp.omp_get_max_threads()
    omp.omp_set_num_threads(before + 1)
    try:
        batch()
    finally:
        omp.omp_set_num_threads(before)
    assert calls == list(batch.convs)
    for conv in batch.convs:
        conv.__class__ = onednn_conv.BoundConv
    np.testing.assert_array_equal(exe.run(x=image), want)


@needs_onednn
def test_a_failing_convolution_in_a_batch_names_it(monkeypatch):
    rng = np.random.default_rng(2)
    x, y = _chain(rng, blocks=2)
    exe = graphc.compile([x], [y], kernels="generated")
    exe.run(x=rng.standard_normal(x.shape).astype(np.float32))
    batch = next(k for k in _runner_kernels(exe) if isinstance(k, onednn_batch.Batch))

    def failing(handles, stream, args, status):
        status[0], status[1] = 1, 5
        return True
    monkeypatch.setattr(onednn_batch, "_loop", lambda: failing)
    with pytest.raises(RuntimeError, match=r"execution of convolution 1 of a batch of \d+ "
                                           r"failed \(dnnl status 5\)"):
        batch()


def test_what_is_not_a_plain_convolution_is_left_alone():
    kernels = [print, len, print]
    assert onednn_batch.batched(kernels) is kernels
