"""Sorting, searching, cumulative functions, order statistics, the nan-functions and
the functions of a value-dependent size (static ``size=``) against NumPy, in graph
mode (both plans) and eager mode (opcheck.check_op); gradients against finite
differences (gradcheck.check_gradient)."""
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

import graphc
import graphc.eager as E
import graphc.ndarray as N
from gradcheck import check_gradient
from opcheck import arrays, check_op, examples, shapes

FLOATS = (np.float32, np.float64)
NUMBERS = FLOATS + (np.int32, np.int64)


@st.composite
def array_and_axis(draw, dtypes=NUMBERS, min_dims=1, min_side=0, specials=True, low=None):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(shapes(min_dims=min_dims, max_dims=3, min_side=min_side, max_side=5))
    # few distinct values: ties
    x = draw(arrays(dtype, shape, specials=specials, low=low, high=None if low is None else 3))
    axis = draw(st.integers(-len(shape), len(shape) - 1)) if shape else None
    return x, axis


@examples(40)
@given(array_and_axis(dtypes=NUMBERS + (np.bool_,)), st.booleans())
def test_sort_and_argsort_match_numpy(case, stable):
    x, axis = case
    check_op(lambda M, a: M.sort(a, axis=axis, stable=stable), lambda a: np.sort(a, axis), x)
    if stable:      # an unstable argsort may order ties differently from NumPy's own call
        check_op(lambda M, a: M.argsort(a, axis=axis, stable=True),
                 lambda a: np.argsort(a, axis=axis, stable=True), x)
    check_op(lambda M, a: M.sort(a, axis=None), lambda a: np.sort(a, axis=None), x)


@examples(30)
@given(array_and_axis(min_side=1))
def test_partition_places_the_kth_element(case):
    x, axis = case
    k = x.shape[axis] // 2
    got = E.partition(x, k, axis=axis)
    expected = np.partition(x, k, axis=axis)
    kth = (slice(None),) * (axis % x.ndim) + (k,)
    np.testing.assert_array_equal(got[kth], expected[kth])
    order = E.argpartition(x, k, axis=axis)
    np.testing.assert_array_equal(np.take_along_axis(x, order, axis)[kth], expected[kth])


@examples(40)
@given(array_and_axis(), st.sampled_from(["cumsum", "cumprod", "nancumsum", "nancumprod"]),
       st.sampled_from([None, np.float64, np.int64]))
def test_cumulative_functions_match_numpy(case, name, dtype):
    x, axis = case
    check_op(lambda M, a: getattr(M, name)(a, axis=axis, dtype=dtype),
             lambda a: getattr(np, name)(a, axis=axis, dtype=dtype), x)
    check_op(lambda M, a: getattr(M, name)(a), lambda a: getattr(np, name)(a), x)


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
@pytest.mark.parametrize("include_initial", [False, True])
def test_array_api_cumulatives(name, include_initial):
    x = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    for axis in (0, 1, -1):
        check_op(lambda M, a: getattr(M, name)(a, axis=axis, include_initial=include_initial),
                 lambda a: getattr(np, name)(a, axis=axis, include_initial=include_initial), x)


@examples(40)
@given(array_and_axis(dtypes=FLOATS + (np.int64,), min_side=1),
       st.sampled_from(["linear", "lower", "higher", "nearest", "midpoint", "inverted_cdf",
                        "averaged_inverted_cdf", "closest_observation", "hazen", "weibull",
                        "interpolated_inverted_cdf", "median_unbiased", "normal_unbiased"]),
       st.sampled_from([37.5, 0, 100, [10.0, 50.0, 90.0]]), st.booleans())
def test_percentiles_and_quantiles_match_numpy_bits(case, method, q, keepdims):
    x, axis = case
    for name, scale in (("percentile", 1), ("quantile", 100), ("nanpercentile", 1),
                        ("nanquantile", 100)):
        qq = q / scale if np.ndim(q) == 0 else [v / scale for v in q]
        check_op(lambda M, a: getattr(M, name)(a, qq, axis=axis, method=method,
                                               keepdims=keepdims),
                 lambda a: getattr(np, name)(a, qq, axis=axis, method=method,
                                             keepdims=keepdims), x)


