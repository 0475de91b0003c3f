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
from ..tensors import onnx_dtype
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
    """X shifted by Y bits, as multiplications and floor divisions by powers of two
    (graphc has no shift kind): a left shift wraps like C's on the unsigned bits, a
    right shift of a signed X is arithmetic, and a shift outside [0, bits) leaves only
    the sign extension (-1 for a right shift of a negative X, else 0)."""
    ns, x, shift = ctx.ns, _integer_input(ctx, 0), _integer_input(ctx, 1)
    direction = ctx.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.invalid(f"attribute direction={direction!r} must be 'LEFT' or 'RIGHT'")
    dtype = np.dtype(ctx.dtype(0))
    bits = np.iinfo(dtype).bits
    valid = ns.logical_and(ns.greater_equal(shift, 0), ns.less(shift, bits))
    shift = ns.where(valid, shift, ns.zeros_like(shift))

    def power_of_two(n):  # 2**n in X's dtype; 2**(bits-1) wraps to the sign bit alone
        return ns.power(ns.full(ctx.shape(1), 2, dtype), ns.astype(n, dtype))

    if direction == "LEFT":
        shifted = ns.multiply(x, power_of_two(shift))
        return ns.where(valid, shifted, ns.zeros_like(shifted))
    # floor(x / 2**n) in two steps, so that no divisor reaches the sign bit
    half = ns.floor_divide(shift, 2)
    shifted = ns.floor_divide(ns.floor_divide(x, power_of_two(half)),
                              power_of_two(ns.subtract(shift, half)))
    fill = ns.where(ns.less(x, 0), ns.full(ctx.shape(0), -1, dtype), ns.zeros_like(x)) \
        if dtype.kind == "i" else ns.zeros_like(x)
    return ns.where(valid, shifted, fill)


@converter("BitwiseNot")
def bitwise_not(ctx):
    """~X: -X - 1 for signed X (two's complement), max - X for unsigned."""
    ns, x = ctx.ns, _integer_input(ctx)
    dtype = np.dtype(ctx.dtype(0))
    if dtype.kind == "i":
        return ns.subtract(ns.negative(x), ns.ones_like(x))
    return ns.subtract(ns.full(ctx.shape(0), np.iinfo(dtype).max, dtype), x)


def _bits(ns, x, unsigned, powers):
    """The bits of ``x`` (as ``unsigned``, two's complement), least significant first,
    along a new last axis."""
    return ns.remainder(ns.floor_divide(ns.expand_dims(ns.astype(x, unsigned), -1), powers), 2)


def _bitwise(combine):
    """A converter of a bitwise operator computed on the bit planes of its operands
    (graphc has no bitwise kind for integers): ``combine`` maps two 0/1 planes to one."""
    def convert(ctx):
        ns, a, b = ctx.ns, _integer_input(ctx, 0), _integer_input(ctx, 1)
        dtype = np.dtype(ctx.dtype(0))
        unsigned = np.dtype(f"u{dtype.itemsize}")
        powers = np.left_shift(np.ones(1, unsigned), np.arange(dtype.itemsize * 8,
                                                               dtype=unsigned))
        planes = combine(ns, _bits(ns, a, unsigned, powers), _bits(ns, b, unsigned, powers))
        value = ns.astype(ns.sum(ns.multiply(planes, powers), axis=-1), unsigned)
        return ns.astype(value, dtype)
    return convert


converter("BitwiseAnd")(_bitwise(lambda ns, p, q: ns.multiply(p, q)))
converter("BitwiseOr")(_bitwise(lambda ns, p, q: ns.maximum(p, q)))
converter("BitwiseXor")(_bitwise(lambda ns, p, q: ns.remainder(ns.add(p, q), 2)))


# -- casts ----------------------------------------------------------------------------------
def _target_dtype(ctx, to):
    if isinstance(to, str):  # opset 1 names the type ("FLOAT")
        import onnx

        try:
            to = onnx.TensorProto.DataType.Value(to.upper())
        except ValueError:
            raise ctx.invalid(f"attribute to={to!r} is not an ONNX data type") from None
    return onnx_dtype(int(to), f"{ctx.describe()}: attribute to={to}")


@converter("Cast", attrs={"to": REQUIRED, "saturate": 1, "round_mode": "up"})
def cast(ctx):
    """``input`` as the ``to`` type. ``saturate`` and ``round_mode`` concern only the
    float8 and e8m0 types, which the importer refuses, so they change nothing here."""
    return ctx.ns.astype(ctx.input(0), _target_dtype(ctx, ctx.attr("to")))


@converter("CastLike", attrs={"saturate": 1, "round_mode": "up"})
def cast_like(ctx):
    """``input`` as the type of ``target_type`` (see Cast for ``saturate``)."""
    return ctx.ns.astype(ctx.input(0), ctx.dtype(1))
