"""Elementwise functions match NumPy (and SciPy for erf/sigmoid) in graph mode (both
memory plans) and eager mode: unary maths, broadcasting binaries, Python-scalar
operands (NumPy 2 weak scalars), Tensor operators, NumPy ufuncs and ndarray
operators applied to lazy values, ``where`` and ``clip``."""
import operator
import sys

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
import scipy.special
from hypothesis import given

import graphc
import graphc.eager as E
import graphc.ndarray as N
from opcheck import (BOOL_DTYPE, FLOAT_DTYPES, NUMERIC_DTYPES, arrays, check_op, dtypes,
                     examples, shapes)

#: tests parametrized by function run fewer examples each (there are ~150 of them)
PER_OP = examples(10)

# -- unary ----------------------------------------------------------------------------
UNARY = {
    "negative": np.negative, "neg": np.negative, "abs": np.abs, "absolute": np.absolute,
    "sign": np.sign, "exp": np.exp, "log": np.log, "log2": np.log2, "log1p": np.log1p,
    "expm1": np.expm1, "arcsin": np.arcsin, "asin": np.arcsin, "arccos": np.arccos,
    "acos": np.arccos, "arctan": np.arctan, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "arcsinh": np.arcsinh, "asinh": np.arcsinh, "arccosh": np.arccosh, "acosh": np.arccosh,
    "arctanh": np.arctanh, "atanh": np.arctanh, "log10": np.log10, "exp2": np.exp2,
    "trunc": np.trunc,
    "sqrt": np.sqrt, "square": np.square, "reciprocal": np.reciprocal, "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "tanh": np.tanh, "floor": np.floor, "ceil": np.ceil,
    "round": np.round, "rint": np.rint, "erf": scipy.special.erf,
    "sigmoid": scipy.special.expit, "relu": lambda x: np.maximum(x, x.dtype.type(0)),
    "logical_not": np.logical_not,
}


def _unary_values(name, dtype):
    # integer reciprocal of 0 is undefined behaviour in C; NumPy's result varies
    if name == "reciprocal" and np.dtype(dtype).kind in "iu":
        return {"low": 1, "high": 20}
    return {}


@pytest.mark.parametrize("name", sorted(UNARY))
@PER_OP
@given(data=st.data(), dtype=dtypes(), shape=shapes())
def test_unary_matches_numpy(name, data, dtype, shape):
    x = data.draw(arrays(dtype, shape, **_unary_values(name, dtype)))
    check_op(lambda M, a: getattr(M, name)(a), UNARY[name], x)


NUMPY_UFUNC_UNARY = ["negative", "absolute", "sign", "exp", "log", "log2", "log1p", "expm1",
                     "sqrt", "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh",
                     "arccosh", "arctanh", "log10", "exp2", "trunc",
                     "square", "reciprocal", "sin", "cos", "tan", "tanh", "floor", "ceil",
                     "rint", "logical_not", "isfinite"]


@pytest.mark.parametrize("name", NUMPY_UFUNC_UNARY)
@PER_OP
@given(data=st.data(), dtype=dtypes(), shape=shapes(max_dims=3))
def test_numpy_ufunc_on_tensor_builds_the_graphc_op(name, data, dtype, shape):
    """``np.exp(tensor)`` adds a graphc node (``__array_ufunc__``)."""
    x = data.draw(arrays(dtype, shape, **_unary_values(name, dtype)))
    ufunc = getattr(np, name)
    check_op(lambda M, a: ufunc(a), ufunc, x, eager=False)


@given(data=st.data(), dtype=dtypes(), shape=shapes(max_dims=3))
def test_unary_tensor_operators(data, dtype, shape):
    x = data.draw(arrays(dtype, shape))
    check_op(lambda M, a: -a, operator.neg, x, eager=False)
    check_op(lambda M, a: abs(a), abs, x, eager=False)
    check_op(lambda M, a: +a, lambda a: a, x, eager=False)


@given(x=arrays(BOOL_DTYPE, shapes()))
def test_invert_on_bool_is_logical_not(x):
    check_op(lambda M, a: ~a, np.invert, x, eager=False)
    check_op(lambda M, a: np.invert(a), np.invert, x, eager=False)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_invert_refuses_floats(dtype):
    with pytest.raises(graphc.DTypeError, match="invert"):
        ~N.var("x", (3,), dtype)
    with pytest.raises(graphc.DTypeError, match="invert"):
        N.invert(N.var("x", (3,), dtype))


@given(x=arrays(np.float64, shapes(max_dims=2)))
def test_isfinite_matches_numpy(x):
    check_op(lambda M, a: M.isfinite(a), np.isfinite, x)


