"""Narrow number formats: ``N.round_to_format`` against ml_dtypes' casts, in graph
and eager mode, its gradient, save/load and ONNX export, and ONNX models whose inputs,
outputs and intermediate values have narrow types."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.type.errors import DTypeError
from graphc.type.formats import NARROW_FORMATS, is_narrow, narrow_format

ml_dtypes = pytest.importorskip("ml_dtypes")

FLOATS = [name for name, f in NARROW_FORMATS.items() if f.is_float]
INTS = [name for name, f in NARROW_FORMATS.items() if not f.is_float]


def _reference(x, name, saturate=True):
    """The format's values by ml_dtypes' own cast (after ONNX's saturating clip)."""
    fmt = NARROW_FORMATS[name]
    if saturate and fmt.saturable:
        x = np.clip(x, fmt.lowest, fmt.highest)
    return x.astype(getattr(ml_dtypes, name)).astype(fmt.compute_dtype)


_values = st.lists(st.floats(-1e5, 1e5, width=32) | st.sampled_from(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 448.0, 449.0, 240.5, 57344.0, 1e-9, 7.5, -8.5]),
    min_size=1, max_size=24).map(lambda v: np.array(v, np.float32))


@settings(max_examples=40, deadline=None)
@given(x=_values, name=st.sampled_from([f for f in FLOATS if f != "float8_e8m0fnu"]),
       saturate=st.booleans())
def test_float_formats_round_as_ml_dtypes_casts(x, name, saturate):
    got = E.round_to_format(x, name, saturate=saturate)
    np.testing.assert_array_equal(got, _reference(x, name, saturate))
    assert got.dtype == np.float32


@settings(max_examples=30, deadline=None)
@given(x=st.lists(st.floats(-40, 40, width=32), min_size=1, max_size=16).map(
    lambda v: np.array(v, np.float32)), name=st.sampled_from(INTS))
def test_integer_formats_truncate_and_wrap_as_ml_dtypes(x, name):
    got = E.round_to_format(x, name)
    np.testing.assert_array_equal(got, _reference(x, name))
    assert got.dtype == NARROW_FORMATS[name].compute_dtype
    small = np.arange(-9, 17).astype(np.int16)  # integers in: wrapped into the format
    np.testing.assert_array_equal(E.round_to_format(small, name), _reference(small, name))


def _e8m0(x, rounding, saturate):
    """float8_e8m0fnu by its definition: the power of two at or below |x| (positive
    x), moved up by the rounding; NaN beyond the exponent range."""
    out = []
    for v in np.asarray(x, np.float64):
        if not np.isfinite(v):
            out.append(np.nan)
            continue
        e = max(np.floor(np.log2(v)) if v > 0 else -127, -127)
        low = 2.0 ** e
        up = {"up": v > low, "down": False, "nearest": v >= 1.5 * low and e > -127}[rounding]
        e = e + up if not (saturate and e == 127) else e
        out.append(np.nan if e > 127 else 2.0 ** e)
    return np.array(out, np.float32)


@pytest.mark.parametrize("rounding", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [True, False])
def test_e8m0_rounds_to_powers_of_two(rounding, saturate):
    x = np.array([1.0, 1.25, 1.5, 3.0, 0.7, 6.0, 2.0 ** 127, 3.0 * 2.0 ** 126, 2.0 ** -120,
                  np.inf, np.nan], np.float32)
    got = E.round_to_format(x, "float8_e8m0fnu", saturate=saturate, rounding=rounding)
    np.testing.assert_array_equal(got, _e8m0(x, rounding, saturate))


@pytest.mark.parametrize("name", sorted(NARROW_FORMATS))
def test_rounding_is_idempotent_and_graph_equals_eager(name):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(64) * 6).astype(np.float32)
    v = N.var("x", x.shape, np.float32)
    g = graphc.compile([v], [N.round_to_format(v, name)])
    once = g.run(x)[0]
    np.testing.assert_array_equal(once, E.round_to_format(x, name))
    if NARROW_FORMATS[name].is_float:  # values of the format stay
        np.testing.assert_array_equal(E.round_to_format(once, name, saturate=False), once)


def test_gradient_passes_straight_through():
    x = N.var("x", (5,), np.float32)
    loss = N.sum(N.multiply(N.round_to_format(x, "bfloat16"), 3.0))
    (dx,) = graphc.algodiff.grad(loss, [x])
    g = graphc.compile([x], [dx])
    np.testing.assert_array_equal(g.run(np.linspace(-1, 1, 5, dtype=np.float32))[0],
                                  np.full(5, 3.0, np.float32))


def test_bad_format_and_rounding_are_named():
    x = N.var("x", (2,), np.float32)
    with pytest.raises(DTypeError, match="not a narrow number format.*bfloat16"):
        N.round_to_format(x, "float7")
    with pytest.raises(ValueError, match="round_to_format: rounding must be one of"):
        N.round_to_format(x, "float8_e8m0fnu", rounding="sideways")
    with pytest.raises(DTypeError, match="round_to_format: expected a real array"):
        N.round_to_format(N.var("z", (2,), np.complex64), "bfloat16")


