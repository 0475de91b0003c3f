"""The models: parameter counts and layouts, eager and graph forward passes
agree, the MNIST CNN matches a plain NumPy transcription."""
import math

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import graphc
import graphc.eager as E
import graphc.ndarray as N
import graphc.neural as nn


def graph_forward(model, params, x, training=False, seed=0, **options):
    xv = N.var("x", x.shape, x.dtype)
    pv = {k: N.var(k, v.shape, v.dtype) for k, v in params.items()}
    stats = {}
    logits = model.forward(N, pv, xv, training=training, batch_stats=stats)
    outputs = [logits] + [s for m, v, _ in stats.values() for s in (m, v)]
    executable = graphc.compile([xv, *pv.values()], outputs, seed=seed, **options)
    return executable.run(x=x, **params)


def test_parameter_counts_are_exact():
    assert nn.resnet50().num_parameters() == 25_557_032
    assert nn.inception_v3().num_parameters() == 23_834_568
    # Owl's MNIST CNN: 5x5x32 conv with bias, 14*14*32 -> 1024 -> 10
    assert nn.MnistCNN().num_parameters() == (25 * 32 + 32) + (6272 * 1024 + 1024) + (
        1024 * 10 + 10)


@pytest.mark.parametrize("make, batch_norms", [(nn.resnet50, 53), (nn.inception_v3, 94)])
def test_running_statistics_are_state_not_parameters(make, batch_norms):
    model = make()
    specs = model.specs()
    state = model.state_names()
    assert len(state) == 2 * batch_norms
    assert all(n.endswith((".running_mean", ".running_var")) for n in state)
    assert sum(p.size for p in specs) - model.num_parameters() == sum(
        p.size for p in specs if p.name in state)
    assert len(model.conv_bn_layers()) == batch_norms


def test_resnet50_layout_follows_torchvision():
    shapes = {p.name: p.shape for p in nn.resnet50().specs()}
    assert shapes["conv1.weight"] == (64, 3, 7, 7)
    assert shapes["layer1.0.downsample.0.weight"] == (256, 64, 1, 1)
    assert shapes["layer2.0.conv2.weight"] == (128, 128, 3, 3)
    assert shapes["layer4.2.conv3.weight"] == (2048, 512, 1, 1)
    assert shapes["layer4.2.bn3.running_var"] == (2048,)
    assert shapes["fc.weight"] == (2048, 1000) and shapes["fc.bias"] == (1000,)
    assert "layer1.1.downsample.0.weight" not in shapes
    assert sum(1 for n in shapes if n.endswith("downsample.0.weight")) == 4


def test_resnet50_strides_on_the_3x3_convolution():
    model = nn.resnet50()
    params = {p.name: N.var(p.name, p.shape) for p in model.specs()}
    logits = model.forward(N, params, N.var("x", (1, 3, 224, 224)))
    assert logits.shape == (1, 1000)
    strides = {}
    stack = [logits]
    seen = set()
    while stack:  # every conv2d node, keyed by its weight's name
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.op.kind == "conv2d":
            strides[n.parents[1].name] = (n.op["stride"], n.shape[2:])
        stack.extend(n.parents)
    assert strides["layer2.0.conv1.weight"][0] == (1, 1)
    assert strides["layer2.0.conv2.weight"][0] == (2, 2)
    assert strides["layer2.0.downsample.0.weight"][0] == (2, 2)
    assert strides["layer4.2.conv3.weight"][1] == (7, 7)


def test_inception_v3_layout_and_shapes_at_299():
    model = nn.inception_v3()
    shapes = {p.name: p.shape for p in model.specs()}
    assert shapes["Conv2d_1a_3x3.conv.weight"] == (32, 3, 3, 3)
    assert shapes["Mixed_6b.branch7x7_2.conv.weight"] == (128, 128, 1, 7)
    assert shapes["Mixed_7c.branch3x3dbl_3b.conv.weight"] == (384, 384, 3, 1)
    assert shapes["fc.weight"] == (2048, 1000)
    assert not any("AuxLogits" in n for n in shapes)
    assert all(layer.bn.eps == 0.001 for layer in model.conv_bn_layers())
    params = {p.name: N.var(p.name, p.shape) for p in model.specs()}
    assert model.forward(N, params, N.var("x", (1, 3, 299, 299))).shape == (1, 1000)
    with pytest.raises(ValueError, match="75"):
        nn.InceptionV3(image_size=74)


def test_init_is_deterministic_and_follows_the_declared_scheme():
    model = nn.resnet50(classes=10)
    a, b = model.init(0), model.init(0)
    assert a.keys() == b.keys() == {p.name for p in model.specs()}
    assert all(np.array_equal(a[k], b[k]) and a[k].dtype == np.float32 for k in a)
    assert not np.array_equal(a["conv1.weight"], model.init(1)["conv1.weight"])
    np.testing.assert_array_equal(a["bn1.weight"], 1)
    np.testing.assert_array_equal(a["bn1.bias"], 0)
    np.testing.assert_array_equal(a["bn1.running_mean"], 0)
    np.testing.assert_array_equal(a["bn1.running_var"], 1)
    w = a["layer3.0.conv2.weight"]  # He normal: std sqrt(2 / fan_in)
    assert abs(w.std() / math.sqrt(2 / (256 * 9)) - 1) < 0.05
    fc = a["fc.weight"]  # Glorot uniform: limit sqrt(6 / (in + out))
    limit = math.sqrt(6 / (2048 + 10))
    assert fc.max() <= limit and fc.min() >= -limit and fc.max() > 0.9 * limit


