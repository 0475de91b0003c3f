"""ONNX files are untrusted input (issue 13, item 5).

A few bytes of a model can ask for terabytes; every size is checked before it is
allocated, constant folding holds at most ``fold_limit_bytes`` (a larger constant is
computed at run time), and every error a model's content causes is an
``OnnxModelError`` or ``OnnxUnsupported`` naming the node. The last test is a seeded
fuzz: mutated small models either import to the same results as onnxruntime's, or
are refused with one of those two errors.
"""
from __future__ import annotations

import collections
import copy
import math
import time
import tracemalloc
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

import graphc.onnx  # noqa: E402
from graphc.onnx import OnnxModelError, OnnxUnsupported  # noqa: E402
from graphc.onnx.importer import import_graph  # noqa: E402
from graphc.onnx.limits import LimitExceeded  # noqa: E402
from graphc.type.errors import InputError, ShapeError  # noqa: E402
from onnx_reference import onnxruntime_run  # noqa: E402

F = T.FLOAT
MiB = 1 << 20


def _model(nodes, inputs, outputs, inits=(), opset=17, name="g"):
    graph = h.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def _i64(name, values):
    return nh.from_array(np.array(values, np.int64), name)


def _f32(name, values):
    return nh.from_array(np.asarray(values, np.float32), name)


def _peak(function):
    """``(result or the exception raised, peak bytes traced)`` of ``function()``."""
    tracemalloc.start()
    try:
        result = function()
    except Exception as exc:  # the caller asserts on it
        result = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return result, peak


def _kinds(loaded) -> collections.Counter:
    return collections.Counter(n.op.kind for n in loaded.executable.graph.order)


# -- the 133-byte model ---------------------------------------------------------------------
def _bomb(n):
    """The issue's model: ConstantOfShape of [n] into ReduceSum (133 bytes)."""
    shape = h.make_tensor("v", T.INT64, [1], [n])
    nodes = [h.make_node("Constant", [], ["s"], value=shape),
             h.make_node("ConstantOfShape", ["s"], ["z"]),
             h.make_node("ReduceSum", ["z"], ["y"], keepdims=0)]
    return _model(nodes, [], [_vi("y", F, [])], name="bomb6")


def test_the_133_byte_model_imports_without_computing_its_512_mib():
    data = _bomb(2 ** 27).SerializeToString()
    assert len(data) == 133
    (variables, outputs), peak = _peak(lambda: import_graph(graphc.onnx.read_model(data), {}))
    # the import held 522 MiB before; now the fill is a graph operation, run later
    assert peak < MiB
    kinds, stack = set(), list(outputs)
    while stack:
        node = stack.pop()
        kinds.add(node.op.kind)
        stack.extend(node.parents)
    assert "fill" in kinds and variables == []


def test_the_133_byte_model_asking_for_terabytes_is_refused_naming_the_node():
    error, peak = _peak(lambda: graphc.onnx.load(_bomb(2 ** 40).SerializeToString()))
    assert isinstance(error, LimitExceeded) and isinstance(error, OnnxModelError)
    assert str(error).startswith("ConstantOfShape node (#1, outputs ['z'])")
    assert "4 TiB" in str(error) and "value_limit_bytes" in str(error)
    assert peak < MiB


# -- the fold budget ------------------------------------------------------------------------
def _fill_model(n, value=1.5):
    """y = ReduceSum(ConstantOfShape([n], value)) + x: a constant subgraph of n floats."""
    nodes = [h.make_node("ConstantOfShape", ["s"], ["z"],
                         value=h.make_tensor("v", F, [1], [value])),
             h.make_node("ReduceSum", ["z"], ["total"], keepdims=1),
             h.make_node("Add", ["x", "total"], ["y"])]
    return _model(nodes, [_vi("x", F, [2])], [_vi("y", F, [2])], [_i64("s", [n])])


def test_a_constant_past_the_fold_limit_is_computed_at_run_time_with_the_same_result():
    model = _fill_model(4096)
    x = np.array([1.0, -2.0], np.float32)
    (want,) = onnxruntime_run(model, {"x": x})
    folded = graphc.onnx.load(model, optimise=False)
    deferred = graphc.onnx.load(model, optimise=False, fold_limit_bytes=4 << 10)
    assert "fill" not in _kinds(folded)
    assert _kinds(deferred)["fill"] == 1
    for loaded in (folded, deferred):
        np.testing.assert_array_equal(loaded.run({"x": x})[0], want)