def test_format_table_lookups():
    assert narrow_format(ml_dtypes.float8_e5m2).name == "float8_e5m2"
    assert is_narrow(ml_dtypes.int4) and not is_narrow(np.int8) and not is_narrow("no")
    for fmt in NARROW_FORMATS.values():
        info = (ml_dtypes.finfo if fmt.is_float else ml_dtypes.iinfo)(fmt.storage_dtype())
        assert float(info.max) == fmt.highest
        assert float(info.min if fmt.name != "float8_e8m0fnu" else info.smallest_normal) \
            == fmt.lowest


def test_saved_graph_keeps_the_rounding(tmp_path):
    x = N.var("x", (4,), np.float32)
    g = graphc.compile([x], [N.round_to_format(x, "float8_e5m2", saturate=False)])
    path = tmp_path / "g.graphc"
    g.save(path)
    data = np.array([1e6, 0.3, -2.7, 7.0], np.float32)
    np.testing.assert_array_equal(graphc.load(path).run(data)[0], g.run(data)[0])


# -- ONNX ---------------------------------------------------------------------------------
onnx = pytest.importorskip("onnx")
import graphc.onnx  # noqa: E402
from onnx import TensorProto, helper as h  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "int4"])
def test_onnx_export_casts_to_the_format_and_back(name, tmp_path):
    x = N.var("x", (6,), np.float32)
    g = graphc.compile([x], [N.round_to_format(x, name)])
    path = tmp_path / "m.onnx"
    if name != "bfloat16":  # the default opset (18) has no float8 or int4 element type
        with pytest.raises(graphc.onnx.OnnxUnsupported, match="pass opset="):
            graphc.onnx.save(g, path)
    graphc.onnx.save(g, path, opset=21)
    data = np.array([0.1, -2.6, 3.3, 500.0, 7.9, -1e3], np.float32)
    want = g.run(data)[0]
    model = onnx.load(path)
    assert [n.op_type for n in model.graph.node] == ["Cast", "Cast"]
    np.testing.assert_array_equal(ReferenceEvaluator(model).run(None, {"x": data})[0], want)
    np.testing.assert_array_equal(graphc.onnx.load(path).run(x=data)[0], want)


def _bf16_model():
    """y = (a + b) * a in bfloat16, z = y as float32, plus an int4 passthrough."""
    nodes = [h.make_node("Add", ["a", "b"], ["s"]), h.make_node("Mul", ["s", "a"], ["y"]),
             h.make_node("Cast", ["y"], ["z"], to=TensorProto.FLOAT),
             h.make_node("Identity", ["q"], ["r"])]
    graph = h.make_graph(nodes, "g", [
        h.make_tensor_value_info("a", TensorProto.BFLOAT16, [3]),
        h.make_tensor_value_info("b", TensorProto.BFLOAT16, [3]),
        h.make_tensor_value_info("q", TensorProto.INT4, [2])], [
        h.make_tensor_value_info("y", TensorProto.BFLOAT16, [3]),
        h.make_tensor_value_info("z", TensorProto.FLOAT, [3]),
        h.make_tensor_value_info("r", TensorProto.INT4, [2])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])


def test_onnx_model_with_narrow_inputs_and_outputs():
    model = _bf16_model()
    a = np.array([1.0, 2.5, -3.0], np.float32).astype(ml_dtypes.bfloat16)
    b = np.array([0.00390625, 1000.0, 0.1], np.float32).astype(ml_dtypes.bfloat16)
    q = np.array([-8, 7], np.int8).astype(ml_dtypes.int4)
    want = ReferenceEvaluator(model).run(None, {"a": a, "b": b, "q": q})
    got = graphc.onnx.load(model).run(a=a, b=b, q=q)
    assert [v.dtype for v in got] == [v.dtype for v in want]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.astype(np.float32), w.astype(np.float32))
    # the sum is rounded to bfloat16 before the product, as a bfloat16 Add computes it
    s = (a.astype(np.float32) + b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got[0], (s.astype(np.float32) * a.astype(np.float32))
                                  .astype(ml_dtypes.bfloat16))


def test_onnx_narrow_input_fed_in_its_compute_dtype_is_rounded():
    model = _bf16_model()
    a = np.array([1.001, 2.0, 3.0], np.float32)
    got = graphc.onnx.load(model).run(a=a, b=np.zeros(3, np.float32),
                                      q=np.zeros(2, np.int8))
    np.testing.assert_array_equal(got[1], np.square(a.astype(ml_dtypes.bfloat16)
                                                    .astype(np.float32)).astype(
                                      ml_dtypes.bfloat16).astype(np.float32))
