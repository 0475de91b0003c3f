"""ONNX control flow (If, Loop, Scan) imported onto N.where, N.scan and N.while_loop,
checked against onnx's reference implementation."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import graphc.onnx  # noqa: E402
from graphc.onnx.errors import OnnxUnsupported  # noqa: E402
from onnx import TensorProto as T, helper as h  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

F, I, B = T.FLOAT, T.INT64, T.BOOL


def _info(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, opset=17):
    graph = h.make_graph(nodes, "g", inputs, outputs)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=8)


def _reference(model, feeds):
    """onnxruntime's outputs (onnx's reference implements Scan only along axis 0,
    forward, and no opset-8 Scan), else the reference's."""
    try:
        import onnxruntime
    except ImportError:
        return ReferenceEvaluator(model).run(None, feeds)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _check(model, feeds, rtol=1e-6):
    want = _reference(model, feeds)
    loaded = graphc.onnx.load(model)
    got = loaded.run(feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6)
    return loaded


def _kinds(loaded) -> set:
    return {node.op.kind for node in loaded.executable.liveness.steps}


# -- Scan ---------------------------------------------------------------------------------
def _cumsum_body(width):
    return h.make_graph([h.make_node("Add", ["s", "x"], ["t"]),
                         h.make_node("Mul", ["t", "w"], ["y"])], "body",
                        [_info("s", F, [width]), _info("x", F, [width])],
                        [_info("t", F, [width]), _info("y", F, [width])])


def _scan_model(xs_shape, width, axis, direction, out_axis, out_direction):
    node = h.make_node("Scan", ["s0", "xs"], ["final", "ys"], body=_cumsum_body(width),
                       num_scan_inputs=1, scan_input_axes=[axis],
                       scan_input_directions=[direction], scan_output_axes=[out_axis],
                       scan_output_directions=[out_direction])
    scale = h.make_node("Constant", [], ["w"], value=h.make_tensor("w", F, [width],
                                                                   [0.5, 2.0, -1.0]))
    steps = xs_shape[axis]
    ys_shape = [steps, width] if out_axis == 0 else [width, steps]
    return _model([scale, node], [_info("s0", F, [width]), _info("xs", F, list(xs_shape))],
                  [_info("final", F, [width]), _info("ys", F, ys_shape)])


@pytest.mark.parametrize("axis,out_axis", [(0, 0), (1, 0), (0, 1), (-1, -1)])
def test_scan_axes_and_directions_and_an_outer_value(axis, out_axis):
    rng = np.random.default_rng(abs(axis) + 2 * abs(out_axis))
    width, steps = 3, 5
    xs = rng.standard_normal((steps, width) if axis == 0 else (width, steps)).astype(np.float32)
    feeds = {"s0": rng.standard_normal(width).astype(np.float32), "xs": xs}
    loaded = _check(_scan_model(xs.shape, width, axis, 0, out_axis, 0), feeds)
    assert "loop" in _kinds(loaded)  # one loop node: the body is not unrolled
    forward = loaded.run(feeds)
    # onnx's reference has no reversed scans: a reversed input is the forward scan of the
    # flipped input, a reversed output the forward output flipped
    backward = graphc.onnx.load(_scan_model(xs.shape, width, axis, 1, out_axis, 1))
    final, ys = backward.run({**feeds, "xs": np.flip(xs, axis).copy()})
    np.testing.assert_array_equal(final, forward[0])
    np.testing.assert_array_equal(ys, np.flip(forward[1], out_axis))


def test_opset8_scan_runs_once_per_batch_element():
    body = h.make_graph([h.make_node("Add", ["s", "x"], ["t"]),
                         h.make_node("Mul", ["t", "t"], ["y"])], "body",
                        [_info("s", F, [2]), _info("x", F, [2])],
                        [_info("t", F, [2]), _info("y", F, [2])])
    node = h.make_node("Scan", ["", "s0", "xs"], ["final", "ys"], body=body,
                       num_scan_inputs=1)
    model = _model([node], [_info("s0", F, [2, 2]), _info("xs", F, [2, 4, 2])],
                   [_info("final", F, [2, 2]), _info("ys", F, [2, 4, 2])], opset=8)
    rng = np.random.default_rng(1)
    _check(model, {"s0": rng.standard_normal((2, 2)).astype(np.float32),
                   "xs": rng.standard_normal((2, 4, 2)).astype(np.float32)})


