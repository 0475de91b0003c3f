"""The matrix-vector product over (N, K) rows as generated loops (graphc/engine/numba_gemv.py):
against float64 products, serial and on the threads, every row count around the
threads' blocks; what it declines; and a classifier imported from ONNX running on it."""
from __future__ import annotations

import numpy as np
import pytest

from graphc.engine import numba_kernels, onednn_conv
from graphc.engine.numba_gemv import rows_kernel
from graphc.engine.numba_gemv_loops import BLOCK

pytestmark = [pytest.mark.cpu_engine,
              pytest.mark.skipif(numba_kernels.available() is not None,
                                 reason="Numba is not installed")]


@pytest.fixture
def onednn_running(monkeypatch):
    """As where a graph's oneDNN convolutions run (the only place the loops serve)."""
    monkeypatch.setattr(onednn_conv, "wanted", lambda: "")
    monkeypatch.setattr(onednn_conv, "in_use", lambda: True)


@pytest.mark.parametrize("k", [1, 7, 64, 1280])
@pytest.mark.parametrize("n", [1, BLOCK - 1, BLOCK, BLOCK + 1, 1000])
@pytest.mark.parametrize("parallel", [False, True])
def test_rows_match_the_float64_product(onednn_running, k, n, parallel):
    rng = np.random.default_rng(k * 1000 + n)
    x = rng.standard_normal((1, k)).astype(np.float32)
    rows = rng.standard_normal((n, k)).astype(np.float32)
    out = np.full((1, n), np.nan, np.float32)
    run = rows_kernel(x, rows.T, out, parallel)
    assert run is not None
    kept = rows.copy(), x.copy()
    run()
    want = x.astype(np.float64) @ rows.T.astype(np.float64)
    # float32 lanes: within K ulps of the row's magnitude
    scale = np.abs(x).astype(np.float64) @ np.abs(rows.T).astype(np.float64)
    assert np.all(np.abs(out - want) <= k * np.finfo(np.float32).eps * scale + 1e-30)
    assert rows.tobytes() == kept[0].tobytes() and x.tobytes() == kept[1].tobytes()


@pytest.mark.parametrize("a, b, out, why", [
    (np.ones((2, 3), np.float32), np.ones((2, 3), np.float32).T, np.empty((2, 2), np.float32),
     "two rows"),
    (np.ones((1, 3), np.float32), np.ones((3, 2), np.float32), np.empty((1, 2), np.float32),
     "(K, N) rows, not (N, K)"),
    (np.ones((1, 3)), np.ones((2, 3)).T, np.empty((1, 2)), "float64"),
    (np.ones((1, 6), np.float32)[:, ::2], np.ones((2, 3), np.float32).T,
     np.empty((1, 2), np.float32), "a strided row"),
    (np.ones((1, 3), np.float32), np.ones((2, 3), np.float32).T, np.empty((1, 3), np.float32),
     "the wrong result shape"),
])
def test_what_the_loops_decline(onednn_running, a, b, out, why):
    assert rows_kernel(a, b, out, parallel=True) is None, why


def test_without_onednn_s_convolutions_blas_serves(monkeypatch):
    monkeypatch.setattr(onednn_conv, "in_use", lambda: False)
    a, rows = np.ones((1, 3), np.float32), np.ones((2, 3), np.float32)
    assert rows_kernel(a, rows.T, np.empty((1, 2), np.float32), parallel=True) is None


def test_an_imported_classifier_after_a_convolution_runs_on_the_loops(monkeypatch):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    import graphc.onnx
    if onednn_conv.wanted():
        pytest.skip(onednn_conv.wanted())
    monkeypatch.setenv("GRAPHC_KERNELS", "generated")     # the default outside the tests
    rng = np.random.default_rng(9)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1
    fc = rng.standard_normal((100, 32)).astype(np.float32) * 0.2
    bias = rng.standard_normal(100).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "bias"], ["y"], transB=1)]
    model = helper.make_model(helper.make_graph(
        nodes, "classifier", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                            [1, 16, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 100])],
        [numpy_helper.from_array(a, n) for a, n in ((w, "w"), (fc, "fc"), (bias, "bias"))]))
    g = graphc.onnx.load(model)
    x = rng.standard_normal((1, 16, 32, 32)).astype(np.float32)
    got = g.run({"x": x})
    got = got[0] if isinstance(got, (list, tuple)) else got
    conv = np.zeros((32, 32, 32))
    padded = np.pad(x[0].astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    for i in range(3):
        for j in range(3):
            conv += np.einsum("chw,oc->ohw", padded[:, i:i + 32, j:j + 32], w[:, :, i, j])
    pooled = np.maximum(conv, 0).mean(axis=(1, 2))
    np.testing.assert_allclose(np.asarray(got)[0], pooled @ fc.T + bias, rtol=1e-4, atol=1e-4)
    exe = g.executable
    products = [k for s, k in zip(exe.liveness.steps, exe.program.kernels)
                if s.op.kind in ("matmul", "fused_matmul")]
    assert "conv2d_nhwc" in {s.op.kind for s in exe.liveness.steps}     # on oneDNN
    classifier = getattr(products[-1], "gemm", products[-1])
    assert "rows_kernel" in getattr(classifier, "__qualname__", ""), classifier
