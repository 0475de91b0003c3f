"""The exporters: ``EXPORTERS[kind](ctx, op, ins, out) -> name`` emits the ONNX nodes
computing one graphc op and returns the name of the value holding its result.

``ins`` and ``out`` are :class:`~graphc.onnx.export.Value` (name, shape, dtype);
``out.name`` is the name the result should get (exporters pass it as ``out=`` of
their last node). graphc follows NumPy's type promotion while ONNX operators take
operands of one type, so exporters cast operands to the dtype NumPy computes in.
Elementwise, reduction and linear-algebra kinds are here; shape and neural kinds
are in :mod:`graphc.onnx.export_shape`.

Example::

        def _exp(ctx, op, ins, out):
        return ctx.op("Exp", [ctx.cast(ins[0], out.dtype)], out=out.name)
"""
from __future__ import annotations

import math
import string

import numpy as np

from ..type.program import operand
from .errors import OnnxUnsupported
from .export import Value

#: kind -> exporter function; filled by the op definitions (:mod:`graphc.ops`, their ``onnx``)
EXPORTERS: dict = {}

#: kind -> why it cannot be exported (for the error message); filled the same way
REFUSED: dict = {}


def unsupported(ctx, what: str) -> OnnxUnsupported:
    """An error naming the graphc node being exported."""
    return OnnxUnsupported(f"onnx export: {ctx.where}: {what}")


def _exact(dtype) -> bool:
    return np.dtype(dtype).kind in "biu"


# -- unary --------------------------------------------------------------------------------------
def unary_exporter(onnx_op: str, identity_on: str = ""):
    """The exporter of a one-input kind that is the ONNX operator ``onnx_op`` (on
    operands cast to the result dtype), or ``Identity`` for results of the dtype
    kinds ``identity_on`` (floor of an integer; ONNX's operators take floats only).

    Example: ``unary_exporter("Floor", identity_on="biu")``
    """
    def export(ctx, op, ins, out):
        x = ctx.cast(ins[0], out.dtype)
        if out.dtype.kind in identity_on:
            return ctx.op("Identity", [x], out=out.name)
        return ctx.op(onnx_op, [x], out=out.name)
    export.__name__ = f"export_{onnx_op}"
    return export


def logical_not_export(ctx, op, ins, out):
    return ctx.op("Not", [ctx.cast(ins[0], np.bool_)], out=out.name)


def log1p_export(ctx, op, ins, out):
    x = ctx.cast(ins[0], out.dtype)
    return ctx.op("Log", [ctx.op("Add", [x, ctx.scalar(1, out.dtype)])], out=out.name)


def expm1_export(ctx, op, ins, out):
    x = ctx.cast(ins[0], out.dtype)
    return ctx.op("Sub", [ctx.op("Exp", [x]), ctx.scalar(1, out.dtype)], out=out.name)


def square_export(ctx, op, ins, out):
    x = ctx.cast(ins[0], out.dtype)
    return ctx.op("Mul", [x, x], out=out.name)


def reciprocal_export(ctx, op, ins, out):
    x = ctx.cast(ins[0], out.dtype)
    if _exact(out.dtype):   # NumPy's integer 1 / x truncates, as ONNX's integer Div
        return ctx.op("Div", [ctx.scalar(1, out.dtype), x], out=out.name)
    return ctx.op("Reciprocal", [x], out=out.name)


def relu_export(ctx, op, ins, out):
    x = ins[0].name
    if out.dtype.kind == "f":
        return ctx.op("Relu", [x], out=out.name)
    if out.dtype == np.bool_:
        return ctx.op("Identity", [x], out=out.name)
    return ctx.op("Max", [x, ctx.scalar(0, out.dtype)], out=out.name)


def astype_export(ctx, op, ins, out):
    return ctx.op("Cast", [ins[0].name], out=out.name, to=_onnx_type(out.dtype))


def clip_export(ctx, op, ins, out):
    x = ctx.cast(ins[0], out.dtype)
    lo, hi = op["lo"], op["hi"]
    bounds = ["" if v is None else ctx.scalar(v, out.dtype) for v in (lo, hi)]
    while bounds and bounds[-1] == "":
        bounds.pop()
    return ctx.op("Clip", [x] + bounds, out=out.name)


# -- binary -------------------------------------------------------------------------------------
def _operands(ctx, ins, dtype):
    return [ctx.cast(v, dtype) for v in ins]


