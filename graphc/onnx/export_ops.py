"""The exporters: ``EXPORTERS[kind](ctx, op, ins, out) -> name`` emits the ONNX nodes
computing one graphc op and returns the name of the value holding its result.

``ins`` and ``out`` are :class:`~graphc.onnx.export.Value` (name, shape, dtype);
``out.name`` is the name the result should get (exporters pass it as ``out=`` of
their last node). graphc follows NumPy's type promotion while ONNX operators take
operands of one type, so exporters cast operands to the dtype NumPy computes in.
Elementwise, reduction and linear-algebra kinds are here; shape and neural kinds
are in :mod:`graphc.onnx.export_shape`.

Example::

    @exporter("exp")
    def _exp(ctx, op, ins, out):
        return ctx.op("Exp", [ctx.cast(ins[0], out.dtype)], out=out.name)
"""
from __future__ import annotations

import math
import string

import numpy as np

from .errors import OnnxUnsupported
from .export import Value

#: kind -> exporter function
EXPORTERS: dict = {}

#: kind -> why it cannot be exported (for the error message)
REFUSED = {
    **{k: "a random draw, redrawn on every run; ONNX export covers deterministic inference "
          "graphs" for k in ("random_uniform", "random_normal", "random_bernoulli")},
    "delay": "it calls a Python function, which ONNX cannot hold",
    **{k: "a gradient (training) op; ONNX export covers inference graphs"
       for k in ("conv2d_backward_input", "conv2d_backward_kernel", "max_pool2d_backward",
                 "avg_pool2d_backward", "lrn_backward")},
    **{k: "made by the optimiser's lowering; export the graph as written (Executable.source)"
       for k in ("im2col", "col2im")},
}


def exporter(*kinds: str):
    """Register the decorated function as the exporter of each of ``kinds``.

    Example: ``@exporter("tanh")`` above ``def _tanh(ctx, op, ins, out): ...``
    """
    def register(fn):
        for kind in kinds:
            if kind in EXPORTERS:
                raise ValueError(f"ONNX exporter for {kind!r} registered twice")
            EXPORTERS[kind] = fn
        return fn
    return register


def unsupported(ctx, what: str) -> OnnxUnsupported:
    """An error naming the graphc node being exported."""
    return OnnxUnsupported(f"onnx export: {ctx.where}: {what}")


def _exact(dtype) -> bool:
    return np.dtype(dtype).kind in "biu"


# -- unary --------------------------------------------------------------------------------------
_UNARY = {"negative": "Neg", "absolute": "Abs", "sign": "Sign", "exp": "Exp", "log": "Log",
          "sqrt": "Sqrt", "sin": "Sin", "cos": "Cos", "tan": "Tan", "tanh": "Tanh",
          "floor": "Floor", "ceil": "Ceil", "round": "Round", "erf": "Erf",
          "sigmoid": "Sigmoid", "copy": "Identity"}
#: kinds that leave integers and booleans unchanged (their ONNX ops take floats only)
_IDENTITY_ON_EXACT = {"floor", "ceil", "round", "copy"}


@exporter(*_UNARY)
def _unary(ctx, op, ins, out):
    x = ctx.cast(ins[0], out.dtype)
    if _exact(out.dtype) and (op.kind in _IDENTITY_ON_EXACT or
                              (op.kind == "absolute" and out.dtype == np.bool_)):
        return ctx.op("Identity", [x], out=out.name)
    return ctx.op(_UNARY[op.kind], [x], out=out.name)


@exporter("logical_not")
def _logical_not(ctx, op, ins, out):
    return ctx.op("Not", [ctx.cast(ins[0], np.bool_)], out=out.name)


@exporter("log1p", "expm1")
def _log1p_expm1(ctx, op, ins, out):
    x = ctx.cast(ins[0], out.dtype)
    one = ctx.scalar(1, out.dtype)
    if op.kind == "log1p":
        return ctx.op("Log", [ctx.op("Add", [x, one])], out=out.name)
    return ctx.op("Sub", [ctx.op("Exp", [x]), one], out=out.name)


@exporter("square")
def _square(ctx, op, ins, out):
    x = ctx.cast(ins[0], out.dtype)
    return ctx.op("Mul", [x, x], out=out.name)


@exporter("reciprocal")
def _reciprocal(ctx, op, ins, out):
    x = ctx.cast(ins[0], out.dtype)
    if _exact(out.dtype):   # NumPy's integer 1 / x truncates, as ONNX's integer Div
        return ctx.op("Div", [ctx.scalar(1, out.dtype), x], out=out.name)
    return ctx.op("Reciprocal", [x], out=out.name)