def test_the_fold_budget_counts_every_value_the_import_holds():
    """Six 2 KiB constants with a 5 KiB budget: two fold, four wait for run time."""
    nodes, names = [], []
    for i in range(6):
        nodes.append(h.make_node("ConstantOfShape", ["s"], [f"c{i}"],
                                 value=h.make_tensor(f"v{i}", F, [1], [i + 0.5])))
        names.append(f"c{i}")
    nodes += [h.make_node("Concat", names, ["all"], axis=0),
              h.make_node("ReduceSum", ["all"], ["total"], keepdims=1),
              h.make_node("Add", ["x", "total"], ["y"])]
    model = _model(nodes, [_vi("x", F, [1])], [_vi("y", F, [1])], [_i64("s", [512])])
    loaded = graphc.onnx.load(model, optimise=False, fold_limit_bytes=5 << 10)
    assert _kinds(loaded)["fill"] == 4
    x = np.zeros(1, np.float32)
    np.testing.assert_array_equal(loaded.run({"x": x})[0], onnxruntime_run(model, {"x": x})[0])


def test_shapes_still_fold_when_the_budget_is_spent():
    """Shape -> Gather -> Concat -> Reshape needs its values while importing: small
    values fold even with a budget of zero."""
    nodes = [h.make_node("Shape", ["x"], ["s"]),
             h.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             h.make_node("Concat", ["n", "minus1"], ["t"], axis=0),
             h.make_node("Reshape", ["x", "t"], ["y"])]
    model = _model(nodes, [_vi("x", F, [2, 3, 4])], [_vi("y", F, [2, 12])],
                   [_i64("zero", [0]), _i64("minus1", [-1])])
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(graphc.onnx.load(model, fold_limit_bytes=0).run({"x": x})[0],
                                  onnxruntime_run(model, {"x": x})[0])


def test_the_value_limit_refuses_a_value_it_does_not_allow_and_can_be_raised():
    model = _fill_model(1 << 18)  # 1 MiB of floats
    with pytest.raises(LimitExceeded, match=r"ConstantOfShape node \(#0.*1 MiB.*"
                                            r"value_limit_bytes=524288"):
        graphc.onnx.load(model, value_limit_bytes=512 << 10)
    x = np.zeros(2, np.float32)
    np.testing.assert_array_equal(graphc.onnx.load(model).run({"x": x})[0],
                                  onnxruntime_run(model, {"x": x})[0])


def test_a_range_past_the_fold_limit_is_refused_as_only_the_import_computes_it():
    nodes = [h.make_node("Range", ["a", "b", "c"], ["y"], name="bomb")]
    model = _model(nodes, [], [_vi("y", T.INT64, ["n"])],
                   [nh.from_array(np.array(v, np.int64), k) for k, v in
                    (("a", 0), ("b", 4096), ("c", 1))])
    with pytest.raises(LimitExceeded, match="Range node 'bomb'.*cannot be computed at run "
                                            "time.*fold_limit_bytes"):
        graphc.onnx.load(model, fold_limit_bytes=1 << 10)
    np.testing.assert_array_equal(graphc.onnx.load(model).run({})[0], np.arange(4096))


@pytest.mark.parametrize("option, value", [("fold_limit_bytes", -1),
                                           ("value_limit_bytes", "4 GiB"),
                                           ("fold_limit_bytes", 1.5)])
def test_the_limits_are_non_negative_integers(option, value):
    with pytest.raises(ValueError, match=option):
        graphc.onnx.load(_fill_model(4), **{option: value})


# -- attribute bombs ------------------------------------------------------------------------
def _one(op_type, inputs, inits, x_shape=(2,), x_type=F, outputs=("y",), **attrs):
    """A model of one node named 'bomb' reading graph input x (when listed) and ``inits``."""
    graph_inputs = [_vi("x", x_type, list(x_shape))] if "x" in inputs else []
    node = h.make_node(op_type, inputs, list(outputs), name="bomb", **attrs)
    return _model([node], graph_inputs, [_vi(o, F, ["n"]) for o in outputs], inits)


