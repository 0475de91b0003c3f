"""Converters of ONNX's elementwise arithmetic, comparison, logic and cast operators,
with ONNX's output dtypes (where NumPy's promotion differs, the result is cast);
the activations and the unary maths graphc composes live in :mod:`.elementwise_math`.

Before opset 7, Add, Sub, Mul, Div, Pow and the comparisons broadcast only when
``broadcast=1``, and then unidirectionally: B's dimensions line up with A's from
``axis`` (or from the end without it).

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["Div"]
>>> node = NodeContext.for_test("Div", []).node
>>> spec.fn(NodeContext(node, 14, [np.array([-7, 7]), np.array([2, 2])], {}, spec))
array([-3,  3])
"""
from __future__ import annotations

import numpy as np

from ..registry import REQUIRED, converter
from ..tensors import onnx_dtype, onnx_format
from . import elementwise_math  # noqa: F401  (registers the activations and unary maths)

#: attributes of the binary arithmetic before opset 7 (``consumed_inputs`` was a hint
#: for in-place execution: it changes nothing in the result)
LEGACY_BINARY = {"broadcast": 0, "axis": None, "consumed_inputs": None}


def _cast(ctx, value, dtype):
    """``value`` as ``dtype`` where it differs."""
    return value if value.dtype == dtype else ctx.ns.astype(value, dtype)


def binary_operands(ctx):
    """Inputs 0 and 1, with B reshaped as the pre-opset-7 ``broadcast``/``axis``
    attributes say (``opset >= 7``: NumPy broadcasting, unchanged).

    Example: A (2, 3, 4, 5), B (3, 4), axis=1 -> B reshaped to (3, 4, 1).
    """
    a, b = ctx.input(0), ctx.input(1)
    if ctx.opset >= 7 or ctx.spec.attrs.get("broadcast", REQUIRED) is REQUIRED:
        return a, b
    a_shape, b_shape = ctx.shape(0), ctx.shape(1)
    if not ctx.attr("broadcast"):
        if a_shape != b_shape:
            raise ctx.invalid(f"without broadcast=1 (opset {ctx.opset}) A and B must have the "
                              f"same shape, got {a_shape} and {b_shape}")
        return a, b
    rank = len(a_shape)
    axis = ctx.attr("axis")
    if axis is None:
        axis = rank - len(b_shape)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis <= rank - len(b_shape):
        raise ctx.invalid(f"broadcast axis={ctx.attr('axis')} does not fit B of shape "
                          f"{b_shape} into A of shape {a_shape}")
    aligned = (1,) * axis + tuple(b_shape) + (1,) * (rank - axis - len(b_shape))
    for d_a, d_b in zip(a_shape, aligned):
        if d_b not in (1, d_a):
            raise ctx.invalid(f"B of shape {b_shape} cannot be broadcast to A of shape "
                              f"{a_shape} at axis {axis}")
    return a, ctx.ns.reshape(b, aligned)


def _simple_binary(function_name):
    def convert(ctx):
        a, b = binary_operands(ctx)
        return getattr(ctx.ns, function_name)(a, b)
    convert.__name__ = function_name
    convert.__doc__ = f"ONNX's {function_name} with ONNX broadcasting (see the module doc)."
    return convert


for _op, _function in [("Add", "add"), ("Sub", "subtract"), ("Mul", "multiply")]:
    converter(_op, attrs=LEGACY_BINARY)(_simple_binary(_function))
for _op, _function in [("Equal", "equal"), ("Less", "less"), ("Greater", "greater"),
                       ("And", "logical_and"), ("Or", "logical_or"), ("Xor", "logical_xor")]:
    converter(_op, attrs={"broadcast": 0, "axis": None})(_simple_binary(_function))
for _op, _function in [("LessOrEqual", "less_equal"), ("GreaterOrEqual", "greater_equal")]:
    converter(_op)(_simple_binary(_function))


@converter("Div", attrs=LEGACY_BINARY)
def div(ctx):
    """A / B; integer division truncates toward zero (C's, not NumPy's floor)."""
    a, b = binary_operands(ctx)
    ns = ctx.ns
    if np.dtype(ctx.dtype(0)).kind not in "iu":
        return ns.divide(a, b)
    quotient = ns.floor_divide(a, b)
    if ctx.dtype(0).kind == "u":
        return quotient
    # the floor is one below the truncation where the division is inexact and the
    # signs differ
    inexact = ns.not_equal(ns.subtract(a, ns.multiply(quotient, b)), 0)
    signs_differ = ns.not_equal(ns.less(a, 0), ns.less(b, 0))
    bump = ns.astype(ns.logical_and(inexact, signs_differ), quotient.dtype)
    return ns.add(quotient, bump)


@converter("Mod", attrs={"fmod": 0})
def mod(ctx):
    """A mod B: the sign of B (Python's ``%``) or, with ``fmod=1``, of A (C's ``fmod``)."""
    a, b = ctx.input(0), ctx.input(1)
    ns = ctx.ns
    if not ctx.attr("fmod") or ctx.dtype(0).kind == "u":
        return ns.remainder(a, b)
    # fmod(a, b) = sign(a) * (|a| mod |b|): with both operands non-negative NumPy's
    # remainder is exactly C's fmod, infinities and zeros included
    magnitude = ns.remainder(ns.absolute(a), ns.absolute(b))
    return ns.where(ns.less(a, 0), ns.negative(magnitude), magnitude)


