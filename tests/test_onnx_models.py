"""The nine light models shipped in the onnx wheel, imported by graphc with random
weights and compared with onnxruntime on a random input, logits included
(their shipped outputs are uniform softmaxes and prove little)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import graphc.onnx  # noqa: E402
from graphc.onnx.zoo import LIGHT_MODELS, light_model, with_logits  # noqa: E402
from onnx_reference import onnxruntime_run  # noqa: E402


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_with_random_weights_matches_onnxruntime(name):
    model = with_logits(light_model(name, seed=0))
    graph = graphc.onnx.load(model)
    (input_name,) = graph.input_names
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    ours = graph.run({input_name: x})
    reference = onnxruntime_run(model, {input_name: x})
    assert len(ours) == len(reference) == len(model.graph.output)
    for got, want in zip(ours, reference):
        assert got.shape == want.shape and got.dtype == want.dtype
        scale = float(np.abs(want).max())
        assert scale > 0
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-4 * scale)
    # the comparison is meaningful: the logits spread (not a uniform softmax)
    assert float(np.std(reference[-1])) > 1e-2 * float(np.abs(reference[-1]).max())
