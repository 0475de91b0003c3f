"""What ONNX's quantization converters share: a scale or zero point shaped to broadcast
over the quantized tensor (per tensor, per axis or per block), the saturation range of
an integer type, and the narrow format of an input.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> ctx = NodeContext.for_test("DequantizeLinear", [np.zeros((2, 4)), np.array([1., 2.])],
...                            {"axis": 1, "block_size": 2})
>>> quantization_param(ctx, 1, (2, 4), 1, 2, "x_scale")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
graphc.onnx.errors.OnnxModelError: ...x_scale of shape (2,) must have the input's rank 2...
>>> quantization_param(ctx, 1, (2, 4), 1, 0, "x_scale")
Traceback (most recent call last):
...
graphc.onnx.errors.OnnxModelError: ...one per slice along axis 1: shape (4,)... (or set block_size)
>>> integer_range("int4", np.dtype("int8")), integer_range(None, np.dtype("uint16"))
((-8, 7), (0, 65535))
"""
from __future__ import annotations

import math

import numpy as np

from ...type.formats import NARROW_FORMATS

#: the float8 formats, whose zero point is 0 and whose casts may saturate
FLOAT8_FORMATS = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")


def integer_range(fmt, dtype) -> tuple:
    """``(lowest, highest)`` of an integer quantized type: a narrow format's, else the
    NumPy dtype's. Example: ``integer_range(None, np.dtype("int8")) == (-128, 127)``"""
    if fmt is not None:
        facts = NARROW_FORMATS[fmt]
        return int(facts.lowest), int(facts.highest)
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def input_format(ctx, i):
    """The narrow format (``graphc.type.formats`` name) of input ``i``'s ONNX type,
    ``None`` for a type NumPy holds natively (or an absent input).
    Example: ``input_format(ctx, 2) == "uint4"``"""
    return ctx.format(i) if ctx.has_input(i) else None


def quantization_param(ctx, i, x_shape, axis, block, what):
    """Input ``i`` (a scale or a zero point) shaped to broadcast over an input of shape
    ``x_shape``: one value (per tensor), a 1-D one along ``axis`` (per axis), or with
    ``block`` > 0 one per ``block`` elements along ``axis`` (the input's rank, the
    same shape elsewhere). ``None`` when the input is absent."""
    value = ctx.input(i, optional=True)
    if value is None:
        return None
    ns, shape, rank = ctx.ns, ctx.shape(i), len(x_shape)
    if math.prod(shape) == 1:
        return ns.reshape(value, ())
    if not -rank <= axis < rank:
        raise ctx.invalid(f"axis {axis} is out of range for an input of rank {rank} "
                          f"({what} has shape {shape}: per-axis or blocked quantization)")
    axis %= rank
    if not block:
        if shape != (x_shape[axis],):
            raise ctx.invalid(f"{what} of shape {shape} must hold one value, or one per "
                              f"slice along axis {axis}: shape ({x_shape[axis]},) for the "
                              f"input's shape {tuple(x_shape)} (or set block_size)")
        return ns.reshape(value, tuple(x_shape[axis] if j == axis else 1
                                       for j in range(rank)))
    where = (f"block_size={block} along axis {axis} of the input's shape "
             f"{tuple(x_shape)}")
    if len(shape) != rank:
        raise ctx.invalid(f"{what} of shape {shape} must have the input's rank {rank} for "
                          f"blocked quantization ({where})")
    want = tuple(-(-x_shape[j] // block) if j == axis else x_shape[j] for j in range(rank))
    if shape != want:
        raise ctx.invalid(f"{what} of shape {shape} must have shape {want}: one value per "
                          f"block ({where})")
    spread = ns.repeat(value, block, axis=axis)
    if shape[axis] * block != x_shape[axis]:     # a last, shorter block
        spread = ns.getitem(spread, (slice(None),) * axis + (slice(0, x_shape[axis]),))
    return spread
