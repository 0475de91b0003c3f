"""Exporters of the integer bit kinds (``bitwise_and``/``or``/``xor``, ``invert``,
``left_shift``, ``right_shift``): ONNX's BitwiseAnd/Or/Xor/Not (opset 18) and BitShift.

ONNX's BitShift takes unsigned integers only and leaves shifts outside ``[0, bits)``
unspecified, while NumPy's are defined (0, or -1 for a right shift of a negative
value) and its right shift of a signed value is arithmetic. So a shift is done on
the unsigned bits, with the amount clamped into range and the result chosen by
``Where``; an arithmetic right shift of a negative value is ``~((~x) >> s)``.

Example: ``EXPORTERS["bitwise_and"] = bitwise_exporter("BitwiseAnd", on_bool="And")``
"""
from __future__ import annotations

import numpy as np

from .export_ops import _onnx_type, _operands


def _cast_name(ctx, name, dtype):
    return ctx.op("Cast", [name], to=_onnx_type(dtype))


def bitwise_exporter(onnx_op: str, on_bool: str):
    """The exporter of a bitwise binary: ``onnx_op`` on integers, ``on_bool`` (the
    logical operator) on booleans.

    Example: ``bitwise_exporter("BitwiseOr", on_bool="Or")``
    """
    def export(ctx, op, ins, out):
        a, b = _operands(ctx, ins, out.dtype)
        return ctx.op(on_bool if out.dtype == np.bool_ else onnx_op, [a, b], out=out.name)
    export.__name__ = f"export_{onnx_op}"
    return export


def invert_export(ctx, op, ins, out):
    x = ctx.cast(ins[0], out.dtype)
    return ctx.op("Not" if out.dtype == np.bool_ else "BitwiseNot", [x], out=out.name)


def _shift_parts(ctx, ins, out):
    """The value and the amount in ``out``'s dtype, whether the amount is in
    ``[0, bits)``, the amount clamped to 0 where it is not, as unsigned bits of the
    same width, and that unsigned dtype. ``Where`` stays in ``out``'s dtype
    (onnxruntime has none for uint64)."""
    dtype = np.dtype(out.dtype)
    unsigned = np.dtype(f"u{dtype.itemsize}")
    x, s = _operands(ctx, ins, dtype)
    zero = ctx.scalar(0, dtype)
    valid = ctx.op("Less", [s, ctx.scalar(dtype.itemsize * 8, dtype)])
    if dtype.kind == "i":
        valid = ctx.op("And", [valid, ctx.op("GreaterOrEqual", [s, zero])])
    amount = ctx.op("Where", [valid, s, zero])
    return x, valid, _as(ctx, amount, dtype, unsigned), unsigned


def _as(ctx, name, dtype, target):
    return name if np.dtype(dtype) == np.dtype(target) else _cast_name(ctx, name, target)


def left_shift_export(ctx, op, ins, out):
    x, valid, amount, unsigned = _shift_parts(ctx, ins, out)
    shifted = ctx.op("BitShift", [_as(ctx, x, out.dtype, unsigned), amount], direction="LEFT")
    shifted = _as(ctx, shifted, unsigned, out.dtype)
    return ctx.op("Where", [valid, shifted, ctx.scalar(0, out.dtype)], out=out.name)


def right_shift_export(ctx, op, ins, out):
    x, valid, amount, unsigned = _shift_parts(ctx, ins, out)
    negative = None
    if np.dtype(out.dtype).kind == "i":  # arithmetic: shift the complement of a negative x
        negative = ctx.op("Less", [x, ctx.scalar(0, out.dtype)])
        x = ctx.op("Where", [negative, ctx.op("BitwiseNot", [x]), x])
    shifted = ctx.op("BitShift", [_as(ctx, x, out.dtype, unsigned), amount], direction="RIGHT")
    shifted = _as(ctx, shifted, unsigned, out.dtype)
    if negative is None:
        return ctx.op("Where", [valid, shifted, ctx.scalar(0, out.dtype)], out=out.name)
    shifted = ctx.op("Where", [valid, shifted, ctx.scalar(0, out.dtype)])
    return ctx.op("Where", [negative, ctx.op("BitwiseNot", [shifted]), shifted], out=out.name)


__all__ = ["bitwise_exporter", "invert_export", "left_shift_export", "right_shift_export"]
