"""Converters of ONNX's linear quantization: QuantizeLinear, DequantizeLinear and
DynamicQuantizeLinear, composed of graphc's functions (divide, ``rint``: round half
to even, clip, astype).

``y = saturate(rint(x / scale) + zero_point)`` and ``x = (y - zero_point) * scale``,
with a scale and a zero point per tensor, per slice along ``axis`` (1-D) or per
block of ``block_size`` elements along ``axis`` (the input's rank). The integer
results are computed in float64, where every value before the clip is exact; the
float8 and float4 targets are rounded to their format (:mod:`graphc.type.formats`).

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["QuantizeLinear"]
>>> node = NodeContext.for_test("QuantizeLinear", []).node
>>> x, scale = np.array([-3.0, 1.0, 3.0, 600.0], np.float32), np.array(2, np.float32)
>>> spec.fn(NodeContext(node, 21, [x, scale, np.array(3, np.uint8)], {}, spec))  # halves to even
array([  1,   3,   5, 255], dtype=uint8)
"""
from __future__ import annotations

import numpy as np

from ..registry import converter
from ..tensors import onnx_dtype, onnx_format
from .quantize_params import FLOAT8_FORMATS, input_format, integer_range, quantization_param

#: ONNX's element types of the quantized side that NumPy holds natively
_NATIVE_QUANTIZED = ("uint8", "int8", "uint16", "int16")


def _target(ctx, zero_point_index):
    """``(format name or None, dtype)`` QuantizeLinear produces: the zero point's type,
    else ``output_dtype``, else uint8 (they must agree when both are given)."""
    given = int(ctx.attr("output_dtype") or 0)
    zero = ctx.input(zero_point_index, optional=True)
    if zero is not None:
        fmt = input_format(ctx, zero_point_index)
        dtype = zero.dtype
        if given and (onnx_format(given) != fmt or onnx_dtype(given) != dtype):
            raise ctx.invalid(f"output_dtype={given} disagrees with the zero point's type "
                              f"({fmt or dtype})")
        return fmt, dtype
    if not given:
        return None, np.dtype(np.uint8)
    return onnx_format(given), onnx_dtype(given, f"{ctx.describe()}: output_dtype")


def _check_quantized(ctx, fmt, dtype, what):
    if fmt is None and dtype.name not in _NATIVE_QUANTIZED + ("int32",):
        raise ctx.invalid(f"{what} must be a quantized type (int8, uint8, int16, uint16, "
                          f"int32, a 2- or 4-bit integer, float8 or float4), got {dtype}")
    if fmt is not None and fmt not in FLOAT8_FORMATS + ("float4_e2m1fn", "int4", "uint4",
                                                        "int2", "uint2"):
        raise ctx.unsupported(f"{what} of type {fmt} is not a quantized type")


def _axis_and_block(ctx):
    axis, block = int(ctx.attr("axis")), int(ctx.attr("block_size") or 0)
    if block < 0:
        raise ctx.invalid(f"block_size must be 0 (per tensor or per axis) or positive, "
                          f"got {block}")
    return axis, block


@converter("QuantizeLinear", attrs={"axis": 1, "saturate": 1, "block_size": 0,
                                    "output_dtype": 0, "precision": 0})
def quantize_linear(ctx):
    ns, x = ctx.ns, ctx.input(0)
    if ctx.dtype(0).kind not in "fi":
        raise ctx.invalid(f"x must be floating-point or int32, got {ctx.dtype(0)}")
    fmt, dtype = _target(ctx, 2)
    _check_quantized(ctx, fmt, dtype, "the output")
    if fmt is None and dtype == np.int32:
        raise ctx.invalid("the output must be a quantized type, not int32")
    axis, block = _axis_and_block(ctx)
    scale = quantization_param(ctx, 1, ctx.shape(0), axis, block, "y_scale")
    precision = int(ctx.attr("precision") or 0)
    if precision:
        wide = onnx_dtype(precision, f"{ctx.describe()}: precision")
        x, scale = ns.astype(x, wide), ns.astype(scale, wide)
    scaled = ns.divide(x, scale)
    if not precision and input_format(ctx, 0) == input_format(ctx, 1) == "bfloat16":
        scaled = ns.round_to_format(scaled, "bfloat16")   # as a bfloat16 division rounds
    zero = quantization_param(ctx, 2, ctx.shape(0), axis, block, "y_zero_point")
    if fmt in FLOAT8_FORMATS:
        # the zero point of a float8 type is 0 by the spec: only the rounding remains
        return ns.round_to_format(scaled, fmt, saturate=bool(ctx.attr("saturate")))
    if fmt == "float4_e2m1fn":
        if zero is not None:
            scaled = ns.add(scaled, zero)
        return ns.round_to_format(scaled, fmt, saturate=True)
    lowest, highest = integer_range(fmt, dtype)
    # float64 holds every rounded value and zero point exactly; larger ones saturate
    rounded = ns.astype(ns.rint(scaled), np.float64)
    if zero is not None:
        rounded = ns.add(rounded, ns.astype(zero, np.float64))
    return ns.astype(ns.clip(rounded, float(lowest), float(highest)), dtype)


