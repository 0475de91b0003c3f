"""The elementwise ONNX converters beyond what onnx's conformance suite covers:
the legacy (opset < 7) broadcast attributes, integer Div and Mod semantics on
random data against onnxruntime, dtypes, the composed inverse trigonometric and
hyperbolic functions on their whole domains, BitShift's edge cases, errors."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

from opcheck import examples

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper as h  # noqa: E402

#: the domain edges and special values below give inf and NaN on purpose
_EDGES = pytest.mark.filterwarnings("ignore::RuntimeWarning")

import graphc.onnx  # noqa: E402
from graphc.onnx import OnnxModelError, OnnxUnsupported  # noqa: E402
from graphc.onnx.tensors import numpy_to_onnx_dtype  # noqa: E402


def _model(op_type, arrays, opset=17, out_dtype=None, n_outputs=1, **attrs):
    """A one-node model whose inputs are ``arrays`` (named a, b, c ...)."""
    names = [chr(ord("a") + i) for i in range(len(arrays))]
    inputs = [h.make_tensor_value_info(n, numpy_to_onnx_dtype(x.dtype), list(x.shape))
              for n, x in zip(names, arrays)]
    out_dtype = out_dtype or numpy_to_onnx_dtype(arrays[0].dtype)
    try:
        out_shape = np.broadcast_shapes(*(x.shape for x in arrays))
    except ValueError:  # legacy unidirectional broadcasting
        out_shape = arrays[0].shape
    outputs = [h.make_tensor_value_info(f"y{i}", out_dtype, list(out_shape))
               for i in range(n_outputs)]
    node = h.make_node(op_type, names, [o.name for o in outputs], **attrs)
    graph = h.make_graph([node], "g", inputs, outputs)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _run(model, arrays):
    feed = {chr(ord("a") + i): x for i, x in enumerate(arrays)}
    return graphc.onnx.load(model).run(**feed)[0]


def _ort(model, arrays):
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {chr(ord("a") + i): x for i, x in enumerate(arrays)})[0]


# -- legacy broadcasting ----------------------------------------------------------------------
@pytest.mark.parametrize("op_type, reference", [("Add", np.add), ("Sub", np.subtract),
                                                ("Mul", np.multiply), ("Div", np.divide)])
def test_legacy_broadcast_aligns_b_at_axis(op_type, reference):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
    b = rng.uniform(1, 2, size=(3, 4)).astype(np.float32)
    model = _model(op_type, [a, b], opset=6, broadcast=1, axis=1)
    expected = reference(a, b[None, :, :, None])
    np.testing.assert_allclose(_run(model, [a, b]), expected, rtol=1e-6)


def test_legacy_broadcast_without_axis_aligns_the_trailing_dimensions():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.arange(4, dtype=np.float32)
    out = _run(_model("Add", [a, b], opset=6, broadcast=1), [a, b])
    np.testing.assert_array_equal(out, a + b)


def test_legacy_negative_axis_counts_from_the_end_of_a():
    a = np.ones((2, 3, 4), np.float32)
    b = np.array([1.0, 2.0, 3.0], np.float32)
    out = _run(_model("Mul", [a, b], opset=6, broadcast=1, axis=-2), [a, b])
    np.testing.assert_array_equal(out, a * b[:, None])


def test_legacy_comparison_and_pow_take_the_broadcast_attributes_too():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1.0, 4.0], np.float32)
    out = _run(_model("Greater", [a, b], opset=6, broadcast=1, axis=0,
                      out_dtype=TensorProto.BOOL), [a, b])
    np.testing.assert_array_equal(out, a > b[:, None])
    out = _run(_model("Pow", [a, b], opset=6, broadcast=1, axis=0), [a, b])
    np.testing.assert_allclose(out, a ** b[:, None])


def test_legacy_without_broadcast_needs_equal_shapes():
    a, b = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    with pytest.raises(OnnxModelError, match=r"same shape.*\(2, 3\) and \(3,\)"):
        graphc.onnx.load(_model("Add", [a, b], opset=6))


def test_legacy_broadcast_axis_that_does_not_fit_is_an_error():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    with pytest.raises(OnnxModelError, match="axis=1"):
        graphc.onnx.load(_model("Add", [a, b], opset=6, broadcast=1, axis=1))
    with pytest.raises(OnnxModelError, match="cannot be broadcast"):
        graphc.onnx.load(_model("Add", [a, np.ones(2, np.float32)], opset=6, broadcast=1,
                                axis=1))


def test_legacy_consumed_inputs_attribute_is_accepted():
    x = np.array([-1.0, 2.0], np.float32)
    out = _run(_model("Relu", [x], opset=1, consumed_inputs=[0]), [x])
    np.testing.assert_array_equal(out, [0.0, 2.0])


# -- integer arithmetic against onnxruntime ----------------------------------------------------
_INT_DTYPES = st.sampled_from([np.int8, np.int32, np.int64, np.uint8, np.uint32])


@st.composite
def _int_operands(draw, nonzero_divisor=True):
    dtype = np.dtype(draw(_INT_DTYPES))
    shape_a, shape_b = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3,
                                                              max_side=4)).input_shapes
    info = np.iinfo(dtype)
    low, high = max(info.min, -100), min(info.max, 100)
    a = draw(hnp.arrays(dtype, shape_a, elements=st.integers(low, high)))
    elements = st.integers(low, high).filter(lambda v: v != 0 or not nonzero_divisor)
    b = draw(hnp.arrays(dtype, shape_b, elements=elements))
    return a, b


@examples(20)
@given(_int_operands(), st.sampled_from([("Div", {}), ("Mod", {"fmod": 0}),
                                         ("Mod", {"fmod": 1})]))
def test_integer_div_and_mod_match_onnxruntime(operands, case):
    op_type, attrs = case
    model = _model(op_type, list(operands), **attrs)
    out = _run(model, list(operands))
    expected = _ort(model, list(operands))
    assert out.dtype == expected.dtype == operands[0].dtype
    np.testing.assert_array_equal(out, expected)


def test_integer_div_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 6, -6], np.int32)
    b = np.array([2, 2, -2, -2, -3, 3], np.int32)
    expected = [math.trunc(x / y) for x, y in zip(a.tolist(), b.tolist())]
    out = _run(_model("Div", [a, b]), [a, b])
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, expected)


@_EDGES
@examples(15)
@given(hnp.arrays(np.float64, 12, elements=st.floats(-50, 50)),
       hnp.arrays(np.float64, 12, elements=st.floats(-50, 50)))
def test_float_fmod_has_the_sign_of_the_dividend(a, b):
    out = _run(_model("Mod", [a, b], fmod=1), [a, b])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out, np.fmod(a, b))


@_EDGES
def test_fmod_special_values():
    a = np.array([np.inf, 3.0, 3.0, -3.0, np.nan, 5.5], np.float32)
    b = np.array([2.0, 0.0, np.inf, -np.inf, 1.0, -2.0], np.float32)
    out = _run(_model("Mod", [a, b], fmod=1), [a, b])
    np.testing.assert_array_equal(out, [np.nan, np.nan, 3.0, -3.0, np.nan, 1.5])


def test_pow_keeps_the_dtype_of_the_base():
    base = np.array([2, 3, 4], np.int32)
    exponent = np.array([0.5, 2.0, 1.5], np.float32)
    out = _run(_model("Pow", [base, exponent]), [base, exponent])
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [1, 9, 8])  # 2**0.5 = 1.41 -> 1, 4**1.5 = 8


def test_variadic_ops_broadcast_all_inputs():
    xs = [np.full((3, 1), 1.0, np.float32), np.arange(4, dtype=np.float32),
          np.full((1, 4), 5.0, np.float32)]
    for op_type, expected in [("Sum", xs[0] + xs[1] + xs[2]), ("Mean", (xs[0] + xs[1] + xs[2]) / 3),
                              ("Max", np.maximum(np.maximum(xs[0], xs[1]), xs[2])),
                              ("Min", np.minimum(np.minimum(xs[0], xs[1]), xs[2]))]:
        out = _run(_model(op_type, xs), xs)
        assert out.dtype == np.float32 and out.shape == (3, 4)
        np.testing.assert_allclose(out, expected, rtol=1e-6)


@_EDGES
# -- composed unary maths -------------------------------------------------------------------
@pytest.mark.parametrize("op_type, reference, low, high", [
    ("Asin", np.arcsin, -1, 1), ("Acos", np.arccos, -1, 1), ("Atan", np.arctan, -1e6, 1e6),
    ("Sinh", np.sinh, -20, 20), ("Cosh", np.cosh, -20, 20), ("Asinh", np.arcsinh, -1e6, 1e6),
    ("Acosh", np.arccosh, 1, 1e6), ("Atanh", np.arctanh, -1, 1)])
def test_composed_functions_match_numpy_on_their_whole_domain(op_type, reference, low, high):
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(low, high, 200), [low, high, 0.0, 1e-12, -1e-12]])
    x = np.clip(x, low, high)
    for dtype, rtol in [(np.float64, 1e-12), (np.float32, 2e-6)]:
        xs = x.astype(dtype)
        out = _run(_model(op_type, [xs]), [xs])
        assert out.dtype == dtype
        with np.errstate(all="ignore"):
            expected = reference(xs.astype(np.float64))
        np.testing.assert_allclose(out, expected, rtol=rtol, atol=1e-300)


@_EDGES
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_composed_functions_stay_finite_near_the_ends_of_the_dtype(dtype):
    info = np.finfo(dtype)
    # e**x overflows beyond log(max), cosh and sinh only half a unit of x later
    beyond = math.log(float(info.max)) + 0.5
    cases = [("Sinh", np.sinh, [beyond, -beyond, 2.0]), ("Cosh", np.cosh, [beyond, -beyond]),
             ("Asinh", np.arcsinh, [float(info.max), -float(info.max) / 3, 1e4, 2.0]),
             ("Acosh", np.arccosh, [float(info.max), float(info.max) / 3, 1e4, 2.0])]
    for op_type, reference, values in cases:
        xs = np.array(values, dtype)
        out = _run(_model(op_type, [xs]), [xs])
        expected = reference(xs.astype(np.float64))
        assert np.isfinite(out).all(), (op_type, out)
        np.testing.assert_allclose(out.astype(np.float64), expected, rtol=4 * float(info.eps),
                                   err_msg=op_type)


@_EDGES
def test_composed_functions_are_nan_outside_their_domain():
    x = np.array([-1.5, 1.5], np.float64)
    for op_type in ["Asin", "Acos", "Atanh"]:
        assert np.isnan(_run(_model(op_type, [x]), [x])).all(), op_type
    x = np.array([0.5], np.float64)
    assert np.isnan(_run(_model("Acosh", [x]), [x])).all()


@pytest.mark.parametrize("negative, positive", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_isinf_detects_the_signs_asked_for(negative, positive):
    x = np.array([-np.inf, np.inf, np.nan, 0.0, 1e308], np.float64)
    out = _run(_model("IsInf", [x], out_dtype=TensorProto.BOOL,
                      detect_negative=negative, detect_positive=positive), [x])
    expected = (np.isneginf(x) & bool(negative)) | (np.isposinf(x) & bool(positive))
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, expected)


# -- activations ------------------------------------------------------------------------------
@examples(10)
@given(hnp.arrays(np.float32, (3, 4), elements=st.floats(-30, 30, width=32)),
       st.sampled_from([("Softplus", {}), ("Mish", {}), ("Gelu", {"approximate": "tanh"}),
                        ("Celu", {"alpha": 2.0}), ("Selu", {}), ("HardSwish", {}),
                        ("ThresholdedRelu", {"alpha": 0.5}), ("Elu", {"alpha": 0.3})]))
def test_activations_match_onnxruntime(x, case):
    op_type, attrs = case
    model = _model(op_type, [x], opset=20, **attrs)
    np.testing.assert_allclose(_run(model, [x]), _ort(model, [x]), rtol=1e-5, atol=1e-6)


def test_softplus_does_not_overflow_for_large_inputs():
    x = np.array([100.0, -30.0], np.float32)
    out = _run(_model("Softplus", [x]), [x])
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, [100.0, math.log1p(math.exp(-30.0))], rtol=1e-6)


def test_legacy_prelu_slope_is_per_channel():
    x = np.linspace(-1, 1, 2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    out = _run(_model("PRelu", [x, slope], opset=6), [x, slope])
    np.testing.assert_allclose(out, np.where(x < 0, x * slope[:, None], x))


def test_clip_attribute_form_before_opset_11():
    x = np.array([-3.0, 0.5, 3.0], np.float32)
    out = _run(_model("Clip", [x], opset=6, min=-1.0), [x])
    np.testing.assert_array_equal(out, [-1.0, 0.5, 3.0])


def test_clip_with_only_max_given():
    x = np.array([-3, 0, 3], np.int8)
    hi = np.array(1, np.int8)
    node = h.make_node("Clip", ["a", "", "b"], ["y0"])
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("a", TensorProto.INT8, [3]),
                                       h.make_tensor_value_info("b", TensorProto.INT8, [])],
                         [h.make_tensor_value_info("y0", TensorProto.INT8, [3])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    out = graphc.onnx.load(model).run(a=x, b=hi)[0]
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, [-3, 0, 1])


def test_gelu_refuses_an_unknown_approximation():
    x = np.zeros(2, np.float32)
    with pytest.raises(OnnxModelError, match="approximate='fast'"):
        graphc.onnx.load(_model("Gelu", [x], opset=20, approximate="fast"))


# -- casts, bits ------------------------------------------------------------------------------
def test_cast_opset_1_names_the_type():
    x = np.array([1.7, -1.7], np.float32)
    out = _run(_model("Cast", [x], opset=1, out_dtype=TensorProto.INT32, to="INT32"), [x])
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [1, -1])


def test_cast_to_string_is_unsupported():
    """graphc computes on numbers (bfloat16 and the other narrow formats included:
    tests/test_formats.py), not on strings."""
    x = np.zeros(2, np.float32)
    with pytest.raises(OnnxUnsupported, match="STRING"):
        graphc.onnx.load(_model("Cast", [x], out_dtype=TensorProto.STRING,
                                to=TensorProto.STRING))


def _shift_reference(x, s, direction, bits, signed):
    """One element of BitShift from the spec's words, on Python ints."""
    if not 0 <= s < bits:
        return -1 if direction == "RIGHT" and x < 0 else 0
    if direction == "RIGHT":
        return x >> s  # Python's >> is arithmetic
    wrapped = (x << s) % (1 << bits)
    return wrapped - (1 << bits) if signed and wrapped >= 1 << (bits - 1) else wrapped


