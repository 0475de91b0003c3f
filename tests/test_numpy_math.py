"""NumPy's mathematical functions (graphc/operator/math_*.py and the bit and
float-representation kinds of graphc/ops/elementwise_bits.py) against NumPy in graph
mode (both memory plans) and eager mode, on special values (NaN, infinities, signed
zeros) where they matter; gradients of the differentiable ones against finite
differences; bad arguments refused with errors naming the function."""

import operator

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

import graphc
import graphc.eager as E
import graphc.ndarray as N
from gradcheck import check_gradient
from opcheck import (ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, NUMERIC_DTYPES, arrays, check_op,
                     dtypes, examples, shapes)

PER_OP = examples(8)
FEW = examples(4)
#: composites of transcendental kinds: the generated (fused) kernels' C library maths may
#: differ from NumPy's SIMD loops by an ulp or two
ULPS = {"rtol": 2e-6}


def _call(name, **kwargs):
    return lambda M, *xs: getattr(M, name)(*xs, **kwargs)


def _ref(name, **kwargs):
    return lambda *xs: getattr(np, name)(*xs, **kwargs)


# -- one array, elementwise ----------------------------------------------------------------
#: name -> (dtypes, check_op tolerance)
UNARY = {
    "isnan": (ALL_DTYPES, {}), "isinf": (ALL_DTYPES, {}), "isposinf": (NUMERIC_DTYPES, {}),
    "isneginf": (NUMERIC_DTYPES, {}), "signbit": (NUMERIC_DTYPES, {}),
    "fabs": (ALL_DTYPES, {}), "deg2rad": (ALL_DTYPES, {}), "radians": (ALL_DTYPES, {}),
    "rad2deg": (ALL_DTYPES, {}), "degrees": (ALL_DTYPES, {}), "sinc": (NUMERIC_DTYPES, ULPS),
    "nan_to_num": (ALL_DTYPES, {}), "positive": (NUMERIC_DTYPES, {}), "fix": (ALL_DTYPES, {}),
    "modf": (ALL_DTYPES, {}), "conj": (ALL_DTYPES, {}), "conjugate": (ALL_DTYPES, {}),
    "real": (ALL_DTYPES, {}), "imag": (ALL_DTYPES, {}), "angle": (ALL_DTYPES, {}),
    "iscomplex": (ALL_DTYPES, {}), "isreal": (ALL_DTYPES, {}), "around": (NUMERIC_DTYPES, {}),
    "i0": (NUMERIC_DTYPES, ULPS), "cbrt": (ALL_DTYPES, {"rtol": 1e-6}),
    "invert": (INT_DTYPES + (np.dtype(np.bool_),), {}),
    "bitwise_not": (INT_DTYPES + (np.dtype(np.bool_),), {}),
    "bitwise_invert": (INT_DTYPES + (np.dtype(np.bool_),), {}),
    "bitwise_count": (INT_DTYPES, {}),
    "spacing": (FLOAT_DTYPES, {}), "frexp": (FLOAT_DTYPES + INT_DTYPES, {}),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@PER_OP
@given(data=st.data(), shape=shapes(max_dims=3))
def test_unary_matches_numpy(name, data, shape):
    allowed, tolerance = UNARY[name]
    dtype = data.draw(dtypes(*allowed))
    x = data.draw(arrays(dtype, shape))
    check_op(_call(name), _ref(name), x, **tolerance)


def test_nan_and_inf_predicates_are_exact_on_every_special():
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-310, -1.0, 3e38])
    for name in ("isnan", "isinf", "isposinf", "isneginf", "signbit", "isfinite"):
        for dtype in FLOAT_DTYPES:
            check_op(_call(name), _ref(name), x.astype(dtype))


@given(x=arrays(np.float64, shapes(max_dims=2)), nan=st.floats(-3, 3),
       big=st.one_of(st.none(), st.floats(-9, 9)), small=st.one_of(st.none(), st.floats(-9, 9)))
def test_nan_to_num_with_fill_values(x, nan, big, small):
    check_op(_call("nan_to_num", nan=nan, posinf=big, neginf=small),
             _ref("nan_to_num", nan=nan, posinf=big, neginf=small), x)