@examples(40)
@given(array_and_axis(min_side=1), st.booleans())
def test_medians_match_numpy(case, keepdims):
    x, axis = case
    for name in ("median", "nanmedian"):
        for ax in (axis, None):
            check_op(lambda M, a: getattr(M, name)(a, axis=ax, keepdims=keepdims),
                     lambda a: getattr(np, name)(a, axis=ax, keepdims=keepdims), x)


@examples(40)
@given(array_and_axis(min_side=1), st.booleans())
def test_nan_reductions_match_numpy(case, keepdims):
    x, axis = case
    for name in ("nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd"):
        check_op(lambda M, a: getattr(M, name)(a, axis=axis, keepdims=keepdims),
                 lambda a: getattr(np, name)(a, axis=axis, keepdims=keepdims), x,
                 rtol=1e-6 if name in ("nanvar", "nanstd") else None)
    if not (x.dtype.kind == "f" and np.isnan(x).all(axis=axis).any()):
        for name in ("nanargmax", "nanargmin"):
            check_op(lambda M, a: getattr(M, name)(a, axis=axis),
                     lambda a: getattr(np, name)(a, axis=axis), x)


def test_nanargmax_of_an_all_nan_slice():
    x = np.array([[np.nan, np.nan], [1.0, np.nan]])
    with pytest.raises(graphc.ShapeError, match="All-NaN"):
        E.nanargmax(x, axis=1)
    xv = N.var("x", x.shape, x.dtype)
    (got,) = graphc.compile([xv], [N.nanargmax(xv, axis=1)]).run(x=x)
    np.testing.assert_array_equal(got, [-1, 0])


@examples(40)
@given(st.sampled_from(NUMBERS), st.integers(0, 6), shapes(max_dims=2, max_side=4),
       st.sampled_from(["left", "right"]), st.data())
def test_searchsorted_and_digitize_match_numpy(dtype, n, vshape, side, data):
    a = np.sort(data.draw(arrays(dtype, (n,), specials=False, low=-4, high=4)))
    v = data.draw(arrays(dtype, vshape, specials=False, low=-5, high=5))
    check_op(lambda M, s, w: M.searchsorted(s, w, side=side),
             lambda s, w: np.searchsorted(s, w, side=side), a, v)
    if n:
        for bins in (a, a[::-1]):
            check_op(lambda M, w, b: M.digitize(w, b, right=side == "right"),
                     lambda w, b: np.digitize(w, b, right=side == "right"), v, bins)
    sorter = np.argsort(a[::-1], kind="stable")
    check_op(lambda M, s, w: M.searchsorted(s, w, sorter=sorter),
             lambda s, w: np.searchsorted(s, w, sorter=sorter), a[::-1].copy(), v)


def test_lexsort_and_sort_complex():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 3, (3, 10))
    check_op(lambda M, k: M.lexsort(k), np.lexsort, keys)
    check_op(lambda M, a, b: M.lexsort((a, b)), lambda a, b: np.lexsort((a, b)),
             keys[0], keys[1])
    check_op(lambda M, a: M.sort_complex(a), np.sort_complex,
             rng.integers(-3, 3, 6).astype(np.float32))


@examples(30)
@given(array_and_axis(min_side=1), st.data())
def test_take_along_axis_matches_numpy(case, data):
    x, axis = case
    n = x.shape[axis]
    shape = list(x.shape)
    shape[axis] = data.draw(st.integers(0, 4))
    shape = [1 if i != axis % x.ndim and data.draw(st.booleans()) else d
             for i, d in enumerate(shape)]
    idx = data.draw(arrays(np.int64, tuple(shape), low=-n, high=n - 1))
    check_op(lambda M, a, i: M.take_along_axis(a, i, axis=axis),
             lambda a, i: np.take_along_axis(a, i, axis=axis), x, idx)