@examples(20)
@given(st.sampled_from([np.uint8, np.uint16, np.uint32, np.uint64]),
       st.sampled_from(["LEFT", "RIGHT"]), st.data())
def test_bitshift_follows_the_spec(dtype, direction, data):
    info = np.iinfo(dtype)
    x = data.draw(hnp.arrays(dtype, 6, elements=st.integers(int(info.min), int(info.max))))
    low = -3 if info.min < 0 else 0
    s = data.draw(hnp.arrays(dtype, 6, elements=st.integers(low, info.bits + 2)))
    out = _run(_model("BitShift", [x, s], opset=11, direction=direction), [x, s])
    expected = [_shift_reference(int(v), int(k), direction, info.bits, info.min < 0)
                for v, k in zip(x, s)]
    assert out.dtype == dtype
    assert out.tolist() == expected


@pytest.mark.parametrize("dtype", [np.int8, np.int64])
def test_bitshift_of_signed_integers_is_refused_as_onnxruntime_does(dtype):
    """BitShift's schema takes unsigned integers only: a signed one is a malformed
    model (onnxruntime refuses it), named by node and input."""
    x = np.array([1, -2], dtype)
    model = _model("BitShift", [x, x], opset=11, direction="LEFT")
    with pytest.raises(Exception):
        _ort(model, [x, x])
    with pytest.raises(OnnxModelError, match=r"BitShift node \(#0.*input 0 \('a'\) is "
                                             f"{np.dtype(dtype)}"):
        _run(model, [x, x])