_W = _f32("w", np.ones((1, 1, 1, 1)))
BOMBS = {
    "ConstantOfShape 2**40": (_one("ConstantOfShape", ["s"], [_i64("s", [2 ** 40])]),
                              LimitExceeded, "4 TiB"),
    "ConstantOfShape negative": (_one("ConstantOfShape", ["s"], [_i64("s", [3, -1])]),
                                 OnnxModelError, "negative dimension"),
    "OneHot depth 2**40": (_one("OneHot", ["x", "d", "v"],
                                [_i64("d", 2 ** 40), _f32("v", [0, 1])], x_type=T.INT64),
                           LimitExceeded, "8 TiB"),
    "OneHot depth 2**40 folded": (_one("OneHot", ["i", "d", "v"],
                                       [_i64("i", [0, 1]), _i64("d", 2 ** 40),
                                        _f32("v", [0, 1])]), LimitExceeded, "8 TiB"),
    "OneHot depth 0": (_one("OneHot", ["x", "d", "v"], [_i64("d", 0), _f32("v", [0, 1])],
                            x_type=T.INT64), OnnxModelError, "depth must be positive"),
    "Tile repeats 2**40": (_one("Tile", ["x", "r"], [_i64("r", [2 ** 40])]),
                           LimitExceeded, "8 TiB"),
    "Tile repeats negative": (_one("Tile", ["x", "r"], [_i64("r", [-2])]),
                              OnnxModelError, "non-negative"),
    "Pad widths 2**40": (_one("Pad", ["x", "p"], [_i64("p", [2 ** 40, 0])]),
                         LimitExceeded, "TiB"),
    "Pad widths 2**40 edge": (_one("Pad", ["x", "p"], [_i64("p", [0, 2 ** 40])], mode="edge"),
                              LimitExceeded, "TiB"),
    "Pad crops past the input": (_one("Pad", ["x", "p"], [_i64("p", [-2, -1])]),
                                 OnnxModelError, "crop more"),
    "Expand 2**20 x 2**20": (_one("Expand", ["x", "s"], [_i64("s", [2 ** 20, 2 ** 20])],
                                  x_shape=(1,)), LimitExceeded, "4 TiB"),
    "Expand negative": (_one("Expand", ["x", "s"], [_i64("s", [-2])]),
                        OnnxModelError, "does not broadcast"),
    "Reshape 2**40": (_one("Reshape", ["x", "s"], [_i64("s", [2 ** 40, -1])], x_shape=(4,)),
                      OnnxModelError, "cannot reshape"),
    "Range 2**40": (_one("Range", ["a", "b", "c"], [_i64("a", 0), _i64("b", 2 ** 40),
                                                    _i64("c", 1)]), LimitExceeded, "TiB"),
    "Conv pads 2**40": (_one("Conv", ["x", "w"], [_W], x_shape=(1, 1, 4, 4),
                             pads=[2 ** 40, 2 ** 40, 0, 0]), LimitExceeded, "TiB"),
    "Conv folded scratch": (_one("Conv", ["i", "w"],
                                 [_f32("i", np.ones((1, 1, 256, 256))),
                                  _f32("w", np.ones((1, 1, 64, 64)))],
                                 ), LimitExceeded, "conv2d's scratch"),
    "MaxPool window 2**20 taps": (_one("MaxPool", ["x"], [], x_shape=(1, 1, 4),
                                       kernel_shape=[2 ** 20], pads=[2 ** 20, 2 ** 20]),
                                  OnnxUnsupported, "more than 16384 graph operations"),
    "LRN size 2**20": (_one("LRN", ["x"], [], x_shape=(1, 2, 2, 2), size=2 ** 20),
                       OnnxUnsupported, "more than 16384 graph operations"),
    "TopK k 2**40": (_one("TopK", ["x", "k"], [_i64("k", [2 ** 40])], x_shape=(3,),
                          outputs=("y", "i")), OnnxModelError, "k = 1099511627776"),
}


@pytest.mark.parametrize("name", BOMBS)
def test_every_size_a_model_asks_for_is_checked_before_allocating(name):
    model, kind, detail = BOMBS[name]
    error, peak = _peak(lambda: graphc.onnx.load(model.SerializeToString(),
                                                 value_limit_bytes=256 * MiB))
    assert isinstance(error, kind), repr(error)
    op_type = model.graph.node[0].op_type
    outputs = list(model.graph.node[0].output)
    assert str(error).startswith(f"{op_type} node 'bomb' (#0, outputs {outputs})")
    assert detail in str(error) and " (at " not in str(error)
    assert peak < 64 * MiB


@pytest.mark.parametrize("dim, kind, detail", [(2 ** 40, LimitExceeded, "4 TiB"),
                                               (-3, OnnxModelError, "non-negative")])
def test_the_dimensions_a_graph_input_declares_are_checked(dim, kind, detail):
    model = _one("Relu", ["x"], [], x_shape=(dim,))
    error, peak = _peak(lambda: graphc.onnx.load(model))
    assert isinstance(error, kind) and "input 'x'" in str(error) and detail in str(error)
    assert peak < MiB