# -- binary ---------------------------------------------------------------------------
BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "true_divide": np.true_divide, "floor_divide": np.floor_divide, "power": np.power,
    "remainder": np.remainder, "mod": np.mod, "maximum": np.maximum, "minimum": np.minimum,
    "arctan2": np.arctan2, "hypot": np.hypot, "equal": np.equal, "not_equal": np.not_equal,
    "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "logical_and": np.logical_and,
    "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}


def _exponent_values(name):
    # NumPy raises at run time for integers to negative integer powers
    return {"low": 0, "high": 5} if name == "power" else {}


@pytest.mark.parametrize("name", sorted(BINARY))
@PER_OP
@given(data=st.data(), da=dtypes(), db=dtypes(),
       pair=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=3))
def test_binary_broadcasting_matches_numpy(name, data, da, db, pair):
    sa, sb = pair.input_shapes
    a = data.draw(arrays(da, sa))
    b = data.draw(arrays(db, sb, **_exponent_values(name)))
    check_op(lambda M, x, y: getattr(M, name)(x, y), BINARY[name], a, b)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_shape_mismatch_names_op_shapes_and_line(name):
    x, y = N.var("x", (2, 3)), N.var("y", (4,))
    with pytest.raises(graphc.ShapeError) as info:
        line = sys._getframe().f_lineno; getattr(N, name)(x, y)  # noqa: E702
    message = str(info.value)
    assert name in message or BINARY[name].__name__ in message
    assert "(2, 3)" in message and "(4,)" in message
    assert f"test_ops_elementwise.py:{line}" in message


def test_operator_shape_mismatch_names_the_line():
    x, y = N.var("x", (5,)), N.var("y", (3, 4))
    with pytest.raises(graphc.ShapeError) as info:
        line = sys._getframe().f_lineno; x * y  # noqa: E702,B018
    assert "multiply" in str(info.value) and "(5,)" in str(info.value)
    assert f"test_ops_elementwise.py:{line}" in str(info.value)


SCALARS = st.one_of(st.booleans(), st.integers(-5, 5),
                    st.floats(-4, 4, allow_nan=False, allow_infinity=False),
                    st.sampled_from([0.5, -1.5, np.inf, np.nan]))


@pytest.mark.parametrize("name", sorted(BINARY))
@PER_OP
@given(data=st.data(), dtype=dtypes(), shape=shapes(max_dims=3), scalar_first=st.booleans())
def test_python_scalar_operands_are_weak(name, data, dtype, shape, scalar_first):
    """NumPy 2: a Python scalar takes the array's dtype (float32 array + 0.5 stays
    float32; int32 array + 1 stays int32; int32 array + 0.5 becomes float64)."""
    scalars = st.integers(0, 3) if name == "power" else SCALARS
    s = data.draw(scalars)
    x = data.draw(arrays(dtype, shape, **(_exponent_values(name) if scalar_first else {})))
    fn, ref = BINARY[name], BINARY[name]
    if scalar_first:
        check_op(lambda M, a: getattr(M, name)(s, a), lambda a: ref(s, a), x)
    else:
        check_op(lambda M, a: getattr(M, name)(a, s), lambda a: fn(a, s), x)


def test_weak_scalar_examples():
    x = N.var("x", (2,), np.float32)
    assert (x + 0.5).dtype == np.float32
    assert (0.5 * x).dtype == np.float32
    assert (x + np.float64(0.5)).dtype == np.float64  # NumPy scalars are strong
    i = N.var("i", (2,), np.int32)
    assert (i + 1).dtype == np.int32 and (i + 0.5).dtype == np.float64
    assert (i / 2).dtype == np.float64


OPERATORS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
    "!=": operator.ne,
}