def test_bitwise_not_is_the_complement():
    x = np.array([0, 5, -128, 127], np.int8)
    np.testing.assert_array_equal(_run(_model("BitwiseNot", [x], opset=18), [x]), ~x)
    u = np.array([0, 5, 255], np.uint8)
    np.testing.assert_array_equal(_run(_model("BitwiseNot", [u], opset=18), [u]), ~u)


def test_unknown_attribute_is_refused_naming_it():
    from graphc.onnx.importer import import_graph  # onnx.checker would refuse it first

    x = np.zeros(2, np.float32)
    with pytest.raises(OnnxUnsupported, match="LeakyRelu node.*'beta'"):
        import_graph(_model("LeakyRelu", [x], beta=1.0), {})


def test_constant_inputs_fold_while_importing():
    """A node whose inputs are all initializers is computed at import (eager)."""
    a = onnx.numpy_helper.from_array(np.array([7, -7], np.int64), "a")
    b = onnx.numpy_helper.from_array(np.array([2, 2], np.int64), "b")
    node = h.make_node("Div", ["a", "b"], ["y"])
    graph = h.make_graph([node], "g", [], [h.make_tensor_value_info("y", TensorProto.INT64, [2])],
                         initializer=[a, b])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 14)])
    from graphc.onnx.importer import import_graph

    _, (out,) = import_graph(model, {})
    assert out.op.kind == "const"
    np.testing.assert_array_equal(out.value, [3, -3])


@examples(15)
@given(st.sampled_from([np.int8, np.int32, np.int64, np.uint16, np.uint64]),
       st.sampled_from([("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or),
                        ("BitwiseXor", np.bitwise_xor)]), st.data())
def test_bitwise_binary_ops_match_numpy(dtype, case, data):
    op_type, reference = case
    info = np.iinfo(dtype)
    shape_a, shape_b = data.draw(hnp.mutually_broadcastable_shapes(
        num_shapes=2, max_dims=3, max_side=3)).input_shapes
    elements = st.integers(int(info.min), int(info.max))
    a = data.draw(hnp.arrays(dtype, shape_a, elements=elements))
    b = data.draw(hnp.arrays(dtype, shape_b, elements=elements))
    out = _run(_model(op_type, [a, b], opset=18), [a, b])
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, reference(a, b))