# -- errors caused by a model's content -----------------------------------------------------
def test_a_float16_input_into_float32_weights_is_a_model_error_as_in_onnxruntime():
    model = _one("Conv", ["x", "w"], [_W], x_shape=(1, 1, 4, 4), x_type=T.FLOAT16)
    with pytest.raises(Exception):
        onnxruntime_run(model, {"x": np.zeros((1, 1, 4, 4), np.float16)})
    with pytest.raises(OnnxModelError, match=r"^Conv node 'bomb' \(#0, outputs \['y'\]\): "
                                             r"input 1 \('w'\) is float32 but input 0 \('x'\) "
                                             r"is float16"):
        graphc.onnx.load(model)


def test_an_element_type_the_operator_does_not_take_is_a_model_error():
    model = _one("Conv", ["x", "w"], [nh.from_array(np.ones((1, 1, 1, 1), np.int64), "w")],
                 x_shape=(1, 1, 4, 4), x_type=T.INT64)
    with pytest.raises(OnnxModelError, match="input 0 \\('x'\\) is int64, which Conv does not "
                                             "take there"):
        graphc.onnx.load(model)


@pytest.mark.parametrize("op_type, w_shape", [("MatMul", (4, 5)), ("Add", (4,))])
def test_shape_errors_from_graphc_name_the_node_and_chain_the_original(op_type, w_shape):
    model = _model([h.make_node("Relu", ["x"], ["r"]),
                    h.make_node(op_type, ["r", "w"], ["y"], name="second")],
                   [_vi("x", F, [2, 3])], [_vi("y", F, ["a", "b"])],
                   [_f32("w", np.ones(w_shape))])
    with pytest.raises(OnnxModelError) as caught:
        graphc.onnx.load(model)
    message = str(caught.value)
    assert message.startswith(f"{op_type} node 'second' (#1, outputs ['y']): ShapeError: ")
    assert " (at " not in message  # not the caller's line: the node is what is wrong
    assert isinstance(caught.value.__cause__, ShapeError)