def arithmetic_exporter(onnx_op: str, on_bool: str = None):
    """The exporter of a broadcasting arithmetic kind: ``onnx_op`` on operands in the
    result dtype; on booleans NumPy's arithmetic is logic (``on_bool``, e.g. ``Or``
    for ``add``), and a kind without it refuses booleans.

    Example: ``arithmetic_exporter("Add", on_bool="Or")``
    """
    def export(ctx, op, ins, out):
        a, b = _operands(ctx, ins, out.dtype)
        if out.dtype == np.bool_:
            if on_bool is None:
                raise unsupported(ctx, f"{op.kind} of booleans")
            return ctx.op(on_bool, [a, b], out=out.name)
        return ctx.op(onnx_op, [a, b], out=out.name)
    export.__name__ = f"export_{onnx_op}"
    return export


def comparison_exporter(onnx_op: str, negated: bool = False):
    """The exporter of a comparison: ``onnx_op`` in the operands' common dtype
    (booleans ordered as int32: ONNX orders numbers only), ``Not`` of it if
    ``negated`` (``not_equal`` is ``Not(Equal)``).

    Example: ``comparison_exporter("Less")``
    """
    def export(ctx, op, ins, out):
        common = np.result_type(*[v.dtype for v in ins])
        if common == np.bool_ and onnx_op != "Equal":
            common = np.dtype(np.int32)
        a, b = _operands(ctx, ins, common)
        if negated:
            return ctx.op("Not", [ctx.op(onnx_op, [a, b])], out=out.name)
        return ctx.op(onnx_op, [a, b], out=out.name)
    export.__name__ = f"export_{onnx_op}"
    return export


def logical_exporter(onnx_op: str):
    """The exporter of a logical binary: ``onnx_op`` on truth values.

    Example: ``logical_exporter("Xor")``
    """
    def export(ctx, op, ins, out):
        a, b = _operands(ctx, ins, np.bool_)
        return ctx.op(onnx_op, [a, b], out=out.name)
    export.__name__ = f"export_{onnx_op}"
    return export


def _fmod_adjusted(ctx, a, b, dtype):
    """NumPy's float ``(remainder, a - remainder)``: ``fmod`` moved to the sign of ``b``."""
    mod = ctx.op("Mod", [a, b], fmod=1)
    zero = ctx.scalar(0, dtype)
    signs_differ = ctx.op("Xor", [ctx.op("Less", [b, zero]), ctx.op("Less", [mod, zero])])
    fix = ctx.op("And", [ctx.op("Not", [ctx.op("Equal", [mod, zero])]), signs_differ])
    return mod, fix


def remainder_export(ctx, op, ins, out):
    a, b = _operands(ctx, ins, out.dtype)
    if _exact(out.dtype):
        return ctx.op("Mod", [a, b], out=out.name, fmod=0)   # Python's sign rule, as NumPy
    mod, fix = _fmod_adjusted(ctx, a, b, out.dtype)
    return ctx.op("Where", [fix, ctx.op("Add", [mod, b]), mod], out=out.name)


def floor_divide_export(ctx, op, ins, out):
    a, b = _operands(ctx, ins, out.dtype)
    if _exact(out.dtype):  # (a - a mod b) / b divides exactly, so truncation is flooring
        mod = ctx.op("Mod", [a, b], fmod=0)
        return ctx.op("Div", [ctx.op("Sub", [a, mod]), b], out=out.name)
    # NumPy's npy_divmod: exact where floor(a / b) rounds (1 // 0.1 is 9, not 10)
    mod, fix = _fmod_adjusted(ctx, a, b, out.dtype)
    div = ctx.op("Div", [ctx.op("Sub", [a, mod]), b])
    div = ctx.op("Where", [fix, ctx.op("Sub", [div, ctx.scalar(1, out.dtype)]), div])
    floor = ctx.op("Floor", [div])
    up = ctx.op("Greater", [ctx.op("Sub", [div, floor]), ctx.scalar(0.5, out.dtype)])
    floor = ctx.op("Where", [up, ctx.op("Add", [floor, ctx.scalar(1, out.dtype)]), floor])
    # b == 0: NumPy gives a / b (inf or NaN)
    zero_b = ctx.op("Equal", [b, ctx.scalar(0, out.dtype)])
    return ctx.op("Where", [zero_b, ctx.op("Div", [a, b]), floor], out=out.name)


def _sign_bit(ctx, v, dtype):
    """Whether ``v`` is negative or -0 (``1 / -0`` is ``-inf``)."""
    zero = ctx.scalar(0, dtype)
    reciprocal = ctx.op("Div", [ctx.scalar(1, dtype), v])
    return ctx.op("Or", [ctx.op("Less", [v, zero]), ctx.op("Less", [reciprocal, zero])])