# -- two arrays, elementwise --------------------------------------------------------------
BINARY = {
    "fmax": (NUMERIC_DTYPES, {}), "fmin": (NUMERIC_DTYPES, {}), "fmod": (NUMERIC_DTYPES, {}),
    "heaviside": (NUMERIC_DTYPES, {}), "logaddexp": (NUMERIC_DTYPES, ULPS),
    "logaddexp2": (NUMERIC_DTYPES, ULPS), "atan2": (NUMERIC_DTYPES, {}),
    "divmod": (NUMERIC_DTYPES, {}), "copysign": (NUMERIC_DTYPES, {}),
    "nextafter": (FLOAT_DTYPES, {}), "isclose": (NUMERIC_DTYPES, {}),
    "bitwise_and": (INT_DTYPES + (np.dtype(np.bool_),), {}),
    "bitwise_or": (INT_DTYPES + (np.dtype(np.bool_),), {}),
    "bitwise_xor": (INT_DTYPES + (np.dtype(np.bool_),), {}),
    "gcd": (INT_DTYPES, {}), "lcm": (INT_DTYPES, {}),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@PER_OP
@given(data=st.data(), pair=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3,
                                                              max_side=3))
def test_binary_matches_numpy(name, data, pair):
    allowed, tolerance = BINARY[name]
    da, db = data.draw(dtypes(*allowed)), data.draw(dtypes(*allowed))
    a = data.draw(arrays(da, pair.input_shapes[0]))
    b = data.draw(arrays(db, pair.input_shapes[1]))
    check_op(_call(name), _ref(name), a, b, **tolerance)


@PER_OP
@given(data=st.data(), shape=shapes(max_dims=2))
def test_float_power(data, shape):
    a = np.abs(data.draw(arrays(data.draw(dtypes(*NUMERIC_DTYPES)), shape)))
    b = data.draw(arrays(data.draw(dtypes(*FLOAT_DTYPES)), shape))
    check_op(_call("float_power"), _ref("float_power"), a, b, rtol=1e-15)
    check_op(_call("pow"), _ref("pow"), a, b, **ULPS)


SHIFTS = {"left_shift": np.left_shift, "right_shift": np.right_shift,
          "bitwise_left_shift": np.left_shift, "bitwise_right_shift": np.right_shift}


@pytest.mark.parametrize("name", sorted(SHIFTS))
@PER_OP
@given(data=st.data(), da=dtypes(*INT_DTYPES), db=dtypes(*INT_DTYPES),
       pair=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
def test_shifts_match_numpy_outside_the_width_too(name, data, da, db, pair):
    """Amounts from -3 to 70: NumPy gives 0 (or -1 for a negative value shifted right)
    for a negative amount or one of the width or more."""
    a = data.draw(hnp.arrays(da, pair.input_shapes[0], elements=st.integers(-2**31, 2**31 - 1)))
    b = data.draw(hnp.arrays(db, pair.input_shapes[1], elements=st.integers(-3, 70)))
    check_op(_call(name), SHIFTS[name], a, b)


@PER_OP
@given(data=st.data(), da=dtypes(*FLOAT_DTYPES), db=dtypes(*INT_DTYPES), shape=shapes(max_dims=2))
def test_ldexp(data, da, db, shape):
    a = data.draw(arrays(da, shape))
    b = data.draw(hnp.arrays(db, shape, elements=st.integers(-1100, 1100)))
    check_op(_call("ldexp"), np.ldexp, a, b)


INT_OPERATORS = {"&": operator.and_, "|": operator.or_, "^": operator.xor,
                 "<<": operator.lshift, ">>": operator.rshift}


@pytest.mark.parametrize("symbol", sorted(INT_OPERATORS))
@PER_OP
@given(data=st.data(), da=dtypes(*INT_DTYPES), db=dtypes(*INT_DTYPES, np.dtype(np.bool_)),
       pair=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
def test_integer_operators_on_tensors(symbol, data, da, db, pair):
    op = INT_OPERATORS[symbol]
    a = data.draw(arrays(da, pair.input_shapes[0]))
    b = data.draw(hnp.arrays(db, pair.input_shapes[1], elements=st.integers(0, 40))
                  if db != np.bool_ else arrays(db, pair.input_shapes[1]))
    check_op(lambda M, x, y: op(x, y), op, a, b, eager=False)
    check_op(lambda M, y: op(a, y), lambda y: op(a, y), b, eager=False)   # ndarray op tensor
    check_op(lambda M, x: op(x, 3), lambda x: op(x, 3), a, eager=False)
    check_op(lambda M, x: op(5, x), lambda x: op(5, x), b, eager=False)


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
                                  "right_shift", "gcd"])
