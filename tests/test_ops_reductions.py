"""Reductions match NumPy in graph mode (both memory plans) and eager mode:
``axis`` as None, an int (negative too) or a tuple, ``keepdims``, every dtype;
``argmax``/``argmin``; ``var``/``std`` with ``ddof``; ``logsumexp`` against SciPy
(rows of ``-inf`` included)."""
import inspect
import sys

import hypothesis.strategies as st
import numpy as np
import pytest
import scipy.special
from hypothesis import given

import graphc
import graphc.ndarray as N
from opcheck import (ALL_DTYPES, FLOAT_DTYPES, arrays, axis_args, check_op, dtypes, elements,
                     examples, shapes)

REDUCTIONS = {"sum": np.sum, "prod": np.prod, "max": np.max, "amax": np.amax, "min": np.min,
              "amin": np.amin, "mean": np.mean, "any": np.any, "all": np.all}


@st.composite
def array_and_axis(draw, dtype_choices=ALL_DTYPES, min_dims=0, **element_options):
    dtype = draw(st.sampled_from(dtype_choices))
    x = draw(arrays(dtype, shapes(min_dims=min_dims), **element_options))
    return x, draw(axis_args(x.ndim))


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@examples(20)
@given(xa=array_and_axis(), keepdims=st.booleans())
def test_reduction_matches_numpy(name, xa, keepdims):
    """Zero-size axes included: max/min of nothing is a ShapeError where NumPy's is a
    ValueError; sum/prod/any/all give the identity, mean gives NaN."""
    x, axis = xa
    ref = REDUCTIONS[name]
    check_op(lambda M, a: getattr(M, name)(a, axis=axis, keepdims=keepdims),
             lambda a: ref(a, axis=axis, keepdims=keepdims), x)


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "any", "all"])
@examples(20)
@given(xa=array_and_axis(min_dims=1), keepdims=st.booleans())
def test_reduction_methods_match_ndarray_methods(name, xa, keepdims):
    x, axis = xa
    check_op(lambda M, a: getattr(a, name)(axis=axis, keepdims=keepdims),
             lambda a: getattr(a, name)(axis=axis, keepdims=keepdims), x, eager=False)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@given(data=st.data(), dtype=dtypes(), shape=shapes(), keepdims=st.booleans())
def test_arg_reduction_matches_numpy(name, data, dtype, shape, keepdims):
    """Ties and NaN give the first index, as in NumPy; the dtype is intp."""
    x = data.draw(arrays(dtype, shape, low=-2, high=2))
    axis = data.draw(axis_args(x.ndim, allow_tuple=False))
    ref = getattr(np, name)
    check_op(lambda M, a: getattr(M, name)(a, axis=axis, keepdims=keepdims),
             lambda a: ref(a, axis=axis, keepdims=keepdims), x)
    check_op(lambda M, a: getattr(a, name)(axis=axis, keepdims=keepdims),
             lambda a: getattr(a, name)(axis=axis, keepdims=keepdims), x, eager=False)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reduction_refuses_a_tuple_of_axes(name):
    x = N.var("x", (2, 3))
    with pytest.raises(TypeError):
        getattr(np, name)(np.zeros((2, 3)), axis=(0,))
    with pytest.raises(TypeError):
        getattr(N, name)(x, axis=(0,))


def _tolerance(dtype):
    return {"rtol": 2e-5, "atol": 1e-5} if np.dtype(dtype) == np.float32 else \
        {"rtol": 1e-12, "atol": 1e-12}


@pytest.mark.parametrize("name", ["var", "std"])
@examples(20)
@given(xa=array_and_axis(specials=False), keepdims=st.booleans(), ddof=st.integers(0, 3))
def test_var_std_match_numpy(name, xa, keepdims, ddof):
    """ddof may reach or pass the count: NumPy divides by max(n - ddof, 0)."""
    x, axis = xa
    ref = getattr(np, name)
    result_dtype = np.var(np.ones(1, x.dtype)).dtype
    check_op(lambda M, a: getattr(M, name)(a, axis=axis, ddof=ddof, keepdims=keepdims),
             lambda a: ref(a, axis=axis, ddof=ddof, keepdims=keepdims), x,
             **_tolerance(result_dtype))
    check_op(lambda M, a: getattr(a, name)(axis=axis, ddof=ddof, keepdims=keepdims),
             lambda a: getattr(a, name)(axis=axis, ddof=ddof, keepdims=keepdims), x,
             eager=False, **_tolerance(result_dtype))


@given(xa=array_and_axis(FLOAT_DTYPES, specials=False), ddof=st.integers(0, 2))
def test_var_is_also_named_variance(xa, ddof):
    x, axis = xa
    check_op(lambda M, a: M.variance(a, axis=axis, ddof=ddof),
             lambda a: np.var(a, axis=axis, ddof=ddof), x, **_tolerance(x.dtype))