def test_a_graph_output_declared_with_another_element_type_is_a_model_error():
    model = _model([h.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", F, [2])],
                   [_vi("y", T.FLOAT16, [2])])
    with pytest.raises(OnnxModelError, match="graph output 'y' is declared float16, but the "
                                             "value computed by Relu node 'r' .* is float32"):
        graphc.onnx.load(model)


def test_a_switch_attribute_takes_zero_or_one():
    model = _model([h.make_node("ReduceSum", ["x"], ["y"], name="r", keepdims=2)],
                   [_vi("x", F, [2, 3])], [_vi("y", F, [1, 1])])
    with pytest.raises(OnnxModelError, match="ReduceSum node 'r'.*'keepdims' is a switch"):
        graphc.onnx.load(model)


def test_a_failing_import_leaves_the_callers_arrays_and_the_model_untouched():
    model = _one("Tile", ["x", "r"], [_i64("r", [2 ** 40])])
    before = model.SerializeToString()
    with pytest.raises(LimitExceeded):
        graphc.onnx.load(model)
    assert model.SerializeToString() == before


# -- running with ONNX input names ----------------------------------------------------------
def _named_model():
    return _model([h.make_node("Relu", ["gpu_0/data_0"], ["gpu_0/softmax_1"])],
                  [_vi("gpu_0/data_0", F, ["N", 2])], [_vi("gpu_0/softmax_1", F, ["N", 2])])


def test_run_takes_a_dict_for_input_names_that_are_not_identifiers():
    g = graphc.onnx.load(_named_model())
    x = np.array([[-1.0, 2.0]], np.float32)
    np.testing.assert_array_equal(g.run({"gpu_0/data_0": x})[0], np.maximum(x, 0))
    np.testing.assert_array_equal(g.run(**{"gpu_0/data_0": x})[0], np.maximum(x, 0))


def test_run_says_which_input_names_exist():
    g = graphc.onnx.load(_named_model())
    with pytest.raises(InputError, match=r"unknown inputs \['data'\]; the model's inputs are "
                                         r"\['gpu_0/data_0'\]"):
        g.run({"gpu_0/data_0": np.zeros((1, 2), np.float32), "data": 0})
    with pytest.raises(InputError, match=r"missing inputs \['gpu_0/data_0'\]"):
        g.run(data=np.zeros((1, 2), np.float32))
    with pytest.raises(InputError, match=r"as a dict .*\['gpu_0/data_0'\].*got ndarray"):
        g.run(np.zeros((1, 2), np.float32))


def test_input_shapes_are_checked_and_name_the_input():
    with pytest.raises(InputError, match=r"input_shapes\['gpu_0/data_0'\].*negative"):
        graphc.onnx.load(_named_model(), input_shapes={"gpu_0/data_0": (-1, 2)})
    with pytest.raises(InputError, match="sequence of ints"):
        graphc.onnx.load(_named_model(), input_shapes={"gpu_0/data_0": "big"})


# -- the fuzz -------------------------------------------------------------------------------
INTERESTING_INTS = [-2 ** 62, -2 ** 40, -2 ** 31, -7, -2, -1, 0, 1, 2, 3, 5, 64, 2 ** 20,
                    2 ** 31, 2 ** 40, 2 ** 62]
INTERESTING_FLOATS = [math.nan, math.inf, -math.inf, -1.0, 0.0, 1e-30, 1e30]
#: initializer values that keep the arithmetic finite: overflowing activations tell two
#: libraries apart only by how they order their rounding, which no test may depend on
MODERATE_FLOATS = [-1.0, 0.0, 1e-3, 2.5, 100.0]
STRINGS = ["SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET", "reflect", "edge", "wrap",
           "constant", "DCR", "bogus", ""]
ELEM_TYPES = [T.FLOAT, T.FLOAT16, T.DOUBLE, T.INT64, T.INT32, T.INT8, T.UINT8, T.BOOL,
              T.BFLOAT16, T.STRING, T.COMPLEX64]

#: onnxruntime's own limits on models the spec allows; a mutant that only onnxruntime
#: cannot run has no reference, and is counted apart (message fragment -> why)
ONNXRUNTIME_LIMITS = {
    "NOT_IMPLEMENTED": "no kernel for these element types (OneHot's indices may be any "
                       "numeric type)",
    "size_ % 2 == 1": "its LRN takes odd sizes only",
    "Pad should be smaller than kernel": "its poolings refuse pads as large as the window",
    "Axes input is null": "it fails on an omitted optional axes input (Squeeze of every 1)",
    "onnxruntime crashed": "it crashes on some valid models (LayerNormalization without "
                           "its optional bias, given as \"\")",
}


def _base_models():
    """Six small valid models through the converters the bombs go through."""
    rng = np.random.default_rng(0)

    def weights(name, shape):
        return _f32(name, rng.standard_normal(shape))

    cnn = _model(
        [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
         h.make_node("Relu", ["c"], ["r"]),
         h.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
         h.make_node("Flatten", ["p"], ["f"], axis=1),
         h.make_node("Gemm", ["f", "w2", "b2"], ["g"]),
         h.make_node("Softmax", ["g"], ["y"], axis=1)],
        [_vi("x", F, [1, 2, 6, 6])], [_vi("y", F, [1, 5])],
        [weights("w", (4, 2, 3, 3)), weights("b", (4,)), weights("w2", (36, 5)),
         weights("b2", (5,))])
    shapes = _model(
        [h.make_node("Shape", ["x"], ["s"]),
         h.make_node("Gather", ["s", "zero"], ["s0"], axis=0),
         h.make_node("Unsqueeze", ["s0", "axes0"], ["s0u"]),
         h.make_node("Concat", ["s0u", "minus1"], ["target"], axis=0),
         h.make_node("Reshape", ["x", "target"], ["y1"]),
         h.make_node("ConstantOfShape", ["twelve"], ["half"],
                     value=h.make_tensor("v", F, [1], [0.5])),
         h.make_node("Expand", ["half", "two_twelve"], ["z"]),
         h.make_node("Add", ["y1", "z"], ["a"]),
         h.make_node("Tile", ["a", "reps"], ["t"]),
         h.make_node("Pad", ["t", "pads"], ["pd"], mode="constant"),
         h.make_node("Slice", ["pd", "starts", "ends", "axes1"], ["sl"]),
         h.make_node("ReduceSum", ["sl", "axes1"], ["y"], keepdims=1)],
        [_vi("x", F, [2, 3, 4])], [_vi("y", F, [2, 1])],
        [_i64("zero", 0), _i64("axes0", [0]), _i64("minus1", [-1]), _i64("twelve", [12]),
         _i64("two_twelve", [2, 12]), _i64("reps", [1, 2]), _i64("pads", [0, 1, 0, 1]),
         _i64("starts", [0]), _i64("ends", [20]), _i64("axes1", [1])])
    indexing = _model(
        [h.make_node("Gather", ["x", "rows"], ["g"], axis=0),
         h.make_node("OneHot", ["labels", "depth", "onoff"], ["oh"], axis=-1),
         h.make_node("Mul", ["g", "oh"], ["m"]),
         h.make_node("TopK", ["m", "k"], ["tv", "ti"], axis=1),
         h.make_node("Range", ["r0", "r1", "r2"], ["rg"]),
         h.make_node("Cast", ["rg"], ["rgf"], to=F),
         h.make_node("Add", ["tv", "rgf"], ["y"]),
         h.make_node("Cast", ["ti"], ["yi"], to=T.INT64)],
        [_vi("x", F, [4, 5])], [_vi("y", F, [3, 2]), _vi("yi", T.INT64, [3, 2])],
        [_i64("rows", [3, 0, 1]), _i64("labels", [0, 2, 4]), _i64("depth", 5),
         _f32("onoff", [0.0, 1.0]), _i64("k", [2]), _f32("r0", 0.0), _f32("r1", 2.0),
         _f32("r2", 1.0)])
    norm = _model(
        [h.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["bn"]),
         h.make_node("LRN", ["bn"], ["l"], size=3),
         h.make_node("AveragePool", ["l"], ["ap"], kernel_shape=[2, 2], pads=[0, 0, 1, 1]),
         h.make_node("GlobalAveragePool", ["ap"], ["gp"]),
         h.make_node("Squeeze", ["gp", "axes23"], ["sq"]),
         h.make_node("LayerNormalization", ["sq", "ln_scale", "ln_bias"], ["y"], axis=-1)],
        [_vi("x", F, [2, 3, 4, 4])], [_vi("y", F, [2, 3])],
        [weights("scale", (3,)), weights("bias", (3,)), weights("mean", (3,)),
         _f32("var", [1.0, 2.0, 0.5]), _i64("axes23", [2, 3]), weights("ln_scale", (3,)),
         weights("ln_bias", (3,))])
    elementwise = _model(
        [h.make_node("Div", ["x", "c"], ["d"]),
         h.make_node("Pow", ["d", "two"], ["p"]),
         h.make_node("Clip", ["p", "lo", "hi"], ["cl"]),
         h.make_node("Greater", ["x", "zero_f"], ["pos"]),
         h.make_node("Neg", ["cl"], ["ng"]),
         h.make_node("Where", ["pos", "cl", "ng"], ["w"]),
         h.make_node("CumSum", ["w", "axis1"], ["cs"]),
         h.make_node("Transpose", ["cs"], ["y"], perm=[1, 0]),
         h.make_node("ArgMax", ["x"], ["y2"], axis=0, keepdims=0)],
        [_vi("x", F, [3, 4])], [_vi("y", F, [4, 3]), _vi("y2", T.INT64, [4])],
        [weights("c", (4,)), _f32("two", 2.0), _f32("lo", -1.0), _f32("hi", 3.0),
         _f32("zero_f", 0.0), _i64("axis1", 1)])
    # constants of 2 KiB: folded under the default budget, run-time fills under none
    folding = _model(
        [h.make_node("ConstantOfShape", ["cshape"], ["c"],
                     value=h.make_tensor("v", F, [1], [0.25])),
         h.make_node("Mul", ["c", "w"], ["cw"]),
         h.make_node("Transpose", ["cw"], ["t"], perm=[1, 0]),
         h.make_node("MatMul", ["x", "t"], ["mm"]),
         h.make_node("Range", ["r0", "r1", "r2"], ["rg"]),
         h.make_node("Cast", ["rg"], ["rgf"], to=F),
         h.make_node("Add", ["mm", "rgf"], ["y"])],
        [_vi("x", F, [4, 16])], [_vi("y", F, [4, 32])],
        [_i64("cshape", [32, 16]), weights("w", (32, 16)), _i64("r0", 0), _i64("r1", 32),
         _i64("r2", 1)])
    return [cnn, shapes, indexing, norm, elementwise, folding]