@exporter("relu")
def _relu(ctx, op, ins, out):
    x = ins[0].name
    if out.dtype.kind == "f":
        return ctx.op("Relu", [x], out=out.name)
    if out.dtype == np.bool_:
        return ctx.op("Identity", [x], out=out.name)
    return ctx.op("Max", [x, ctx.scalar(0, out.dtype)], out=out.name)


@exporter("astype")
def _astype(ctx, op, ins, out):
    return ctx.op("Cast", [ins[0].name], out=out.name, to=_onnx_type(out.dtype))


@exporter("clip")
def _clip(ctx, op, ins, out):
    x = ctx.cast(ins[0], out.dtype)
    lo, hi = op["lo"], op["hi"]
    bounds = ["" if v is None else ctx.scalar(v, out.dtype) for v in (lo, hi)]
    while bounds and bounds[-1] == "":
        bounds.pop()
    return ctx.op("Clip", [x] + bounds, out=out.name)


# -- binary -------------------------------------------------------------------------------------
_ARITHMETIC = {"add": "Add", "subtract": "Sub", "multiply": "Mul", "divide": "Div",
               "power": "Pow", "maximum": "Max", "minimum": "Min"}
#: NumPy's arithmetic on booleans is logic
_BOOL_ARITHMETIC = {"add": "Or", "multiply": "And", "maximum": "Or", "minimum": "And"}
_COMPARISONS = {"equal": "Equal", "less": "Less", "less_equal": "LessOrEqual",
                "greater": "Greater", "greater_equal": "GreaterOrEqual"}
_LOGICAL = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}


def _operands(ctx, ins, dtype):
    return [ctx.cast(v, dtype) for v in ins]


@exporter(*_ARITHMETIC)
def _arithmetic(ctx, op, ins, out):
    a, b = _operands(ctx, ins, out.dtype)
    if out.dtype == np.bool_:
        if op.kind not in _BOOL_ARITHMETIC:
            raise unsupported(ctx, f"{op.kind} of booleans")
        return ctx.op(_BOOL_ARITHMETIC[op.kind], [a, b], out=out.name)
    return ctx.op(_ARITHMETIC[op.kind], [a, b], out=out.name)


@exporter(*_COMPARISONS, "not_equal")
def _comparison(ctx, op, ins, out):
    common = np.result_type(*[v.dtype for v in ins])
    if common == np.bool_ and op.kind not in ("equal", "not_equal"):
        common = np.dtype(np.int32)   # ONNX orders numbers only
    a, b = _operands(ctx, ins, common)
    if op.kind == "not_equal":
        return ctx.op("Not", [ctx.op("Equal", [a, b])], out=out.name)
    return ctx.op(_COMPARISONS[op.kind], [a, b], out=out.name)


@exporter(*_LOGICAL)
def _logical(ctx, op, ins, out):
    a, b = _operands(ctx, ins, np.bool_)
    return ctx.op(_LOGICAL[op.kind], [a, b], out=out.name)


def _fmod_adjusted(ctx, a, b, dtype):
    """NumPy's float ``(remainder, a - remainder)``: ``fmod`` moved to the sign of ``b``."""
    mod = ctx.op("Mod", [a, b], fmod=1)
    zero = ctx.scalar(0, dtype)
    signs_differ = ctx.op("Xor", [ctx.op("Less", [b, zero]), ctx.op("Less", [mod, zero])])
    fix = ctx.op("And", [ctx.op("Not", [ctx.op("Equal", [mod, zero])]), signs_differ])
    return mod, fix


@exporter("remainder")
def _remainder(ctx, op, ins, out):
    a, b = _operands(ctx, ins, out.dtype)
    if _exact(out.dtype):
        return ctx.op("Mod", [a, b], out=out.name, fmod=0)   # Python's sign rule, as NumPy
    mod, fix = _fmod_adjusted(ctx, a, b, out.dtype)
    return ctx.op("Where", [fix, ctx.op("Add", [mod, b]), mod], out=out.name)


@exporter("floor_divide")
def _floor_divide(ctx, op, ins, out):
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


@exporter("arctan2")
def _arctan2(ctx, op, ins, out):
    y, x = _operands(ctx, ins, out.dtype)
    zero = ctx.scalar(0, out.dtype)
    base = ctx.op("Atan", [ctx.op("Div", [y, x])])
    turn = ctx.op("Where", [ctx.op("Less", [y, zero]), ctx.scalar(-math.pi, out.dtype),
                            ctx.scalar(math.pi, out.dtype)])
    base = ctx.op("Where", [ctx.op("Less", [x, zero]), ctx.op("Add", [base, turn]), base])
    origin = ctx.op("And", [ctx.op("Equal", [x, zero]), ctx.op("Equal", [y, zero])])
    # atan2(0, x) is 0 for x >= 0 and pi for x < 0 (signed zeros aside)
    at_origin = ctx.op("Where", [ctx.op("Less", [x, zero]), ctx.scalar(math.pi, out.dtype),
                                 zero])
    return ctx.op("Where", [origin, at_origin, base], out=out.name)