@converter("DequantizeLinear", attrs={"axis": 1, "block_size": 0, "output_dtype": 0})
def dequantize_linear(ctx):
    ns, x = ctx.ns, ctx.input(0)
    fmt = input_format(ctx, 0)
    _check_quantized(ctx, fmt, ctx.dtype(0), "x")
    scale_dtype = ctx.dtype(1)
    if scale_dtype.kind != "f":
        raise ctx.invalid(f"x_scale must be floating-point, got {scale_dtype}")
    axis, block = _axis_and_block(ctx)
    scale = quantization_param(ctx, 1, ctx.shape(0), axis, block, "x_scale")
    zero = quantization_param(ctx, 2, ctx.shape(0), axis, block, "x_zero_point")
    if zero is not None and (input_format(ctx, 2) != fmt or ctx.dtype(2) != ctx.dtype(0)):
        raise ctx.invalid(f"x_zero_point's type ({input_format(ctx, 2) or ctx.dtype(2)}) "
                          f"must be x's ({fmt or ctx.dtype(0)})")
    # float32 holds every value of the 8- and 16-bit types (and the narrow ones) exactly;
    # int32 rounds to it, as in ONNX's reference
    wide = np.promote_types(np.float32, scale_dtype)
    shifted = ns.astype(x, wide)
    if zero is not None and fmt not in FLOAT8_FORMATS:   # float8's zero point is 0
        shifted = ns.subtract(shifted, ns.astype(zero, wide))
    y = ns.multiply(shifted, ns.astype(scale, wide))
    # the output has output_dtype's type, else the scale's (bfloat16 held rounded)
    given = int(ctx.attr("output_dtype") or 0)
    if given:
        out_format, out = onnx_format(given), onnx_dtype(given, f"{ctx.describe()}: "
                                                               "output_dtype")
    else:
        out_format, out = input_format(ctx, 1), scale_dtype
    if out_format == "float8_e8m0fnu":
        raise ctx.unsupported("a float8e8m0 output (the scale's type, without output_dtype) "
                              "is not supported: give output_dtype")
    return ns.astype(y, out) if out_format is None else ns.round_to_format(y, out_format)


@converter("DynamicQuantizeLinear")
def dynamic_quantize_linear(ctx):
    """uint8 ``y``, its scale and zero point, from the range of ``x`` widened to hold
    0 (ONNX's formula: the zero point is the rounded, clipped ``-min(x) / scale``)."""
    ns, x = ctx.ns, ctx.input(0)
    if ctx.dtype(0) != np.float32:
        raise ctx.invalid(f"x must be float32, got {ctx.dtype(0)}")
    if not np.prod(ctx.shape(0), dtype=np.int64):
        raise ctx.invalid(f"x of shape {ctx.shape(0)} is empty: it has no range")
    zero32 = np.float32(0)
    highest = ns.maximum(ns.max(x), zero32)
    lowest = ns.minimum(ns.min(x), zero32)
    span = ns.where(ns.equal(highest, lowest), np.float32(1), ns.subtract(highest, lowest))
    scale = ns.divide(span, np.float32(255))
    zero = ns.rint(ns.clip(ns.negative(ns.divide(lowest, scale)), 0.0, 255.0))
    y = ns.clip(ns.add(ns.rint(ns.divide(x, scale)), zero), 0.0, 255.0)
    return ns.astype(y, np.uint8), scale, ns.astype(zero, np.uint8)


__all__ = ["quantize_linear", "dequantize_linear", "dynamic_quantize_linear"]
