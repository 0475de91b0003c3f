"""The ONNX shape, data-movement and constant converters (graphc/onnx/ops/shape.py)
beyond what ONNX's conformance suite reaches: random geometry against onnxruntime,
the legacy-opset attribute forms against onnx's reference evaluator, constant
folding of shape chains, and the errors a user sees."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper as h, numpy_helper as nh  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import graphc.onnx  # noqa: E402
from graphc.onnx import OnnxModelError, OnnxUnsupported  # noqa: E402
from graphc.onnx.tensors import numpy_to_onnx_dtype  # noqa: E402

from opcheck import examples  # noqa: E402


def _model(op, inputs, consts=None, attrs=None, opset=17, n_outputs=1, like=None):
    """One ``op`` node reading graph ``inputs`` (name -> array, in order, ``None``
    for an omitted optional input) and initializers ``consts``; its outputs are
    declared as arrays ``like`` or as onnx infers them."""
    consts = consts or {}
    inputs = {**inputs, **consts}
    names = list(inputs)
    outs = [f"y{i}" for i in range(n_outputs)]
    node = h.make_node(op, [n if inputs[n] is not None else "" for n in names], outs,
                       **(attrs or {}))
    graph = h.make_graph(
        [node], "g",
        [h.make_tensor_value_info(n, numpy_to_onnx_dtype(v.dtype), list(v.shape))
         for n, v in inputs.items() if v is not None and n not in consts],
        [h.make_value_info(o, onnx.TypeProto()) if like is None else
         h.make_tensor_value_info(o, numpy_to_onnx_dtype(a.dtype), list(a.shape))
         for o, a in zip(outs, like or [None] * n_outputs)],
        [nh.from_array(np.asarray(v), n) for n, v in consts.items() if v is not None])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 8
    return _typed_outputs(model)


def _typed_outputs(model, elem_type=TensorProto.FLOAT):
    """``model`` with its outputs' types as onnx infers them (the checker wants
    them); ``elem_type`` of unknown shape where inference cannot tell."""
    model = onnx.shape_inference.infer_shapes(model)
    for out in model.graph.output:
        if not out.type.HasField("tensor_type"):
            out.type.tensor_type.elem_type = elem_type
            out.type.tensor_type.shape.SetInParent()
    return model


def _feeds(inputs, consts):
    return {n: v for n, v in inputs.items() if v is not None and n not in (consts or {})}


def _graphc(model, feeds):
    return graphc.onnx.load(model).run(feeds)


def _check(op, inputs, consts=None, attrs=None, opset=17, n_outputs=1, reference="ort"):
    model = _model(op, inputs, consts, attrs, opset, n_outputs)
    feeds = _feeds(inputs, consts)
    got = _graphc(model, feeds)
    if reference == "ort":
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        want = session.run(None, feeds)
    else:
        want = ReferenceEvaluator(model).run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)
    return got


def _ints(*values):
    return np.array(values, np.int64)


# -- random geometry against onnxruntime -----------------------------------------------------
bounds = st.integers(-8, 8) | st.sampled_from([2**63 - 1, -2**63])


def _slice_by_the_spec(x, starts, ends, axes, steps):
    """The Slice spec's text, index by index: negative starts/ends count from the end,
    then clamp to [0, dim] and [0, dim] (positive steps) or [0, dim-1] and [-1, dim-1]."""
    for s, e, a, t in zip(starts, ends, axes, steps):
        dim = x.shape[a]
        s, e = s + dim if s < 0 else s, e + dim if e < 0 else e
        if t > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
        else:
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
        x = np.take(x, np.array(list(range(s, e, t)) if dim else [], np.int64), axis=a)
    return x


@examples(40)
@given(dims=st.lists(st.integers(0, 5), min_size=1, max_size=3), data=st.data())
def test_slice_clamps_as_the_spec_says(dims, data):
    rank = len(dims)
    axes = data.draw(st.permutations(range(rank)).map(lambda p: list(p)[:max(1, len(p) - 1)]))
    n = len(axes)
    starts, ends = (data.draw(st.lists(bounds, min_size=n, max_size=n)) for _ in range(2))
    steps = data.draw(st.lists(st.integers(-3, 3).filter(bool), min_size=n, max_size=n))
    signed = [a - rank if data.draw(st.booleans()) else a for a in axes]
    x = np.arange(np.prod(dims), dtype=np.float32).reshape(dims)
    consts = {"s": _ints(*starts), "e": _ints(*ends), "a": _ints(*signed), "t": _ints(*steps)}
    (got,) = _graphc(_model("Slice", {"x": x}, consts, opset=13), {"x": x})
    want = _slice_by_the_spec(x, starts, ends, axes, steps)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_slice_agrees_with_onnxruntime_away_from_int64_extremes():
    # onnxruntime reads an INT64_MAX end with a negative step as "to the start"; the
    # spec clamps it to dim-1 (nothing): those corners are checked against the spec above
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    for starts, ends, steps in (([-10, 1, 7], [2, -1, -9], [1, 2, -2]),
                                ([5, -1, 0], [-10, 0, 5], [-1, -1, 3]),
                                ([0, -4, 4], [9, 4, -6], [2, 1, -1])):
        _check("Slice", {"x": x}, {"s": _ints(*starts), "e": _ints(*ends),
                                   "a": _ints(0, -2, 2), "t": _ints(*steps)}, opset=13)


@examples(40)
@given(dims=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       mode=st.sampled_from(["constant", "reflect", "edge", "wrap"]), data=st.data())
def test_pad_modes_and_negative_pads_like_onnxruntime(dims, mode, data):
    rank = len(dims)
    # crops leave at least two elements on each axis, so reflect has something to mirror
    lo = [data.draw(st.integers(-max(0, (d - 2) // 2), 3)) for d in dims]
    hi = [data.draw(st.integers(-max(0, (d - 2) // 2), 3)) for d in dims]
    if mode == "reflect":  # mirrors at most size-1 cells of what is left after cropping
        kept = [d + min(a, 0) + min(b, 0) for a, b, d in zip(lo, hi, dims)]
        lo = [min(p, k - 1) if k > 1 else min(p, 0) for p, k in zip(lo, kept)]
        hi = [min(p, k - 1) if k > 1 else min(p, 0) for p, k in zip(hi, kept)]
    x = np.arange(np.prod(dims), dtype=np.float32).reshape(dims) + 1
    consts = {"p": _ints(*lo, *hi), "v": np.array(7.5, np.float32)}
    _check("Pad", {"x": x}, consts, {"mode": mode}, opset=18)


@examples(20)
@given(dims=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data())
def test_gather_elements_with_negative_graph_indices(dims, data):
    rank = len(dims)
    axis = data.draw(st.integers(-rank, rank - 1))
    index_dims = [data.draw(st.integers(1, d)) for d in dims]
    size = dims[axis]
    index_dims[axis] = data.draw(st.integers(1, 4))
    indices = np.array(data.draw(st.lists(st.integers(-size, size - 1),
                                          min_size=int(np.prod(index_dims)),
                                          max_size=int(np.prod(index_dims)))),
                       np.int64).reshape(index_dims)
    x = np.arange(np.prod(dims), dtype=np.float32).reshape(dims)
    _check("GatherElements", {"x": x, "i": indices}, attrs={"axis": axis})


@examples(20)
@given(size=st.integers(0, 9), n=st.integers(1, 4), axis=st.sampled_from([0, -1]))
def test_split_num_outputs_gives_a_smaller_last_chunk(size, n, axis):
    x = np.arange(2 * size, dtype=np.float32).reshape(2, size).T.copy()
    if -(-size // n) * (n - 1) >= size and size:  # onnx wants every chunk non-empty
        return
    _check("Split", {"x": x}, attrs={"axis": axis, "num_outputs": n}, opset=18, n_outputs=n,
           reference="ref")


@examples(20)
@given(dims=st.lists(st.integers(1, 3), min_size=1, max_size=3), data=st.data())
def test_onehot_axis_and_out_of_range_indices(dims, data):
    depth = data.draw(st.integers(1, 5))
    count = int(np.prod(dims))
    indices = np.array(data.draw(st.lists(st.integers(-depth - 2, depth + 2), min_size=count,
                                          max_size=count)), np.int64).reshape(dims)
    axis = data.draw(st.integers(-len(dims) - 1, len(dims)))
    _check("OneHot", {"i": indices}, {"d": np.array(depth, np.int64),
                                      "v": np.array([2, 5], np.float32)}, {"axis": axis})


def test_onehot_float_indices_are_cast_to_int64():
    """The spec: non-integer indices are cast to int64 (truncated) before use, as
    onnxruntime does since 1.32 (1.31 and onnx's reference matched only whole
    numbers), so the expectation is written out here."""
    indices = np.array([[1.7, -1.0], [2.0, -1.2]], np.float32)
    model = _model("OneHot", {"i": indices}, {"d": np.array(3.0, np.float32),
                                              "v": np.array([0, 1], np.float32)}, {"axis": 0})
    got = _graphc(model, _feeds({"i": indices}, {"d": np.array(3.0, np.float32),
                                                  "v": np.array([0, 1], np.float32)}))[0]
    classes = np.array([[1, 2], [2, 2]])           # 1.7 -> 1, -1 -> 2, 2 -> 2, -1.2 -> -1 -> 2
    np.testing.assert_array_equal(got, np.stack([classes == k for k in range(3)]).astype(
        np.float32))


@pytest.mark.parametrize("op, mode", [("DepthToSpace", "DCR"), ("DepthToSpace", "CRD"),
                                      ("SpaceToDepth", None)])
def test_depth_and_space_blocks(op, mode):
    x = np.arange(2 * 8 * 4 * 6, dtype=np.float32).reshape(2, 8, 4, 6)
    attrs = {"blocksize": 2} if mode is None else {"blocksize": 2, "mode": mode}
    _check(op, {"x": x}, attrs=attrs, opset=13)  # (SpaceToDepth's modes: conformance, opset 28)


@examples(40)
@given(data=st.data())
def test_einsum_matches_numpy(data):
    sizes = {"i": 2, "j": 3, "k": 4, "l": 1}
    n = data.draw(st.integers(1, 3))
    terms = [data.draw(st.text("ijkl", min_size=0, max_size=3)) for _ in range(n)]
    used = sorted(set("".join(terms)))
    explicit = data.draw(st.booleans())
    output = "".join(data.draw(st.permutations(used))[:data.draw(st.integers(0, len(used)))])
    batch = data.draw(st.sampled_from([(), (2,)]))
    prefix = "..." if batch else ""
    equation = ",".join(prefix + t for t in terms) + (f"->{prefix}{output}" if explicit else "")
    rng = np.random.default_rng(0)
    inputs = {f"x{i}": rng.standard_normal(batch + tuple(sizes[c] for c in t))
              for i, t in enumerate(terms)}
    want = np.einsum(equation, *inputs.values())
    model = _model("Einsum", inputs, attrs={"equation": equation}, opset=12, like=[want])
    (got,) = _graphc(model, inputs)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# -- legacy opsets against onnx's reference evaluator ------------------------------------------
def test_slice_attributes_before_opset_10():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    _check("Slice", {"x": x}, attrs={"starts": [1, -3], "ends": [1000, -1], "axes": [0, 2]},
           opset=9, reference="ref")


def test_pad_attributes_before_opset_11():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _check("Pad", {"x": x}, attrs={"pads": [1, 0, 0, 2], "value": 3.0}, opset=2,
           reference="ref")
    _check("Pad", {"x": x}, attrs={"pads": [1, 2, 1, 2], "mode": "edge"}, opset=2,
           reference="ref")


def test_pad_axes_input_from_opset_18():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    _check("Pad", {"x": x}, {"p": _ints(1, 1, 2, 0), "v": None, "a": _ints(-1, 0)},
           {"mode": "reflect"}, opset=18)


def test_pad_value_computed_in_the_graph():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    pads = _ints(1, 0, -1, 2)
    _check("Pad", {"x": x, "p": pads, "v": np.array(-2.5, np.float32)}, {"p": pads})


def test_split_and_squeeze_attributes_before_opset_13():
    x = np.arange(12, dtype=np.float32).reshape(1, 6, 2)
    _check("Split", {"x": x}, attrs={"axis": 1, "split": [1, 2, 3]}, opset=11, n_outputs=3,
           reference="ref")
    _check("Split", {"x": x}, attrs={"axis": -2}, opset=11, n_outputs=2, reference="ref")
    _check("Squeeze", {"x": x}, attrs={"axes": [-3]}, opset=11, reference="ref")
    _check("Squeeze", {"x": x}, opset=11, reference="ref")
    _check("Unsqueeze", {"x": x}, attrs={"axes": [-1, 0]}, opset=11, reference="ref")


def test_squeeze_and_unsqueeze_axes_inputs_from_opset_13():
    x = np.arange(6, dtype=np.float32).reshape(1, 3, 1, 2)
    _check("Squeeze", {"x": x}, {"a": _ints(2, -4)}, opset=13)
    _check("Unsqueeze", {"x": x}, {"a": _ints(-1, 1, 0)}, opset=13)


def test_concat_axis_defaults_to_one_in_opset_1():
    a, b = np.ones((2, 1), np.float32), np.zeros((2, 3), np.float32)
    model = _model("Concat", {"a": a, "b": b}, opset=1)
    (y,) = _graphc(model, {"a": a, "b": b})
    np.testing.assert_array_equal(y, np.concatenate([a, b], axis=1))


def test_reshape_zero_copies_unless_allowzero():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    _check("Reshape", {"x": x}, {"s": _ints(0, -1)}, opset=14)
    _check("Reshape", {"x": x}, {"s": _ints(4, 0, 2)}, opset=14)
    empty = np.zeros((0, 3), np.float32)
    _check("Reshape", {"x": empty}, {"s": _ints(3, 0)}, {"allowzero": 1}, opset=14)


def test_dropout_is_identity_with_an_all_true_mask_per_opset():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for opset, mask_dtype in ((6, np.float32), (9, np.float32), (10, np.bool_), (13, np.bool_)):
        attrs = {"is_test": 1} if opset < 7 else {}
        model = _model("Dropout", {"x": x}, attrs=attrs, opset=opset, n_outputs=2)
        y, mask = _graphc(model, {"x": x})
        np.testing.assert_array_equal(y, x)
        assert mask.dtype == mask_dtype and mask.shape == x.shape and np.all(mask)
    model = _model("Dropout", {"x": x}, {"r": np.array(0.0, np.float32),
                                         "t": np.array(True)}, opset=13, n_outputs=2)
    y, mask = _graphc(model, {"x": x})
    np.testing.assert_array_equal(y, x)


def test_constant_attribute_forms():
    for attrs, want in (({"value_float": 1.5}, np.array(1.5, np.float32)),
                        ({"value_floats": [1.0, 2.0]}, np.array([1, 2], np.float32)),
                        ({"value_int": 3}, np.array(3, np.int64)),
                        ({"value_ints": [3, 4]}, np.array([3, 4], np.int64))):
        node = h.make_node("Constant", [], ["y0"], **attrs)
        graph = h.make_graph([node], "g", [], [h.make_value_info("y0", onnx.TypeProto())])
        (got,) = graphc.onnx.load(_typed_outputs(h.make_model(graph))).run({})
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_size_and_range_and_eyelike_values():
    x = np.zeros((3, 4), np.float32)
    (size,) = _check("Size", {"x": x})
    assert size.shape == ()
    _check("Range", {}, {"s": np.array(10, np.int32), "l": np.array(1, np.int32),
                         "d": np.array(-3, np.int32)})
    _check("Range", {}, {"s": np.array(0.5, np.float32), "l": np.array(2.0, np.float32),
                         "d": np.array(0.25, np.float32)})
    _check("EyeLike", {"x": x}, attrs={"k": -1, "dtype": TensorProto.INT32})


def test_trilu_k_computed_in_the_graph():
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    for upper in (0, 1):
        for k in (-2, 0, 1, 5):
            _check("Trilu", {"x": x, "k": np.array(k, np.int64)}, attrs={"upper": upper})


# -- folding --------------------------------------------------------------------------------
def test_shape_gather_concat_reshape_chain_folds_at_import():
    nodes = [h.make_node("Shape", ["x"], ["s"]),
             h.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             h.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
             h.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             h.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [nh.from_array(np.array(0, np.int64), "zero"), nh.from_array(_ints(0), "zero1"),
             nh.from_array(_ints(-1), "minus1")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TensorProto.FLOAT,
                                                               ["N", 3, 4])],
                         [h.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 12])],
                         inits)
    g = graphc.onnx.load(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]))
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    (y,) = g.run(x=x)
    np.testing.assert_array_equal(y, x.reshape(2, 12))
    # what the importer built, before graphc's optimiser: the shape arithmetic is gone
    assert {n.op.kind for n in g.executable.source.order} == {"var", "reshape"}


# -- errors ---------------------------------------------------------------------------------
def test_string_constants_are_unsupported_and_named():
    node = h.make_node("Constant", [], ["y0"], value_string="hi")
    graph = h.make_graph([node], "g", [], [h.make_value_info("y0", onnx.TypeProto())])
    with pytest.raises(OnnxUnsupported, match="value_string"):
        graphc.onnx.load(_typed_outputs(h.make_model(graph), TensorProto.STRING))


def test_shape_inputs_computed_from_graph_inputs_specialise_the_model():
    """A Reshape target computed from graph input ``s`` (not ``s`` itself): the
    model is compiled for each value of ``s`` it runs with."""
    nodes = [h.make_node("Neg", ["s"], ["t"]), h.make_node("Neg", ["t"], ["u"]),
             h.make_node("Reshape", ["x", "u"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                      h.make_tensor_value_info("s", TensorProto.INT64, [2])],
                         [h.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
    g = graphc.onnx.load(h.make_model(graph, opset_imports=[h.make_opsetid("", 14)]))
    assert g.executable is None   # nothing to compile until s has a value
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for target in ([3, 2], [6, 1], [3, 2]):
        (y,) = g.run(x=x, s=np.array(target, np.int64))
        np.testing.assert_array_equal(y, x.reshape(target))
    assert len(g._compiled) == 2


def test_training_dropout_is_unsupported():
    x = np.zeros((2, 3), np.float32)
    model = _model("Dropout", {"x": x}, {"r": np.array(0.5, np.float32),
                                         "t": np.array(True)}, opset=13)
    with pytest.raises(OnnxUnsupported, match="training"):
        graphc.onnx.load(model)


def test_malformed_nodes_name_what_is_wrong():
    x = np.zeros((2, 3), np.float32)
    cases = [("Gather", {"i": _ints(0, 5)}, {}, "indices must lie in"),
             ("Reshape", {"s": _ints(4, -1)}, {}, "cannot reshape"),
             ("Squeeze", {"a": _ints(0)}, {}, "not 1"),
             ("Transpose", {}, {"perm": [0, 0]}, "repeat"),
             ("Tile", {"r": _ints(2)}, {}, "one non-negative count per axis")]
    for op, consts, attrs, message in cases:
        model = _model(op, {"x": x, **consts}, consts, attrs, opset=13)
        with pytest.raises(OnnxModelError, match=message):
            graphc.onnx.load(model)