def test_numpy_ufunc_on_integer_tensors(name):
    a = np.array([[3, -8, 12], [0, 7, 1]], np.int64)
    b = np.array([1, 2, 3], np.int32)
    ufunc = getattr(np, name)
    check_op(lambda M, x, y: ufunc(x, y), ufunc, a, b, eager=False)


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor", "invert",
                                  "left_shift", "gcd", "bitwise_count"])
def test_bit_functions_refuse_floats(name):
    x = N.var("x", (3,), np.float32)
    args = (x,) if name in ("invert", "bitwise_count") else (x, x)
    with pytest.raises(graphc.DTypeError, match=name):
        getattr(N, name)(*args)


# -- closeness and equality ---------------------------------------------------------------
@PER_OP
@given(data=st.data(), pair=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2,
                                                              max_side=3),
       rtol=st.sampled_from([1e-5, 0.1, 0.0]), atol=st.sampled_from([1e-8, 0.5, 0.0]),
       equal_nan=st.booleans())
def test_isclose_and_allclose(data, pair, rtol, atol, equal_nan):
    da, db = data.draw(dtypes(*NUMERIC_DTYPES)), data.draw(dtypes(*NUMERIC_DTYPES))
    a = data.draw(arrays(da, pair.input_shapes[0]))
    b = data.draw(arrays(db, pair.input_shapes[1]))
    kwargs = {"rtol": rtol, "atol": atol, "equal_nan": equal_nan}
    check_op(_call("isclose", **kwargs), _ref("isclose", **kwargs), a, b)
    check_op(_call("allclose", **kwargs), lambda x, y: np.bool_(np.allclose(x, y, **kwargs)),
             a, b)


@PER_OP
@given(data=st.data(), shape=shapes(max_dims=2, max_side=3), other=shapes(max_dims=2,
                                                                          max_side=3),
       equal_nan=st.booleans())
def test_array_equal_and_equiv(data, shape, other, equal_nan):
    a = data.draw(arrays(np.float64, shape))
    b = a.copy() if data.draw(st.booleans()) else data.draw(arrays(np.float64, other))
    check_op(_call("array_equal", equal_nan=equal_nan),
             lambda x, y: np.bool_(np.array_equal(x, y, equal_nan=equal_nan)), a, b)
    check_op(_call("array_equiv"), lambda x, y: np.bool_(np.array_equiv(x, y)), a, b)


@PER_OP
@given(data=st.data(), dtype=dtypes(), shape=shapes(max_dims=3), keepdims=st.booleans())
def test_count_nonzero(data, dtype, shape, keepdims):
    x = data.draw(arrays(dtype, shape))
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1)) if shape else None
    check_op(_call("count_nonzero", axis=axis, keepdims=keepdims),
             lambda a: np.asarray(np.count_nonzero(a, axis=axis, keepdims=keepdims)), x)


NUMPY_UFUNCS = ["isnan", "isinf", "signbit", "fabs", "fmax", "fmin", "float_power",
                "heaviside", "logaddexp", "logaddexp2", "deg2rad", "radians", "rad2deg",
                "degrees", "positive", "cbrt", "modf", "divmod", "conjugate", "frexp", "fmod",
                "copysign", "nextafter", "spacing", "ldexp"]


@pytest.mark.parametrize("name", NUMPY_UFUNCS)
def test_numpy_ufuncs_on_tensors_build_graphc_nodes(name):
    """``np.isnan(tensor)``, ``np.fmax(ndarray, tensor)``: composites too."""
    ufunc = getattr(np, name)
    x = np.array([[1.5, -0.0, np.inf], [-2.25, np.nan, 3.0]], np.float32)
    if ufunc.nin == 1:
        check_op(lambda M, a: ufunc(a), ufunc, x, eager=False, rtol=1e-6)
        return
    y = np.array([0.5, -1.0, 2.0], np.float32) if name != "ldexp" else np.array([1, -2, 3])
    check_op(lambda M, a, b: ufunc(a, b), ufunc, x, y, eager=False, rtol=1e-6)
    check_op(lambda M, b: ufunc(x, b), lambda b: ufunc(x, b), y, eager=False, rtol=1e-6)