@exporter("hypot")
def _hypot(ctx, op, ins, out):
    a, b = _operands(ctx, ins, out.dtype)
    total = ctx.op("Add", [ctx.op("Mul", [a, a]), ctx.op("Mul", [b, b])])
    return ctx.op("Sqrt", [total], out=out.name)


@exporter("where")
def _where(ctx, op, ins, out):
    cond = ctx.cast(ins[0], np.bool_)
    a, b = _operands(ctx, ins[1:], out.dtype)
    return ctx.op("Where", [cond, a, b], out=out.name)


# -- optimiser-made elementwise kinds (an optimised graph exports too) -----------------------------
@exporter("fma")
def _fma(ctx, op, ins, out):
    a, b, c = _operands(ctx, ins, out.dtype)
    return ctx.op("Add", [ctx.op("Mul", [a, b]), c], out=out.name)


@exporter("fused_adagrad")
def _fused_adagrad(ctx, op, ins, out):
    v = ctx.cast(ins[0], out.dtype)
    root = ctx.op("Sqrt", [ctx.op("Add", [v, ctx.scalar(op["eps"], out.dtype)])])
    return ctx.op("Div", [ctx.scalar(op["lr"], out.dtype), root], out=out.name)


@exporter("fused")
def _fused(ctx, op, ins, out):
    from ..shape.rules import infer

    acc = None
    program = op["program"]
    for k, (inner, args) in enumerate(program):
        operands = [acc if a[0] == "acc" else ins[a[1]] for a in args]
        shape, dtype = infer(inner, operands)
        last = k == len(program) - 1
        step = Value(out.name if last and dtype == out.dtype else ctx.fresh(inner.kind),
                     shape, dtype)
        name = EXPORTERS[inner.kind](ctx, inner, operands, step)
        # each instruction writes into the output's memory: its dtype and shape
        name = ctx.cast(Value(name, shape, dtype), out.dtype)
        if shape != out.shape:
            name = ctx.op("Expand", [name, ctx.ints(out.shape)])
        acc = Value(name, out.shape, out.dtype)
    return acc.name


# -- reductions ---------------------------------------------------------------------------------
_REDUCE = {"sum": "ReduceSum", "prod": "ReduceProd", "mean": "ReduceMean", "max": "ReduceMax",
           "min": "ReduceMin"}


def _reduce(ctx, onnx_op, x, axes, keepdims, out_name=None):
    inputs = [x] if axes is None else [x, ctx.ints(axes)]
    return ctx.op(onnx_op, inputs, out=out_name, keepdims=int(keepdims))


@exporter(*_REDUCE)
def _reduction(ctx, op, ins, out):
    axes, keep = op["axis"], op["keepdims"]
    if axes == ():   # an empty axes input would reduce every axis
        return ctx.op("Identity", [ctx.cast(ins[0], out.dtype)], out=out.name)
    if op.kind in ("max", "min") and out.dtype == np.bool_:  # ONNX 18 orders numbers only
        x = ctx.cast(ins[0], np.int32)
        reduced = _reduce(ctx, _REDUCE[op.kind], x, axes, keep)
        return ctx.op("Cast", [reduced], out=out.name, to=_onnx_type(np.bool_))
    x = ctx.cast(ins[0], out.dtype)  # NumPy sums int32 in int64, means ints in float64
    return _reduce(ctx, _REDUCE[op.kind], x, axes, keep, out.name)


@exporter("any", "all")
def _any_all(ctx, op, ins, out):
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


@exporter("argmax", "argmin")
def _arg_reduction(ctx, op, ins, out):
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


@exporter("matmul")
def _matmul(ctx, op, ins, out):
    a = _transposed(ctx, ins[0], op.get("trans_a"))
    b = _transposed(ctx, ins[1], op.get("trans_b"))
    return _via_numbers(ctx, out, lambda dtype, name: ctx.op(
        "MatMul", _operands(ctx, [a, b], dtype), out=name))


@exporter("dot")
def _dot(ctx, op, ins, out):
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


@exporter("einsum")
def _einsum(ctx, op, ins, out):
    return _via_numbers(ctx, out, lambda dtype, name: ctx.op(
        "Einsum", _operands(ctx, ins, dtype), out=name, equation=op["subscripts"]))


def _onnx_type(dtype):
    from .export import onnx_type

    return onnx_type(dtype)


from . import export_shape  # noqa: E402,F401  (registers the shape and neural exporters)

__all__ = ["EXPORTERS", "REFUSED", "exporter", "unsupported"]