# -- value-dependent sizes -------------------------------------------------------------------
@examples(30)
@given(array_and_axis(dtypes=(np.int64, np.float64, np.bool_), low=0), st.integers(0, 8))
def test_nonzero_argwhere_flatnonzero_with_a_size(case, extra):
    x, _ = case
    count = np.count_nonzero(x)
    size = count + extra
    pad = lambda r: np.concatenate([r, np.full(size - count, -1, r.dtype)])  # noqa: E731
    check_op(lambda M, a: list(M.nonzero(a, size=size, fill_value=-1)),
             lambda a: [pad(r) for r in np.nonzero(a)], x)
    check_op(lambda M, a: M.flatnonzero(a, size=count), np.flatnonzero, x)
    check_op(lambda M, a: M.argwhere(a, size=count), np.argwhere, x)
    check_op(lambda M, a: M.nonzero(a, size=count)[0], lambda a: np.nonzero(a)[0], x)


def test_a_missing_size_is_named_in_the_error():
    x = N.var("x", (5,), np.int64)
    for call in (N.nonzero, N.unique, N.flatnonzero, N.argwhere,
                 lambda v: N.bincount(v), lambda v: N.extract(v > 0, v),
                 lambda v: N.setdiff1d(v, v), lambda v: N.trim_zeros(v)):
        with pytest.raises(graphc.ShapeError, match=r"size=|length="):
            call(x)
    # known values need no size: eager arrays and constants
    np.testing.assert_array_equal(E.nonzero(np.array([0, 2, 3]))[0], [1, 2])


@examples(30)
@given(array_and_axis(dtypes=(np.int64, np.float64), low=-2))
def test_unique_family_matches_numpy(case):
    x, _ = case
    count = np.unique(x).size
    check_op(lambda M, a: list(M.unique(a, True, True, True, size=count)),
             lambda a: list(np.unique(a, True, True, True)), x)
    count = np.unique(x, equal_nan=False).size
    check_op(lambda M, a: list(M.unique_all(a, size=count)), lambda a: list(np.unique_all(a)),
             x)
    # NumPy's unique_values gives its values in no promised order (a hash table since
    # NumPy 2.3); graphc's are sorted
    check_op(lambda M, a: M.unique_values(a, size=count), lambda a: np.sort(np.unique_values(a)),
             x)


def test_unique_pads_with_fill_value():
    x = np.array([3, 1, 3])
    xv = N.var("x", (3,), np.int64)
    (got,) = graphc.compile([xv], [N.unique(xv, size=4, fill_value=-7)]).run(x=x)
    np.testing.assert_array_equal(got, [1, 3, -7, -7])


@examples(30)
@given(st.lists(st.integers(-3, 3), max_size=8), st.lists(st.integers(-3, 3), max_size=8))
def test_set_functions_match_numpy(a, b):
    a, b = np.array(a, np.int64), np.array(b, np.int64)
    check_op(lambda M, u, v: M.isin(u, v), np.isin, a, b)
    check_op(lambda M, u, v: M.isin(u, v, invert=True), lambda u, v: np.isin(u, v, invert=True),
             a, b)
    for name in ("intersect1d", "setdiff1d", "setxor1d", "union1d"):
        size = getattr(np, name)(a, b).size
        check_op(lambda M, u, v: getattr(M, name)(u, v, size=size), getattr(np, name), a, b)


