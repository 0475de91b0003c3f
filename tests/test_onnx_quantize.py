"""The converters of ONNX's quantization operators (graphc/onnx/ops/quantize.py,
quantize_products.py) and BitCast (graphc/onnx/ops/bitcast.py, the ``bitcast`` kind):
each against onnx's reference implementation (or NumPy, where the reference mishandles
per-row parameters) on random shapes, types and attributes, in graph mode and folded
while importing, and the errors a user sees."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")
from onnx import TensorProto as TP, helper as h, numpy_helper as nh  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import graphc  # noqa: E402
import graphc.eager as E  # noqa: E402
import graphc.ndarray as N  # noqa: E402
import graphc.onnx  # noqa: E402
from graphc.onnx import OnnxModelError, OnnxUnsupported  # noqa: E402
from graphc.onnx.export import to_onnx  # noqa: E402
from graphc.type.errors import DTypeError  # noqa: E402
from graphc.type.formats import NARROW_FORMATS  # noqa: E402
from opcheck import check_op, examples  # noqa: E402

OPSET = 25


def _info(name, array):
    return h.make_tensor_value_info(name, h.np_dtype_to_tensor_dtype(array.dtype), array.shape)


def _model(op_type, inputs: dict, attrs: dict, outputs, opset=OPSET, constants=()):
    """A one-node model; an input given as ``None`` is omitted (an empty name), one named
    in ``constants`` is an initializer; ``outputs``: (name, element type, shape)."""
    names = [name if value is not None else "" for name, value in inputs.items()]
    while names and not names[-1]:
        names.pop()
    infos = [_info(n, a) for n, a in inputs.items() if a is not None and n not in constants]
    node = h.make_node(op_type, names, [n for n, _, _ in outputs], **attrs)
    graph = h.make_graph([node], "g", infos, [h.make_tensor_value_info(n, t, shape)
                                              for n, t, shape in outputs],
                         initializer=[nh.from_array(inputs[n], n) for n in constants])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 11
    return model


def _reference(op_type, inputs, attrs, n_outputs=1, opset=OPSET):
    """onnx.reference's outputs (the model's output types are taken from them)."""
    outputs = [(f"y{i}", TP.UNDEFINED, None) for i in range(n_outputs)]
    model = _model(op_type, inputs, attrs, outputs, opset)
    feeds = {k: v for k, v in inputs.items() if v is not None}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ReferenceEvaluator(model).run(None, feeds)


def _graphc(op_type, inputs, attrs, want, opset=OPSET, fold=False):
    """graphc's outputs, typed as ``want``; ``fold``: every input an initializer, so the
    converter computes while importing (the eager namespace)."""
    present = {k: v for k, v in inputs.items() if v is not None}
    constants = tuple(present) if fold else ()
    outputs = [(f"y{i}", h.np_dtype_to_tensor_dtype(w.dtype), w.shape)
               for i, w in enumerate(want)]
    model = _model(op_type, inputs, attrs, outputs, opset, constants)
    feeds = {k: v for k, v in present.items() if k not in constants}
    return graphc.onnx.load(model).run(**feeds)


def _assert_equal(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype,
                                                                 got.shape, want.shape)
    wide = (np.float64 if want.dtype.kind == "f" or want.dtype.name in NARROW_FORMATS
            else want.dtype)
    np.testing.assert_array_equal(np.asarray(got).astype(wide), np.asarray(want).astype(wide))


def _compare(op_type, inputs, attrs, n_outputs=1, opset=OPSET, reference=None):
    """graphc (graph mode and folded) equal to the reference (onnx's unless given)."""
    want = reference if reference is not None else _reference(op_type, inputs, attrs,
                                                              n_outputs, opset)
    for fold in (False, True):
        got = _graphc(op_type, inputs, attrs, want, opset, fold)
        for g, w in zip(got, want):
            _assert_equal(g, w)
    return want


# -- the quantized types ---------------------------------------------------------------------
#: quantized type name -> (ONNX element type, the NumPy / ml_dtypes dtype)
QUANTIZED = {"uint8": (TP.UINT8, np.uint8), "int8": (TP.INT8, np.int8),
             "uint16": (TP.UINT16, np.uint16), "int16": (TP.INT16, np.int16),
             "uint4": (TP.UINT4, ml_dtypes.uint4), "int4": (TP.INT4, ml_dtypes.int4),
             "uint2": (TP.UINT2, ml_dtypes.uint2), "int2": (TP.INT2, ml_dtypes.int2),
             "float8_e4m3fn": (TP.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn),
             "float8_e5m2": (TP.FLOAT8E5M2, ml_dtypes.float8_e5m2),
             "float8_e4m3fnuz": (TP.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz),
             "float4_e2m1fn": (TP.FLOAT4E2M1, ml_dtypes.float4_e2m1fn)}


def _range(name):
    dtype = np.dtype(QUANTIZED[name][1])
    if name in NARROW_FORMATS:
        return NARROW_FORMATS[name].lowest, NARROW_FORMATS[name].highest
    return np.iinfo(dtype).min, np.iinfo(dtype).max


def _quantized_values(rng, name, shape):
    """Random values of the quantized type ``name`` over its whole range."""
    dtype = QUANTIZED[name][1]
    lowest, highest = _range(name)
    if name.startswith("float"):
        return (rng.uniform(lowest, highest, shape) * rng.uniform(0, 1, shape) ** 3).astype(
            dtype)
    return rng.integers(lowest, highest, shape, endpoint=True).astype(dtype)


def _zero_point(rng, name, shape, floats=True):
    """A zero point of type ``name``: 0 for float8 (the spec's), and for float4 unless
    ``floats`` (the reference's DequantizeLinear ignores a float4 zero point)."""
    if name.startswith("float8") or (name.startswith("float") and not floats):
        return np.zeros(shape, QUANTIZED[name][1])
    return _quantized_values(rng, name, shape)


@st.composite
def _layouts(draw):
    """``(x shape, parameter shape, axis, block_size)`` of a per-tensor, per-axis or
    blocked quantization."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    rank = len(shape)
    axis = draw(st.integers(-rank, rank - 1))
    mode = draw(st.sampled_from(["tensor", "tensor1", "axis", "block"]))
    if mode == "tensor":
        return shape, (), axis, 0
    if mode == "tensor1":
        return shape, (1,), axis, 0
    if mode == "axis":
        return shape, (shape[axis],), axis, 0
    block = draw(st.integers(1, 3))
    params = tuple(-(-n // block) if j == axis % rank else n for j, n in enumerate(shape))
    return shape, params, axis, block


def _scales(rng, shape, dtype):
    """Powers of two (ties exact) or arbitrary positive scales."""
    if rng.random() < 0.5:
        return (2.0 ** rng.integers(-3, 3, shape)).astype(dtype)
    return rng.uniform(0.05, 3.0, shape).astype(dtype)


@examples(30)
@given(_layouts(), st.sampled_from(sorted(QUANTIZED)), st.sampled_from([np.float32, np.float16]),
       st.integers(0, 2 ** 32 - 1), st.booleans(), st.booleans())
def test_quantize_linear_matches_onnx(layout, target, dtype, seed, with_zero, saturate):
    shape, params, axis, block = layout
    rng = np.random.default_rng(seed)
    scale = _scales(rng, params, dtype)
    lowest, highest = _range(target)
    # values within and past the range, and ties (halves of power-of-two scales)
    x = (rng.uniform(lowest - 4, highest + 4, shape) * rng.choice([1, 0.25, 8], shape))
    x = np.where(rng.random(shape) < 0.3, np.round(x) + 0.5, x)
    # x / scale finite: the reference casts infinities to int32 (undefined behaviour:
    # the lowest int32), graphc saturates them
    bound = 60000.0 * float(np.min(scale)) if dtype == np.float16 else 60000.0
    x = np.clip(x, -bound, bound).astype(dtype)
    zero = _zero_point(rng, target, params) if with_zero else None
    attrs = {"axis": axis, "saturate": int(saturate)}
    if block:
        attrs["block_size"] = block
    if zero is None:
        attrs["output_dtype"] = QUANTIZED[target][0]
    elif rng.random() < 0.3:     # both given: they must agree
        attrs["output_dtype"] = QUANTIZED[target][0]
    _compare("QuantizeLinear", {"x": x, "y_scale": scale, "y_zero_point": zero}, attrs)


@examples(30)
@given(_layouts(), st.sampled_from(sorted(QUANTIZED)), st.sampled_from([np.float32, np.float16]),
       st.integers(0, 2 ** 32 - 1), st.booleans(), st.sampled_from([None, TP.FLOAT,
                                                                     TP.FLOAT16]))
def test_dequantize_linear_matches_onnx(layout, source, dtype, seed, with_zero, output):
    shape, params, axis, block = layout
    rng = np.random.default_rng(seed)
    x = _quantized_values(rng, source, shape)
    scale = _scales(rng, params, dtype)
    zero = _zero_point(rng, source, params, floats=False) if with_zero else None
    attrs = {"axis": axis}
    if block:
        attrs["block_size"] = block
    if output is not None:
        attrs["output_dtype"] = output
    _compare("DequantizeLinear", {"x": x, "x_scale": scale, "x_zero_point": zero}, attrs)


def test_dequantize_linear_int32_and_old_opsets():
    rng = np.random.default_rng(0)
    x = rng.integers(-2 ** 20, 2 ** 20, (3, 4)).astype(np.int32)
    _compare("DequantizeLinear", {"x": x, "x_scale": np.float32(0.125)}, {})
    x8 = rng.integers(0, 256, (2, 3)).astype(np.uint8)
    quantize = {"x": rng.normal(0, 50, (2, 3)).astype(np.float32), "y_scale": np.float32(0.5)}
    dequantize = {"x": x8, "x_scale": np.float32(0.5), "x_zero_point": np.uint8(7)}
    for op_type, inputs in (("QuantizeLinear", quantize), ("DequantizeLinear", dequantize)):
        want = _reference(op_type, inputs, {}, opset=19)   # its oldest version
        for opset in (10, 13, 19):
            _compare(op_type, inputs, {}, opset=opset, reference=want)


def test_quantize_linear_precision_and_int32_input():
    rng = np.random.default_rng(1)
    x16 = rng.normal(0, 300, (4, 5)).astype(np.float16)
    scale16 = np.float16(0.3)
    _compare("QuantizeLinear", {"x": x16, "y_scale": scale16, "y_zero_point": np.int16(3)},
             {"precision": TP.FLOAT})
    xi = rng.integers(-1000, 1000, (6,)).astype(np.int32)
    _compare("QuantizeLinear", {"x": xi, "y_scale": np.int32(7),
                                "y_zero_point": np.int8(-2)}, {})


def test_bfloat16_scales_and_float4_zero_points():
    rng = np.random.default_rng(2)
    bf16 = ml_dtypes.bfloat16
    x = rng.normal(0, 40, (3, 4)).astype(bf16)
    scale = rng.uniform(0.1, 2, (4,)).astype(bf16)
    _compare("QuantizeLinear", {"x": x, "y_scale": scale, "y_zero_point": np.zeros(4, np.int8)},
             {"axis": 1})
    q = rng.integers(0, 256, (3, 4)).astype(np.uint8)
    _compare("DequantizeLinear", {"x": q, "x_scale": scale, "x_zero_point": np.full(4, 9,
                                                                                   np.uint8)},
             {"axis": 1})
    # the spec's formula, (x - zero point) * scale, for float4 too (the reference ignores it)
    f4 = ml_dtypes.float4_e2m1fn
    values, zero = np.array([-6, -1, 0, 0.5, 4], np.float32), np.float32(1.5)
    want = [((values - zero) * np.float32(2)).astype(np.float32)]
    _compare("DequantizeLinear", {"x": values.astype(f4), "x_scale": np.float32(2),
                                  "x_zero_point": np.array([zero]).astype(f4)}, {},
             reference=want)


@examples(20)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.integers(0, 2 ** 32 - 1),
       st.sampled_from(["mixed", "positive", "negative", "constant", "zero"]))
def test_dynamic_quantize_linear_matches_onnx(shape, seed, kind):
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 10, shape).astype(np.float32)
    x = {"mixed": x, "positive": np.abs(x) + 1, "negative": -np.abs(x) - 1,
         "constant": np.full(shape, 3.5, np.float32), "zero": np.zeros(shape, np.float32)}[kind]
    _compare("DynamicQuantizeLinear", {"x": x.astype(np.float32)}, {}, n_outputs=3, opset=11)


# -- integer products ----------------------------------------------------------------------
def _int8s(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


@examples(25)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 4), st.sampled_from([0, 1, 2]),
       st.sampled_from([np.uint8, np.int8]), st.sampled_from([np.uint8, np.int8]),
       st.sampled_from(["none", "tensor", "slices"]), st.integers(0, 2 ** 32 - 1))
def test_matmul_integer_is_exact(m, k, n, batch, a_type, b_type, zeros, seed):
    rng = np.random.default_rng(seed)
    a = _int8s(rng, a_type, ((batch,) if batch else ()) + (m, k))
    b = _int8s(rng, b_type, (k, n))
    za = zb = None
    if zeros == "tensor":
        za, zb = _int8s(rng, a_type, (1,)), _int8s(rng, b_type, ())
    elif zeros == "slices":   # per row of a, per column of b
        za, zb = _int8s(rng, a_type, (m,)), _int8s(rng, b_type, (n,))
    wide_a = a.astype(np.int64) - (0 if za is None else za.astype(np.int64).reshape(-1, 1))
    wide_b = b.astype(np.int64) - (0 if zb is None else zb.astype(np.int64))
    want = [(wide_a @ wide_b).astype(np.int32)]
    inputs = {"A": a, "B": b, "a_zero_point": za, "b_zero_point": zb}
    if zeros != "slices":
        want = _reference("MatMulInteger", inputs, {}, opset=10)
    _compare("MatMulInteger", inputs, {}, opset=10, reference=want)


@st.composite
def _convolutions(draw):
    rank = draw(st.integers(1, 2))
    group = draw(st.integers(1, 2))
    channels, out = group * draw(st.integers(1, 2)), group * draw(st.integers(1, 2))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    spatial = tuple(k + draw(st.integers(0, 3)) for k in kernel)
    attrs = {"group": group,
             "strides": [draw(st.integers(1, 2)) for _ in range(rank)],
             "pads": [draw(st.integers(0, 1)) for _ in range(2 * rank)]}
    return (2, channels) + spatial, (out, channels // group) + kernel, attrs


@examples(20)
@given(_convolutions(), st.sampled_from([np.uint8, np.int8]), st.sampled_from([np.uint8,
                                                                                  np.int8]),
       st.sampled_from(["none", "tensor", "channels"]), st.integers(0, 2 ** 32 - 1))
def test_conv_integer_is_exact(conv, x_type, w_type, zeros, seed):
    x_shape, w_shape, attrs = conv
    rng = np.random.default_rng(seed)
    x, w = _int8s(rng, x_type, x_shape), _int8s(rng, w_type, w_shape)
    zx = zw = None
    if zeros != "none":
        zx = _int8s(rng, x_type, ())
        zw = _int8s(rng, w_type, (w_shape[0],) if zeros == "channels" else ())
    inputs = {"x": x, "w": w, "x_zero_point": zx, "w_zero_point": zw}
    if zeros == "channels" and len(x_shape) != 4:   # the reference expands zw to 4-D only
        want = _conv_reference(x, w, zx, zw.reshape(-1, 1, 1), attrs)
    else:
        want = _reference("ConvInteger", inputs, attrs, opset=10)
    _compare("ConvInteger", inputs, attrs, opset=10, reference=want)


def _conv_reference(x, w, zx, zw, attrs):
    """ONNX's Conv on the int64 operands less their zero points (float64 is exact here),
    by onnx.reference."""
    x64 = (x.astype(np.int64) - zx).astype(np.float64)
    w64 = (w.astype(np.int64) - zw).astype(np.float64)
    (y,) = _reference("Conv", {"x": x64, "w": w64}, attrs, opset=11)
    return [y.astype(np.int32)]


@examples(25)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 4), st.sampled_from([0, 2]),
       st.sampled_from([np.uint8, np.int8]), st.sampled_from([np.float32, np.float16]),
       st.integers(0, 2 ** 32 - 1), st.booleans())
def test_qlinear_matmul_matches_onnx(m, k, n, batch, dtype, scale_type, seed, per_row):
    rng = np.random.default_rng(seed)
    lead = (batch,) if batch else ()
    a, b = _int8s(rng, dtype, lead + (m, k)), _int8s(rng, dtype, lead + (k, n))
    sa = rng.uniform(0.01, 0.1, (m,) if per_row else (1,)).astype(scale_type)
    sb = rng.uniform(0.01, 0.1, (n,) if per_row else ()).astype(scale_type)
    sy = rng.uniform(0.05, 0.5, (1,)).astype(scale_type)
    za, zb, zy = (_int8s(rng, dtype, s) for s in (((m,) if per_row else (1,)),
                                                  ((n,) if per_row else ()), (1,)))
    inputs = {"a": a, "a_scale": sa, "a_zero_point": za, "b": b, "b_scale": sb,
              "b_zero_point": zb, "y_scale": sy, "y_zero_point": zy}
    if per_row:   # the reference applies a's parameters along the last axis
        acc = ((a.astype(np.int64) - za.reshape(-1, 1)) @ (b.astype(np.int64) - zb))
        multiplier = (sa.reshape(-1, 1) * sb / sy).astype(np.float64)
        info = np.iinfo(dtype)
        want = [np.clip(np.rint(acc * multiplier) + zy[0], info.min, info.max).astype(dtype)]
    else:
        want = _reference("QLinearMatMul", inputs, {}, opset=21)
    _compare("QLinearMatMul", inputs, {}, opset=21, reference=want)


@examples(20)
@given(_convolutions(), st.sampled_from([np.uint8, np.int8]), st.integers(0, 2 ** 32 - 1),
       st.booleans(), st.booleans())
def test_qlinear_conv_matches_onnx(conv, dtype, seed, per_channel, bias):
    x_shape, w_shape, attrs = conv
    if len(x_shape) != 4:       # the reference's per-channel scales are 2-D only
        x_shape, w_shape = x_shape + (2,), w_shape + (1,)
        attrs = {**attrs, "strides": attrs["strides"] * 2, "pads": attrs["pads"] * 2}
    rng = np.random.default_rng(seed)
    x, w = _int8s(rng, dtype, x_shape), _int8s(rng, dtype, w_shape)
    out = w_shape[0]
    inputs = {"x": x, "x_scale": np.float32(rng.uniform(0.01, 0.1)),
              "x_zero_point": _int8s(rng, dtype, ()), "w": w,
              "w_scale": rng.uniform(0.01, 0.1, (out,) if per_channel else (1,)).astype(
                  np.float32),
              "w_zero_point": _int8s(rng, dtype, ()), "y_scale": np.float32(0.2),
              "y_zero_point": _int8s(rng, dtype, ()),
              "B": rng.integers(-500, 500, (out,)).astype(np.int32) if bias else None}
    _compare("QLinearConv", inputs, attrs, opset=10)


# -- errors ----------------------------------------------------------------------------------
def _load(op_type, inputs, attrs, out_type, opset=OPSET):
    rank = np.ndim(next(iter(inputs.values())))   # symbolic: the checker wants a shape
    output = ("y", out_type, [f"d{i}" for i in range(rank)])
    return graphc.onnx.load(_model(op_type, inputs, attrs, [output], opset))


@pytest.mark.parametrize("op_type, inputs, attrs, out_type, message", [
    ("QuantizeLinear", {"x": np.zeros((2, 4), np.float32), "s": np.ones((2, 3), np.float32)},
     {"axis": 1, "block_size": 2}, TP.UINT8, r"y_scale of shape \(2, 3\) must have shape "
                                             r"\(2, 2\)"),
    ("QuantizeLinear", {"x": np.zeros((2, 4), np.float32), "s": np.ones(3, np.float32)},
     {"axis": 1}, TP.UINT8, r"one per slice along axis 1: shape \(4,\)"),
    ("QuantizeLinear", {"x": np.zeros((2, 4), np.float32), "s": np.ones(4, np.float32)},
     {"axis": 2}, TP.UINT8, "axis 2 is out of range"),
    ("QuantizeLinear", {"x": np.zeros(4, np.float32), "s": np.ones((), np.float32),
                        "z": np.zeros((), np.uint8)},
     {"output_dtype": TP.INT8}, TP.UINT8, "output_dtype=3 disagrees with the zero point"),
    ("QuantizeLinear", {"x": np.zeros(4, np.float32), "s": np.ones((), np.float32)},
     {"block_size": -1}, TP.UINT8, "block_size must be 0"),
    ("DequantizeLinear", {"x": np.zeros(4, np.uint8), "s": np.ones((), np.float32),
                          "z": np.zeros((), np.int8)}, {}, TP.FLOAT,
     r"input 2 \('z'\) is int8 but input 0 \('x'\) is uint8"),
    ("DequantizeLinear", {"x": np.zeros(4, np.uint8), "s": np.ones((), np.int32)}, {},
     TP.FLOAT, "its x_scale is one of"),
    ("MatMulInteger", {"a": np.zeros((2, 3), np.uint8), "b": np.zeros((4, 2), np.uint8)}, {},
     TP.INT32, "do not chain"),
    ("MatMulInteger", {"a": np.zeros((2, 3), np.int32), "b": np.zeros((3, 2), np.uint8)}, {},
     TP.INT32, "its A is one of: int8, uint8"),
    ("ConvInteger", {"x": np.zeros((1, 2, 4, 4), np.uint8), "w": np.zeros((2, 3, 1, 1),
                                                                         np.uint8)},
     {}, TP.INT32, "group=1"),
    ("BitCast", {"x": np.zeros(3, np.float32)}, {"to": TP.INT64}, TP.INT64,
     "must have one size"),
])
def test_bad_models_are_refused_clearly(op_type, inputs, attrs, out_type, message):
    opset = 26 if op_type == "BitCast" else OPSET
    with pytest.raises(OnnxModelError, match=message):
        _load(op_type, inputs, attrs, out_type, opset)


def test_float8_products_are_unsupported():
    f8 = np.zeros((2, 2), ml_dtypes.float8_e4m3fn)
    one = np.ones(1, np.float32)
    zero = np.zeros(1, ml_dtypes.float8_e4m3fn)
    inputs = {"a": f8, "sa": one, "za": zero, "b": f8, "sb": one, "zb": zero, "sy": one,
              "zy": zero}
    with pytest.raises(OnnxUnsupported, match="float8"):
        _load("QLinearMatMul", inputs, {}, TP.FLOAT8E4M3FN, 21)


# -- BitCast and the bitcast kind --------------------------------------------------------------
#: same-size pairs of the dtypes graphc holds natively
PAIRS = [(np.float32, np.int32), (np.int32, np.float32), (np.float64, np.int64),
         (np.int64, np.float64), (np.uint32, np.int32), (np.int8, np.uint8),
         (np.bool_, np.uint8), (np.uint16, np.int16), (np.float16, np.uint16),
         (np.complex64, np.float64), (np.uint64, np.int64)]


def _bitcast(ns, x, dtype):
    return ns.bitcast(x, dtype)


def _bits_of(rng, dtype, shape):
    raw = rng.integers(0, 256, shape + (np.dtype(dtype).itemsize,), dtype=np.uint8)
    if dtype == np.bool_:
        return raw[..., 0] % 2 == 1
    return raw.view(dtype).reshape(shape)


@pytest.mark.parametrize("source, target", PAIRS)
def test_bitcast_reinterprets_bits_as_numpy_view(source, target):
    rng = np.random.default_rng(3)
    x = _bits_of(rng, source, (3, 4))
    check_op(lambda ns, a: _bitcast(ns, a, target), lambda a: a.view(target), x)
    # a strided input (a transposed view) keeps its elements' order
    check_op(lambda ns, a: _bitcast(ns, a.T if ns is E else ns.transpose(a), target),
             lambda a: a.T.view(target), x)


@pytest.mark.parametrize("source, target", PAIRS[:8])
def test_onnx_bitcast_matches_onnx(source, target):
    rng = np.random.default_rng(4)
    x = _bits_of(rng, source, (2, 3))
    to = h.np_dtype_to_tensor_dtype(np.dtype(target))
    _compare("BitCast", {"x": x}, {"to": to}, opset=26)
    _compare("BitCast", {"x": x[0, 0]}, {"to": to}, opset=26)


def test_bitcast_refuses_other_sizes_and_narrow_formats():
    with pytest.raises(DTypeError, match="bitcast: float32 .4 bytes. cannot be reinterpreted "
                                         "as int64"):
        _bitcast(N, N.var("x", (3,)), np.int64)
    with pytest.raises(DTypeError, match="same size"):
        _bitcast(E, np.zeros(3, np.float32), np.float16)
    with pytest.raises(OnnxUnsupported, match="bfloat16"):
        _load("BitCast", {"x": np.zeros(3, np.int16)}, {"to": TP.BFLOAT16}, TP.BFLOAT16, 26)


def test_bitcast_passes_no_gradient_and_exports_from_opset_26():
    x = N.var("x", (3,))
    y = _bitcast(N, x, np.int32)
    data = np.array([1.0, -2.0, 0.5], np.float32)
    # d/dx of sum(f(x) * x) is f(x) alone where f (a bitcast) passes no gradient on
    (gx,) = N.grad(N.sum(N.astype(y, np.float32) * x), [x])
    np.testing.assert_array_equal(graphc.compile([x], [gx]).run(x=data)[0],
                                  data.view(np.int32).astype(np.float32))
    with pytest.raises(OnnxUnsupported, match="opset 26"):
        to_onnx(y, [x])
    model = to_onnx(y, [x], opset=26)
    assert [n.op_type for n in model.graph.node] == ["BitCast"]
    (got,) = ReferenceEvaluator(model).run(None, {"x": data})
    np.testing.assert_array_equal(got, data.view(np.int32))


def test_bitcast_survives_save_and_load(tmp_path):
    x = N.var("x", (2, 2))
    g = graphc.compile([x], [_bitcast(N, x, np.uint32)])
    g.save(tmp_path / "g.npz")
    data = np.arange(4, dtype=np.float32).reshape(2, 2)
    np.testing.assert_array_equal(graphc.load(tmp_path / "g.npz").run(x=data)[0],
                                  data.view(np.uint32))


def test_tensor_view_is_ndarray_view():
    x = N.var("x", (3,))
    g = graphc.compile([x], [x.view(np.int32), x.view()])
    data = np.array([1.0, -2.5, 0.0], np.float32)
    bits, same = g.run(x=data)
    np.testing.assert_array_equal(bits, data.view(np.int32))
    np.testing.assert_array_equal(same, data)
    with pytest.raises(graphc.DTypeError, match="bitcast"):
        x.view(np.int64)