# -- Loop ---------------------------------------------------------------------------------
def _loop_model(body, trips=4, scan_shape=None, cond_input=True):
    node = h.make_node("Loop", ["M", "c" if cond_input else "", "v0"],
                       ["v"] + (["ys"] if scan_shape else []), body=body)
    outputs = [_info("v", F, [2])] + ([_info("ys", F, scan_shape)] if scan_shape else [])
    consts = [h.make_node("Constant", [], ["M"], value=h.make_tensor("M", I, [], [trips])),
              h.make_node("Constant", [], ["c"], value=h.make_tensor("c", B, [], [True]))]
    return _model(consts + [node], [_info("v0", F, [2])], outputs)


def test_counted_loop_with_scan_outputs_is_one_scan():
    body = h.make_graph([h.make_node("Identity", ["cond"], ["cond_out"]),
                         h.make_node("Cast", ["i"], ["fi"], to=F),
                         h.make_node("Add", ["v", "fi"], ["v2"]),
                         h.make_node("Mul", ["v2", "v2"], ["y"])], "body",
                        [_info("i", I, []), _info("cond", B, []), _info("v", F, [2])],
                        [_info("cond_out", B, []), _info("v2", F, [2]), _info("y", F, [2])])
    loaded = _check(_loop_model(body, 4, [4, 2]), {"v0": np.array([0.5, -1.0], np.float32)})
    assert "loop" in _kinds(loaded)


def test_loop_that_slices_by_its_iteration_number_is_unrolled():
    """ONNX's loop11: the body slices a constant at its iteration number, which graphc
    needs while importing, so each step is its own nodes."""
    table = h.make_node("Constant", [], ["x"], value=h.make_tensor("x", F, [4], [1, 2, 3, 4]))
    body = h.make_graph([
        h.make_node("Identity", ["cond"], ["cond_out"]), table,
        h.make_node("Unsqueeze", ["i", "zero"], ["start"]),
        h.make_node("Add", ["start", "one"], ["end"]),
        h.make_node("Slice", ["x", "start", "end"], ["piece"]),
        h.make_node("Add", ["v", "piece"], ["v2"])], "body",
        [_info("i", I, []), _info("cond", B, []), _info("v", F, [2])],
        [_info("cond_out", B, []), _info("v2", F, [2])])
    model = _loop_model(body, 3)
    model.graph.initializer.extend([h.make_tensor("zero", I, [1], [0]),
                                    h.make_tensor("one", I, [1], [1])])
    loaded = _check(model, {"v0": np.array([0.0, 10.0], np.float32)})
    assert "loop" not in _kinds(loaded)


def test_loop_whose_body_computes_its_condition_is_a_while_loop():
    """Halve v until its first element is below 1 (at most M times)."""
    body = h.make_graph([h.make_node("Mul", ["v", "half"], ["v2"]),
                         h.make_node("Gather", ["v2", "first"], ["head"], axis=0),
                         h.make_node("Greater", ["head", "one"], ["cond_out"])], "body",
                        [_info("i", I, []), _info("cond", B, []), _info("v", F, [2])],
                        [_info("cond_out", B, []), _info("v2", F, [2])])
    for trips in (2, 50):
        model = _loop_model(body, trips)
        model.graph.initializer.extend([h.make_tensor("half", F, [], [0.5]),
                                        h.make_tensor("first", I, [], [0]),
                                        h.make_tensor("one", F, [], [1.0])])
        for v0 in ([40.0, 3.0], [0.5, 7.0]):
            _check(model, {"v0": np.array(v0, np.float32)})


