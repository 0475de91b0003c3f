"""``upsample_nearest2d`` and its backward kind (added with issue 14 as the proof that a
neural op with a backward kind is one definition): against float64 loop references, in
every mode, their gradients against finite differences, save/load, ONNX export against
onnxruntime, and their errors."""
import hypothesis.strategies as st
import numpy as np
import pytest
from gradcheck import check_gradient
from hypothesis import given
from neural_reference import DTYPES, SEEDS, check_everywhere, data
from opcheck import examples

import graphc
import graphc.ndarray as N
from graphc import DTypeError, ShapeError


def ref_upsample(x, sh, sw):
    n, c, h, w = x.shape
    out = np.empty((n, c, h * sh, w * sw), np.float64)
    for i in range(h * sh):
        for j in range(w * sw):
            out[:, :, i, j] = x[:, :, i // sh, j // sw]
    return out


def ref_upsample_backward(g, sh, sw):
    n, c, H, W = g.shape
    out = np.zeros((n, c, H // sh, W // sw), np.float64)
    for i in range(H):
        for j in range(W):
            out[:, :, i // sh, j // sw] += g[:, :, i, j]
    return out


SCALES = st.tuples(st.integers(1, 3), st.integers(1, 3))
SHAPES = st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 4), st.integers(1, 4))


@examples(30)
@given(SHAPES, SCALES, DTYPES, SEEDS)
def test_upsample_matches_the_loop_reference(shape, scale, dtype, seed):
    x = data(seed, shape, dtype)
    check_everywhere(lambda ns, x: ns.upsample_nearest2d(x, scale),
                     lambda x: ref_upsample(x.astype(np.float64), *scale), x)


@examples(30)
@given(SHAPES, SCALES, DTYPES, SEEDS)
def test_upsample_backward_matches_the_loop_reference(shape, scale, dtype, seed):
    n, c, h, w = shape
    g = data(seed, (n, c, h * scale[0], w * scale[1]), dtype)
    check_everywhere(lambda ns, g: ns.upsample_nearest2d_backward(g, scale),
                     lambda g: ref_upsample_backward(g.astype(np.float64), *scale), g,
                     terms=scale[0] * scale[1])


@pytest.mark.parametrize("scale", [2, (1, 3)])
def test_gradients_of_both_kinds(scale):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 3, 2))
    check_gradient(lambda M, x: M.upsample_nearest2d(x, scale), x)
    sh, sw = (scale, scale) if isinstance(scale, int) else scale
    g = rng.standard_normal((1, 2, 3 * sh, 2 * sw))
    check_gradient(lambda M, g: M.upsample_nearest2d_backward(g, scale), g)


def test_saved_and_loaded(tmp_path):
    x = N.var("x", (1, 2, 3, 3))
    y = N.upsample_nearest2d_backward(N.upsample_nearest2d(x, (2, 1)) * 2.0, (2, 1))
    exe = graphc.compile([x], y)
    exe.save(tmp_path / "g.npz")
    X = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    np.testing.assert_array_equal(graphc.load(tmp_path / "g.npz").run(x=X), exe.run(x=X))


def test_exported_to_onnx_as_resize():
    pytest.importorskip("onnxruntime")
    from test_onnx_export import onnxruntime_run, op_types, to_onnx

    x = N.var("x", (1, 3, 4, 5))
    exe = graphc.compile([x], N.upsample_nearest2d(x, (2, 3)))
    model = to_onnx(exe)
    assert "Resize" in op_types(model)
    X = np.random.default_rng(2).standard_normal(x.shape).astype(np.float32)
    np.testing.assert_array_equal(onnxruntime_run(model, {"x": X})[0], exe.run(x=X))


def test_errors_name_the_op_and_shapes():
    with pytest.raises(ShapeError, match="upsample_nearest2d: the input must be 4-D"):
        N.upsample_nearest2d(N.var("x", (3, 4)), 2)
    with pytest.raises(ShapeError, match="scale must be at least 1"):
        N.upsample_nearest2d(N.var("x", (1, 1, 3, 4)), 0)
    with pytest.raises(ShapeError, match=r"\(5, 4\) is not a multiple of the scale \(2, 2\)"):
        N.upsample_nearest2d_backward(N.var("g", (1, 1, 5, 4)), 2)
    with pytest.raises(DTypeError, match="upsample_nearest2d: expected floating-point"):
        N.upsample_nearest2d(N.var("i", (1, 1, 2, 2), np.int32), 2)
