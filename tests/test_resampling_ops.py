"""Bilinear upsampling (issue 18): ``upsample_bilinear2d`` and its backward kind against
float64 loop references (hypothesis over shapes, sizes, ``align_corners``, dtypes), in graph
mode (optimised or not, both memory plans) and eager mode; the two kinds as adjoints; their
gradients against finite differences; errors; save/load; ONNX export against onnxruntime;
and PyTorch's ``interpolate`` (values and gradients) where torch is installed."""
import math

import hypothesis.strategies as st
import numpy as np
import pytest
from gradcheck import check_gradient
from hypothesis import given
from neural_reference import DTYPES, SEEDS, check_everywhere, data
from opcheck import examples

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc import DTypeError, ShapeError


# -- the reference: one output cell at a time -------------------------------------------------
def ref_source(dst, size, out_size, align_corners):
    """PyTorch's source coordinate of output cell ``dst`` along one axis."""
    if align_corners:
        return dst * (size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return max((dst + 0.5) * size / out_size - 0.5, 0.0)


def ref_taps(dst, size, out_size, align_corners):
    """The two (input cell, weight) pairs output cell ``dst`` reads along one axis."""
    src = ref_source(dst, size, out_size, align_corners)
    low = math.floor(src)
    return [(low, 1.0 - (src - low)), (min(low + 1, size - 1), src - low)]


def ref_upsample(x, size, align_corners):
    x = x.astype(np.float64)
    n, c, h, w = x.shape
    out = np.zeros((n, c) + tuple(size))
    for i in range(size[0]):
        for j in range(size[1]):
            for r, wr in ref_taps(i, h, size[0], align_corners):
                for s, ws in ref_taps(j, w, size[1], align_corners):
                    out[:, :, i, j] += wr * ws * x[:, :, r, s]
    return out


def ref_upsample_backward(g, input_size, align_corners):
    g = g.astype(np.float64)
    n, c, oh, ow = g.shape
    dx = np.zeros((n, c) + tuple(input_size))
    for i in range(oh):
        for j in range(ow):
            for r, wr in ref_taps(i, input_size[0], oh, align_corners):
                for s, ws in ref_taps(j, input_size[1], ow, align_corners):
                    dx[:, :, r, s] += wr * ws * g[:, :, i, j]
    return dx


@st.composite
def cases(draw):
    """An input shape (N, C <= 2, H, W <= 6), an output size up to 3x (smaller too) and
    whether corners are aligned."""
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    size = (draw(st.integers(1, 3 * h)), draw(st.integers(1, 3 * w)))
    return (n, c, h, w), size, draw(st.booleans())


def terms(in_hw, out_hw):
    """How many products a backward cell sums at most (float32's tolerance grows with it)."""
    return math.prod(-(-o // i) + 2 for i, o in zip(in_hw, out_hw))


@examples(40)
@given(cases(), DTYPES, SEEDS)
def test_upsample_matches_the_loop_reference(case, dtype, seed):
    shape, size, aligned = case
    x = data(seed, shape, dtype)
    check_everywhere(lambda ns, x: ns.upsample_bilinear2d(x, size=size, align_corners=aligned),
                     lambda x: ref_upsample(x, size, aligned), x, terms=4)


@examples(40)
@given(cases(), DTYPES, SEEDS)
def test_upsample_backward_matches_the_loop_reference(case, dtype, seed):
    (n, c, h, w), size, aligned = case
    g = data(seed, (n, c) + size, dtype)
    check_everywhere(lambda ns, g: ns.upsample_bilinear2d_backward(g, (h, w), aligned),
                     lambda g: ref_upsample_backward(g, (h, w), aligned), g,
                     terms=terms((h, w), size))


@examples(15)
@given(cases(), st.tuples(st.integers(1, 3), st.integers(1, 3)), SEEDS)
def test_scale_gives_the_whole_multiple_of_the_size(case, scale, seed):
    (n, c, h, w), _, aligned = case
    x = data(seed, (n, c, h, w), np.float64)
    size = (h * scale[0], w * scale[1])
    check_everywhere(lambda ns, x: ns.upsample_bilinear2d(x, scale=scale, align_corners=aligned),
                     lambda x: ref_upsample(x, size, aligned), x, terms=4)


@examples(20)
@given(cases(), SEEDS)
def test_the_backward_kind_is_the_transpose(case, seed):
    """<A x, g> == <x, A^T g>, both kinds run in one compiled graph."""
    shape, size, aligned = case
    rng = np.random.default_rng(seed)
    x, g = rng.standard_normal(shape), rng.standard_normal(shape[:2] + size)
    xv, gv = N.var("x", shape, np.float64), N.var("g", g.shape, np.float64)
    up = N.upsample_bilinear2d(xv, size=size, align_corners=aligned)
    down = N.upsample_bilinear2d_backward(gv, shape[2:], align_corners=aligned)
    ax, atg = graphc.compile([xv, gv], [up, down]).run(x=x, g=g)
    np.testing.assert_allclose(np.vdot(ax, g), np.vdot(x, atg), rtol=1e-12, atol=1e-12)


def test_equal_calls_make_equal_ops_and_an_empty_batch_runs():
    x = N.var("x", (0, 3, 4, 5))
    ops = {N.upsample_bilinear2d(x, scale=s).op for s in (2, (2, 2), 2.0, np.int64(2))}
    assert ops == {N.upsample_bilinear2d(x, size=(8, 10)).op}
    assert N.upsample_bilinear2d(x, size=3).op["size"] == (3, 3)
    (out,) = graphc.compile([x], [N.upsample_bilinear2d(x, size=(8, 10))]).run(
        x=np.zeros(x.shape, np.float32))
    assert out.shape == (0, 3, 8, 10) and out.dtype == np.float32


# -- gradients --------------------------------------------------------------------------------
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("shape,size", [((2, 2, 3, 4), (5, 9)), ((1, 2, 5, 3), (2, 1))])
def test_gradients_of_both_kinds_match_finite_differences(shape, size, aligned):
    rng = np.random.default_rng(0)
    check_gradient(lambda M, x: M.upsample_bilinear2d(x, size=size, align_corners=aligned),
                   rng.standard_normal(shape), optimised=True)
    check_gradient(lambda M, g: M.upsample_bilinear2d_backward(g, shape[2:], aligned),
                   rng.standard_normal(shape[:2] + size), optimised=True)


def test_each_kind_differentiates_to_the_other():
    x, g = N.var("x", (1, 2, 3, 4), np.float64), N.var("g", (1, 2, 7, 5), np.float64)
    (dx,) = N.grad(N.sum(N.upsample_bilinear2d(x, size=(7, 5), align_corners=True)), [x])
    assert dx.op.kind == "upsample_bilinear2d_backward"
    assert dict(dx.op.attrs) == {"input_size": (3, 4), "align_corners": True}
    (dg,) = N.grad(N.sum(N.upsample_bilinear2d_backward(g, (3, 4))), [g])
    assert dg.op.kind == "upsample_bilinear2d"
    assert dict(dg.op.attrs) == {"size": (7, 5), "align_corners": False}


# -- errors -----------------------------------------------------------------------------------
UP, BACK = "upsample_bilinear2d", "upsample_bilinear2d_backward"
X = N.var("x", (1, 2, 3, 4))


@pytest.mark.parametrize("call,error,message", [
    (lambda: N.upsample_bilinear2d(N.var("x3", (3, 4)), size=2), ShapeError,
     rf"{UP}: the input must be 4-D \(N, C, H, W\), got shape \(3, 4\)"),
    (lambda: N.upsample_bilinear2d(N.var("i", (1, 1, 2, 2), np.int32), size=2), DTypeError,
     rf"{UP}: expected floating-point arrays, got dtypes \('int32',\)"),
    (lambda: N.upsample_bilinear2d(N.var("e", (1, 1, 0, 3)), size=2), ShapeError,
     rf"{UP}: the input has shape \(1, 1, 0, 3\), whose spatial shape \(0, 3\) is empty"),
    (lambda: N.upsample_bilinear2d(X, size=0), ShapeError, f"{UP}: size must be at least 1"),
    (lambda: N.upsample_bilinear2d(X, size=(4, -1)), ShapeError,
     rf"{UP}: size must be at least 1, got \(4, -1\)"),
    (lambda: N.upsample_bilinear2d(X, size=(1, 2, 3)), ShapeError,
     f"{UP}: size must be an int or a pair of ints"),
    (lambda: N.upsample_bilinear2d(X, size=True), ShapeError,
     f"{UP}: size must be an int, got True"),
    (lambda: N.upsample_bilinear2d(X, size=2.5), ShapeError, f"{UP}: size must be an int"),
    (lambda: N.upsample_bilinear2d(X), ShapeError,
     f"{UP}: give exactly one of size and scale, got size=None and scale=None"),
    (lambda: N.upsample_bilinear2d(X, size=6, scale=2), ShapeError,
     f"{UP}: give exactly one of size and scale, got size=6 and scale=2"),
    (lambda: N.upsample_bilinear2d(X, scale=1.5), ShapeError,
     rf"{UP}: scale must be a whole number .*\(for other factors give size\), got 1.5"),
    (lambda: N.upsample_bilinear2d(X, scale=(2, 0.5)), ShapeError,
     rf"{UP}: scale must be a whole number .* got \(2, 0.5\)"),
    (lambda: N.upsample_bilinear2d(X, scale=0), ShapeError, f"{UP}: scale must be at least 1"),
    (lambda: N.upsample_bilinear2d(X, scale=(2, -2)), ShapeError,
     rf"{UP}: scale must be at least 1, got \(2, -2\)"),
    (lambda: N.upsample_bilinear2d(X, scale=True), ShapeError,
     f"{UP}: scale must be a whole number .* got True"),
    (lambda: N.upsample_bilinear2d(X, scale=(2,)), ShapeError,
     rf"{UP}: scale must be a whole number or a pair of whole numbers, got \(2,\)"),
    (lambda: N.upsample_bilinear2d(X, scale="2"), ShapeError,
     f"{UP}: scale must be a whole number .* got '2'"),
    (lambda: N.upsample_bilinear2d(X, scale=float("inf")), ShapeError,
     f"{UP}: scale must be a whole number .* got inf"),
    (lambda: N.upsample_bilinear2d(X, size=2, align_corners="no"), ShapeError,
     f"{UP}: align_corners must be True or False, got 'no'"),
    (lambda: N.upsample_bilinear2d_backward(N.var("g3", (2, 3, 4)), (2, 2)), ShapeError,
     rf"{BACK}: the gradient must be 4-D \(N, C, H, W\), got shape \(2, 3, 4\)"),
    (lambda: N.upsample_bilinear2d_backward(N.var("gi", (1, 1, 4, 4), np.int64), 2),
     DTypeError, f"{BACK}: expected floating-point arrays, got dtypes"),
    (lambda: N.upsample_bilinear2d_backward(N.var("ge", (1, 1, 4, 0)), 2), ShapeError,
     rf"{BACK}: the gradient has shape \(1, 1, 4, 0\), whose spatial shape \(4, 0\) is empty"),
    (lambda: N.upsample_bilinear2d_backward(X, (0, 2)), ShapeError,
     f"{BACK}: input_size must be at least 1"),
    (lambda: N.upsample_bilinear2d_backward(X, (2, False)), ShapeError,
     f"{BACK}: input_size must be an int, got False"),
    (lambda: N.upsample_bilinear2d_backward(X, 2, align_corners=1), ShapeError,
     f"{BACK}: align_corners must be True or False, got 1"),
])
def test_errors_name_the_function_and_what_was_expected(call, error, message):
    with pytest.raises(error, match=message) as caught:
        call()
    assert "test_resampling_ops.py" in str(caught.value)    # the user's line


def test_eager_mode_refuses_the_same_arguments():
    x = np.zeros((1, 1, 2, 2), np.float32)
    with pytest.raises(ShapeError, match=f"{UP}: give exactly one of size and scale"):
        E.upsample_bilinear2d(x)
    with pytest.raises(DTypeError, match=f"{UP}: expected floating-point"):
        E.upsample_bilinear2d(np.zeros((1, 1, 2, 2), np.int64), scale=2)
    with pytest.raises(ShapeError, match=f"{BACK}: the gradient must be 4-D"):
        E.upsample_bilinear2d_backward(x[0], (1, 1))


# -- save/load, ONNX, PyTorch -----------------------------------------------------------------
def test_graphs_are_saved_and_loaded(tmp_path):
    x = N.var("x", (2, 3, 4, 5))
    y = N.upsample_bilinear2d(x, scale=(2, 3), align_corners=True)
    z = N.upsample_bilinear2d(x, size=(3, 7))
    (dx,) = N.grad(N.sum(y * y) + N.sum(z), [x])
    exe = graphc.compile([x], [y, z, dx])
    exe.save(tmp_path / "g.npz")
    X = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    for got, want in zip(graphc.load(tmp_path / "g.npz").run(x=X), exe.run(x=X)):
        np.testing.assert_array_equal(got, want)


def _exported(shape, size, aligned):
    from graphc.onnx.export import to_onnx
    x = N.var("x", shape)
    exe = graphc.compile([x], N.upsample_bilinear2d(x, size=size, align_corners=aligned))
    model = to_onnx(exe)
    assert [n.op_type for n in model.graph.node] == ["Resize"]
    return exe, model


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("shape,size", [((2, 3, 4, 5), (8, 10)), ((1, 2, 5, 3), (7, 8)),
                                        ((1, 2, 4, 5), (1, 1)), ((1, 1, 5, 2), (1, 3)),
                                        ((1, 2, 6, 6), (4, 3))])
def test_exported_to_onnx_resize(shape, size, aligned):
    """``half_pixel`` (not ``pytorch_half_pixel``, which differs for a 1-cell output):
    onnxruntime's linear ``Resize`` then computes what PyTorch does."""
    pytest.importorskip("onnxruntime")
    from onnx_reference import onnxruntime_run
    exe, model = _exported(shape, size, aligned)
    X = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(onnxruntime_run(model, {"x": X})[0], exe.run(x=X),
                               rtol=1e-5, atol=1e-6)


def test_the_backward_kind_is_refused_by_onnx_export():
    pytest.importorskip("onnx")
    from graphc.onnx import OnnxUnsupported
    from graphc.onnx.export import to_onnx
    g = N.var("g", (1, 1, 4, 4))
    with pytest.raises(OnnxUnsupported, match=f"{BACK}.*a gradient .*training"):
        to_onnx(N.upsample_bilinear2d_backward(g, (2, 2)), [g])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("aligned", [False, True])
def test_matches_pytorch_interpolate_and_its_gradient(dtype, aligned):
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional
    rng = np.random.default_rng(3)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for shape, size, scale in [((2, 3, 4, 5), (9, 13), None), ((1, 2, 5, 6), (2, 1), None),
                               ((1, 1, 1, 3), (3, 2), None), ((2, 2, 3, 4), None, (2, 3))]:
        x = rng.standard_normal(shape).astype(dtype)
        got = E.upsample_bilinear2d(x, size=size, scale=scale, align_corners=aligned)
        xt = torch.from_numpy(x).requires_grad_()
        want = functional.interpolate(xt, size=size, scale_factor=scale, mode="bilinear",
                                      align_corners=aligned)
        np.testing.assert_allclose(got, want.detach().numpy(), **tol)
        g = rng.standard_normal(want.shape).astype(dtype)
        want.backward(torch.from_numpy(g))
        np.testing.assert_allclose(E.upsample_bilinear2d_backward(g, shape[2:], aligned),
                                   xt.grad.numpy(), **tol)
