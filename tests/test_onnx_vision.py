"""The converters of ONNX's sampling and folding operators (graphc/onnx/ops/vision.py,
folding.py, sampling.py): GridSample, AffineGrid, DeformConv, Col2Im and MaxUnpool
against onnx's reference implementation on random shapes and attributes, their
gradients against finite differences, and the errors a user sees."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

onnx = pytest.importorskip("onnx")
from onnx import helper as h, numpy_helper as nh  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import graphc.onnx  # noqa: E402
from graphc.onnx import OnnxModelError, OnnxUnsupported  # noqa: E402
from graphc.onnx.ops.folding import block_indices  # noqa: E402
from graphc.onnx.ops.sampling import reflect, sample  # noqa: E402
from gradcheck import check_gradient  # noqa: E402
from opcheck import examples  # noqa: E402

import graphc.eager as E  # noqa: E402


def _model(op_type, inputs: dict, attrs: dict, opset: int, constants=(), out_shape=None):
    """A one-node model; inputs named in ``constants`` become initializers; the output
    has ``out_shape`` (symbolic dimensions of the first input's rank by default)."""
    infos = [h.make_tensor_value_info(name, h.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for name, a in inputs.items() if name not in constants]
    first = next(iter(inputs.values()))
    if out_shape is None:
        out_shape = [f"d{i}" for i in range(first.ndim)]
    output = h.make_tensor_value_info("y", h.np_dtype_to_tensor_dtype(first.dtype), out_shape)
    node = h.make_node(op_type, list(inputs), ["y"], **attrs)
    graph = h.make_graph([node], "g", infos, [output],
                         initializer=[nh.from_array(inputs[n], n) for n in constants])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _compare(op_type, inputs, attrs, opset, constants=(), rtol=1e-5, atol=1e-5, fold=False):
    """graphc against onnx.reference; ``fold``: every input an initializer, so the
    converter computes while importing (the eager namespace)."""
    constants = tuple(inputs) if fold else constants
    feeds = {k: v for k, v in inputs.items() if k not in constants}
    want = _reference(_model(op_type, inputs, attrs, opset, constants), feeds)
    model = _model(op_type, inputs, attrs, opset, constants, want.shape)
    (got,) = graphc.onnx.load(model).run(**feeds)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape,
                                                                  got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return got


def _reference(model, feeds):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (want,) = ReferenceEvaluator(model).run(None, feeds)
    return want


def _load(op_type, inputs, attrs, opset, constants=()):
    return graphc.onnx.load(_model(op_type, inputs, attrs, opset, constants))


# -- GridSample ----------------------------------------------------------------------------------
@examples(30)
@given(st.integers(2, 3), st.sampled_from(["nearest", "linear", "cubic"]),
       st.sampled_from(["zeros", "border", "reflection"]), st.booleans(),
       st.integers(0, 2 ** 31), st.booleans())
def test_grid_sample_matches_reference(rank, mode, padding, align, seed, fold):
    if rank == 3 and mode == "cubic":
        mode = "linear"  # the reference samples volumes in nearest and linear modes only
    rng = np.random.default_rng(seed)
    # the reference divides by zero reflecting within one cell (graphc reads that cell)
    spatial = tuple(rng.integers(2 if align and padding == "reflection" else 1, 5, rank))
    out = tuple(rng.integers(1, 4, rank))
    n, c = rng.integers(1, 3, 2)
    x = rng.standard_normal((n, c) + spatial).astype(np.float32)
    # beyond [-1, 1] too: every padding mode is exercised
    grid = rng.uniform(-1.6, 1.6, (n,) + out + (rank,)).astype(np.float32)
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": int(align)}
    _compare("GridSample", {"X": x, "Grid": grid}, attrs, 22, rtol=1e-4, atol=1e-4,
             fold=fold)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_opset_16_names(mode):
    rng = np.random.default_rng(3)
    inputs = {"X": rng.standard_normal((1, 2, 3, 4)).astype(np.float32),
              "Grid": rng.uniform(-1.2, 1.2, (1, 2, 5, 2)).astype(np.float32)}
    # the reference knows opset 20's names only: the same sampling under them
    new = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}[mode]
    want = _reference(_model("GridSample", inputs, {"mode": new, "padding_mode": "border"},
                             22), inputs)
    model = _model("GridSample", inputs, {"mode": mode, "padding_mode": "border"}, 16,
                   out_shape=want.shape)
    (got,) = graphc.onnx.load(model).run(**inputs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_grid_sample_nearest_reads_integers_exactly():
    rng = np.random.default_rng(4)
    inputs = {"X": rng.integers(-100, 100, (2, 3, 4, 5)).astype(np.int32),
              "Grid": rng.uniform(-1.3, 1.3, (2, 3, 3, 2)).astype(np.float32)}
    got = _compare("GridSample", inputs, {"mode": "nearest"}, 22)
    assert got.dtype == np.int32


@pytest.mark.parametrize("attrs, opset, message", [
    ({"mode": "bilinear"}, 22, "mode must be one of"),
    ({"mode": "linear"}, 16, "mode must be one of"),
    ({"padding_mode": "wrap"}, 22, "padding_mode must be one of"),
])
def test_grid_sample_bad_attributes(attrs, opset, message):
    inputs = {"X": np.zeros((1, 1, 2, 2), np.float32), "Grid": np.zeros((1, 2, 2, 2),
                                                                        np.float32)}
    with pytest.raises(OnnxModelError, match=message):
        _load("GridSample", inputs, attrs, opset)


def test_grid_sample_bad_grid_shape():
    inputs = {"X": np.zeros((1, 1, 2, 2), np.float32), "Grid": np.zeros((1, 2, 2, 3),
                                                                        np.float32)}
    with pytest.raises(OnnxModelError, match=r"grid must be \(N, D1_out, \.\.\., 2\)"):
        _load("GridSample", inputs, {}, 22)


def test_grid_sample_refuses_interpolating_integers():
    inputs = {"X": np.zeros((1, 1, 2, 2), np.int32), "Grid": np.zeros((1, 2, 2, 2),
                                                                      np.float32)}
    with pytest.raises(OnnxUnsupported, match="linear interpolation of a int32 input"):
        _load("GridSample", inputs, {"mode": "linear"}, 22)


def test_reflect_folds_into_the_range():
    values = np.array([-7.25, -1.5, -0.25, 0.0, 1.5, 3.0, 4.0, 9.5])
    # reflecting in [0, 3] is periodic with period 6 and mirrors about 0
    period = np.mod(values, 6.0)
    want = np.where(period > 3, 6 - period, period)
    np.testing.assert_allclose(reflect(E, values, 0.0, 3.0), want)
    np.testing.assert_array_equal(reflect(E, values, 2.0, 2.0), np.full(values.shape, 2.0))


@pytest.mark.parametrize("mode, padding", [("linear", "zeros"), ("cubic", "border"),
                                           ("linear", "reflection")])
def test_sampling_gradients(mode, padding):
    rng = np.random.default_rng(5)
    image = rng.standard_normal((2, 2, 3, 4))
    # away from whole cells, where the interpolation weights have kinks
    rows = rng.integers(-2, 4, (2, 5)) + rng.uniform(0.2, 0.8, (2, 5))
    cols = rng.integers(-2, 5, (2, 5)) + rng.uniform(0.2, 0.8, (2, 5))
    bounds = [(-0.5, 2.5), (-0.5, 3.5)]

    def fn(M, x, r, c):
        return sample(M, x, [r, c], mode, padding, bounds)

    check_gradient(fn, image, rows, cols, rtol=1e-4, atol=1e-6)


# -- AffineGrid ---------------------------------------------------------------------------------
@examples(15)
@given(st.integers(2, 3), st.booleans(), st.integers(0, 2 ** 31), st.booleans())
def test_affine_grid_matches_reference(rank, align, seed, fold):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3))
    spatial = [int(s) for s in rng.integers(2 if align else 1, 5, rank)]
    inputs = {"theta": rng.standard_normal((n, rank, rank + 1)).astype(np.float32),
              "size": np.array([n, 3] + spatial, np.int64)}
    _compare("AffineGrid", inputs, {"align_corners": int(align)}, 20, constants=("size",),
             fold=fold)