def _numpy_mnist_cnn(params, x):
    """Owl's network transcribed with plain NumPy (same padding: 2 on every side)."""
    x = x.astype(np.float64) / 256
    padded = np.pad(x, ((0, 0), (0, 0), (2, 2), (2, 2)))
    windows = sliding_window_view(padded, (5, 5), axis=(2, 3))
    y = np.einsum("nchwkl,ockl->nohw", windows, params["conv.weight"])
    y = np.maximum(y + params["conv.bias"][None, :, None, None], 0)
    n, c, h, w = y.shape
    y = y.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5)).reshape(n, -1)
    y = np.maximum(y @ params["fc1.weight"] + params["fc1.bias"], 0)
    return y @ params["fc2.weight"] + params["fc2.bias"]


def test_mnist_cnn_matches_a_numpy_transcription():
    model = nn.MnistCNN()
    rng = np.random.default_rng(0)
    params = model.init(3)
    params = {k: v + rng.standard_normal(v.shape).astype(np.float32) * 0.01 for k, v in
              params.items()}  # non-zero biases
    x = rng.uniform(0, 255, (3, 1, 28, 28)).astype(np.float32)
    expected = _numpy_mnist_cnn(params, x)
    np.testing.assert_allclose(model.forward(E, params, x), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(graph_forward(model, params, x)[0], expected, rtol=1e-4,
                               atol=1e-5)


CASES = [(nn.MnistCNN, (2, 1, 28, 28)), (lambda: nn.resnet50(classes=10), (1, 3, 64, 64)),
         (lambda: nn.inception_v3(classes=10), (1, 3, 75, 75))]


@pytest.mark.parametrize("make, shape", CASES, ids=["mnist", "resnet50", "inception_v3"])
def test_eager_and_graph_forward_agree(make, shape):
    model = make()
    params = model.init(0)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32) * 50
    eager = model.forward(E, params, x)
    assert eager.shape == (shape[0], model.classes) and eager.dtype == np.float32
    assert np.isfinite(eager).all()
    for plan in ("blocks", "offsets"):
        graph = graph_forward(model, params, x, plan=plan)[0]
        scale = np.abs(eager).max()
        np.testing.assert_allclose(graph, eager, rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.parametrize("make, shape", [
    (lambda: nn.resnet50(classes=10), (2, 3, 64, 64)),
    # dropout draws differ between eager and graph mode: compared without it
    # batch norm over 2 images of small maps amplifies any reordered sum past 1e-4 in
    # the logits (seen on the device, whose reductions sum in another order): NumPy's
    # order, the CPU program's, is what this case compares
    pytest.param(lambda: nn.InceptionV3(classes=5, image_size=75, dropout=0.0),
                 (2, 3, 75, 75), marks=pytest.mark.cpu_engine)],
    ids=["resnet50", "inception_v3"])
def test_training_forward_uses_batch_statistics(make, shape):
    model = make()
    params = model.init(0)
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    stats = {}
    eager = model.forward(E, params, x, training=True, batch_stats=stats)
    assert set(stats) == {layer.bn.name for layer in model.conv_bn_layers()}
    mean, var, count = stats[model.conv_bn_layers()[0].bn.name]
    assert mean.shape == var.shape and count > 1 and (var >= 0).all()
    # batch statistics are not the running ones: inference gives other logits
    assert not np.allclose(eager, model.forward(E, params, x), rtol=1e-3)
    graph = graph_forward(model, params, x, training=True)
    np.testing.assert_allclose(graph[0], eager, rtol=1e-4, atol=1e-4 * np.abs(eager).max())
    for (m, v, _), gm, gv in zip(stats.values(), graph[1::2], graph[2::2]):
        np.testing.assert_allclose(gm, m, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(gv, v, rtol=1e-4, atol=1e-5)


def test_running_stat_updates_follow_pytorch():
    model = nn.ResNet((1, 1, 1, 1), classes=3, width=8)
    params = model.init(0)
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    stats = {}
    model.forward(E, params, x, training=True, batch_stats=stats)
    new = model.running_stat_updates(E, params, stats, momentum=0.1)
    assert set(new) == set(model.state_names())
    # conv1's batch statistics from its input directly
    conv = model.stem.conv
    y = E.conv2d(x, params["conv1.weight"], stride=conv.stride, padding=conv.padding)
    y64 = y.astype(np.float64)
    np.testing.assert_allclose(new["bn1.running_mean"], 0.1 * y64.mean(axis=(0, 2, 3)),
                               rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(new["bn1.running_var"],
                               0.9 + 0.1 * y64.var(axis=(0, 2, 3), ddof=1), rtol=1e-4)


def test_missing_parameter_names_the_parameter():
    model = nn.MnistCNN()
    params = model.init(0)
    del params["fc1.bias"]
    with pytest.raises(KeyError, match="fc1.bias"):
        model.forward(E, params, np.zeros((1, 1, 28, 28), np.float32))
