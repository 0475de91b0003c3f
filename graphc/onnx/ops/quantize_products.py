"""Converters of ONNX's integer products: MatMulInteger, ConvInteger, QLinearMatMul and
QLinearConv.

The operands, less their zero points, are exact integers: a matrix product runs in
int32 (ONNX's accumulator; NumPy's integer matmul is exact), a convolution in float64,
where every product and partial sum of 8-bit operands is an exact integer whatever the
summation order, so either gives the exact int32 result. QLinear* then requantize it:
``saturate(rint(acc * (scale_a * scale_b / scale_y)) + zero_y)``, the multiplier in
the scales' type and the product in float64, as ONNX's reference computes it.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["MatMulInteger"]
>>> node = NodeContext.for_test("MatMulInteger", []).node
>>> a, b = np.array([[1, 2]], np.uint8), np.array([[3], [4]], np.uint8)
>>> spec.fn(NodeContext(node, 10, [a, b, np.array(1, np.uint8)], {}, spec))
array([[4]], dtype=int32)
"""
from __future__ import annotations

import math

import numpy as np

from ..registry import converter
from .nn_conv import _CONV_ATTRS, _conv
from .nn_window import kernel_of, window
from .quantize_params import integer_range

_EIGHT_BITS = (np.dtype(np.int8), np.dtype(np.uint8))


def _eight_bit(ctx, i, what):
    value = ctx.input(i)
    if ctx.dtype(i) not in _EIGHT_BITS:
        kind = "a float8 type" if ctx.dtype(i).kind == "f" else str(ctx.dtype(i))
        if ctx.dtype(i).kind == "f":
            raise ctx.unsupported(f"{what} of {kind}: only int8 and uint8 are supported")
        raise ctx.invalid(f"{what} must be int8 or uint8, got {kind}")
    return value


def _shifted(ctx, i, zero_index, what, along, dtype=np.int32):
    """Input ``i`` as ``dtype`` less its zero point (input ``zero_index``, optional): one
    value, or (``along`` = ``(axis, length)``) one per slice along that axis of ``i``.
    """
    ns = ctx.ns
    x = ns.astype(_eight_bit(ctx, i, what), dtype)
    if not ctx.has_input(zero_index):
        return x
    if ctx.dtype(zero_index) != ctx.dtype(i):
        raise ctx.invalid(f"{what}'s zero point is {ctx.dtype(zero_index)}, {what} is "
                          f"{ctx.dtype(i)}: they must have one type")
    zero = ns.astype(ctx.input(zero_index), dtype)
    return ns.subtract(x, _per_slice(ctx, zero_index, zero, ctx.shape(i), along,
                                     f"{what}'s zero point"))


def _per_slice(ctx, i, value, shape, along, what):
    """``value`` (input ``i``) shaped to broadcast over ``shape``: one value, a 1-D one
    along ``along = (axis, length)``, or already of a broadcastable shape."""
    given, rank = ctx.shape(i), len(shape)
    if math.prod(given) == 1:
        return ctx.ns.reshape(value, ())
    axis, length = along
    if len(given) == 1 and given[0] == length and rank > 0:
        return ctx.ns.reshape(value, tuple(length if j == axis % rank else 1
                                           for j in range(rank)))
    try:
        if np.broadcast_shapes(given, shape) == tuple(shape):
            return value
    except ValueError:
        pass
    raise ctx.invalid(f"{what} of shape {given} must hold one value or one per slice "
                      f"({length}) along axis {axis} of shape {tuple(shape)}")


def _matmul_operands(ctx, a_index, b_index, zeros):
    """``a`` and ``b`` less their zero points (per tensor, per row of ``a``, per column
    of ``b``), as int32."""
    sa, sb = ctx.shape(a_index), ctx.shape(b_index)
    if not sa or not sb:
        raise ctx.invalid(f"a and b must have at least one axis, got shapes {sa} and {sb}")
    a = _shifted(ctx, a_index, zeros[0], "a", (-2, sa[-2] if len(sa) > 1 else 1))
    b = _shifted(ctx, b_index, zeros[1], "b", (-1, sb[-1]))
    if sa[-1] != (sb[-2] if len(sb) > 1 else sb[0]):
        raise ctx.invalid(f"a of shape {sa} and b of shape {sb} do not chain")
    return a, b


@converter("MatMulInteger")
def matmul_integer(ctx):
    a, b = _matmul_operands(ctx, 0, 1, (2, 3))
    return ctx.ns.matmul(a, b)