def test_var_with_a_name_declares_a_variable():
    x = N.var("x", (2, 3), np.float64)
    assert x.op.kind == "var" and x.shape == (2, 3) and x.dtype == np.float64
    v = N.var(x, axis=0)
    assert v.shape == (3,) and v.op.kind != "var"


@st.composite
def logsumexp_case(draw):
    dtype = draw(st.sampled_from(FLOAT_DTYPES))
    values = st.one_of(elements(dtype, specials=False, low=-30, high=30),
                       st.just(-np.inf))
    # 0-d arrays left out: SciPy gives them shape (1,) with keepdims or axis=()
    x = draw(arrays(dtype, shapes(min_dims=1, min_side=1), low=-30, high=30, specials=False))
    if x.size:
        x = np.where(draw(arrays(np.bool_, x.shape)), x, draw(values))
    return x.astype(dtype), draw(axis_args(x.ndim))


@examples(60)
@given(case=logsumexp_case(), keepdims=st.booleans())
def test_logsumexp_matches_scipy(case, keepdims):
    x, axis = case
    check_op(lambda M, a: M.logsumexp(a, axis=axis, keepdims=keepdims),
             lambda a: scipy.special.logsumexp(a, axis=axis, keepdims=keepdims), x,
             **_tolerance(x.dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_logsumexp_rows_of_minus_inf_and_large_values(dtype):
    x = np.array([[-np.inf, -np.inf, -np.inf], [1000.0, 1000.0, -np.inf], [-1.0, 0.0, 1.0],
                  [np.inf, 0.0, -np.inf]], dtype=dtype)
    expected = check_op(lambda M, a: M.logsumexp(a, axis=1), lambda a: scipy.special.logsumexp(
        a, axis=1), x, **_tolerance(dtype))[0]
    assert expected[0] == -np.inf and np.isfinite(expected[1]) and expected[3] == np.inf


@given(data=st.data(), dtype=dtypes(np.int32, np.int64, np.bool_),
       shape=shapes(min_dims=1, min_side=1))
def test_logsumexp_of_integers_matches_scipy(data, dtype, shape):
    x = data.draw(arrays(dtype, shape))
    axis = data.draw(axis_args(x.ndim))
    check_op(lambda M, a: M.logsumexp(a, axis=axis), lambda a: scipy.special.logsumexp(
        a, axis=axis), x, rtol=1e-12, atol=1e-12)


# -- errors ---------------------------------------------------------------------------
BAD_AXES = [2, -3, (0, 2), (1, -1)]  # out of bounds either side, repeated (1 == -1)


@pytest.mark.parametrize("axis", BAD_AXES)
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "any", "all", "var",
                                  "std", "logsumexp"])
def test_bad_axis_is_a_shape_error(name, axis):
    x = N.var("x", (2, 3))
    with pytest.raises(graphc.ShapeError, match="var|std" if name == "std" else name):
        getattr(N, name)(x, axis=axis)
    ref = scipy.special.logsumexp if name == "logsumexp" else getattr(np, name)
    with pytest.raises(ValueError):  # NumPy refuses it too
        ref(np.zeros((2, 3)), axis=axis)


@pytest.mark.parametrize("axis", [2, -3])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_bad_axis_of_arg_reduction_is_a_shape_error(name, axis):
    with pytest.raises(graphc.ShapeError, match=name):
        getattr(N, name)(N.var("x", (2, 3)), axis=axis)


@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin"])
def test_empty_reduction_without_identity_names_op_shape_and_line(name):
    x = N.var("x", (3, 0))
    with pytest.raises(graphc.ShapeError) as info:
        line = sys._getframe().f_lineno; getattr(N, name)(x, axis=1)  # noqa: E702
    message = str(info.value)
    assert name in message and "(3, 0)" in message
    assert f"test_ops_reductions.py:{line}" in message
    assert getattr(N, name)(x, axis=0).shape == (0,)


# -- dtype= (NumPy's accumulator and result type) ------------------------------------------
def _accumulation_tolerance(x, dtype):
    """Exact for integers and booleans; for floats, the rounding of a sum of
    ``x.size`` terms of up to 3 in ``dtype``, in whatever order it is added."""
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        return {}
    return {"rtol": 4 * np.finfo(dtype).eps * max(x.size, 1),
            "atol": 4 * np.finfo(dtype).eps * 3 * max(x.size, 1)}


@pytest.mark.parametrize("name", ["sum", "prod", "mean"])
@examples(30)
@given(xa=array_and_axis(specials=False, low=-3, high=3), keepdims=st.booleans(),
       dtype=dtypes())
def test_reduction_with_dtype_matches_numpy(name, xa, keepdims, dtype):
    """``dtype=`` casts first, as NumPy does (float to int truncates), computes and
    returns that dtype; integer results wrap as NumPy's do."""
    x, axis = xa
    ref = getattr(np, name)
    check_op(lambda M, a: getattr(M, name)(a, axis=axis, keepdims=keepdims, dtype=dtype),
             lambda a: ref(a, axis=axis, keepdims=keepdims, dtype=dtype), x,
             **_accumulation_tolerance(x, dtype))