def test_loop_with_scan_outputs_and_a_computed_condition_is_refused():
    body = h.make_graph([h.make_node("Greater", ["v", "v"], ["many"]),
                         h.make_node("ReduceMax", ["many"], ["cond_out"], keepdims=0),
                         h.make_node("Identity", ["v"], ["v2"]),
                         h.make_node("Identity", ["v"], ["y"])], "body",
                        [_info("i", I, []), _info("cond", B, []), _info("v", F, [2])],
                        [_info("cond_out", B, []), _info("v2", F, [2]), _info("y", F, [2])])
    with pytest.raises(OnnxUnsupported, match="scan outputs have no static shape"):
        graphc.onnx.load(_loop_model(body, 3, [3, 2]))


# -- If -----------------------------------------------------------------------------------
def _branch(name, op, operand):
    shape = [2, 3] if operand == "pair" else [3]
    return h.make_graph([h.make_node(op, ["x", operand], [name])], name, [],
                        [_info(name, F, shape)])


def _if_model(then_operand="two", else_operand="two"):
    node = h.make_node("If", ["c"], ["y"], then_branch=_branch("t", "Mul", then_operand),
                       else_branch=_branch("e", "Add", else_operand))
    shape = [2, 3] if "pair" in (then_operand, else_operand) else [3]
    model = _model([node], [_info("c", B, []), _info("x", F, [3])], [_info("y", F, shape)])
    model.graph.initializer.extend([h.make_tensor("two", F, [], [2.0]),
                                    h.make_tensor("pair", F, [2, 1], [1.0, -1.0])])
    return model


def test_if_on_a_graph_input_selects_per_run():
    loaded = graphc.onnx.load(_if_model())
    for cond in (True, False):
        _check(_if_model(), {"c": np.array(cond), "x": np.arange(3, dtype=np.float32)})
        got = loaded.run(c=np.array(cond), x=np.arange(3, dtype=np.float32))[0]
        np.testing.assert_array_equal(got, np.arange(3) * 2.0 if cond else np.arange(3) + 2.0)
    assert len(loaded._compiled) == 1  # both branches in one graph, chosen per run


@pytest.mark.parametrize("cond", [True, False])
def test_if_whose_branches_differ_in_shape_is_compiled_per_condition(cond):
    model = _if_model(else_operand="pair")
    _check(model, {"c": np.array(cond), "x": np.arange(3, dtype=np.float32)})


def test_if_on_a_constant_is_its_branch_inline():
    model = _if_model()
    model.graph.initializer.append(h.make_tensor("c", B, [], [False]))
    del model.graph.input[0]
    loaded = _check(model, {"x": np.arange(3, dtype=np.float32)})
    assert "where" not in _kinds(loaded)


def test_an_error_inside_a_body_names_both_nodes():
    node = h.make_node("If", ["c"], ["y"], then_branch=_branch("t", "Mul", "count"),
                       else_branch=_branch("e", "Add", "two"))
    model = _model([node], [_info("c", B, []), _info("x", F, [3])], [_info("y", F, [3])])
    model.graph.initializer.extend([h.make_tensor("two", F, [], [2.0]),
                                    h.make_tensor("count", I, [], [2])])
    with pytest.raises(graphc.onnx.OnnxModelError, match=r"If node .*Mul node .*'count'"):
        graphc.onnx.load(model)


def test_scan_over_constants_is_computed_while_importing():
    xs = np.arange(15, dtype=np.float32).reshape(5, 3)
    model = _scan_model(xs.shape, 3, 0, 0, 0, 0)
    model.graph.initializer.extend([h.make_tensor("s0", F, [3], [1.0, -1.0, 0.5]),
                                    h.make_tensor("xs", F, [5, 3], xs.ravel().tolist())])
    del model.graph.input[:]
    loaded = graphc.onnx.load(model)
    for got, want in zip(loaded.run({}), _reference(model, {})):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert "loop" not in _kinds(loaded)