def _mutate_attribute(model, rng):
    nodes = [n for n in model.graph.node if n.attribute]
    node = nodes[rng.integers(len(nodes))]
    attr = node.attribute[rng.integers(len(node.attribute))]
    kind = onnx.AttributeProto
    if attr.type == kind.INT:
        attr.i = int(rng.choice(INTERESTING_INTS))
    elif attr.type == kind.INTS and len(attr.ints):
        values = list(attr.ints)
        roll = rng.random()
        if roll < 0.2:
            values.append(int(rng.choice(INTERESTING_INTS)))
        elif roll < 0.4:
            values.pop()
        else:
            values[rng.integers(len(values))] = int(rng.choice(INTERESTING_INTS))
        del attr.ints[:]
        attr.ints.extend(values)
    elif attr.type == kind.FLOAT:
        attr.f = float(rng.choice(INTERESTING_FLOATS))
    elif attr.type == kind.STRING:
        attr.s = str(rng.choice(STRINGS)).encode()
    elif attr.type == kind.TENSOR:
        replacement = (h.make_tensor("v", int(rng.choice(ELEM_TYPES[:4])), [1], [1.0])
                       if rng.random() < 0.5 else h.make_tensor("v", F, [2], [1.0, 2.0]))
        attr.t.CopyFrom(replacement)