def test_extract_compress_trim_zeros():
    x = np.array([0.0, 0.0, 2.0, -1.0, 0.0, 3.0, 0.0])
    check_op(lambda M, a: M.extract(M.greater(a, 0), a, size=2),
             lambda a: np.extract(a > 0, a), x)
    check_op(lambda M, a: M.compress([True, False, True], a), lambda a: np.compress(
        [True, False, True], a), x)
    m = np.arange(12.0).reshape(3, 4)
    check_op(lambda M, a: M.compress(M.greater(a[:, 0], 3), a, axis=0, size=2),
             lambda a: np.compress(a[:, 0] > 3, a, axis=0), m)
    for trim in ("fb", "f", "b"):
        size = np.trim_zeros(x, trim).size
        check_op(lambda M, a: M.trim_zeros(a, trim, size=size),
                 lambda a: np.trim_zeros(a, trim), x)


@examples(30)
@given(st.lists(st.integers(0, 6), max_size=10), st.integers(0, 4), st.booleans())
def test_bincount_matches_numpy(values, minlength, weighted):
    x = np.array(values, np.int64)
    w = np.linspace(-1, 1, x.size).astype(np.float32)
    length = max(int(x.max()) + 1 if x.size else 0, minlength)
    args = (x, w) if weighted else (x,)
    check_op(lambda M, *a: M.bincount(*a, minlength=minlength, length=length),
             lambda *a: np.bincount(*a, minlength=minlength), *args)


@examples(30)
@given(st.sampled_from(NUMBERS), shapes(min_dims=1, max_dims=1, max_side=12),
       st.sampled_from([3, 5, [-3.0, -1.0, 0.5, 2.0, 6.0]]), st.booleans(), st.booleans(),
       st.data())
def test_histograms_match_numpy(dtype, shape, bins, ranged, density, data):
    x = data.draw(arrays(dtype, shape, specials=False, low=-5, high=5))
    rng = (-2.0, 3.0) if ranged else None
    if x.size == 0 and not ranged:
        rng = (0.0, 1.0)
    check_op(lambda M, a: list(M.histogram(a, bins, range=rng, density=density)),
             lambda a: list(np.histogram(a, bins, range=rng, density=density)), x)
    check_op(lambda M, a: M.histogram_bin_edges(a, bins, range=rng),
             lambda a: np.histogram_bin_edges(a, bins, range=rng), x)
    y = x[::-1].copy()
    check_op(lambda M, a, b: [M.histogram2d(a, b, bins=3, range=[rng, rng] if rng else None)[0]],
             lambda a, b: [np.histogram2d(a, b, bins=3, range=[rng, rng] if rng else None)[0]],
             x, y)


def test_index_conversions_interp_and_bits():
    flat = np.array([0, 5, 11, 7])
    check_op(lambda M, i: list(M.unravel_index(i, (3, 4))), lambda i: list(
        np.unravel_index(i, (3, 4))), flat)
    check_op(lambda M, i: list(M.unravel_index(i, (3, 4), order="F")), lambda i: list(
        np.unravel_index(i, (3, 4), order="F")), flat)
    rows, cols = np.array([0, 2, 1]), np.array([3, 0, 5])
    for mode in ("wrap", "clip"):
        check_op(lambda M, r, c: M.ravel_multi_index((r, c), (3, 4), mode=mode),
                 lambda r, c: np.ravel_multi_index((r, c), (3, 4), mode=mode), rows, cols)
    x = np.array([-1.0, 0.0, 0.3, 1.0, 1.5, 2.0, 9.0, np.nan])
    xp, fp = np.array([0.0, 1.0, 2.0]), np.array([1.0, 3.0, -1.0])
    check_op(lambda M, a, p, f: M.interp(a, p, f), np.interp, x, xp, fp)
    check_op(lambda M, a, p, f: M.interp(a, p, f, left=-5.0, right=7.0),
             lambda a, p, f: np.interp(a, p, f, left=-5.0, right=7.0), x, xp, fp)
    bits = np.random.default_rng(0).integers(0, 2, (3, 11)).astype(np.bool_)
    for axis in (None, 0, 1):
        for order in ("big", "little"):
            check_op(lambda M, b: M.packbits(b, axis=axis, bitorder=order),
                     lambda b: np.packbits(b, axis=axis, bitorder=order), bits)
            packed = np.packbits(bits, axis=axis, bitorder=order)
            check_op(lambda M, b: M.unpackbits(b, axis=axis, bitorder=order),
                     lambda b: np.unpackbits(b, axis=axis, bitorder=order), packed)
    check_op(lambda M, b: M.unpackbits(b, count=-3), lambda b: np.unpackbits(b, count=-3),
             np.packbits(bits))