def arctan2_export(ctx, op, ins, out):
    """atan(y / x), turned by pi where x is negative, +-pi/2 where x is zero; at the
    origin NumPy's signed results: +-0 where x is +0, +-pi where x is -0. Two infinite
    operands give NaN (NumPy: an odd multiple of pi/4)."""
    y, x = _operands(ctx, ins, out.dtype)
    zero = ctx.scalar(0, out.dtype)
    base = ctx.op("Atan", [ctx.op("Div", [y, x])])
    turn = ctx.op("Where", [_sign_bit(ctx, y, out.dtype), ctx.scalar(-math.pi, out.dtype),
                            ctx.scalar(math.pi, out.dtype)])
    base = ctx.op("Where", [ctx.op("Less", [x, zero]), ctx.op("Add", [base, turn]), base])
    # y / +-0 is +-inf whichever zero x is: there the angle is +-pi/2 by y's sign alone
    half = ctx.op("Where", [_sign_bit(ctx, y, out.dtype), ctx.scalar(-math.pi / 2, out.dtype),
                            ctx.scalar(math.pi / 2, out.dtype)])
    half = ctx.op("Where", [ctx.op("Equal", [y, y]), half, y])     # a NaN y stays NaN
    on_axis = ctx.op("Equal", [x, zero])
    base = ctx.op("Where", [on_axis, half, base])
    origin = ctx.op("And", [on_axis, ctx.op("Equal", [y, zero])])
    at_origin = ctx.op("Where", [_sign_bit(ctx, x, out.dtype), turn, y])
    return ctx.op("Where", [origin, at_origin, base], out=out.name)


def hypot_export(ctx, op, ins, out):
    a, b = _operands(ctx, ins, out.dtype)
    total = ctx.op("Add", [ctx.op("Mul", [a, a]), ctx.op("Mul", [b, b])])
    return ctx.op("Sqrt", [total], out=out.name)


def where_export(ctx, op, ins, out):
    cond = ctx.cast(ins[0], np.bool_)
    a, b = _operands(ctx, ins[1:], out.dtype)
    return ctx.op("Where", [cond, a, b], out=out.name)


# -- optimiser-made elementwise kinds (an optimised graph exports too) -----------------------------
def fma_export(ctx, op, ins, out):
    a, b, c = _operands(ctx, ins, out.dtype)
    return ctx.op("Add", [ctx.op("Mul", [a, b]), c], out=out.name)


def trunc_export(ctx, op, ins, out):
    """ONNX has no Trunc: Floor above zero, Ceil below."""
    x = ctx.cast(ins[0], out.dtype)
    negative = ctx.op("Less", [x, ctx.scalar(0, out.dtype)])
    return ctx.op("Where", [negative, ctx.op("Ceil", [x]), ctx.op("Floor", [x])],
                  out=out.name)


def fused_adagrad_export(ctx, op, ins, out):
    v = ctx.cast(ins[0], out.dtype)
    root = ctx.op("Sqrt", [ctx.op("Add", [v, ctx.scalar(op["eps"], out.dtype)])])
    return ctx.op("Div", [ctx.scalar(op["lr"], out.dtype), root], out=out.name)


def fused_export(ctx, op, ins, out):
    from ..shape.rules import infer

    results = []
    program = op["program"]
    for k, (inner, args) in enumerate(program):
        operands = [operand(a, ins, results) for a in args]
        shape, dtype = infer(inner, operands)
        last = k == len(program) - 1
        step = Value(out.name if last and dtype == out.dtype else ctx.fresh(inner.kind),
                     shape, dtype)
        name = EXPORTERS[inner.kind](ctx, inner, operands, step)
        # each instruction writes into the output's memory: its dtype and shape
        name = ctx.cast(Value(name, shape, dtype), out.dtype)
        if shape != out.shape:
            name = ctx.op("Expand", [name, ctx.ints(out.shape)])
        results.append(Value(name, out.shape, out.dtype))
    return results[-1].name


# -- reductions ---------------------------------------------------------------------------------
def _reduce(ctx, onnx_op, x, axes, keepdims, out_name=None):
    inputs = [x] if axes is None else [x, ctx.ints(axes)]
    return ctx.op(onnx_op, inputs, out=out_name, keepdims=int(keepdims))