@pytest.mark.parametrize("name", ["var", "std"])
@examples(20)
@given(xa=array_and_axis(specials=False, low=-3, high=3), dtype=dtypes(*FLOAT_DTYPES))
def test_var_std_with_a_float_dtype_match_numpy(name, xa, dtype):
    x, axis = xa
    ref = getattr(np, name)
    check_op(lambda M, a: getattr(M, name)(a, axis=axis, dtype=dtype),
             lambda a: ref(a, axis=axis, dtype=dtype), x, **_accumulation_tolerance(x, dtype))


def test_sum_of_float32_in_float64_keeps_what_float32_loses():
    x = N.var("x", (3,))
    values = np.array([1.0, 1e-8, -1.0], np.float32)
    g = graphc.compile([x], [N.sum(x, dtype=np.float64), N.sum(x)])
    wide, narrow = g.run(values)
    assert wide.dtype == np.float64 and narrow.dtype == np.float32
    assert wide == np.sum(values, dtype=np.float64) and wide != 0.0


@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std_refuse_a_non_float_dtype(name):
    with pytest.raises(graphc.DTypeError, match=f"{name}.*floating-point.*int64"):
        getattr(N, name)(N.var("x", (3,)), dtype=np.int64)


def test_a_dtype_given_where_keepdims_goes_is_a_clear_type_error():
    """NumPy's third positional argument is dtype; graphc's is keepdims (as before)."""
    with pytest.raises(TypeError, match=r"sum: keepdims must be True or False.*dtype="):
        N.sum(N.var("x", (2, 3)), 0, np.float64)


@pytest.mark.parametrize("name", ["max", "min", "any", "all", "argmax", "argmin"])
def test_reductions_numpy_gives_no_dtype_refuse_it_naming_themselves(name):
    with pytest.raises(TypeError) as info:
        getattr(N, name)(N.var("x", (2, 3)), dtype=np.float64)
    message = str(info.value)
    assert message.startswith(f"N.{name}() got an unexpected keyword argument 'dtype'")
    assert "takes (x, axis=None, keepdims=False)" in message
    with pytest.raises(TypeError):                 # NumPy has no dtype= there either
        getattr(np, name)(np.zeros((2, 3)), dtype=np.float64)


# -- every public function of graphc.ndarray names itself in argument errors ---------------
def _takes_any_keyword(function) -> bool:
    """``N.fromfunction`` passes unknown keywords on to the user's function, as NumPy's."""
    return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(function).parameters.values())


def _public_functions():
    functions = {f"N.{name}": getattr(N, name) for name in N.__all__
                 if callable(getattr(N, name)) and not isinstance(getattr(N, name), type)}
    for module in ("random", "linalg", "fft"):
        functions.update({f"N.{module}.{name}": getattr(getattr(N, module), name)
                          for name in dir(getattr(N, module)) if not name.startswith("_")
                          and not isinstance(getattr(getattr(N, module), name), type)})
    return {k: f for k, f in functions.items() if not _takes_any_keyword(f)}


@pytest.mark.parametrize("qualified", sorted(_public_functions()))
def test_an_unknown_keyword_names_the_public_function_and_what_it_takes(qualified):
    function = _public_functions()[qualified]
    with pytest.raises(TypeError) as info:
        function(N.var("x", (2, 3)), zzz_not_an_argument=1)
    message = str(info.value)
    # a function of several arrays misses one first (N.random.beta(a, b))
    assert message.startswith((f"{qualified}() got an unexpected keyword argument "
                               "'zzz_not_an_argument'", f"{qualified}() missing a required "
                               "argument")), message
    assert f"; {qualified} takes (" in message and "<locals>" not in message


def _eager_functions():
    import graphc.eager as E
    return {f"E.{name}": getattr(E, name) for name in E.__all__
            if name not in ("evaluate", "grad", "value_and_grad")
            and callable(getattr(E, name)) and not isinstance(getattr(E, name), type)
            and not _takes_any_keyword(getattr(E, name))}


@pytest.mark.parametrize("qualified", sorted(_eager_functions()))
def test_an_unknown_keyword_to_an_eager_function_names_it(qualified):
    function = _eager_functions()[qualified]
    with pytest.raises(TypeError) as info:
        function(np.ones((2, 3), np.float32), zzz_not_an_argument=1)
    message = str(info.value)
    assert message.startswith(f"{qualified}() got an unexpected keyword argument "
                              "'zzz_not_an_argument'"), message
    assert "<locals>" not in message


def test_too_many_positional_arguments_name_the_public_function():
    with pytest.raises(TypeError, match=r"^N\.exp\(\) too many positional arguments; "
                                        r"N\.exp takes \(x\)$"):
        N.exp(N.var("x", (2,)), 1.0)


def test_a_type_error_of_the_computation_itself_is_left_as_it_is():
    """Arguments that fit the signature: the function's own error comes through."""
    with pytest.raises(TypeError, match="^argmax: axis must be an integer or None"):
        N.argmax(N.var("x", (2, 3)), axis=(0,))
