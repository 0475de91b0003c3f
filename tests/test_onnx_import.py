"""The ONNX importer's own behaviour: inputs and initializers, shapes known only at
run time, constant folding at import, and the errors a user sees."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper as h, numpy_helper as nh  # noqa: E402

import graphc.onnx  # noqa: E402
from graphc.onnx import OnnxModelError, OnnxUnsupported  # noqa: E402
from graphc.type.errors import InputError  # noqa: E402

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, initializers=(), opset=17, ir=None):
    graph = h.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    if ir is not None:
        model.ir_version = ir
    return model


def _relu_add(dims=(2, 3)):
    bias = nh.from_array(np.arange(3, dtype=np.float32), "b")
    return _model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Add", ["r", "b"], ["y"])],
                  [h.make_tensor_value_info("x", F, list(dims))],
                  [h.make_tensor_value_info("y", F, list(dims))], [bias])


def test_run_takes_onnx_input_names_and_returns_outputs_in_order():
    g = graphc.onnx.load(_relu_add())
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    (y,) = g.run(x=x)
    np.testing.assert_array_equal(y, np.maximum(x, 0) + np.arange(3))
    assert g.input_names == ["x"] and g.output_names == ["y"]
    assert g.executable is not None  # static shapes: compiled at load


def test_load_accepts_a_path_and_bytes(tmp_path):
    model = _relu_add()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    x = np.ones((2, 3), np.float32)
    want = graphc.onnx.load(model).run(x=x)[0]
    for source in (path, str(path), model.SerializeToString()):
        np.testing.assert_array_equal(graphc.onnx.load(source).run(x=x)[0], want)


def test_initializers_listed_as_inputs_in_old_ir_are_not_inputs():
    model = _relu_add()
    model.graph.input.append(h.make_tensor_value_info("b", F, [3]))  # IR < 4 style
    g = graphc.onnx.load(model)
    assert g.input_names == ["x"]
    np.testing.assert_array_equal(g.run(x=np.zeros((2, 3), np.float32))[0],
                                  np.tile(np.arange(3, dtype=np.float32), (2, 1)))


def test_symbolic_batch_compiles_once_per_shape():
    g = graphc.onnx.load(_relu_add(("N", 3)))
    assert g.executable is None
    for n in (1, 4, 1):
        x = np.full((n, 3), -1.0, np.float32)
        np.testing.assert_array_equal(g.run(x=x)[0], np.tile(np.arange(3), (n, 1)))
    assert len(g._compiled) == 2
    fixed = graphc.onnx.load(_relu_add(("N", 3)), input_shapes={"x": (5, 3)})
    assert fixed.executable.graph.inputs[0].shape == (5, 3)


def test_run_errors_name_the_inputs():
    g = graphc.onnx.load(_relu_add())
    with pytest.raises(InputError, match="missing inputs \\['x'\\]"):
        g.run()
    with pytest.raises(InputError, match="unknown inputs \\['z'\\]"):
        g.run(x=np.zeros((2, 3), np.float32), z=np.zeros(1))
    with pytest.raises(InputError, match="shape"):
        g.run(x=np.zeros((3, 3), np.float32))
    with pytest.raises(InputError, match="not inputs of the model"):
        graphc.onnx.load(_relu_add(), input_shapes={"q": (1,)})
    # a dict of the compiled shapes goes straight to the graph; any other, the checks
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 3
    np.testing.assert_array_equal(g.run({"x": x})[0], g.run(x=x)[0])
    with pytest.raises(InputError, match="missing inputs \\['x'\\]"):
        g.run({"z": x})
    with pytest.raises(InputError, match="expects shape \\(2, 3\\) but got shape \\(3, 2\\)"):
        g.run({"x": x.reshape(3, 2)})
    with pytest.raises(InputError, match="float32"):
        g.run({"x": x.astype(np.int64)})


def test_unsupported_operator_names_it_and_the_node():
    model = _model([h.make_node("NoSuchOp", ["x"], ["y"], name="mystery")],
                   [h.make_tensor_value_info("x", F, [2])],
                   [h.make_tensor_value_info("y", F, [2])])
    model.opset_import.append(h.make_opsetid("custom.domain", 1))
    model.graph.node[0].domain = "custom.domain"
    with pytest.raises(OnnxUnsupported, match="NoSuchOp node 'mystery'.*domain 'custom.domain'"):
        graphc.onnx.load(model)


def test_unsupported_attribute_names_it_and_the_node():
    model = _model([h.make_node("Relu", ["x"], ["y"], name="r1", bogus=3)],
                   [h.make_tensor_value_info("x", F, [2])],
                   [h.make_tensor_value_info("y", F, [2])])
    # onnx's checker already refuses an attribute the operator does not define
    with pytest.raises(graphc.onnx.OnnxError, match="bogus"):
        graphc.onnx.load(onnx.ModelProto.FromString(model.SerializeToString()))


def test_an_operator_missing_from_the_registry_is_named():
    model = _model([h.make_node("StringNormalizer", ["x"], ["y"])],
                   [h.make_tensor_value_info("x", TensorProto.STRING, [2])],
                   [h.make_tensor_value_info("y", TensorProto.STRING, [2])])
    with pytest.raises(OnnxUnsupported, match="STRING|StringNormalizer"):
        graphc.onnx.load(model)


@pytest.mark.parametrize("damage", ["garbage", "missing_input", "unsorted"])
def test_malformed_models_get_a_clear_error(damage):
    if damage == "garbage":
        with pytest.raises(OnnxModelError, match="not a readable ONNX model"):
            graphc.onnx.load(b"\x08\x07 this is not protobuf \xff\xff")
        return
    nodes = [h.make_node("Relu", ["x"], ["r"]), h.make_node("Relu", ["r"], ["y"])]
    if damage == "missing_input":
        nodes[1] = h.make_node("Relu", ["nowhere"], ["y"])
    else:
        nodes.reverse()
    model = _model(nodes, [h.make_tensor_value_info("x", F, [2])],
                   [h.make_tensor_value_info("y", F, [2])])
    with pytest.raises(OnnxModelError, match="not valid ONNX|not produced"):
        graphc.onnx.load(model)


def test_missing_file_is_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        graphc.onnx.load(tmp_path / "absent.onnx")


def test_constant_subgraphs_fold_at_import():
    """Shape -> Gather -> Concat -> Reshape on a graph input, and ConstantOfShape
    weights: only the Reshape and the Mul reach the graph."""
    shape_of = h.make_node("Shape", ["x"], ["s"])
    first = h.make_node("Gather", ["s", "zero"], ["n"], axis=0)
    target = h.make_node("Concat", ["n", "minus1"], ["t"], axis=0)
    reshape = h.make_node("Reshape", ["x", "t"], ["flat"])
    weights = h.make_node("ConstantOfShape", ["wshape"], ["w"],
                          value=nh.from_array(np.array([0.5], np.float32)))
    mul = h.make_node("Mul", ["flat", "w"], ["y"])
    inits = [nh.from_array(np.array([0], np.int64), "zero"),
             nh.from_array(np.array([-1], np.int64), "minus1"),
             nh.from_array(np.array([12], np.int64), "wshape")]
    model = _model([shape_of, first, target, reshape, weights, mul],
                   [h.make_tensor_value_info("x", F, [2, 3, 4])],
                   [h.make_tensor_value_info("y", F, [2, 12])], inits)
    g = graphc.onnx.load(model, optimise=False)
    kinds = sorted(n.op.kind for n in g.executable.graph.order)
    assert kinds == ["const", "multiply", "reshape", "var"]
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(g.run(x=x)[0], x.reshape(2, 12) * 0.5)


def test_supported_operators_cover_the_classic_cnns():
    classic = {"Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization",
               "Relu", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Sum", "Max", "Min",
               "Concat", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Softmax",
               "LogSoftmax", "LRN", "Dropout", "Constant", "ConstantOfShape", "Identity",
               "Shape", "Gather", "Slice", "Pad", "Clip", "ReduceMean", "ReduceSum",
               "ReduceMax"}
    assert classic <= set(graphc.onnx.supported_operators())


def test_an_attribute_the_converter_does_not_declare_is_refused_by_name(monkeypatch):
    from graphc.onnx.registry import CONVERTERS, Converter

    monkeypatch.setitem(CONVERTERS, "Elu", Converter("Elu", lambda ctx: ctx.input(0), {}))
    model = _model([h.make_node("Elu", ["x"], ["y"], name="e1", alpha=0.5)],
                   [h.make_tensor_value_info("x", F, [2])],
                   [h.make_tensor_value_info("y", F, [2])])
    with pytest.raises(OnnxUnsupported, match="Elu node 'e1'.*attribute 'alpha' is not supported"):
        graphc.onnx.load(model)


@pytest.mark.parametrize("bias", [True, False])
def test_batchnorm_folds_into_the_conv_before_it(bias):
    rng = np.random.default_rng(0)
    c = 4
    arrays = {"W": rng.standard_normal((c, 3, 3, 3)), "B": rng.standard_normal(c),
              "gamma": rng.uniform(0.5, 2, c), "beta": rng.standard_normal(c),
              "mean": rng.standard_normal(c), "var": rng.uniform(0.5, 2, c)}
    inits = [nh.from_array(v.astype(np.float32), k) for k, v in arrays.items()
             if bias or k != "B"]
    conv = h.make_node("Conv", ["x", "W", "B"] if bias else ["x", "W"], ["c"], pads=[1, 1, 1, 1])
    bn = h.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"],
                     epsilon=1e-3)
    model = _model([conv, bn, h.make_node("Relu", ["n"], ["y"])],
                   [h.make_tensor_value_info("x", F, [2, 3, 5, 5])],
                   [h.make_tensor_value_info("y", F, [2, c, 5, 5])], inits)
    x = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    folded = graphc.onnx.load(model, optimise=False)
    plain = graphc.onnx.load(model, optimise=False, fold_batchnorm=False)
    np.testing.assert_allclose(folded.run(x=x)[0], plain.run(x=x)[0], rtol=1e-5, atol=1e-5)
    assert len(folded.executable.graph.order) < len(plain.executable.graph.order)
    assert model.graph.initializer[0].name == "W"  # the user's model is untouched
    np.testing.assert_array_equal(nh.to_array(model.graph.initializer[0]),
                                  arrays["W"].astype(np.float32))


def test_a_static_model_compiles_once_and_adopts_its_initializers():
    """Loading compiles for the declared shapes and the first run reuses that graph;
    raw-data initializers reach the graph without a copy."""
    weight = np.arange(3, dtype=np.float32) + 1
    model = _model([h.make_node("Mul", ["x", "w"], ["y"])],
                   [h.make_tensor_value_info("x", F, [2, 3])],
                   [h.make_tensor_value_info("y", F, [2, 3])], [nh.from_array(weight, "w")])
    g = graphc.onnx.load(model, optimise=False)
    compiled = g.executable
    g.run(x=np.ones((2, 3), np.float32))
    assert g.executable is compiled and len(g._compiled) == 1
    (const,) = [n for n in compiled.graph.order if n.op.kind == "const"]
    root = const.value
    while isinstance(root, np.ndarray) and root.base is not None:
        root = root.base
    assert isinstance(root, bytes)   # a view of the initializer's bytes, not a copy


def test_specialising_on_an_input_value_leaves_the_callers_array_writeable():
    axes = np.array([1], np.int64)
    model = _model([h.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
                   [h.make_tensor_value_info("x", F, [2, 3]),
                    h.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                   [h.make_tensor_value_info("y", F, [2])])
    g = graphc.onnx.load(model)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(g.run(x=x, axes=axes)[0], x.sum(axis=1))
    assert axes.flags.writeable
    axes[0] = 0   # a new value: a new specialisation, not the stale one
    np.testing.assert_array_equal(g.run(x=x, axes=axes)[0], x.sum(axis=0))



def _linear_bn(rank: int, flatten_axis, shape_reader: bool, second_reader: bool):
    """``BN(flatten(x @ W))`` (LeViT's Linear + BatchNorm1d), reshaped back by a Shape
    of the product, or through a Relu; with ``second_reader``, the product is an
    output too."""
    rng = np.random.default_rng(1)
    k, n = 4, 6
    dims = [2, 5, k][-rank:]
    arrays = {"W": rng.standard_normal((k, n)), "gamma": rng.uniform(0.5, 2, n),
              "beta": rng.standard_normal(n), "mean": rng.standard_normal(n),
              "var": rng.uniform(0.5, 2, n)}
    inits = [nh.from_array(v.astype(np.float32), name) for name, v in arrays.items()]
    nodes = [h.make_node("MatMul", ["x", "W"], ["p"])]
    product = [*dims[:-1], n]
    flat, out = "p", product
    if flatten_axis is not None:
        nodes.append(h.make_node("Flatten", ["p"], ["f"], axis=flatten_axis))
        axis = flatten_axis % rank
        flat, out = "f", [int(np.prod(product[:axis])), int(np.prod(product[axis:]))]
    nodes.append(h.make_node("BatchNormalization", [flat, "gamma", "beta", "mean", "var"],
                             ["n"], epsilon=1e-3))
    if shape_reader:
        nodes += [h.make_node("Shape", ["p"], ["s"]), h.make_node("Reshape", ["n", "s"], ["y"])]
        out = product
    else:
        nodes.append(h.make_node("Relu", ["n"], ["y"]))
    outputs = [h.make_tensor_value_info("y", F, out)]
    if second_reader:
        outputs.append(h.make_tensor_value_info("p", F, product))
    model = _model(nodes, [h.make_tensor_value_info("x", F, dims)], outputs, inits)
    return model, rng.standard_normal(dims).astype(np.float32)


@pytest.mark.parametrize("rank, flatten_axis, shape_reader, second_reader", [
    (3, 2, True, False),     # LeViT's export: a Shape of the product reshapes it back
    (3, -1, False, False),
    (2, None, False, False),  # a BatchNormalization straight on a 2-D product
    (2, 1, False, False),
    (3, 2, True, True),      # the unscaled product is an output too: no fold
])
def test_batchnorm_folds_into_a_constant_matmul_before_it(rank, flatten_axis, shape_reader,
                                                          second_reader):
    model, x = _linear_bn(rank, flatten_axis, shape_reader, second_reader)
    folded = graphc.onnx.load(model, optimise=False)
    plain = graphc.onnx.load(model, optimise=False, fold_batchnorm=False)
    for a, b in zip(folded.run(x=x), plain.run(x=x)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    # folded: the scale went into the matrix, an addition of the shift is left
    steps = len(folded.executable.graph.order), len(plain.executable.graph.order)
    assert (steps[0] < steps[1]) != second_reader
    np.testing.assert_array_equal(nh.to_array(model.graph.initializer[0]),   # untouched
                                  np.random.default_rng(1).standard_normal((4, 6))
                                  .astype(np.float32))