def test_dtype_questions_are_answered_while_building():
    x, z = N.var("x", (2,), np.int32), N.var("z", (2,), np.float32)
    assert N.isrealobj(x) and not N.iscomplexobj(z)
    assert N.common_type(x) is np.float64 and N.common_type(z, x) is np.float64
    assert N.common_type(z) is np.float32


# -- products --------------------------------------------------------------------------
BLAS = {"rtol": 1e-12, "atol": 1e-12}


@PER_OP
@given(data=st.data(), sa=shapes(max_dims=2, min_side=1, max_side=3),
       sb=shapes(max_dims=2, min_side=1, max_side=3))
def test_outer_and_kron(data, sa, sb):
    dt = data.draw(dtypes(*NUMERIC_DTYPES))
    a, b = data.draw(arrays(dt, sa, specials=False)), data.draw(arrays(dt, sb, specials=False))
    check_op(_call("outer"), np.outer, a, b)
    check_op(_call("kron"), np.kron, a, b)


@PER_OP
@given(data=st.data(), lead_a=shapes(max_dims=2, min_side=1, max_side=3),
       lead_b=shapes(max_dims=2, min_side=1, max_side=3), k=st.integers(1, 4))
def test_inner_vdot(data, lead_a, lead_b, k):
    a = data.draw(arrays(np.float64, lead_a + (k,), specials=False))
    b = data.draw(arrays(np.float64, lead_b + (k,), specials=False))
    check_op(_call("inner"), np.inner, a, b, **BLAS)
    if a.size == b.size:
        check_op(_call("vdot"), np.vdot, a, b, **BLAS)


@PER_OP
@given(data=st.data(), pair=hnp.mutually_broadcastable_shapes(
    signature="(m,n),(n)->(m)", max_dims=2, max_side=3))
def test_vecdot_matvec_vecmat(data, pair):
    dt = data.draw(dtypes(*NUMERIC_DTYPES))
    a = data.draw(arrays(dt, pair.input_shapes[0], specials=False))
    v = data.draw(arrays(dt, pair.input_shapes[1], specials=False))
    check_op(_call("matvec"), np.matvec, a, v, **BLAS)
    check_op(lambda M, x, y: M.vecmat(y, M.swapaxes(x, -1, -2)),
             lambda x, y: np.vecmat(y, np.swapaxes(x, -1, -2)), a, v, **BLAS)
    check_op(_call("vecdot"), np.vecdot, a, v, **BLAS)


@PER_OP
@given(data=st.data(), shape=shapes(min_dims=2, max_dims=4, max_side=4),
       offset=st.integers(-4, 4))
def test_trace(data, shape, offset):
    dt = data.draw(dtypes())
    x = data.draw(arrays(dt, shape))
    ndim = len(shape)
    axis1 = data.draw(st.integers(-ndim, ndim - 1))
    axis2 = data.draw(st.integers(-ndim, ndim - 1).filter(lambda a: a % ndim != axis1 % ndim))
    check_op(_call("trace", offset=offset, axis1=axis1, axis2=axis2),
             _ref("trace", offset=offset, axis1=axis1, axis2=axis2), x)


@PER_OP
@given(data=st.data(), da=st.sampled_from([2, 3]), db=st.sampled_from([2, 3]),
       pair=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3))
def test_cross(data, da, db, pair):
    dt = data.draw(dtypes(*NUMERIC_DTYPES))
    a = data.draw(arrays(dt, pair.input_shapes[0] + (da,)))
    b = data.draw(arrays(dt, pair.input_shapes[1] + (db,)))
    check_op(_call("cross"), np.cross, a, b)
    if da == db == 3 and a.ndim == 2:   # vectors along the first axis, the result too
        check_op(_call("cross", axisa=0, axisb=0, axisc=0), _ref("cross", axisa=0, axisb=0,
                                                                axisc=0), a.T.copy(), b)


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@FEW
@given(data=st.data(), n=st.integers(1, 12), m=st.sampled_from([1, 2, 3, 5, 20]))
def test_convolve_and_correlate(name, mode, data, n, m):
    """Short kernels as shifted sums, long ones (20 > SHIFTED_SUM_MAX) as a matmul;
    either operand may be the longer."""
    dt = data.draw(dtypes())
    a = data.draw(arrays(dt, (n,), specials=False))
    v = data.draw(arrays(dt, (m,), specials=False))
    check_op(_call(name, mode=mode), _ref(name, mode=mode), a, v, **BLAS)