@pytest.mark.parametrize("symbol", sorted(OPERATORS))
@PER_OP
@given(data=st.data(), da=dtypes(), db=dtypes(),
       pair=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
def test_tensor_operators(symbol, data, da, db, pair):
    op = OPERATORS[symbol]
    sa, sb = pair.input_shapes
    a = data.draw(arrays(da, sa))
    b = data.draw(arrays(db, sb, **_exponent_values("power" if symbol == "**" else "")))
    check_op(lambda M, x, y: op(x, y), op, a, b, eager=False)


@pytest.mark.parametrize("symbol", sorted(OPERATORS))
@PER_OP
@given(data=st.data(), dtype=dtypes(), shape=shapes(max_dims=3))
def test_tensor_operators_with_python_scalars(symbol, data, dtype, shape):
    op = OPERATORS[symbol]
    s = data.draw(st.integers(0, 3) if symbol == "**" else SCALARS)
    x = data.draw(arrays(dtype, shape, **_exponent_values("power" if symbol == "**" else "")))
    check_op(lambda M, a: op(a, s), lambda a: op(a, s), x, eager=False)
    check_op(lambda M, a: op(s, a), lambda a: op(s, a), x, eager=False)


@pytest.mark.parametrize("symbol", sorted(OPERATORS))
@PER_OP
@given(data=st.data(), da=dtypes(), db=dtypes(),
       pair=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
def test_ndarray_operator_tensor(symbol, data, da, db, pair):
    """``np_array + tensor`` (ndarray on the left) builds a graphc node, not an error."""
    op = OPERATORS[symbol]
    sa, sb = pair.input_shapes
    const = data.draw(arrays(da, sa))
    b = data.draw(arrays(db, sb, **_exponent_values("power" if symbol == "**" else "")))
    check_op(lambda M, y: op(const, y), lambda y: op(const, y), b, eager=False)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "power", "maximum",
                                  "minimum", "arctan2", "hypot", "less", "equal",
                                  "logical_and", "logical_or", "logical_xor", "floor_divide",
                                  "remainder"])
@PER_OP
@given(data=st.data(), da=dtypes(), db=dtypes(),
       pair=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
def test_numpy_binary_ufunc_on_tensors(name, data, da, db, pair):
    ufunc = getattr(np, name)
    sa, sb = pair.input_shapes
    a = data.draw(arrays(da, sa))
    b = data.draw(arrays(db, sb, **_exponent_values(name)))
    check_op(lambda M, x, y: ufunc(x, y), ufunc, a, b, eager=False)
    check_op(lambda M, y: ufunc(a, y), lambda y: ufunc(a, y), b, eager=False)


def test_numpy_scalar_times_tensor():
    x = N.var("x", (3,), np.float32)
    y = np.float64(2.0) * x
    assert isinstance(y, N.Tensor) and y.dtype == np.float64
    g = graphc.compile(inputs=[x], outputs=y, check=True)
    data = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(g.run(x=data), np.float64(2.0) * data, strict=True)


BOOL_OPERATORS = {"&": (operator.and_, np.logical_and), "|": (operator.or_, np.logical_or),
                  "^": (operator.xor, np.logical_xor)}


@pytest.mark.parametrize("symbol", sorted(BOOL_OPERATORS))
@PER_OP
@given(data=st.data(),
       pair=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
def test_bool_operators(symbol, data, pair):
    op, _ = BOOL_OPERATORS[symbol]
    sa, sb = pair.input_shapes
    a, b = data.draw(arrays(BOOL_DTYPE, sa)), data.draw(arrays(BOOL_DTYPE, sb))
    check_op(lambda M, x, y: op(x, y), op, a, b, eager=False)
    check_op(lambda M, y: op(a, y), lambda y: op(a, y), b, eager=False)  # ndarray & tensor
    check_op(lambda M, x: op(x, True), lambda x: op(x, True), a, eager=False)
    check_op(lambda M, x: op(False, x), lambda x: op(False, x), a, eager=False)


@pytest.mark.parametrize("symbol", sorted(BOOL_OPERATORS))
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_bool_operators_refuse_floats(symbol, dtype):
    """On integers (and an integer with a boolean) they are the bitwise kinds
    (tests/test_numpy_math.py)."""
    op, _ = BOOL_OPERATORS[symbol]
    x, b = N.var("x", (3,), dtype), N.var("b", (3,), np.bool_)
    with pytest.raises(graphc.DTypeError):
        op(x, b)
    with pytest.raises(graphc.DTypeError):
        op(b, x)


# -- where ----------------------------------------------------------------------------
@given(data=st.data(), dc=dtypes(), da=dtypes(), db=dtypes(),
       shapes3=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3))
def test_where_matches_numpy(data, dc, da, db, shapes3):
    """The condition may be any dtype: nonzero (NaN included) is true."""
    sc, sa, sb = shapes3.input_shapes
    c = data.draw(arrays(dc, sc))
    a, b = data.draw(arrays(da, sa)), data.draw(arrays(db, sb))
    check_op(lambda M, x, y, z: M.where(x, y, z), np.where, c, a, b)


@given(data=st.data(), dc=dtypes(), da=dtypes(), shape=shapes(max_dims=3),
       s=SCALARS, t=SCALARS)
def test_where_with_python_scalars(data, dc, da, shape, s, t):
    c, a = data.draw(arrays(dc, shape)), data.draw(arrays(da, shape))
    check_op(lambda M, x, y: M.where(x, y, s), lambda x, y: np.where(x, y, s), c, a)
    check_op(lambda M, x, y: M.where(x, s, y), lambda x, y: np.where(x, s, y), c, a)
    check_op(lambda M, x: M.where(x, s, t), lambda x: np.where(x, s, t), c)


@given(data=st.data(), dtype=dtypes(*FLOAT_DTYPES), shape=shapes())
def test_where_leaky_relu(data, dtype, shape):
    x = data.draw(arrays(dtype, shape))
    check_op(lambda M, a: M.where(a > 0, a, 0.01 * a), lambda a: np.where(a > 0, a, 0.01 * a), x)


# -- clip -----------------------------------------------------------------------------
BOUNDS = st.one_of(st.none(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False))


@given(data=st.data(), dtype=dtypes(*NUMERIC_DTYPES), shape=shapes(), lo=BOUNDS, hi=BOUNDS)
def test_clip_with_scalar_bounds(data, dtype, shape, lo, hi):
    x = data.draw(arrays(dtype, shape))
    check_op(lambda M, a: M.clip(a, lo, hi), lambda a: np.clip(a, lo, hi), x)
    check_op(lambda M, a: a.clip(lo, hi), lambda a: a.clip(lo, hi), x)


@given(data=st.data(), dtype=dtypes(*NUMERIC_DTYPES), dl=dtypes(*NUMERIC_DTYPES),
       dh=dtypes(*NUMERIC_DTYPES), lo_none=st.booleans(), hi_none=st.booleans(),
       shapes3=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3))