@converter("Pow", attrs={"broadcast": 0, "axis": None})
def pow_(ctx):
    """A ** B with the dtype of A (NumPy would promote int32 ** float32 to float64)."""
    a, b = binary_operands(ctx)
    return _cast(ctx, ctx.ns.power(a, b), ctx.dtype(0))


def _variadic(function_name):
    def convert(ctx):
        values = [v for v in ctx.inputs if v is not None]
        if not values:
            raise ctx.invalid("needs at least one input")
        result = values[0]
        for value in values[1:]:
            result = getattr(ctx.ns, function_name)(result, value)
        return result if len(values) > 1 else ctx.ns.copy(result)
    return convert


converter("Sum", attrs={"consumed_inputs": None})(_variadic("add"))
converter("Max", attrs={"consumed_inputs": None})(_variadic("maximum"))
converter("Min", attrs={"consumed_inputs": None})(_variadic("minimum"))


@converter("Mean", attrs={"consumed_inputs": None})
def mean(ctx):
    """The elementwise mean of the inputs (broadcast), in their dtype."""
    total = _variadic("add")(ctx)
    count = sum(v is not None for v in ctx.inputs)
    return _cast(ctx, ctx.ns.divide(total, count), total.dtype)


@converter("Not")
def not_(ctx):
    return ctx.ns.logical_not(ctx.input(0))


@converter("Where")
def where(ctx):
    return ctx.ns.where(ctx.input(0), ctx.input(1), ctx.input(2))


# -- bits -----------------------------------------------------------------------------------
def _integer_input(ctx, i=0):
    if ctx.dtype(i).kind not in "iu":
        raise ctx.invalid(f"input {i} must be an integer tensor, got {ctx.dtype(i)}")
    return ctx.input(i)


@converter("BitShift", attrs={"direction": REQUIRED})
def bit_shift(ctx):
    """X shifted by Y bits (graphc's ``left_shift``/``right_shift`` kinds): a shift
    outside [0, bits) gives 0, as NumPy's (ONNX leaves it unspecified)."""
    ns, x, shift = ctx.ns, _integer_input(ctx, 0), _integer_input(ctx, 1)
    direction = ctx.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.invalid(f"attribute direction={direction!r} must be 'LEFT' or 'RIGHT'")
    shifted = (ns.left_shift if direction == "LEFT" else ns.right_shift)(x, shift)
    dtype = np.dtype(ctx.dtype(0))
    return shifted if shifted.dtype == dtype else ns.astype(shifted, dtype)


@converter("BitwiseNot")
def bitwise_not(ctx):
    """~X (graphc's ``invert`` kind)."""
    return ctx.ns.invert(_integer_input(ctx))


def _bitwise(function_name):
    """A converter of a bitwise operator: graphc's kind of the same name."""
    def convert(ctx):
        a, b = _integer_input(ctx, 0), _integer_input(ctx, 1)
        return getattr(ctx.ns, function_name)(a, b)
    return convert


converter("BitwiseAnd")(_bitwise("bitwise_and"))
converter("BitwiseOr")(_bitwise("bitwise_or"))
converter("BitwiseXor")(_bitwise("bitwise_xor"))


# -- casts ----------------------------------------------------------------------------------
def _target_type(ctx, to) -> int:
    if isinstance(to, str):  # opset 1 names the type ("FLOAT")
        import onnx

        try:
            to = onnx.TensorProto.DataType.Value(to.upper())
        except ValueError:
            raise ctx.invalid(f"attribute to={to!r} is not an ONNX data type") from None
    return int(to)


def _cast_to(ctx, x, dtype, fmt):
    """``x`` as ``dtype``, or rounded to the narrow format ``fmt`` by the Cast's
    ``saturate`` and ``round_mode``."""
    if fmt is None:
        return ctx.ns.astype(x, dtype)
    rounding = ctx.attr("round_mode")
    rounding = rounding.decode() if isinstance(rounding, bytes) else rounding
    if rounding not in ("up", "down", "nearest"):
        raise ctx.invalid(f"round_mode must be 'up', 'down' or 'nearest', got {rounding!r}")
    return ctx.ns.round_to_format(x, fmt, saturate=bool(ctx.attr("saturate")),
                                  rounding=rounding)


@converter("Cast", attrs={"to": REQUIRED, "saturate": 1, "round_mode": "up"})
def cast(ctx):
    """``input`` as the ``to`` type; a narrow one (bfloat16, float8, 4-bit ints, ...)
    is held rounded in its compute dtype, ``saturate`` clipping to a float8 format's
    range and ``round_mode`` choosing float8e8m0's rounding."""
    to = _target_type(ctx, ctx.attr("to"))
    dtype = onnx_dtype(to, f"{ctx.describe()}: attribute to={to}")
    return _cast_to(ctx, ctx.input(0), dtype, onnx_format(to))


@converter("CastLike", attrs={"saturate": 1, "round_mode": "up"})
def cast_like(ctx):
    """``input`` as the type of ``target_type`` (see Cast for ``saturate``)."""
    return _cast_to(ctx, ctx.input(0), ctx.dtype(1), ctx.format(1))