def reduction_exporter(onnx_op: str):
    """The exporter of a reduction that is ``onnx_op`` (``ReduceSum``...).

    Example: ``reduction_exporter("ReduceMax")``
    """
    def export(ctx, op, ins, out):
        axes, keep = op["axis"], op["keepdims"]
        if axes == ():   # an empty axes input would reduce every axis
            return ctx.op("Identity", [ctx.cast(ins[0], out.dtype)], out=out.name)
        if onnx_op in ("ReduceMax", "ReduceMin") and out.dtype == np.bool_:
            x = ctx.cast(ins[0], np.int32)        # ONNX 18 orders numbers only
            reduced = _reduce(ctx, onnx_op, x, axes, keep)
            return ctx.op("Cast", [reduced], out=out.name, to=_onnx_type(np.bool_))
        x = ctx.cast(ins[0], out.dtype)  # NumPy sums int32 in int64, means ints in float64
        return _reduce(ctx, onnx_op, x, axes, keep, out.name)
    export.__name__ = f"export_{onnx_op}"
    return export


def any_all_export(ctx, op, ins, out):
    # count the true (any) or false (all) elements: right for empty slices too
    x = ctx.cast(ins[0], np.bool_)
    if op.kind == "all":
        x = ctx.op("Not", [x])
    axes = op["axis"]
    counted = ctx.cast(Value(x, ins[0].shape, np.dtype(np.bool_)), np.int64)
    if axes != ():
        counted = _reduce(ctx, "ReduceSum", counted, axes, op["keepdims"])
    test = "Greater" if op.kind == "any" else "Equal"
    return ctx.op(test, [counted, ctx.scalar(0, np.int64)], out=out.name)


def arg_reduction_export(ctx, op, ins, out):
    x = ins[0]
    name = x.name if x.dtype != np.bool_ else ctx.cast(x, np.int32)
    axes, keep = op["axis"], op["keepdims"]
    onnx_op = "ArgMax" if op.kind == "argmax" else "ArgMin"
    if axes is None:    # over the flattened array
        flat = ctx.op("Reshape", [name, ctx.ints([-1])])
        result = ctx.op(onnx_op, [flat], axis=0, keepdims=0, select_last_index=0)
        result = ctx.op("Reshape", [result, ctx.ints(out.shape)])
    else:
        result = ctx.op(onnx_op, [name], axis=axes[0], keepdims=int(keep), select_last_index=0)
    result = ctx.cast(Value(result, out.shape, np.dtype(np.int64)), out.dtype)
    return result


# -- linear algebra -----------------------------------------------------------------------------
def _transposed(ctx, value, flag):
    if not flag:
        return value
    perm = list(range(len(value.shape)))
    perm[-2:] = perm[-1], perm[-2]
    shape = value.shape[:-2] + (value.shape[-1], value.shape[-2])
    return Value(ctx.op("Transpose", [value.name], perm=perm), shape, value.dtype)


def _via_numbers(ctx, out, compute):
    """``compute(dtype) -> name`` run in int64 when ``out`` is boolean (a sum of
    products of booleans is their logical or of ands)."""
    if out.dtype != np.bool_:
        return compute(out.dtype, out.name)
    counted = compute(np.dtype(np.int64), None)
    return ctx.op("Cast", [counted], out=out.name, to=_onnx_type(np.bool_))


def matmul_export(ctx, op, ins, out):
    a = _transposed(ctx, ins[0], op.get("trans_a"))
    b = _transposed(ctx, ins[1], op.get("trans_b"))
    return _via_numbers(ctx, out, lambda dtype, name: ctx.op(
        "MatMul", _operands(ctx, [a, b], dtype), out=name))


def dot_export(ctx, op, ins, out):
    a, b = ins
    letters = iter(string.ascii_letters)
    sa = "".join(next(letters) for _ in a.shape)
    sb = "".join(next(letters) for _ in b.shape)
    shared = sa[-1]
    sb = sb[:-2] + shared + sb[-1] if len(b.shape) > 1 else shared
    rest = sb[:-2] + sb[-1] if len(b.shape) > 1 else ""
    equation = f"{sa},{sb}->{sa[:-1]}{rest}"
    return _via_numbers(ctx, out, lambda dtype, name: ctx.op(
        "Einsum", _operands(ctx, ins, dtype), out=name, equation=equation))


def einsum_export(ctx, op, ins, out):
    return _via_numbers(ctx, out, lambda dtype, name: ctx.op(
        "Einsum", _operands(ctx, ins, dtype), out=name, equation=op["subscripts"]))


def _onnx_type(dtype):
    from .export import onnx_type

    return onnx_type(dtype)


__all__ = ["EXPORTERS", "REFUSED", "unsupported", "unary_exporter", "arithmetic_exporter",
           "comparison_exporter", "logical_exporter", "reduction_exporter"]