def test_clip_with_array_bounds(data, dtype, dl, dh, lo_none, hi_none, shapes3):
    sx, sl, sh = shapes3.input_shapes
    x = data.draw(arrays(dtype, sx))
    lo = None if lo_none else data.draw(arrays(dl, sl))
    hi = None if hi_none else data.draw(arrays(dh, sh))
    check_op(lambda M, a: M.clip(a, lo, hi), lambda a: np.clip(a, lo, hi), x)
    if lo is not None and hi is not None:  # bounds as graph inputs too
        check_op(lambda M, a, b, c: M.clip(a, b, c), np.clip, x, lo, hi)


@given(data=st.data(), dtype=dtypes(*NUMERIC_DTYPES), db=dtypes(*NUMERIC_DTYPES),
       shape=shapes(max_dims=3), lo=st.integers(-3, 0), hi=st.integers(0, 3))
def test_clip_with_numpy_scalar_bounds(data, dtype, db, shape, lo, hi):
    """NumPy scalars and 0-d arrays are strong: they take part in type promotion."""
    x = data.draw(arrays(dtype, shape))
    lo_s, hi_a = np.dtype(db).type(lo), np.array(hi, dtype=db)
    check_op(lambda M, a: M.clip(a, lo_s, hi), lambda a: np.clip(a, lo_s, hi), x)
    check_op(lambda M, a: M.clip(a, lo, hi_a), lambda a: np.clip(a, lo, hi_a), x)
    check_op(lambda M, a: M.clip(a, None, hi_a), lambda a: np.clip(a, None, hi_a), x)


def test_eager_module_matches_graph_module_names():
    for name in list(UNARY) + list(BINARY) + ["where", "clip", "isfinite"]:
        assert callable(getattr(N, name)) and callable(getattr(E, name)), name



@pytest.mark.parametrize("name", ["equal", "not_equal", "less", "less_equal", "greater",
                                  "greater_equal"])
@PER_OP
@given(x=arrays(np.int32, shapes(max_dims=2)),
       s=st.sampled_from([2**31, -2**31 - 1, 2**40, -2**40, 2**31 - 1, -2**31]))
def test_comparison_with_python_int_outside_the_dtype_range(name, x, s):
    """NumPy 2 compares exactly with a Python int that int32 cannot hold."""
    ref = BINARY[name]
    check_op(lambda M, a: getattr(M, name)(a, s), lambda a: ref(a, s), x)
    check_op(lambda M, a: getattr(M, name)(s, a), lambda a: ref(s, a), x)


@given(x=arrays(np.int32, shapes(max_dims=2)))
def test_clip_bounds_equal_in_value_but_not_in_type_stay_apart(x):
    """0 == 0.0 in Python, but clip(int32, 0, None) is int32 and clip(int32, 0.0, None)
    float64: in one graph, neither the dtype cache nor the optimiser may mix them up."""
    check_op(lambda M, a: [M.clip(a, 0, None), M.clip(a, 0.0, None), M.clip(a, False, 3),
                           M.clip(a, 0, 3.0)],
             lambda a: [np.clip(a, 0, None), np.clip(a, 0.0, None), np.clip(a, False, 3),
                        np.clip(a, 0, 3.0)], x)