def _conv_operands(ctx, x_index, w_index, zeros, dtype):
    """``x`` and ``w`` less their zero points (``w``'s per output channel) as
    ``dtype``, the convolution's geometry checked as Conv's converter checks it."""
    xs, ws = ctx.shape(x_index), ctx.shape(w_index)
    if len(xs) < 3 or len(ws) != len(xs):
        raise ctx.invalid(f"the input (N, C, D1, ...) and the weight must have the same rank, "
                          f"at least 3; got input shape {xs}, weight shape {ws}")
    x = _shifted(ctx, x_index, zeros[0], "x", (1, xs[1]), dtype)
    w = _shifted(ctx, w_index, zeros[1], "w", (0, ws[0]), dtype)
    group = int(ctx.attr("group"))
    if group < 1 or xs[1] != ws[1] * group or ws[0] % group:
        raise ctx.invalid(f"group={group}: the input's {xs[1]} channels must be the weight's "
                          f"axis 1 ({ws[1]}) times group, and group must divide the weight's "
                          f"{ws[0]} output channels (input shape {xs}, weight shape {ws})")
    kernel = kernel_of(ctx, len(xs) - 2, ws)
    strides, dilations, pads = window(ctx, xs[2:], kernel)
    for n, k, d, p in zip(xs[2:], kernel, dilations, pads):
        if n + p[0] + p[1] < (k - 1) * d + 1:
            raise ctx.invalid(f"the kernel {kernel} (dilations {dilations}) is larger than the "
                              f"padded input: input shape {xs}, pads {pads}")
    return _conv(ctx.ns, x, w, strides, pads, dilations, group)


@converter("ConvInteger", attrs=_CONV_ATTRS)
def conv_integer(ctx):
    return ctx.ns.astype(_conv_operands(ctx, 0, 1, (2, 3), np.float64), np.int32)


def _requantized(ctx, acc, multiplier, zero_index, fallback_dtype):
    """``acc`` (exact integers) times ``multiplier``, in float64, rounded half to even,
    plus the output zero point (input ``zero_index``), saturated to its type. The spec
    (and onnxruntime) round before adding the zero point; onnx's reference adds it
    first, which differs only on exact ties with an odd zero point."""
    ns = ctx.ns
    y = ns.multiply(ns.astype(acc, np.float64), ns.astype(multiplier, np.float64))
    y = ns.rint(y)
    if ctx.has_input(zero_index):
        if math.prod(ctx.shape(zero_index)) != 1:
            raise ctx.invalid(f"the output zero point must hold one value, got shape "
                              f"{ctx.shape(zero_index)}")
        dtype = ctx.dtype(zero_index)
        if dtype not in _EIGHT_BITS:
            raise ctx.invalid(f"the output zero point must be int8 or uint8, got {dtype}")
        y = ns.add(y, ns.astype(ns.reshape(ctx.input(zero_index), ()), np.float64))
    else:
        dtype = fallback_dtype
    lowest, highest = integer_range(None, dtype)
    return ns.astype(ns.clip(y, float(lowest), float(highest)), dtype)


def _scale(ctx, i, what):
    if ctx.dtype(i).kind != "f":
        raise ctx.invalid(f"{what} must be floating-point, got {ctx.dtype(i)}")
    return ctx.input(i)


def _per_tensor(ctx, i, what):
    """Scale ``i`` (one value) as a 0-d value."""
    if math.prod(ctx.shape(i)) != 1:
        raise ctx.invalid(f"{what} must hold one value, got shape {ctx.shape(i)}")
    return ctx.ns.reshape(_scale(ctx, i, what), ())


@converter("QLinearMatMul")
def qlinear_matmul(ctx):
    ns = ctx.ns
    a, b = _matmul_operands(ctx, 0, 3, (2, 5))
    sa, sb = ctx.shape(0), ctx.shape(3)
    a_scale = _per_slice(ctx, 1, _scale(ctx, 1, "a_scale"), sa,
                         (-2, sa[-2] if len(sa) > 1 else 1), "a_scale")
    b_scale = _per_slice(ctx, 4, _scale(ctx, 4, "b_scale"), sb, (-1, sb[-1]), "b_scale")
    multiplier = ns.divide(ns.multiply(a_scale, b_scale), _per_tensor(ctx, 6, "y_scale"))
    return _requantized(ctx, ns.matmul(a, b), multiplier, 7, ctx.dtype(0))


@converter("QLinearConv", attrs=_CONV_ATTRS)
def qlinear_conv(ctx):
    ns = ctx.ns
    acc = _conv_operands(ctx, 0, 3, (2, 5), np.float64)
    channels, rank = ctx.shape(3)[0], len(ctx.shape(0))
    if ctx.has_input(8):
        if ctx.dtype(8) != np.int32 or ctx.shape(8) != (channels,):
            raise ctx.invalid(f"the bias must be int32 of shape ({channels},), got "
                              f"{ctx.dtype(8)} of shape {ctx.shape(8)}")
        acc = ns.add(acc, ns.reshape(ns.astype(ctx.input(8), np.float64),
                                     (channels,) + (1,) * (rank - 2)))
    x_scale = _per_tensor(ctx, 1, "x_scale")
    w_scale = _scale(ctx, 4, "w_scale")
    if math.prod(ctx.shape(4)) == 1:
        w_scale = ns.reshape(w_scale, ())
    elif ctx.shape(4) == (channels,):      # per output channel
        w_scale = ns.reshape(w_scale, (channels,) + (1,) * (rank - 2))
    else:
        raise ctx.invalid(f"w_scale must hold one value or one per output channel "
                          f"({channels}), got shape {ctx.shape(4)}")
    multiplier = ns.divide(ns.multiply(x_scale, w_scale), _per_tensor(ctx, 6, "y_scale"))
    return _requantized(ctx, acc, multiplier, 7, ctx.dtype(0))
