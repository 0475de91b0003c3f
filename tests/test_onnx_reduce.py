"""The converters of ONNX's reductions (graphc/onnx/ops/reduce.py): every opset form
(axes attribute or input, noop_with_empty_axes), dtypes and random geometry against
onnxruntime, the spec's identities over zero-size axes, graph inputs that are axes,
and the errors a user sees."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper as h, numpy_helper as nh  # noqa: E402

import graphc.onnx  # noqa: E402
from graphc.onnx import OnnxModelError  # noqa: E402
from graphc.onnx.errors import NeedsInputValue  # noqa: E402
from graphc.onnx.importer import import_graph  # noqa: E402
from graphc.onnx.loaded import OnnxGraph  # noqa: E402
from opcheck import examples  # noqa: E402

REDUCTIONS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
IR = {11: 6, 13: 7, 18: 8, 20: 9}


def _info(name, array):
    return h.make_tensor_value_info(name, h.np_dtype_to_tensor_dtype(array.dtype), array.shape)


def _model(node, inputs: dict, outputs: dict, opset: int, constants=()):
    """A one-node model: ``inputs`` maps names to arrays (the ``constants`` become
    initializers), ``outputs`` maps output names to their dtypes (shape unknown)."""
    graph = h.make_graph(
        [node], "g", [_info(k, v) for k, v in inputs.items() if k not in constants],
        [h.make_tensor_value_info(k, h.np_dtype_to_tensor_dtype(np.dtype(t)), None)
         for k, t in outputs.items()],
        initializer=[nh.from_array(inputs[k], k) for k in constants])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = IR.get(opset, 10)
    try:  # onnx.checker wants the outputs' shapes
        inferred = onnx.shape_inference.infer_shapes(model).graph.output
    except Exception:  # the malformed models of the error tests
        inferred = model.graph.output
    for out, known in zip(model.graph.output, inferred):
        out.CopyFrom(known)
        if not out.type.tensor_type.HasField("shape"):
            out.type.tensor_type.shape.dim.add().dim_param = "d"
    return model


def _feeds(inputs, constants):
    return {k: v for k, v in inputs.items() if k not in constants}


def _run_both(node, inputs, outputs, opset, constants=()):
    model = _model(node, inputs, outputs, opset, constants)
    try:
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        want = session.run(None, _feeds(inputs, constants))
    except Exception:  # a type or form onnxruntime has no kernel for: nothing to compare
        assume(False)
    return graphc.onnx.load(model).run(**_feeds(inputs, constants)), want


def _assert_same(got, want, rtol=1e-5, atol=1e-6):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _axes_since(op):
    return 13 if op == "ReduceSum" else 18


def _reduce_node(op, axes, opset, keepdims=1, noop=None, name="data"):
    """``op`` over ``axes`` in the form ``opset`` defines, and the inputs it adds."""
    attrs, inputs, extra = {"keepdims": keepdims}, [name], {}
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    if opset >= _axes_since(op):
        if axes is not None:
            inputs.append("axes")
            extra["axes"] = np.array(axes, np.int64)
    elif axes is not None:
        attrs["axes"] = list(axes)
    return h.make_node(op, inputs, ["y"], **attrs), extra


# -- against onnxruntime -----------------------------------------------------------------
@st.composite
def reductions(draw):
    op = draw(st.sampled_from(REDUCTIONS))
    opset = draw(st.sampled_from([11, 13, 18]))
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    rank = len(shape)
    axes = draw(st.none() | st.lists(st.integers(-rank, rank - 1), max_size=rank,
                                     unique_by=lambda a: a % rank))
    if axes == [] and opset < _axes_since(op):
        axes = None  # an empty axes attribute is written as no attribute
    noop = draw(st.sampled_from([None, 0, 1])) if opset >= _axes_since(op) else None
    dtype = draw(st.sampled_from([np.float32, np.float32, np.float64, np.int32, np.int64]))
    return op, opset, tuple(shape), axes, draw(st.integers(0, 1)), noop, np.dtype(dtype)


@examples(60)
@given(reductions(), st.booleans(), st.integers(0, 2 ** 31))
def test_reductions_match_onnxruntime(case, axes_known, seed):
    op, opset, shape, axes, keepdims, noop, dtype = case
    rng = np.random.default_rng(seed)
    if dtype.kind == "f":
        low = 0.1 if op == "ReduceLogSum" else -2.0
        data = rng.uniform(low, 2.0, shape).astype(dtype)
    else:
        assume(op not in ("ReduceLogSum", "ReduceLogSumExp"))  # float-only in onnxruntime
        data = rng.integers(-3, 4, shape).astype(dtype)
    node, extra = _reduce_node(op, axes, opset, keepdims, noop)
    inputs = {"data": data, **extra}
    # an axes input is an initializer or, as in onnx's node tests, a graph input
    constants = ("axes",) if axes_known and "axes" in inputs else ()
    got, want = _run_both(node, inputs, {"y": dtype}, opset, constants)
    _assert_same(got, want, rtol=1e-4 if dtype == np.float32 else 1e-6)


@examples(30)
@given(st.sampled_from(["ArgMax", "ArgMin"]), st.sampled_from([11, 13]),
       st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data(),
       st.integers(0, 2 ** 31))
def test_arg_reductions_match_onnxruntime(op, opset, shape, data, seed):
    rank = len(shape)
    attrs = {"axis": data.draw(st.integers(-rank, rank - 1)),
             "keepdims": data.draw(st.integers(0, 1))}
    if opset >= 12:
        attrs["select_last_index"] = data.draw(st.integers(0, 1))
    # few distinct values, so ties are common and the tie rule is what is tested
    x = np.random.default_rng(seed).integers(0, 3, shape).astype(np.float32)
    node = h.make_node(op, ["x"], ["y"], **attrs)
    _assert_same(*_run_both(node, {"x": x}, {"y": np.int64}, opset))


@examples(30)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=3), st.data(),
       st.sampled_from([np.float32, np.float64, np.int32, np.int64]), st.integers(0, 1),
       st.integers(0, 1), st.booleans(), st.integers(0, 2 ** 31))
def test_cumsum_matches_onnxruntime(shape, data, dtype, exclusive, reverse, axis_known, seed):
    rank = len(shape)
    axis = np.array(data.draw(st.integers(-rank, rank - 1)), np.int64)
    x = np.random.default_rng(seed).integers(-5, 6, shape).astype(dtype)
    node = h.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    constants = ("axis",) if axis_known else ()
    _assert_same(*_run_both(node, {"x": x, "axis": axis}, {"y": dtype}, 14, constants))


@examples(30)
@given(st.sampled_from([1, 10, 11]), st.lists(st.integers(1, 5), min_size=1, max_size=3),
       st.data(), st.sampled_from([np.float32, np.int64]), st.integers(0, 2 ** 31))
def test_topk_matches_onnxruntime(opset, shape, data, dtype, seed):
    rank = len(shape)
    if opset < 11:
        dtype = np.float32  # integer TopK exists from opset 11
    axis = data.draw(st.integers(-rank, rank - 1))
    k = data.draw(st.integers(0 if opset >= 10 else 1, shape[axis]))
    x = np.random.default_rng(seed).integers(-2, 3, shape).astype(dtype)  # many ties
    attrs, inputs = {"axis": axis}, {"x": x}
    if opset >= 11:
        attrs["largest"] = data.draw(st.integers(0, 1))
    if opset >= 10:
        inputs["k"] = np.array([k], np.int64)
    else:
        attrs["k"] = k
    node = h.make_node("TopK", list(inputs), ["values", "indices"], **attrs)
    got, want = _run_both(node, inputs, {"values": dtype, "indices": np.int64}, opset,
                          constants=("k",) if opset >= 10 else ())
    _assert_same(got, want)


# -- the spec's values that onnxruntime does not pin down --------------------------------
def _graphc(node, inputs, dtype, opset):
    constants = ("axes",) if "axes" in inputs else ()
    return graphc.onnx.load(_model(node, inputs, {"y": dtype}, opset, constants)
                            ).run(**_feeds(inputs, constants))[0]


def _info_of(dtype):
    return np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else np.finfo(dtype)


@pytest.mark.parametrize("op, dtype, identity", [
    ("ReduceSum", np.float32, 0), ("ReduceSum", np.int64, 0),
    ("ReduceProd", np.float32, 1), ("ReduceProd", np.int32, 1),
    ("ReduceMax", np.float32, -np.inf), ("ReduceMax", np.int32, "lowest"),
    ("ReduceMax", np.bool_, False),
    ("ReduceMin", np.float64, np.inf), ("ReduceMin", np.int64, "highest"),
    ("ReduceMin", np.bool_, True),
    ("ReduceL1", np.float32, 0), ("ReduceL2", np.float32, 0), ("ReduceSumSquare", np.int32, 0),
    ("ReduceLogSum", np.float32, -np.inf), ("ReduceLogSumExp", np.float32, -np.inf)])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reductions_over_a_zero_size_axis_give_the_identity(op, dtype, identity, keepdims):
    """The spec (opset 18+): a reduction over an empty set gives the operation's
    identity: 0 for sums, 1 for products, the lowest/highest value for max/min."""
    if identity == "lowest":
        identity = _info_of(dtype).min
    elif identity == "highest":
        identity = _info_of(dtype).max
    node, extra = _reduce_node(op, [1], 20, keepdims)
    got = _graphc(node, {"data": np.zeros((2, 0, 3), dtype), **extra}, dtype, 20)
    assert got.dtype == dtype and got.shape == ((2, 1, 3) if keepdims else (2, 3))
    assert (got == np.array(identity, dtype)).all()


@pytest.mark.parametrize("op, logical", [("ReduceMax", np.any), ("ReduceMin", np.all)])
def test_bool_max_and_min_are_any_and_all(op, logical):
    x = np.random.default_rng(0).random((3, 4, 2)) < 0.3
    for axes in ([0], [1, 2], [-1], []):
        node, extra = _reduce_node(op, axes, 20, keepdims=0)
        got = _graphc(node, {"data": x, **extra}, np.bool_, 20)
        want = logical(x, axis=tuple(axes) or None)
        assert got.dtype == np.bool_ and np.array_equal(got, want)


@pytest.mark.parametrize("op, elementwise", [
    ("ReduceSum", lambda x: x), ("ReduceSumSquare", np.square), ("ReduceL1", np.abs),
    ("ReduceMax", lambda x: x), ("ReduceLogSumExp", lambda x: x)])
def test_noop_with_empty_axes_reduces_nothing(op, elementwise):
    """With noop_with_empty_axes=1 and no axes, each element is reduced alone (the
    reduction's elementwise part still applies, as in onnx's reference)."""
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    for axes in (None, []):
        node, extra = _reduce_node(op, axes, 18, noop=1)
        got = _graphc(node, {"data": x, **extra}, np.float32, 18)
        np.testing.assert_allclose(got, elementwise(x), rtol=1e-6)
        node, extra = _reduce_node(op, axes, 18, noop=0)  # no axes: every axis
        assert _graphc(node, {"data": x, **extra}, np.float32, 18).shape == (1, 1)


def test_integer_mean_truncates_toward_zero_and_keeps_the_dtype():
    x = np.array([[-3, -4], [3, 4], [-7, 0]], np.int32)  # means -3.5, 3.5, -3.5
    node, extra = _reduce_node("ReduceMean", [1], 18, keepdims=0)
    got = _graphc(node, {"data": x, **extra}, np.int32, 18)
    assert got.dtype == np.int32 and got.tolist() == [-3, 3, -3]


@pytest.mark.parametrize("op, opset", [("ReduceSum", 1), ("ReduceSum", 11),
                                       ("ReduceMean", 1), ("ReduceMax", 13),
                                       ("ReduceL2", 11), ("ReduceLogSumExp", 13)])
def test_legacy_axes_attribute(op, opset):
    x = np.random.default_rng(2).uniform(0.5, 2, (2, 3, 4))
    attrs = {} if opset == 1 else {"axes": [-1, 0]}
    node = h.make_node(op, ["data"], ["y"], **attrs)  # keepdims defaults to 1
    got = graphc.onnx.load(_model(node, {"data": x}, {"y": x.dtype}, opset)).run(data=x)[0]
    axes = (0, 1, 2) if opset == 1 else (0, 2)
    want = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max,
            "ReduceL2": lambda x, axis, keepdims: np.sqrt(np.sum(x * x, axis, keepdims=True)),
            "ReduceLogSumExp": lambda x, axis, keepdims:
                np.log(np.sum(np.exp(x), axis, keepdims=True))}[op](x, axis=axes, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_reduce_log_sum_exp_is_stable():
    x = np.array([[1000.0, 1000.0], [-np.inf, -np.inf]])
    node, extra = _reduce_node("ReduceLogSumExp", [1], 18, keepdims=0)
    got = _graphc(node, {"data": x, **extra}, np.float64, 18)
    np.testing.assert_allclose(got, [1000.0 + np.log(2.0), -np.inf])


def test_select_last_index_picks_the_last_tie():
    x = np.array([[2.0, 5.0, 5.0, 1.0], [1.0, 1.0, 1.0, 1.0]], np.float32)
    for op, first, last in (("ArgMax", [1, 0], [2, 3]), ("ArgMin", [3, 0], [3, 3])):
        for select, want in ((0, first), (1, last)):
            node = h.make_node(op, ["x"], ["y"], axis=1, keepdims=0, select_last_index=select)
            got = graphc.onnx.load(_model(node, {"x": x}, {"y": np.int64}, 13)).run(x=x)[0]
            assert got.dtype == np.int64 and got.tolist() == want


# -- axes fed as a graph input -------------------------------------------------------------
def test_axes_graph_input_compiles_per_value():
    """onnx's node tests feed axes as a graph input: the model is compiled for each
    value it runs with (graphc graphs have static shapes)."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    node, extra = _reduce_node("ReduceSum", [0], 13, keepdims=0)
    model = _model(node, {"data": x, **extra}, {"y": np.float32}, 13)
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_param = "n"  # any number of axes
    g = graphc.onnx.load(model)
    for axes in ([1], [0, -1], [1], []):
        got = g.run(data=x, axes=np.array(axes, np.int64))[0]
        np.testing.assert_array_equal(got, x.sum(axis=tuple(axes) or None))
    assert "3 shape set(s)" in repr(g)
    with pytest.raises(NeedsInputValue, match="graph input 'axes'"):
        import_graph(model, {"axes": (1,)})


