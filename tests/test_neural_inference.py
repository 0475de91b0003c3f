"""Inference: batch norm folded into the convolutions computes the same
logits; the compiled inference graph holds the folded weights as constants
without copying them and has no batch-norm arithmetic left."""
import numpy as np
import pytest

import graphc.eager as E
import graphc.ndarray as N
import graphc.neural as nn
from graphc.neural import compile_inference, evaluate_accuracy, fold_batchnorm
from neural_reference import trained_looking


SMALL = [(lambda: nn.ResNet((1, 1, 1, 1), classes=7, width=8), (2, 3, 32, 32)),
         (lambda: nn.resnet50(classes=10), (1, 3, 32, 32)),
         (lambda: nn.InceptionV3(classes=5, image_size=75), (1, 3, 75, 75))]


@pytest.mark.parametrize("make, shape", SMALL, ids=["resnet-tiny", "resnet50", "inception_v3"])
def test_folded_forward_equals_unfolded_inference_in_float64(make, shape):
    model = make()
    params = trained_looking(model, dtype=np.float64)
    x = np.random.default_rng(1).standard_normal(shape)
    folded = fold_batchnorm(model, params)
    assert not any(".bn" in k or k.startswith("bn") or "downsample.1" in k for k in folded)
    assert len(folded) == len(params) - 4 * len(model.conv_bn_layers()) + len(
        model.conv_bn_layers())
    unfolded_logits = model.forward(E, params, x)
    folded_logits = model.forward(E, folded, x)
    assert folded_logits.dtype == np.float64
    np.testing.assert_allclose(folded_logits, unfolded_logits, rtol=1e-9,
                               atol=1e-9 * np.abs(unfolded_logits).max())


def test_fold_formula_on_one_layer():
    model = nn.ResNet((1, 1, 1, 1), classes=2, width=4)
    params = trained_looking(model, seed=3)
    folded = fold_batchnorm(model, params)
    g, b = params["bn1.weight"].astype(np.float64), params["bn1.bias"].astype(np.float64)
    m, v = params["bn1.running_mean"], params["bn1.running_var"].astype(np.float64)
    s = g / np.sqrt(v + 1e-5)
    np.testing.assert_allclose(folded["conv1.weight"],
                               params["conv1.weight"] * s[:, None, None, None], rtol=1e-6)
    np.testing.assert_allclose(folded["conv1.bias"], b - m * s, rtol=1e-6, atol=1e-7)


def test_folded_arrays_are_read_only_owned_copies():
    model = nn.ResNet((1, 1, 1, 1), classes=2, width=4)
    params = trained_looking(model)
    before = {k: v.copy() for k, v in params.items()}
    folded = fold_batchnorm(model, params)
    for name, value in folded.items():
        assert value.flags.owndata and not value.flags.writeable and value.dtype == np.float32
        assert not np.shares_memory(value, params.get(name, np.empty(0)))
    assert all(np.array_equal(before[k], params[k]) for k in params)  # inputs untouched


def test_folded_params_are_for_inference_only():
    model = nn.ResNet((1, 1, 1, 1), classes=2, width=4)
    folded = fold_batchnorm(model, model.init(0))
    with pytest.raises(ValueError, match="inference only"):
        model.forward(E, folded, np.zeros((2, 3, 32, 32), np.float32), training=True)


@pytest.mark.parametrize("plan", ["blocks", "offsets"])
def test_compiled_inference_matches_eager_and_adopts_weights(plan):
    model = nn.resnet50(classes=10)
    params = trained_looking(model)
    x = np.random.default_rng(5).standard_normal((2, 3, 32, 32)).astype(np.float32)
    predict = compile_inference(model, params, x.shape, plan=plan, check=True)
    expected = model.forward(E, params, x)
    got = predict.run(x=x)
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3 * np.abs(expected).max())
    assert predict.input_names == ["x"]
    # batch norm is gone: the unfolded graph needs a sqrt per batch norm, this one none
    assert not any(n.op.kind == "sqrt" for n in predict.source.order)
    # folded parameters pass through folding unchanged, and the graph (as written and
    # optimised) holds those very arrays as its constants: no copy of any weight
    folded = fold_batchnorm(model, params)
    assert all(fold_batchnorm(model, folded)[k] is v for k, v in folded.items())
    predict = compile_inference(model, folded, x.shape, plan=plan)
    np.testing.assert_array_equal(predict.run(x=x), got)
    ids = {id(v) for v in folded.values() if v.ndim == 4}
    assert len(ids) == len(model.conv_bn_layers())
    weights = {id(n.value) for n in predict.source.order  # (1, C, 1, 1) biases: not weights
               if n.op.kind == "const" and n.ndim == 4 and n.shape[0] > 1}
    assert weights == ids
    # the optimiser may reshape a weight (a 1x1 convolution lowered to a GEMM): a view
    # (biases reshaped to (1, C, 1, 1) are small copies)
    folded_ids = {id(v) for v in folded.values()}
    big = [n.value for n in predict.graph.order
           if n.op.kind == "const" and n.size >= 1024 and n.shape[0] > 1]
    assert len(big) >= len(ids)
    assert all(id(v) in folded_ids or id(v.base) in folded_ids for v in big)


def test_constant_adoption_does_not_copy():
    w = nn.frozen(np.ones((256, 256), np.float32))
    assert N.matmul(N.var("x", (2, 256)), w).parents[1].value is w
    writable = np.ones(3, np.float32)
    c = N.add(N.var("y", (3,)), writable).parents[1]
    assert c.value is not writable and not c.value.flags.writeable
    # a read-only view of a frozen owner cannot change either: adopted
    view = nn.frozen(np.ones((4, 4), np.float32))[1:]
    assert np.shares_memory(N.add(N.var("z", (3, 4)), view).parents[1].value, view)
    # a read-only view of a writeable owner can: copied
    loose = np.ones((4, 4), np.float32)[1:]
    loose.flags.writeable = False
    assert not np.shares_memory(N.add(N.var("q", (3, 4)), loose).parents[1].value, loose)


def test_unfolded_inference_graph_keeps_batch_norm():
    model = nn.ResNet((1, 1, 1, 1), classes=3, width=4)
    params = trained_looking(model)
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    predict = compile_inference(model, params, x.shape, fold=False)
    assert any(n.op.kind == "sqrt" for n in predict.source.order)
    expected = model.forward(E, params, x)
    np.testing.assert_allclose(predict.run(x=x), expected, rtol=1e-4,
                               atol=1e-4 * np.abs(expected).max())


def test_evaluate_accuracy_counts_a_partial_last_batch():
    model = nn.MnistCNN(image_size=8, hidden=16)
    params = model.init(0)
    predict = compile_inference(model, params, (4, 1, 8, 8))
    x = np.random.default_rng(0).uniform(0, 255, (10, 1, 8, 8)).astype(np.float32)
    predicted = np.argmax(model.forward(E, params, x), axis=1)
    y = predicted.copy()
    y[:3] = (y[:3] + 1) % 10  # three wrong in the first batch
    y[9] = (y[9] + 1) % 10    # and one in the partial last batch (10 = 4 + 4 + 2)
    assert evaluate_accuracy(predict, x, y) == pytest.approx(6 / 10)