# -- statistics --------------------------------------------------------------------------
@PER_OP
@given(data=st.data(), shape=shapes(min_dims=1, max_dims=2, min_side=1, max_side=4),
       rowvar=st.booleans(), bias=st.booleans(), ddof=st.sampled_from([None, 0, 2]))
def test_cov_and_corrcoef(data, shape, rowvar, bias, ddof):
    dt = data.draw(dtypes(*NUMERIC_DTYPES))
    x = data.draw(arrays(dt, shape, specials=False))
    kwargs = {"rowvar": rowvar, "bias": bias, "ddof": ddof}
    check_op(_call("cov", **kwargs), _ref("cov", **kwargs), x, **BLAS)
    check_op(_call("corrcoef", rowvar=rowvar), _ref("corrcoef", rowvar=rowvar), x, **BLAS)


@PER_OP
@given(data=st.data(), n=st.integers(2, 5), ddof=st.sampled_from([None, 0, 1]))
def test_cov_with_weights(data, n, ddof):
    x = data.draw(arrays(np.float64, (2, n), specials=False))
    f = data.draw(hnp.arrays(np.int64, (n,), elements=st.integers(1, 4)))
    a = data.draw(arrays(np.float64, (n,), low=0.1, high=3.0, specials=False))
    check_op(lambda M, x, f, a: M.cov(x, ddof=ddof, fweights=f, aweights=a),
             lambda x, f, a: np.cov(x, ddof=ddof, fweights=f, aweights=a), x, f, a, **BLAS)
    check_op(lambda M, x, y: M.cov(x, y), np.cov, x, x[::-1].copy(), **BLAS)


@PER_OP
@given(data=st.data(), shape=shapes(min_dims=1, max_dims=3, min_side=1, max_side=3),
       returned=st.booleans(), keepdims=st.booleans())
def test_average(data, shape, returned, keepdims):
    dt = data.draw(dtypes(*NUMERIC_DTYPES))
    x = data.draw(arrays(dt, shape, specials=False))
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    kwargs = {"axis": axis, "returned": returned, "keepdims": keepdims}
    check_op(_call("average", **kwargs), _ref("average", **kwargs), x, rtol=1e-6)
    w_shape = shape if axis is None or data.draw(st.booleans()) else (shape[axis],)
    w = data.draw(arrays(np.float64, w_shape, low=0.5, high=2.0, specials=False))
    check_op(lambda M, a, b: M.average(a, weights=b, **kwargs),
             lambda a, b: np.average(a, weights=b, **kwargs), x, w, rtol=1e-12)


@PER_OP
@given(data=st.data(), shape=shapes(min_dims=1, max_dims=3, min_side=1, max_side=3),
       keepdims=st.booleans())
def test_ptp(data, shape, keepdims):
    x = data.draw(arrays(data.draw(dtypes(*NUMERIC_DTYPES)), shape))
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    check_op(_call("ptp", axis=axis, keepdims=keepdims), _ref("ptp", axis=axis,
                                                              keepdims=keepdims), x)


def test_einsum_path_is_numpys_plan():
    a, b, c = N.var("a", (4, 5)), N.var("b", (5, 6)), N.var("c", (6, 2))
    got = N.einsum_path("ij,jk,kl->il", a, b, c, optimize="optimal")
    want = np.einsum_path("ij,jk,kl->il", np.zeros((4, 5), np.float32),
                          np.zeros((5, 6), np.float32), np.zeros((6, 2), np.float32),
                          optimize="optimal")
    assert got == want


