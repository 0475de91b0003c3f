"""The converters of Resize, RNN/GRU/LSTM, Attention, GatherND, ReverseSequence,
CenterCropPad, CumProd, NonZero/Compress/Unique and DFT against onnx's reference
implementation (``onnx.reference.ReferenceEvaluator``) on random shapes and
attributes; onnxruntime where the reference ignores an input (``sequence_lens``).
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper as h  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import graphc.onnx  # noqa: E402
from graphc.onnx.errors import OnnxError  # noqa: E402

F32 = TensorProto.FLOAT


def _model(op_type, inputs, outputs, opset, constants=(), **attrs):
    """One-node model: ``inputs`` as ``(name, array)`` graph inputs (``None``: omitted),
    ``constants`` as ``(name, array)`` initializers, ``outputs`` as names."""
    node = h.make_node(op_type, [name or "" for name, _ in inputs], outputs, **attrs)
    graph_inputs = [h.make_tensor_value_info(name, h.np_dtype_to_tensor_dtype(v.dtype),
                                             v.shape)
                    for name, v in inputs if name and not any(name == c for c, _ in constants)]
    initializers = [onnx.numpy_helper.from_array(v, name) for name, v in constants]
    graph = h.make_graph([node], "g", graph_inputs,
                         # placeholders: _typed gives the reference's types and shapes
                         [h.make_tensor_value_info(o, F32, []) for o in outputs if o],
                         initializer=initializers)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _typed(model, feeds, runner="reference"):
    """``model`` with the type and shape of each output, as the reference (or
    onnxruntime) computes them (the checker needs them), and their outputs."""
    if runner == "onnxruntime":
        ort = pytest.importorskip("onnxruntime")
        node = model.graph.node[0]
        first = model.graph.input[0].type.tensor_type.elem_type
        # Unique's outputs after the values are int64; the recurrent layers' are all X's type
        types = [first if i == 0 or node.op_type != "Unique" else TensorProto.INT64
                 for i in range(len(node.output))]
        del model.graph.output[:]
        model.graph.output.extend(h.make_tensor_value_info(o, t, None)
                                  for o, t in zip(node.output, types) if o)
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        expected = session.run(None, feeds)
    else:
        expected = ReferenceEvaluator(model).run(None, feeds)
    outputs = [h.make_tensor_value_info(v.name, h.np_dtype_to_tensor_dtype(e.dtype), e.shape)
               for v, e in zip(model.graph.output, expected)]
    del model.graph.output[:]
    model.graph.output.extend(outputs)
    return model, expected


def _compare(model, feeds, rtol=1e-4, atol=1e-5, expected=None):
    model, expected = _typed(model, feeds, expected or "reference")
    got = graphc.onnx.load(model).run(feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == np.shape(e) and g.dtype == np.asarray(e).dtype
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)


# -- Resize ---------------------------------------------------------------------------------------
TRANSFORMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
              "asymmetric", "tf_crop_and_resize"]


@pytest.mark.parametrize("seed", range(40))
def test_resize_matches_the_reference(seed):
    rng = np.random.default_rng(seed)
    mode = ["nearest", "linear", "cubic"][seed % 3]
    transform = TRANSFORMS[seed % len(TRANSFORMS)]
    shape = (1, 2) + tuple(int(d) for d in rng.integers(1, 7, size=2))
    x = rng.standard_normal(shape).astype(np.float32)
    attrs = {"mode": mode, "coordinate_transformation_mode": transform}
    if mode == "nearest":
        attrs["nearest_mode"] = ["round_prefer_floor", "round_prefer_ceil", "floor",
                                 "ceil"][seed % 4]
    else:
        attrs["antialias"] = int(rng.integers(0, 2))
        attrs["exclude_outside"] = int(rng.integers(0, 2))
    roi = None
    if transform == "tf_crop_and_resize":
        start = rng.uniform(-0.3, 0.5, size=2)
        roi = np.concatenate([[0, 0], start, [1, 1], start + rng.uniform(0.2, 1.0, size=2)])
        roi = roi.astype(np.float32)
        attrs["extrapolation_value"] = float(rng.uniform(-2, 2))
    if seed % 2:
        sizes = np.array(shape[:2] + tuple(int(d) for d in rng.integers(1, 9, size=2)),
                         np.int64)
        inputs = [("x", x), ("roi", roi) if roi is not None else (None, None),
                  (None, None), ("sizes", sizes)]
        constants = [("sizes", sizes)]
    else:
        scales = np.array([1, 1] + list(rng.choice([0.5, 0.6, 1.0, 1.5, 2.0, 2.5], 2)),
                          np.float32)
        inputs = [("x", x), ("roi", roi) if roi is not None else (None, None),
                  ("scales", scales)]
        constants = [("scales", scales)]
    if roi is not None:
        constants.append(("roi", roi))
    _compare(_model("Resize", inputs, ["y"], 19, constants, **attrs), {"x": x})


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_resize_keeps_the_aspect_ratio_on_given_axes(policy):
    x = np.random.default_rng(0).standard_normal((1, 3, 4, 6)).astype(np.float32)
    sizes = np.array([7, 5], np.int64)
    model = _model("Resize", [("x", x), (None, None), (None, None), ("sizes", sizes)], ["y"],
                   19, [("sizes", sizes)], mode="linear", axes=[2, 3],
                   keep_aspect_ratio_policy=policy)
    _compare(model, {"x": x})


def test_resize_of_integers_rounds_and_saturates():
    x = np.array([[[[0, 255], [255, 0]]]], np.uint8)
    scales = np.array([1, 1, 2.0, 2.0], np.float32)
    model = _model("Resize", [("x", x), (None, None), ("scales", scales)], ["y"], 19,
                   [("scales", scales)], mode="cubic")
    _compare(model, {"x": x}, atol=1)


def test_resize_refuses_antialias_for_nearest():
    x = np.zeros((1, 1, 2, 2), np.float32)
    scales = np.array([1, 1, 2.0, 2.0], np.float32)
    model = _model("Resize", [("x", x), (None, None), ("scales", scales)], ["y"], 19,
                   [("scales", scales)], mode="nearest", antialias=1)
    with pytest.raises(OnnxError, match="antialias"):
        graphc.onnx.load(model)


# -- recurrent layers -----------------------------------------------------------------------------
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _recurrent(op, seed, layout=0, direction="forward", **attrs):
    rng = np.random.default_rng(seed)
    steps, batch, size, hidden = (int(v) for v in rng.integers(1, 5, size=4))
    d = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    x = rng.standard_normal((batch, steps, size) if layout else (steps, batch, size))
    w = rng.standard_normal((d, g * hidden, size)) * 0.5
    r = rng.standard_normal((d, g * hidden, hidden)) * 0.5
    b = rng.standard_normal((d, 2 * g * hidden)) * 0.5
    state = (batch, d, hidden) if layout else (d, batch, hidden)
    h0 = rng.standard_normal(state)
    arrays = [("x", x), ("w", w), ("r", r), ("b", b), (None, None), ("h0", h0)]
    outputs = ["y", "y_h"]
    if op == "LSTM":
        arrays += [("c0", rng.standard_normal(state)), ("p", rng.standard_normal((d, 3 * hidden)))]
        outputs.append("y_c")
    arrays = [(n, None if v is None else v.astype(np.float32)) for n, v in arrays]
    model = _model(op, arrays, outputs, 22, [(n, v) for n, v in arrays[1:] if n],
                   hidden_size=hidden, layout=layout, direction=direction, **attrs)
    return model, {"x": arrays[0][1]}


@pytest.mark.parametrize("op", sorted(GATES))
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_recurrent_layers_match_the_reference(op, direction, layout):
    seed = hash((op, direction, layout)) % 1000
    extra = {"linear_before_reset": 1} if op == "GRU" and layout else {}
    model, feeds = _recurrent(op, seed, layout, direction, **extra)
    _compare(model, feeds)


@pytest.mark.parametrize("op", sorted(GATES))
def test_recurrent_layers_take_custom_activations_and_clip(op):
    acts = {"RNN": ["ScaledTanh"], "GRU": ["HardSigmoid", "Softsign"],
            "LSTM": ["HardSigmoid", "ScaledTanh", "Elu"]}[op]
    alphas = {"RNN": [0.7], "GRU": [0.3], "LSTM": [0.3, 0.9, 1.1]}[op]
    betas = {"RNN": [1.2], "GRU": [0.4], "LSTM": [0.4, 1.3]}[op]
    extra = {"activation_beta": betas} if betas else {}
    model, feeds = _recurrent(op, 7, activations=acts, activation_alpha=alphas, clip=1.5,
                              **extra)
    _compare(model, feeds, expected="onnxruntime")


@pytest.mark.parametrize("op", sorted(GATES))
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_recurrent_layers_stop_at_sequence_lens(op, direction):
    model, feeds = _recurrent(op, 3, direction=direction)
    batch = feeds["x"].shape[1]
    lengths = np.random.default_rng(1).integers(1, feeds["x"].shape[0] + 1, size=batch)
    node = model.graph.node[0]
    node.input[4] = "lens"
    model.graph.initializer.append(onnx.numpy_helper.from_array(lengths.astype(np.int32),
                                                                "lens"))
    _compare(model, feeds, expected="onnxruntime")


# -- Attention ------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(24))
def test_attention_matches_the_reference(seed):
    rng = np.random.default_rng(seed)
    batch, q_len, kv_len = (int(v) for v in rng.integers(1, 5, size=3))
    kv_heads = int(rng.integers(1, 3))
    q_heads = kv_heads * int(rng.integers(1, 3))
    size, v_size = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    q = rng.standard_normal((batch, q_heads, q_len, size)).astype(np.float32)
    k = rng.standard_normal((batch, kv_heads, kv_len, size)).astype(np.float32)
    v = rng.standard_normal((batch, kv_heads, kv_len, v_size)).astype(np.float32)
    inputs = [("q", q), ("k", k), ("v", v)]
    attrs = {"is_causal": int(seed % 2), "qk_matmul_output_mode": int(seed % 4)}
    past = seed % 3 == 0
    total = kv_len + (2 if past else 0)
    if seed % 4 < 2:
        mask = (rng.standard_normal((q_len, total)) > -0.5) if seed % 8 < 4 else \
            rng.standard_normal((q_len, total)).astype(np.float32)
        inputs.append(("mask", mask))
    else:
        inputs.append((None, None))
    if past:
        inputs += [("pk", rng.standard_normal((batch, kv_heads, 2, size)).astype(np.float32)),
                   ("pv", rng.standard_normal((batch, kv_heads, 2, v_size)).astype(np.float32))]
    if seed % 5 == 0:
        attrs["softcap"] = 2.5
    if seed % 6 == 1:
        attrs["scale"] = 0.3
    outputs = ["y", "present_key", "present_value", "qk"] if past else ["y", "", "", "qk"]
    model = _model("Attention", inputs, outputs, 23, **attrs)
    feeds = {n: a for n, a in inputs if n}
    _compare(model, feeds)


def test_attention_of_3d_inputs_splits_the_heads():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 3, 8)).astype(np.float32)
    k = rng.standard_normal((2, 5, 4)).astype(np.float32)
    v = rng.standard_normal((2, 5, 6)).astype(np.float32)
    model = _model("Attention", [("q", q), ("k", k), ("v", v)], ["y"], 23, q_num_heads=4,
                   kv_num_heads=2)
    _compare(model, {"q": q, "k": k, "v": v})


def test_attention_refuses_heads_that_do_not_group():
    q, k = np.zeros((1, 3, 2, 4), np.float32), np.zeros((1, 2, 2, 4), np.float32)
    model = _model("Attention", [("q", q), ("k", k), ("v", k)], ["y"], 23)
    with pytest.raises(OnnxError, match="multiple of the key/value"):
        graphc.onnx.load(model)


# -- gathers and value-dependent shapes -----------------------------------------------------------
@pytest.mark.parametrize("seed", range(12))
def test_gather_nd_matches_the_reference(seed):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(2, 5))
    dims = tuple(int(d) for d in rng.integers(1, 4, size=rank))
    batch_dims = int(rng.integers(0, rank - 1))
    depth = int(rng.integers(1, rank - batch_dims + 1))
    lead = tuple(int(d) for d in rng.integers(1, 3, size=int(rng.integers(0, 2))))
    index_shape = dims[:batch_dims] + lead + (depth,)
    bounds = np.array(dims[batch_dims:batch_dims + depth])
    indices = rng.integers(-bounds, bounds, size=index_shape).astype(np.int64)
    x = rng.standard_normal(dims).astype(np.float32)
    model = _model("GatherND", [("x", x), ("i", indices)], ["y"], 13, batch_dims=batch_dims)
    _compare(model, {"x": x, "i": indices})


@pytest.mark.parametrize("batch_axis", [0, 1])
def test_reverse_sequence_matches_the_reference(batch_axis):
    rng = np.random.default_rng(batch_axis)
    x = rng.standard_normal((4, 5, 2)).astype(np.float32)
    lengths = rng.integers(0, 5 if batch_axis == 1 else 6, size=x.shape[batch_axis])
    model = _model("ReverseSequence", [("x", x), ("lens", lengths.astype(np.int64))], ["y"], 10,
                   batch_axis=batch_axis, time_axis=1 - batch_axis)
    _compare(model, {"x": x, "lens": lengths.astype(np.int64)})


@pytest.mark.parametrize("seed", range(6))
def test_center_crop_pad_and_cumprod_match_the_reference(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    shape = rng.integers(1, 8, size=2).astype(np.int64)
    model = _model("CenterCropPad", [("x", x), ("s", shape)], ["y"], 18, [("s", shape)],
                   axes=[1, 2])
    _compare(model, {"x": x})
    axis = np.array(int(rng.integers(-3, 3)), np.int64)
    model = _model("CumProd", [("x", x), ("a", axis)], ["y"], 26, [("a", axis)],
                   exclusive=seed % 2, reverse=seed // 3)
    _compare(model, {"x": x})


@pytest.mark.parametrize("sorted_", [0, 1])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_unique_nonzero_and_compress_evaluate_while_importing(sorted_, axis):
    rng = np.random.default_rng(axis or 0)
    x = rng.integers(0, 3, size=(4, 3)).astype(np.float32)
    attrs = {"sorted": sorted_} if axis is None else {"sorted": sorted_, "axis": axis}
    model = _model("Unique", [("x", x)], ["y", "first", "inverse", "counts"], 11, **attrs)
    # (the reference's Unique fails on an axis and on unsorted values)
    _compare(model, {"x": x}, expected="onnxruntime")
    model = _model("NonZero", [("x", x)], ["y"], 13)
    _compare(model, {"x": x})
    condition = np.arange(x.size if axis is None else x.shape[axis]) % 3 != 1
    model = _model("Compress", [("x", x), ("c", condition)], ["y"], 11, [("c", condition)],
                   **({} if axis is None else {"axis": axis}))
    _compare(model, {"x": x})


def test_nonzero_of_a_computed_value_names_the_static_alternative():
    x = np.zeros((2, 2), np.float32)
    relu = h.make_node("Relu", ["x"], ["r"])
    nonzero = h.make_node("NonZero", ["r"], ["y"])
    graph = h.make_graph([relu, nonzero], "g", [h.make_tensor_value_info("x", F32, (2, 2))],
                         [h.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model, _ = _typed(model, {"x": x})
    g = graphc.onnx.load(model)
    # the value comes from the graph input: the model compiles for each value it is run with
    np.testing.assert_array_equal(g.run({"x": np.eye(2, dtype=np.float32)})[0],
                                  np.array(np.nonzero(np.eye(2)), np.int64))


# -- DFT ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("inverse", [0, 1])
@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("length", [None, 5, 8])
def test_dft_matches_the_reference(inverse, onesided, length):
    rng = np.random.default_rng(inverse * 4 + onesided)
    x = rng.standard_normal((2, 6, 1 if onesided and not inverse else 2)).astype(np.float32)
    inputs = [("x", x)]
    constants = []
    if length is not None:
        inputs.append(("n", np.array(length, np.int64)))
        constants.append(("n", np.array(length, np.int64)))
    model = _model("DFT", inputs, ["y"], 17, constants, axis=1, inverse=inverse,
                   onesided=onesided)
    _compare(model, {"x": x}, atol=1e-4)