# -- errors ----------------------------------------------------------------------------------
def _load(node, inputs, opset, constants=()):
    # OnnxGraph without onnx.checker, which refuses some of these models first
    return OnnxGraph(_model(node, inputs, {"y": np.float32}, opset, constants))


X = np.zeros((2, 3), np.float32)
AXES = {"data": X, "axes": np.array([1], np.int64)}


@pytest.mark.parametrize("node, inputs, opset, message", [
    (h.make_node("ReduceMean", ["data"], ["y"], axes=[1]), {"data": X}, 18,
     r"from opset 18 the axes of ReduceMean are its second input"),
    (h.make_node("ReduceSum", ["data"], ["y"], axes=[1]), {"data": X}, 13,
     r"from opset 13 the axes of ReduceSum"),
    (h.make_node("ReduceMax", ["data", "axes"], ["y"]), AXES, 13,
     r"before opset 18 the axes of ReduceMax are an attribute"),
    (h.make_node("ReduceProd", ["data"], ["y"], noop_with_empty_axes=1), {"data": X}, 13,
     r"noop_with_empty_axes exists only from opset 18"),
    (h.make_node("ReduceL1", ["data"], ["y"], axes=[2]), {"data": X}, 13,
     r"axis 2 is out of range for an input of rank 2 \(expected -2 <= axis < 2\)"),
    (h.make_node("ReduceL1", ["data"], ["y"], axes=[1, -1]), {"data": X}, 13,
     r"axes \[1, -1\] repeat an axis"),
    (h.make_node("ArgMax", ["data"], ["y"], axis=-3), {"data": X}, 13,
     r"axis -3 is out of range for an input of shape \(2, 3\)"),
    (h.make_node("ArgMin", ["data"], ["y"], select_last_index=1), {"data": X}, 11,
     r"select_last_index exists only from opset 12"),
    (h.make_node("ArgMax", ["data"], ["y"], axis=1), {"data": np.zeros((2, 0), np.float32)},
     13, r"ArgMax over axis 1 of size 0 \(input shape \(2, 0\)\)"),
    (h.make_node("CumSum", ["data", "axes"], ["y"]), {"data": X, "axes": np.array(2)}, 14,
     r"axis 2 is out of range for an input of shape \(2, 3\)"),
    (h.make_node("CumSum", ["data", "axes"], ["y"]), {"data": X, "axes": np.array([0, 1])},
     14, r"the axis input must be one integer"),
    (h.make_node("TopK", ["data", "axes"], ["y", "i"]), {"data": X, "axes": np.array([4])},
     11, r"k = 4 must be in \[0, 3\]"),
    (h.make_node("TopK", ["data"], ["y", "i"]), {"data": X}, 1,
     r"attribute 'k' is required before opset 10"),
    (h.make_node("TopK", ["data"], ["y", "i"], k=1, largest=0), {"data": X}, 1,
     r"'largest' and 'sorted' exist only from opset 11"),
])
def test_errors_name_the_node_and_what_was_expected(node, inputs, opset, message):
    with pytest.raises(OnnxModelError, match=message) as info:
        _load(node, inputs, opset, constants=tuple(k for k in inputs if k != "data"))
    assert node.op_type in str(info.value)