def test_affine_grid_errors():
    theta = np.zeros((2, 2, 3), np.float32)
    with pytest.raises(OnnxModelError, match=r"theta must have shape \(2, 3, 4\)"):
        _load("AffineGrid", {"theta": theta, "size": np.array([2, 1, 2, 2, 2])}, {}, 20,
              ("size",))
    with pytest.raises(OnnxModelError, match="size must be"):
        _load("AffineGrid", {"theta": theta, "size": np.array([2, 1, 0, 2])}, {}, 20, ("size",))


# -- DeformConv ---------------------------------------------------------------------------------
@examples(12)
@given(st.integers(1, 2), st.integers(1, 2), st.booleans(), st.booleans(),
       st.integers(0, 2 ** 31))
def test_deform_conv_matches_reference(group, offset_group, mask, bias, seed):
    rng = np.random.default_rng(seed)
    kernel = [int(k) for k in rng.integers(1, 3, 2)]
    strides = [int(s) for s in rng.integers(1, 3, 2)]
    dilations = [int(d) for d in rng.integers(1, 3, 2)]
    pads = [int(p) for p in rng.integers(0, 2, 4)]
    # the reference normalises by (size - 1): sides of one cell give it NaN
    spatial = [max(2, (k - 1) * d + 1 + int(rng.integers(0, 3)))
               for k, d in zip(kernel, dilations)]
    out = [(n + pads[i] + pads[i + 2] - (k - 1) * d - 1) // s + 1 for i, (n, k, s, d) in
           enumerate(zip(spatial, kernel, strides, dilations))]
    channels = group * offset_group
    taps = kernel[0] * kernel[1]
    inputs = {"X": rng.standard_normal([1, channels] + spatial).astype(np.float32),
              "W": rng.standard_normal([2 * group, channels // group] + kernel)
              .astype(np.float32),
              "offset": rng.uniform(-1.5, 1.5, [1, offset_group * taps * 2] + out)
              .astype(np.float32)}
    inputs["B"] = rng.standard_normal(2 * group).astype(np.float32) if bias else \
        np.zeros(0, np.float32)
    if mask:
        inputs["mask"] = rng.uniform(0, 1, [1, offset_group * taps] + out).astype(np.float32)
    attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dilations,
             "pads": pads, "group": group, "offset_group": offset_group}
    if bias:
        _compare("DeformConv", inputs, attrs, 22, rtol=1e-4, atol=1e-4)
        return
    # an omitted optional input: the empty name
    feeds = {k: v for k, v in inputs.items() if k != "B"}
    models = []
    for shape in (None, [1, 2 * group] + out):
        model = _model("DeformConv", inputs, attrs, 22, out_shape=shape)
        model.graph.node[0].input[3] = ""
        model.graph.input.remove(next(i for i in model.graph.input if i.name == "B"))
        models.append(model)
    want = _reference(models[0], feeds)
    (got,) = graphc.onnx.load(models[1]).run(**feeds)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_deform_conv_bad_offset_shape():
    inputs = {"X": np.zeros((1, 1, 3, 3), np.float32), "W": np.zeros((1, 1, 2, 2), np.float32),
              "offset": np.zeros((1, 4, 2, 2), np.float32)}
    with pytest.raises(OnnxModelError, match=r"offset must have shape \(1, 8, 2, 2\)"):
        _load("DeformConv", inputs, {}, 22)


# -- Col2Im -------------------------------------------------------------------------------------
@examples(30)
@given(st.integers(1, 3), st.sampled_from([np.float32, np.float64, np.int32]),
       st.integers(0, 2 ** 31))
def test_col2im_matches_reference(rank, dtype, seed):
    rng = np.random.default_rng(seed)
    block = [int(k) for k in rng.integers(1, 4, rank)]
    strides = [int(s) for s in rng.integers(1, 3, rank)]
    dilations = [int(d) for d in rng.integers(1, 3, rank)]
    pads = [int(p) for p in rng.integers(0, 3, 2 * rank)]
    image = [max(1, (k - 1) * d + 1 - pads[i] - pads[rank + i] + int(rng.integers(0, 3)))
             for i, (k, d) in enumerate(zip(block, dilations))]
    blocks = [(n + pads[i] + pads[rank + i] - (k - 1) * d - 1) // s + 1
              for i, (n, k, s, d) in enumerate(zip(image, block, strides, dilations))]
    n, c = (int(v) for v in rng.integers(1, 3, 2))
    shape = (n, c * int(np.prod(block)), int(np.prod(blocks)))
    x = (rng.integers(-9, 9, shape) if dtype == np.int32 else rng.standard_normal(shape))
    inputs = {"input": x.astype(dtype), "image_shape": np.array(image, np.int64),
              "block_shape": np.array(block, np.int64)}
    attrs = {"strides": strides, "dilations": dilations, "pads": pads}
    _compare("Col2Im", inputs, attrs, 18, constants=("image_shape", "block_shape"),
             rtol=1e-5, atol=1e-5)


def test_col2im_indices_of_an_overlapping_window():
    kept, cells = block_indices((3,), (2,), (1,), (1,), ((0, 0),))
    assert kept.all()
    np.testing.assert_array_equal(cells, [0, 1, 1, 2])
    kept, cells = block_indices((2,), (2,), (1,), (1,), ((1, 0),))
    np.testing.assert_array_equal(kept, [False, True, True, True])
    np.testing.assert_array_equal(cells, [0, 0, 1])


def test_col2im_wrong_block_count():
    inputs = {"input": np.zeros((1, 4, 5), np.float32), "image_shape": np.array([3, 3]),
              "block_shape": np.array([2, 2])}
    with pytest.raises(OnnxModelError, match=r"must be \(N, C x 4, 4\)"):
        _load("Col2Im", inputs, {}, 18, ("image_shape", "block_shape"))


# -- MaxUnpool ----------------------------------------------------------------------------------
@examples(20)
@given(st.integers(1, 3), st.booleans(), st.integers(0, 2 ** 31))
def test_max_unpool_matches_reference(rank, grow, seed):
    rng = np.random.default_rng(seed)
    kernel = [int(k) for k in rng.integers(1, 4, rank)]
    strides = [int(s) for s in rng.integers(1, 3, rank)]
    begins = [int(rng.integers(0, k)) for k in kernel]
    # pads of a window together below its size: every input cell has a window (as pooling)
    pads = begins + [int(rng.integers(0, k - b)) for k, b in zip(kernel, begins)]
    spatial = [int(d) for d in rng.integers(1, 4, rank)]
    unpooled = [(d - 1) * s - pads[i] - pads[rank + i] + k for i, (d, s, k) in
                enumerate(zip(spatial, strides, kernel))]
    x = rng.standard_normal([2, 2] + spatial).astype(np.float32)
    # as MaxPool's Indices: distinct flat indices into the unpooled (N, C, ...) tensor,
    # each within its own image and channel
    cells, count = int(np.prod(unpooled)), int(np.prod(spatial))
    indices = np.stack([rng.choice(cells, count, replace=False) + plane * cells
                        for plane in range(4)]).reshape(x.shape)
    inputs = {"X": x, "I": indices}
    constants = ()
    if grow:
        inputs["output_shape"] = np.array([2, 2] + [u + int(rng.integers(0, 2))
                                                    for u in unpooled], np.int64)
        constants = ("output_shape",)
    _compare("MaxUnpool", inputs, {"kernel_shape": kernel, "strides": strides, "pads": pads},
             11, constants=constants)


def test_max_unpool_errors():
    inputs = {"X": np.ones((1, 1, 2, 2), np.float32),
              "I": np.array([5, 7, 13, 15]).reshape(1, 1, 2, 2),
              "output_shape": np.array([1, 1, 3, 3])}
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    with pytest.raises(OnnxModelError, match="at least the unpooled shape"):
        _load("MaxUnpool", inputs, attrs, 11, ("output_shape",))
    bad = {"X": inputs["X"], "I": np.array([5, 7, 13, 16]).reshape(1, 1, 2, 2)}
    with pytest.raises(OnnxModelError, match="outside the 16 cells"):
        _load("MaxUnpool", bad, attrs, 11, ("I",))
