"""A convolution of a concatenation split into one convolution per part
(graphc/optimiser/split_concat.py, kernels="generated"): the concatenation is gone, the
parts' sums and the bias and activation join the convolutions, the values are the
unoptimised graph's; and where the split does not apply, the graph is left as it was."""
import numpy as np
import pytest
from numpy.testing import assert_allclose

import graphc
import graphc.ndarray as N
from graphc.engine import onednn_conv
from graphc.engine.numba_kernels import available
from graphc.ops.conv_nhwc import NAME

needs_onednn = pytest.mark.skipif(available() is not None or onednn_conv.wanted() != "",
                                  reason="no oneDNN convolutions here")


def _fire(rng, channels, kernel, bias, activation, also=False):
    """``parts`` convolutions of x concatenated, then a convolution of that (SqueezeNet's
    Fire module into the next one's squeeze); ``also``: the concatenation an output too."""
    x = N.var("x", (1, 16, 8, 8))
    branches = [N.relu(N.conv2d(x, N.const(rng.standard_normal((c, 16, 1, 1), np.float32)
                                           * 0.3)))
                for c in channels]
    joined = N.concatenate(branches, axis=1)
    w = rng.standard_normal((24, sum(channels), kernel, kernel), np.float32) * 0.2
    y = N.conv2d(joined, N.const(w), padding=kernel // 2)
    if bias:
        y = y + N.const(rng.standard_normal((24, 1, 1), np.float32))
    if activation:
        y = N.relu(y)
    return x, [y, joined] if also else [y]


def _both(x, outputs):
    fast = graphc.compile([x], outputs, kernels="generated", check=True)
    plain = graphc.compile([x], outputs, optimise=False, kernels="numpy")
    image = np.random.default_rng(5).standard_normal(x.shape).astype(np.float32)
    for got, want in zip(fast.run(x=image), plain.run(x=image)):
        assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    return [n for n in fast.liveness.steps]


@needs_onednn
@pytest.mark.parametrize("channels", [(64, 64), (64, 32, 64), (32, 32, 32, 32)])
@pytest.mark.parametrize("kernel", [1, 3])
@pytest.mark.parametrize("bias, activation", [(True, True), (True, False), (False, False)])
def test_a_convolution_of_a_concatenation_runs_on_its_parts(channels, kernel, bias,
                                                            activation):
    steps = _both(*_fire(np.random.default_rng(1), channels, kernel, bias, activation))
    kinds = [n.op.kind for n in steps]
    assert "concatenate" not in kinds and "add" not in kinds and "relu" not in kinds, kinds
    convs = [n for n in steps if n.op.kind == NAME]
    assert len(convs) == 2 * len(channels), kinds
    # each part's convolution adds the one before it (oneDNN's sum post-op), the
    # activation on the last, after the whole sum
    summed = [c for c in convs if len(c.parents) == 4]
    assert len(summed) == len(channels) - 1
    assert [c.op["activation"] for c in summed] == [""] * (len(summed) - 1) + \
        ["relu" if activation else ""]


@needs_onednn
@pytest.mark.parametrize("why", ["read twice", "five parts", "grouped"])
def test_the_split_leaves_what_it_cannot_take(why):
    rng = np.random.default_rng(2)
    if why == "read twice":
        x, outputs = _fire(rng, (64, 64), 1, True, True, also=True)
    elif why == "five parts":
        x, outputs = _fire(rng, (16,) * 5, 1, True, True)
    else:
        x = N.var("x", (1, 64, 8, 8))
        joined = N.concatenate([N.relu(x), N.sin(x)], axis=1)
        w = N.const(rng.standard_normal((128, 64, 3, 3), np.float32) * 0.2)
        outputs = [N.conv2d(joined, w, padding=1, groups=2)]
    kinds = [n.op.kind for n in _both(x, outputs)]
    assert "concatenate" in kinds, kinds


@needs_onednn
def test_the_split_kernels_are_views_of_the_constant():
    """The parts' kernels are views of the written constant: packed once each, and the
    graph as written still gives the original array."""
    rng = np.random.default_rng(3)
    x, outputs = _fire(rng, (64, 64), 1, True, True)
    exe = graphc.compile([x], outputs, kernels="generated")
    (written,) = [n for n in exe.source.order
                  if n.op.kind == "const" and n.shape == (24, 128, 1, 1)]
    assert written.value.shape == (24, 128, 1, 1)
    assert sum(n.op.kind == NAME for n in exe.liveness.steps) == 4