# -- differences, derivatives, integrals ---------------------------------------------------
@PER_OP
@given(data=st.data(), shape=shapes(min_dims=1, max_dims=3, max_side=4), n=st.integers(0, 3))
def test_diff(data, shape, n):
    dt = data.draw(dtypes())
    x = data.draw(arrays(dt, shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    check_op(_call("diff", n=n, axis=axis), _ref("diff", n=n, axis=axis), x)
    if dt != np.bool_:
        check_op(_call("diff", n=n, axis=axis, prepend=1, append=-2.5),
                 _ref("diff", n=n, axis=axis, prepend=1, append=-2.5), x)


@PER_OP
@given(data=st.data(), shape=shapes(max_dims=2, max_side=4))
def test_ediff1d(data, shape):
    dt = data.draw(dtypes(*NUMERIC_DTYPES))
    x = data.draw(arrays(dt, shape))
    check_op(_call("ediff1d"), np.ediff1d, x)
    check_op(_call("ediff1d", to_begin=[7], to_end=np.array([1, 2])),
             _ref("ediff1d", to_begin=[7], to_end=np.array([1, 2])), x)


@PER_OP
@given(data=st.data(), shape=shapes(min_dims=1, max_dims=3, min_side=3, max_side=5),
       edge_order=st.sampled_from([1, 2]))
def test_gradient(data, shape, edge_order):
    dt = data.draw(dtypes(*NUMERIC_DTYPES))
    f = data.draw(arrays(dt, shape, specials=False))
    check_op(lambda M, a: M.gradient(a, edge_order=edge_order),
             lambda a: np.gradient(a, edge_order=edge_order), f)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis]
    coordinates = np.cumsum(data.draw(hnp.arrays(np.float64, (n,),
                                                 elements=st.floats(0.25, 2.0))))
    spacing = data.draw(st.sampled_from([0.5, 2, np.float64(0.25)]))
    # coordinates known while building (a constant): NumPy's formulas to the bit
    check_op(lambda M, a: M.gradient(a, coordinates, axis=axis, edge_order=edge_order),
             lambda a: np.gradient(a, coordinates, axis=axis, edge_order=edge_order), f)
    check_op(lambda M, a: M.gradient(a, spacing, axis=axis, edge_order=edge_order),
             lambda a: np.gradient(a, spacing, axis=axis, edge_order=edge_order), f)
    # coordinates as a graph input: the non-uniform formulas
    check_op(lambda M, a, x: M.gradient(a, x, axis=axis, edge_order=edge_order),
             lambda a, x: np.gradient(a, x, axis=axis, edge_order=edge_order), f, coordinates,
             rtol=1e-9, atol=1e-9)


@PER_OP
@given(data=st.data(), shape=shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
       dx=st.sampled_from([1.0, 0.5, 3]))
def test_trapezoid(data, shape, dx):
    dt = data.draw(dtypes(*NUMERIC_DTYPES))
    y = data.draw(arrays(dt, shape, specials=False))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    check_op(_call("trapezoid", dx=dx, axis=axis), _ref("trapezoid", dx=dx, axis=axis), y)
    x = np.sort(data.draw(arrays(np.float64, (shape[axis],), specials=False)))
    check_op(lambda M, a, b: M.trapezoid(a, b, axis=axis),
             lambda a, b: np.trapezoid(a, b, axis=axis), y, x)


@PER_OP
@given(data=st.data(), shape=shapes(min_dims=1, max_dims=2, min_side=1, max_side=6),
       period=st.sampled_from([2 * np.pi, 360.0, 6]), discont=st.sampled_from([None, 4.0]))
def test_unwrap(data, shape, period, discont):
    dt = data.draw(dtypes(*NUMERIC_DTYPES)) if period == 6 else np.float64
    p = data.draw(arrays(dt, shape, low=-20, high=20, specials=False))
    kwargs = {"period": period, "discont": discont}
    check_op(_call("unwrap", **kwargs), _ref("unwrap", **kwargs), p, rtol=1e-12, atol=1e-12)


# -- polynomials ---------------------------------------------------------------------------
@PER_OP
@given(data=st.data(), n=st.integers(1, 5), m=st.integers(1, 5), shape=shapes(max_dims=2))
def test_polynomials(data, n, m, shape):
    dt = data.draw(dtypes(*NUMERIC_DTYPES))
    p = data.draw(arrays(dt, (n,), specials=False))
    q = data.draw(arrays(np.float64, (m,), specials=False))
    x = data.draw(arrays(np.float64, shape, specials=False))
    check_op(_call("polyval"), np.polyval, p, x)
    check_op(_call("polyadd"), np.polyadd, p, q)
    check_op(_call("polysub"), np.polysub, p, q)
    check_op(_call("polymul"), np.polymul, p, q, **BLAS)
    for order in (0, 1, 2):
        check_op(_call("polyder", m=order), _ref("polyder", m=order), p)
        check_op(_call("polyint", m=order, k=[1.5] * order),
                 _ref("polyint", m=order, k=[1.5] * order), p)
    check_op(_call("poly"), np.poly, p)


# -- gradients ----------------------------------------------------------------------------
def _rng():
    return np.random.default_rng(3)


GRADIENTS = {
    "fmax": (lambda M, a, b: M.fmax(a, b), 2), "fmin": (lambda M, a, b: M.fmin(a, b), 2),
    "logaddexp": (lambda M, a, b: M.logaddexp(a, b), 2),
    "logaddexp2": (lambda M, a, b: M.logaddexp2(a, b), 2),
    "heaviside": (lambda M, a, b: M.heaviside(a, b), 2),
    "fmod": (lambda M, a, b: M.fmod(a, M.add(M.abs(b), 1.0)), 2),
    "copysign": (lambda M, a, b: M.copysign(a, b), 2),
    "nextafter": (lambda M, a, b: M.nextafter(a, b), 2),
    "float_power": (lambda M, a, b: M.float_power(M.add(M.abs(a), 1.0), b), 2),
    "sinc": (lambda M, a: M.sinc(a), 1), "deg2rad": (lambda M, a: M.deg2rad(a), 1),
    "rad2deg": (lambda M, a: M.rad2deg(a), 1), "cbrt": (lambda M, a: M.cbrt(a), 1),
    "i0": (lambda M, a: M.i0(M.multiply(a, 5.0)), 1),
    "modf": (lambda M, a: M.modf(a)[0], 1), "frexp": (lambda M, a: M.frexp(a)[0], 1),
    "ldexp": (lambda M, a: M.ldexp(a, np.array([1, -2, 3])), 1),
    "nan_to_num": (lambda M, a: M.nan_to_num(a), 1), "angle": (lambda M, a: M.angle(a), 1),
    "outer": (lambda M, a, b: M.outer(a, b), 2), "inner": (lambda M, a, b: M.inner(a, b), 2),
    "vdot": (lambda M, a, b: M.vdot(a, b), 2), "vecdot": (lambda M, a, b: M.vecdot(a, b), 2),
    "kron": (lambda M, a, b: M.kron(a, b), 2),
    "cross": (lambda M, a, b: M.cross(a, b), 2),
    "trace": (lambda M, a: M.trace(M.reshape(a, (1, 3)), offset=-0), 1),
    "convolve": (lambda M, a, b: M.convolve(a, b, mode="same"), 2),
    "correlate": (lambda M, a, b: M.correlate(a, b, mode="full"), 2),
    "average": (lambda M, a, b: M.average(a, weights=M.add(M.abs(b), 1.0)), 2),
    "ptp": (lambda M, a: M.ptp(a), 1),
    "diff": (lambda M, a: M.diff(a, n=2, prepend=0.5), 1),
    "gradient": (lambda M, a: M.gradient(a, edge_order=2), 1),
    "trapezoid": (lambda M, a, b: M.trapezoid(a, b), 2),
    "unwrap": (lambda M, a: M.unwrap(M.multiply(a, 3.0)), 1),
    "polyval": (lambda M, a, b: M.polyval(a, b), 2),
    "polymul": (lambda M, a, b: M.polymul(a, b), 2),
    "polyint": (lambda M, a: M.polyint(a, m=2), 1),
    "poly": (lambda M, a: M.poly(a), 1),
}


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradients_match_finite_differences(name):
    fn, arity = GRADIENTS[name]
    rng = _rng()
    # values 0.25 apart, away from every kink (ties, zeros, multiples of a period)
    values = [(rng.permutation(3) - 1) * 0.75 + 0.3 + 0.11 * k for k in range(arity)]
    check_gradient(fn, *values, rtol=1e-5, atol=1e-6)


def test_gradient_of_cov_and_corrcoef():
    x = _rng().uniform(-2, 2, (2, 4))
    check_gradient(lambda M, a: M.cov(a), x)
    check_gradient(lambda M, a: M.corrcoef(a), x, atol=1e-5)


# -- errors -----------------------------------------------------------------------------------
ERRORS = [
    ("diff", lambda: N.diff(N.var("x", (3,)), n=-1), graphc.ShapeError, "order"),
    ("cross", lambda: N.cross(N.var("x", (4,)), N.var("y", (3,))), graphc.ShapeError, "2 or 3"),
    ("convolve", lambda: N.convolve(N.var("x", (0,)), N.var("y", (3,))), graphc.ShapeError,
     "empty"),
    ("correlate", lambda: N.correlate(N.var("x", (2, 2)), N.var("y", (3,))), graphc.ShapeError,
     "1-d"),
    ("convolve", lambda: N.convolve(N.var("x", (3,)), N.var("y", (3,)), mode="wrap"),
     graphc.ShapeError, "mode"),
    ("gradient", lambda: N.gradient(N.var("x", (1, 4))), graphc.ShapeError, "too small"),
    ("gradient", lambda: N.gradient(N.var("x", (3,)), np.arange(4.0)), graphc.ShapeError,
     "match"),
    ("matvec", lambda: N.matvec(N.var("a", (2, 3)), N.var("v", (2,))), graphc.ShapeError,
     "core"),
    ("vdot", lambda: N.vdot(N.var("a", (2, 3)), N.var("v", (5,))), graphc.ShapeError, "sizes"),
    ("average", lambda: N.average(N.var("a", (2, 3)), weights=N.var("w", (3,))),
     graphc.ShapeError, "axis"),
    ("trace", lambda: N.trace(N.var("a", (3,))), graphc.ShapeError, "2 axes"),
    ("poly", lambda: N.poly(N.var("a", (2, 2, 2))), graphc.ShapeError, "1-d"),
    ("ediff1d", lambda: N.ediff1d(N.var("a", (3,), np.int32), to_end=[0.5]),
     graphc.DTypeError, "to_end"),
    ("signbit", lambda: N.signbit(N.var("a", (3,), np.complex64)), graphc.DTypeError,
     "signbit"),
]


@pytest.mark.parametrize("name, build, error, words", ERRORS,
                         ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_bad_arguments_name_the_function(name, build, error, words):
    with pytest.raises(error) as info:
        build()
    assert name in str(info.value) and words in str(info.value)


def test_operators_on_floats_still_refuse():
    x = N.var("x", (3,), np.float32)
    for op in INT_OPERATORS.values():
        with pytest.raises(graphc.DTypeError):
            op(x, 1)





# -- polynomial fitting, division and roots ---------------------------------------------
@pytest.mark.parametrize("deg", [0, 1, 3])
@pytest.mark.parametrize("columns", [None, 2])
def test_polyfit_matches_numpy(deg, columns):
    rng = np.random.default_rng(deg)
    x = np.linspace(-2, 3, 12)
    y = rng.standard_normal(12 if columns is None else (12, columns))
    w = rng.uniform(0.5, 2.0, 12)
    check_op(lambda M, a, b, c: M.polyfit(a, b, deg, w=c),
             lambda a, b, c: np.polyfit(a, b, deg, w=c), x, y, w, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("sizes", [(5, 3), (4, 4), (6, 2), (3, 1)])
def test_polydiv_matches_numpy(sizes):
    rng = np.random.default_rng(sum(sizes))
    u, v = rng.uniform(1, 2, sizes[0]), rng.uniform(1, 2, sizes[1])
    check_op(lambda M, a, b: list(M.polydiv(a, b)), lambda a, b: list(np.polydiv(a, b)), u, v,
             rtol=1e-12, atol=1e-12)


def test_roots_are_the_companion_matrix_eigenvalues():
    p = np.poly([3.0, -1.0, 0.5, 2.0])           # real, distinct roots
    got = np.sort_complex(E.roots(p))
    assert got.dtype == np.complex128
    np.testing.assert_allclose(got, np.sort_complex(np.roots(p).astype(complex)), atol=1e-9)
    x = N.var("p", (5,), np.float64)
    graph = graphc.compile([x], [N.roots(x)]).run(p=p)[0]
    np.testing.assert_allclose(np.sort_complex(graph), got, atol=1e-9)