def _mutate_initializer(model, rng):
    inits = model.graph.initializer
    tensor = inits[rng.integers(len(inits))]
    array = nh.to_array(tensor).copy()
    choice = rng.integers(4)
    if choice == 0 and array.size:
        flat = array.reshape(-1)
        pool = INTERESTING_INTS if array.dtype.kind in "iu" else MODERATE_FLOATS
        flat[rng.integers(flat.size)] = np.array(rng.choice(pool)).astype(array.dtype)
    elif choice == 1:
        array = array.astype(rng.choice([np.float16, np.float64, np.int64, np.int32,
                                         np.float32, np.bool_]))
    elif choice == 2:
        array = array.reshape((1,) + array.shape) if rng.random() < 0.5 else array.reshape(-1)
    else:
        array = np.resize(array, (max(array.size + int(rng.integers(-2, 3)), 0),))
    tensor.CopyFrom(nh.from_array(array, tensor.name))


def _mutate_input(model, rng):
    info = model.graph.input[rng.integers(len(model.graph.input))]
    tensor_type = info.type.tensor_type
    if rng.random() < 0.5:
        dim = tensor_type.shape.dim[rng.integers(len(tensor_type.shape.dim))]
        dim.dim_value = int(rng.choice([0, 1, -1, -3, 2 ** 40, dim.dim_value + 1]))
    else:
        tensor_type.elem_type = int(rng.choice(ELEM_TYPES))


def _drop_input(model, rng):
    node = model.graph.node[rng.integers(len(model.graph.node))]
    if not len(node.input):
        return
    choice = rng.integers(3)
    if choice == 0:
        node.input[rng.integers(len(node.input))] = ""
    elif choice == 1:
        del node.input[len(node.input) - 1]
    else:
        node.input[rng.integers(len(node.input))] = "nowhere"


def _mutate_output(model, rng):
    info = model.graph.output[rng.integers(len(model.graph.output))]
    info.type.tensor_type.elem_type = int(rng.choice(ELEM_TYPES[:8]))


def _mutate_opset(model, rng):
    model.opset_import[0].version = int(rng.choice([7, 9, 11, 13, 15, 18, 19, 21]))


#: (mutation, weight): attribute values, initializer values/dtypes/dims, input dims and
#: dtypes, dropped or dangling inputs, declared output dtypes, the opset
MUTATIONS = [(_mutate_attribute, 6), (_mutate_initializer, 6), (_mutate_input, 2),
             (_drop_input, 1), (_mutate_output, 1), (_mutate_opset, 1)]


def _mutant(model, rng):
    model = copy.deepcopy(model)
    weights = np.array([w for _, w in MUTATIONS], float)
    for _ in range(int(rng.integers(1, 3))):
        MUTATIONS[rng.choice(len(MUTATIONS), p=weights / weights.sum())][0](model, rng)
    return model


def _feeds(model, rng):
    from graphc.onnx.tensors import onnx_dtype

    return {info.name: (rng.standard_normal([d.dim_value for d in
                                             info.type.tensor_type.shape.dim]) * 3)
            .astype(onnx_dtype(info.type.tensor_type.elem_type))
            for info in model.graph.input}


def _onnxruntime_limit(error) -> bool:
    return any(fragment in str(error) for fragment in ONNXRUNTIME_LIMITS)


def _onnxruntime_serve(connection):
    """The worker's loop: ``(model bytes, feeds)`` in, ``("ok", outputs)`` or
    ``("error", message)`` out."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    while True:
        request = connection.recv()
        if request is None:
            return
        data, feeds = request
        try:
            session = onnxruntime.InferenceSession(data, options,
                                                   providers=["CPUExecutionProvider"])
            connection.send(("ok", session.run(None, feeds)))
        except Exception as exc:
            connection.send(("error", f"{type(exc).__name__}: {exc}"))


class _Onnxruntime:
    """onnxruntime in a worker process: some mutants crash it (a LayerNormalization
    whose optional bias is omitted with "" is a segmentation fault in 1.32), which
    must not take the test process with it. A crashed worker is started again."""

    def __init__(self):
        import multiprocessing

        self._context = multiprocessing.get_context("spawn")
        self._start()

    def _start(self):
        self._connection, child = self._context.Pipe()
        self._process = self._context.Process(target=_onnxruntime_serve, args=(child,),
                                              daemon=True)
        self._process.start()

    def run(self, data, feeds):
        """onnxruntime's outputs, or an exception saying why there are none."""
        try:
            self._connection.send((data, feeds))
            if self._connection.poll(60):
                status, value = self._connection.recv()
                return value if status == "ok" else RuntimeError(value)
        except (EOFError, OSError):
            pass
        self._process.kill()
        self._process.join()
        self._start()
        return RuntimeError("onnxruntime crashed")

    def close(self):
        self._connection.send(None)
        self._process.join(10)