# -- gradients -----------------------------------------------------------------------------
def test_gradients_through_sort_and_order_statistics():
    rng = np.random.default_rng(3)
    x = rng.permutation(24).reshape(4, 6) / 7.0 - 1.0     # distinct: no ties
    for axis in (0, 1, None):
        check_gradient(lambda M, a: M.sort(a, axis=axis), x)
        check_gradient(lambda M, a: M.median(a, axis=axis), x)
        check_gradient(lambda M, a: M.percentile(a, [10.0, 65.0], axis=axis), x)
    check_gradient(lambda M, a: M.take_along_axis(a, np.array([[0, 3, 3], [1, 1, 0]]), 0),
                   x[:, :3].copy())
    y = x.copy()
    y[1, 2] = np.nan
    check_gradient(lambda M, a: M.nanquantile(a, 0.3, axis=1), y)
    check_gradient(lambda M, a: M.nanmean(a, axis=1), y)
    check_gradient(lambda M, a: M.nanvar(a, axis=1), y)


def test_gradients_of_cumulative_functions_with_zeros():
    rng = np.random.default_rng(4)
    x = rng.uniform(0.5, 1.5, (3, 5)) * rng.choice([-1.0, 1.0], (3, 5))
    for axis in (0, 1):
        check_gradient(lambda M, a: M.cumsum(a, axis=axis), x)
        check_gradient(lambda M, a: M.cumprod(a, axis=axis), x)
    with_zeros = x.copy()
    with_zeros[0, 1] = 0.0                 # one zero
    with_zeros[2, 1] = with_zeros[2, 3] = 0.0   # two zeros in a row
    # a product is linear in each element, so central differences are exact at zeros
    check_gradient(lambda M, a: M.cumprod(a, axis=1), with_zeros)


def test_gradient_of_bincount_weights():
    x = np.array([0, 2, 2, 5, 1])
    w = np.linspace(-1, 1, 5)
    check_gradient(lambda M, v, ww: M.bincount(v, ww, length=4), x, w, wrt=[1])


def test_errors_name_the_function_and_the_problem():
    x = N.var("x", (3, 4))
    with pytest.raises(graphc.ShapeError, match="quantile"):
        N.quantile(x, 1.5)
    with pytest.raises(graphc.ShapeError, match="method"):
        N.percentile(x, 50, method="cubic")
    with pytest.raises(graphc.ShapeError, match="searchsorted"):
        N.searchsorted(x, x)
    with pytest.raises(graphc.ShapeError, match="partition"):
        N.partition(x, 9)
    with pytest.raises(graphc.DTypeError, match="order="):
        N.sort(x, order="f")


def test_exported_kinds_match_onnxruntime():
    pytest.importorskip("onnxruntime")
    from graphc.onnx.export import to_onnx
    from onnx_reference import onnxruntime_run
    x, i = N.var("x", (3, 5), np.float32), N.var("i", (6,), np.int64)
    outs = [N.sort(x, axis=1), N.argsort(x, axis=0, stable=True), N.cumsum(x, axis=1),
            N.take_along_axis(x, N.argsort(x, axis=1, stable=True), 1),
            N.bincount(i, length=4), N.bincount(i, N.ones((6,)), length=3)]
    g = graphc.compile([x, i], outs)
    feeds = {"x": np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32),
             "i": np.array([0, 1, 1, 3, 7, -1])}
    for want, got in zip(g.run(**feeds), onnxruntime_run(to_onnx(g), feeds)):
        assert want.dtype == got.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)