def _outcome(model, case, fold_limit, onnxruntime):
    """What happened to one mutant: a key of the outcome counts, or a failure text."""
    data = model.SerializeToString()
    try:
        # a test-sized value limit: whatever graphc accepts is small enough for
        # onnxruntime to run on this machine
        loaded = graphc.onnx.load(data, value_limit_bytes=64 * MiB, fold_limit_bytes=fold_limit)
    except (OnnxModelError, OnnxUnsupported) as exc:
        return f"refused: {type(exc).__name__}"
    except Exception as exc:
        return f"FAIL load raised {type(exc).__name__}: {exc}"
    feeds = _feeds(model, np.random.default_rng(case))
    try:
        ours = loaded.run(feeds)
    except Exception as exc:
        ours = exc
    theirs = onnxruntime.run(data, feeds)
    if isinstance(theirs, Exception):
        if _onnxruntime_limit(theirs):
            return "onnxruntime cannot run it"
        if isinstance(ours, Exception):
            return "both fail at run time"
        if any(known in str(theirs) for known in REFERENCE_IS_LENIENT):
            return _against_reference(model, feeds, ours)
        return f"FAIL graphc accepts what onnxruntime refuses: {str(theirs)[:300]}"
    if isinstance(ours, Exception):
        return f"FAIL graphc's run raised {type(ours).__name__}: {ours}"
    for a, b in zip(ours, theirs):
        if a.dtype != b.dtype or a.shape != b.shape or not np.allclose(
                a, b, rtol=1e-4, atol=1e-5, equal_nan=True):
            return f"FAIL outputs differ: {a!r} vs {b!r}"
    if len(ours) != len(theirs):
        return f"FAIL {len(ours)} outputs, onnxruntime {len(theirs)}"
    return "equal to onnxruntime"


#: onnxruntime's refusals where onnx's reference (and onnx's own function bodies: the
#: expanded AffineGrid feeds Range the one-element vectors a Split makes) accepts the
#: model; graphc follows the reference there, and must equal it
REFERENCE_IS_LENIENT = ("Input to 'Range' op should be scalars",)


def _against_reference(model, feeds, ours) -> str:
    from onnx.reference import ReferenceEvaluator

    theirs = ReferenceEvaluator(model).run(None, feeds)
    if len(ours) != len(theirs) or any(
            a.shape != b.shape or not np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)
            for a, b in zip(ours, theirs)):
        return "FAIL outputs differ from onnx's reference where onnxruntime refuses"
    return "equal to onnx's reference (onnxruntime refuses)"


#: mutants the fuzz tries (seeded: every run tries the same ones)
CASES = 600


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_fuzzed_models_import_as_onnxruntime_runs_them_or_are_refused_by_name():
    """600 seeded mutants of six small valid models; every other one imports with no
    fold budget, so constants are computed at run time. Each outcome is a model whose
    outputs equal onnxruntime's on the same input, or OnnxModelError/OnnxUnsupported
    (or a model onnxruntime cannot run for a limit of its own, ONNXRUNTIME_LIMITS)."""
    rng = np.random.default_rng(2024)
    bases = _base_models()
    counts, failures = collections.Counter(), []
    start = time.perf_counter()
    onnxruntime = _Onnxruntime()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for case in range(CASES):
                model = _mutant(bases[case % len(bases)], rng)
                outcome = _outcome(model, case, 0 if case % 2 else 16 * MiB, onnxruntime)
                if outcome.startswith("FAIL"):
                    failures.append(f"case {case}: {outcome}")
                else:
                    counts[outcome] += 1
    finally:
        onnxruntime.close()
    print(f"\nfuzz outcomes ({time.perf_counter() - start:.1f} s): {dict(counts)}")
    assert not failures, "\n".join(failures)
    # the mutants reach both ends: imports compared with onnxruntime, and refusals
    assert counts["equal to onnxruntime"] >= CASES // 10
    assert counts["refused: OnnxModelError"] + counts["refused: LimitExceeded"] >= CASES // 3
