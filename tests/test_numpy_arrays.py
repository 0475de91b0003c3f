"""NumPy's array-building functions (graphc/operator/array_*.py) against NumPy, in graph
mode (both memory plans) and eager mode: conversions, patterned arrays, ranges,
triangles and diagonals, grids, joins and splits, rolls and rotations, insert and
delete, index helpers, select and choose, and the index-trick objects. Shapes, axes,
offsets and dtypes come from hypothesis; bad arguments must raise graphc's errors."""
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

import graphc
import graphc.eager as E
import graphc.ndarray as N
from gradcheck import check_gradient
from opcheck import (ALL_DTYPES, NUMERIC_DTYPES, arrays, check_op, check_values, dtypes,
                     examples, shapes)

F32 = np.float32
SMALL = dict(specials=False, low=-3, high=3)


def _float32(values):
    """NumPy's float64 creation results as graphc makes them without a dtype."""
    return np.asarray(values).astype(F32)


# -- conversions and filled arrays ------------------------------------------------------
@given(data=st.data(), dtype=dtypes(), new=st.sampled_from([None] + list(ALL_DTYPES)))
def test_array_and_asarray_pass_graph_values_through_and_cast(data, dtype, new):
    x = data.draw(arrays(dtype, shapes()))
    for name in ("array", "asarray", "asanyarray", "ascontiguousarray"):
        check_op(lambda M, a: getattr(M, name)(a, dtype=new),
                 lambda a: getattr(np, name)(a, dtype=new), x)
    check_op(lambda M, a: M.array(a, ndmin=3), lambda a: np.array(a, ndmin=3), x)


@given(values=st.lists(st.integers(-5, 5) | st.floats(-5, 5), min_size=0, max_size=5))
def test_array_of_python_lists_is_a_constant_with_numpys_dtype(values):
    check_values(lambda M: M.array(values), np.array(values))
    check_values(lambda M: M.asarray([values, values]), np.asarray([values, values]))


@given(data=st.data(), dtype=dtypes(*NUMERIC_DTYPES))
def test_array_of_a_list_of_graph_values_stacks_them(data, dtype):
    a, b = (data.draw(arrays(dtype, (2, 3))) for _ in range(2))
    check_op(lambda M, a, b: M.array([[a, b], [b, a]]), lambda a, b: np.array([[a, b], [b, a]]),
             a, b)
    check_op(lambda M, a, b: M.array([a[0, 0], 2.5, b[1, 2]]),
             lambda a, b: np.array([a[0, 0], 2.5, b[1, 2]]), a, b)


@given(shape=shapes(), dtype=st.sampled_from([None] + list(ALL_DTYPES)))
def test_empty_is_zeros_float32_by_default(shape, dtype):
    check_values(lambda M: M.empty(shape, dtype=dtype), np.zeros(shape, dtype or F32))


@given(data=st.data(), dtype=dtypes(), new=st.sampled_from([None] + list(ALL_DTYPES)))
def test_empty_like_is_zeros_like(data, dtype, new):
    x = data.draw(arrays(dtype, shapes()))
    check_op(lambda M, a: M.empty_like(a, dtype=new), lambda a: np.zeros_like(a, dtype=new), x)
    check_op(lambda M, a: M.empty_like(a, shape=(2, 1)),
             lambda a: np.zeros_like(a, shape=(2, 1)), x)


@given(n=st.integers(0, 5), m=st.none() | st.integers(0, 5), k=st.integers(-6, 6),
       dtype=st.sampled_from([None] + list(ALL_DTYPES)))
def test_eye_identity_and_tri(n, m, k, dtype):
    check_values(lambda M: M.eye(n, m, k, dtype=dtype), np.eye(n, m, k, dtype=dtype or F32))
    check_values(lambda M: M.tri(n, m, k, dtype=dtype), np.tri(n, m, k, dtype=dtype or F32))
    check_values(lambda M: M.identity(n, dtype=dtype), np.identity(n, dtype=dtype or F32))


@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming", "hanning", "kaiser"])
@pytest.mark.parametrize("m", [0, 1, 2, 7, 16])
def test_windows_match_numpy_in_float32_unless_asked(name, m):
    args = (m, 8.6) if name == "kaiser" else (m,)
    expected = getattr(np, name)(*args)
    check_values(lambda M: getattr(M, name)(*args), expected.astype(F32))
    check_values(lambda M: getattr(M, name)(*args, dtype=np.float64), expected)


# -- ranges -------------------------------------------------------------------------------
RANGE_DTYPES = st.sampled_from([None, np.float32, np.float64, np.int32, np.int64])


@given(start=st.integers(-9, 9) | st.floats(-9, 9), stop=st.integers(-9, 9) | st.floats(-9, 9),
       num=st.integers(0, 7), endpoint=st.booleans(), dtype=RANGE_DTYPES)
def test_linspace_and_logspace_of_numbers(start, stop, num, endpoint, dtype):
    expected, step = np.linspace(start, stop, num, endpoint, retstep=True, dtype=dtype)
    check_values(lambda M: M.linspace(start, stop, num, endpoint, dtype=dtype),
                 expected if dtype else _float32(expected))
    assert E.linspace(start, stop, num, endpoint, retstep=True)[1] == step or num < 2
    with np.errstate(all="ignore"):
        logs = np.logspace(start / 4, stop / 4, num, endpoint, base=3.0, dtype=dtype)
    check_values(lambda M: M.logspace(start / 4, stop / 4, num, endpoint, base=3.0,
                                      dtype=dtype), logs if dtype else _float32(logs))


@given(data=st.data(), num=st.integers(0, 6), endpoint=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), axis=st.integers(-2, 1),
       out=st.sampled_from([None, np.float64, np.int64]))
def test_linspace_and_geomspace_of_graph_values(data, num, endpoint, dtype, axis, out):
    start = data.draw(arrays(dtype, (3,), specials=False, low=0.5, high=4))
    stop = data.draw(arrays(dtype, (3,), specials=False, low=0.5, high=4))
    check_op(lambda M, a, b: M.linspace(a, b, num, endpoint, dtype=out, axis=axis),
             lambda a, b: np.linspace(a, b, num, endpoint, dtype=out, axis=axis), start, stop,
             rtol=1e-6, atol=1e-6)
    check_op(lambda M, a, b: M.linspace(a, 2.0, num, endpoint)[0] if num else a,
             lambda a, b: np.linspace(a, 2.0, num, endpoint)[0] if num else a, start, stop,
             rtol=1e-6, atol=1e-6)
    check_op(lambda M, a, b: M.geomspace(a, b, num, endpoint, axis=axis),
             lambda a, b: np.geomspace(a, b, num, endpoint, axis=axis), start, stop,
             rtol=1e-6)
    check_op(lambda M, a, b: M.logspace(a, b, num, endpoint, axis=axis),
             lambda a, b: np.logspace(a, b, num, endpoint, axis=axis), start, stop, rtol=1e-5)


@given(start=st.sampled_from([1, 2.5, -1, -0.5, 1000]), ratio=st.sampled_from([2, 10, 0.5]),
       num=st.integers(0, 6), endpoint=st.booleans())
def test_geomspace_of_numbers(start, ratio, num, endpoint):
    expected = np.geomspace(start, start * ratio ** 3, num, endpoint)
    check_values(lambda M: M.geomspace(start, start * ratio ** 3, num, endpoint),
                 _float32(expected))


def test_ranges_refuse_bad_arguments():
    with pytest.raises(graphc.ShapeError, match="non-negative"):
        N.linspace(0, 1, -1)
    with pytest.raises(graphc.ShapeError, match="zero"):
        N.geomspace(0, 1, 3)


# -- triangles and diagonals ----------------------------------------------------------------
@given(data=st.data(), dtype=dtypes(), shape=shapes(min_dims=1), k=st.integers(-5, 5))
def test_tril_and_triu(data, dtype, shape, k):
    x = data.draw(arrays(dtype, shape))
    check_op(lambda M, a: M.tril(a, k), lambda a: np.tril(a, k), x)
    check_op(lambda M, a: M.triu(a, k=k), lambda a: np.triu(a, k=k), x)


@given(data=st.data(), dtype=dtypes(), shape=shapes(min_dims=1, max_dims=3),
       k=st.integers(-5, 5))
def test_diag_and_diagflat(data, dtype, shape, k):
    x = data.draw(arrays(dtype, shape))
    check_op(lambda M, a: M.diag(a, k), lambda a: np.diag(a, k), x)
    check_op(lambda M, a: M.diagflat(a, k), lambda a: np.diagflat(a, k), x)


@given(data=st.data(), dtype=dtypes(), shape=shapes(min_dims=2), offset=st.integers(-5, 5))
def test_diagonal_of_any_axes(data, dtype, shape, offset):
    x = data.draw(arrays(dtype, shape))
    ndim = len(shape)
    axis1 = data.draw(st.integers(-ndim, ndim - 1))
    axis2 = data.draw(st.integers(-ndim, ndim - 1))
    check_op(lambda M, a: M.diagonal(a, offset, axis1, axis2),
             lambda a: np.diagonal(a, offset, axis1, axis2), x)


def test_triangles_and_diagonals_have_gradients():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4))
    for fn in (lambda M, a: M.tril(a, -1) ** 2, lambda M, a: M.diag(a[0], 1) ** 2,
               lambda M, a: M.diagonal(a, 1) ** 3, lambda M, a: M.roll(a, 2) * a,
               lambda M, a: M.insert(a, 1, 2.0, axis=1) ** 2,
               lambda M, a: M.linspace(a[0], a[1], 4, axis=1) ** 2,
               lambda M, a: M.vander(a[0], 3), lambda M, a: M.select([a > 0], [a * a], 1.0)):
        check_gradient(fn, x)


# -- grids and matrices of powers --------------------------------------------------------------
@given(data=st.data(), dtype=dtypes(*NUMERIC_DTYPES), n=st.integers(1, 3),
       indexing=st.sampled_from(["xy", "ij"]), sparse=st.booleans())
def test_meshgrid(data, dtype, n, indexing, sparse):
    xs = [data.draw(arrays(dtype, (data.draw(st.integers(0, 3)),))) for _ in range(n)]
    check_op(lambda M, *a: list(M.meshgrid(*a, indexing=indexing, sparse=sparse)),
             lambda *a: list(np.meshgrid(*a, indexing=indexing, sparse=sparse)), *xs)


@given(dims=shapes(min_dims=1, max_dims=3), dtype=st.sampled_from([int, np.int32, np.float32]),
       sparse=st.booleans())
def test_indices_and_fromfunction(dims, dtype, sparse):
    expected = np.indices(dims, dtype=dtype, sparse=sparse)
    check_values(lambda M: list(M.indices(dims, dtype=dtype, sparse=sparse)) if sparse else
                 M.indices(dims, dtype=dtype), list(expected) if sparse else expected)
    check_values(lambda M: M.fromfunction(lambda *i: sum(i) * 2, dims),
                 np.fromfunction(lambda *i: sum(i) * 2, dims, dtype=F32))


@given(data=st.data(), dtype=dtypes(np.float64, np.int32, np.int64, np.bool_),
       n=st.none() | st.integers(0, 5), increasing=st.booleans())
def test_vander(data, dtype, n, increasing):
    x = data.draw(arrays(dtype, (data.draw(st.integers(0, 4)),), **SMALL))
    check_op(lambda M, a: M.vander(a, n, increasing), lambda a: np.vander(a, n, increasing), x)


# -- joins -------------------------------------------------------------------------------------
JOINS = ["vstack", "hstack", "dstack", "column_stack", "row_stack", "concat", "append",
         "block"]


def _reference_join(name, arrays):
    if name == "append":
        return np.append(arrays[0], arrays[1])
    if name == "block":
        return np.block(list(arrays))
    if name == "row_stack":
        return np.vstack(arrays)
    return getattr(np, name)(arrays)


@pytest.mark.parametrize("name", JOINS)
@examples(25)
@given(data=st.data(), dtype=dtypes(*ALL_DTYPES), other=dtypes(*ALL_DTYPES))
def test_joins(name, data, dtype, other):
    shape = data.draw(shapes(max_dims=3, max_side=3))
    # the second array differs along the axis the function joins on, or not at all
    second = data.draw(st.sampled_from([shape] + [shape[:i] + (shape[i] + 1,) + shape[i + 1:]
                                                   for i in range(len(shape))]))
    a, b = data.draw(arrays(dtype, shape)), data.draw(arrays(other, second))
    call = {"append": lambda M, a, b: M.append(a, b), "block": lambda M, a, b: M.block([a, b])}
    fn = call.get(name, lambda M, a, b: getattr(M, name)([a, b]))
    check_op(fn, lambda a, b: _reference_join(name, [a, b]), a, b)


@given(data=st.data(), dtype=dtypes(*NUMERIC_DTYPES))
def test_block_of_nested_lists_and_joins_with_dtype(data, dtype):
    a = data.draw(arrays(dtype, (2, 2)))
    b = data.draw(arrays(dtype, (2, 1)))
    c = data.draw(arrays(dtype, (1, 3)))
    check_op(lambda M, a, b, c: M.block([[a, b], [c]]), lambda a, b, c: np.block([[a, b], [c]]),
             a, b, c)
    check_op(lambda M, a, b, c: M.block([[[a]], [[a]]]), lambda a, b, c: np.block([[[a]], [[a]]]),
             a, b, c)
    check_op(lambda M, a, b, c: M.vstack([a, a], dtype=np.float64, casting="unsafe"),
             lambda a, b, c: np.vstack([a, a], dtype=np.float64, casting="unsafe"), a, b, c)
    check_op(lambda M, a, b, c: M.append(a, c.T[:2], axis=1),
             lambda a, b, c: np.append(a, c.T[:2], axis=1), a, b, c)


# -- splits ------------------------------------------------------------------------------------
@given(data=st.data(), dtype=dtypes(), shape=shapes(min_dims=1, max_side=6))
def test_array_split_and_unstack(data, dtype, shape):
    x = data.draw(arrays(dtype, shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    sections = data.draw(st.integers(1, 7) | st.lists(st.integers(-7, 7), max_size=4))
    check_op(lambda M, a: M.array_split(a, sections, axis),
             lambda a: np.array_split(a, sections, axis), x)
    check_op(lambda M, a: list(M.unstack(a, axis=axis)) or [a],
             lambda a: list(np.unstack(a, axis=axis)) or [a], x)


@pytest.mark.parametrize("name", ["hsplit", "vsplit", "dsplit"])
@given(data=st.data(), shape=shapes(max_side=4))
def test_hsplit_vsplit_dsplit(name, data, shape):
    x = data.draw(arrays(np.float64, shape))
    sections = data.draw(st.integers(1, 4) | st.lists(st.integers(0, 4), max_size=3))
    check_op(lambda M, a: getattr(M, name)(a, sections), lambda a: getattr(np, name)(a, sections),
             x)


@given(data=st.data(), shape=shapes(max_dims=4))
def test_atleast_nd_and_broadcasting(data, shape):
    x = data.draw(arrays(np.int32, shape))
    y = data.draw(arrays(np.float32, shape[1:]))
    for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
        check_op(lambda M, a: getattr(M, name)(a), lambda a: getattr(np, name)(a), x)
        check_op(lambda M, a, b: list(getattr(M, name)(a, b)),
                 lambda a, b: list(getattr(np, name)(a, b)), x, y)
    check_op(lambda M, a, b: list(M.broadcast_arrays(a, b)),
             lambda a, b: list(np.broadcast_arrays(a, b)), x, y)
    assert N.broadcast_shapes(shape, shape[1:], ()) == np.broadcast_shapes(shape, shape[1:], ())
    with pytest.raises(graphc.ShapeError):
        N.broadcast_shapes((2,), (3,))


# -- rolls, rotations and axis moves -----------------------------------------------------------
@given(data=st.data(), dtype=dtypes(), shape=shapes())
def test_roll(data, dtype, shape):
    x = data.draw(arrays(dtype, shape))
    ndim = len(shape)
    shift = data.draw(st.integers(-9, 9))
    check_op(lambda M, a: M.roll(a, shift), lambda a: np.roll(a, shift), x)
    if ndim:
        axes = data.draw(st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=3))
        shifts = data.draw(st.lists(st.integers(-9, 9), min_size=len(axes),
                                    max_size=len(axes)))
        check_op(lambda M, a: M.roll(a, tuple(shifts), tuple(axes)),
                 lambda a: np.roll(a, tuple(shifts), tuple(axes)), x)
        check_op(lambda M, a: M.roll(a, shift, axes[0]), lambda a: np.roll(a, shift, axes[0]), x)


@given(data=st.data(), dtype=dtypes(), shape=shapes(min_dims=2), k=st.integers(-5, 5))
def test_rot90_flips_and_axis_moves(data, dtype, shape, k):
    x = data.draw(arrays(dtype, shape))
    ndim = len(shape)
    axes = tuple(data.draw(st.lists(st.integers(-ndim, ndim - 1), min_size=2, max_size=2,
                                    unique=True)))
    check_op(lambda M, a: M.rot90(a, k, axes), lambda a: np.rot90(a, k, axes), x)
    check_op(lambda M, a: M.fliplr(a), np.fliplr, x)
    check_op(lambda M, a: M.flipud(a), np.flipud, x)
    check_op(lambda M, a: M.matrix_transpose(a), np.matrix_transpose, x)
    axis, start = data.draw(st.integers(-ndim, ndim - 1)), data.draw(st.integers(-ndim, ndim))
    check_op(lambda M, a: M.rollaxis(a, axis, start), lambda a: np.rollaxis(a, axis, start), x)
    perm = tuple(data.draw(st.permutations(range(ndim))))
    check_op(lambda M, a: M.permute_dims(a, perm), lambda a: np.permute_dims(a, perm), x)


@given(data=st.data(), dtype=dtypes(), shape=shapes(max_dims=3),
       new_shape=shapes(max_dims=3, max_side=5) | st.integers(0, 9))
def test_resize(data, dtype, shape, new_shape):
    x = data.draw(arrays(dtype, shape))
    check_op(lambda M, a: M.resize(a, new_shape), lambda a: np.resize(a, new_shape), x)


# -- insert and delete -----------------------------------------------------------------------------
@st.composite
def index_objects(draw, size):
    """An index, a list of indices, a slice, or a mask for an axis of ``size``."""
    form = draw(st.sampled_from(["int", "list", "slice", "mask"]))
    if form == "int":
        return draw(st.integers(-size, size)) if size else 0
    if form == "list":
        return draw(st.lists(st.integers(-size, size - 1) if size else st.just(0), max_size=3,
                             unique=True)) if size else []
    if form == "slice":
        return slice(draw(st.none() | st.integers(-4, 4)), draw(st.none() | st.integers(-4, 4)),
                     draw(st.none() | st.sampled_from([1, 2, -1])))
    return draw(st.lists(st.booleans(), min_size=size, max_size=size))


@given(data=st.data(), dtype=dtypes(), value_dtype=dtypes(*NUMERIC_DTYPES),
       shape=shapes(min_dims=1, max_dims=3))
def test_insert_and_delete(data, dtype, value_dtype, shape):
    x = data.draw(arrays(dtype, shape))
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    size = x.size if axis is None else shape[axis]
    obj = data.draw(index_objects(size))
    check_op(lambda M, a: M.delete(a, obj, axis), lambda a: np.delete(a, obj, axis), x)
    values = data.draw(arrays(value_dtype, data.draw(st.sampled_from([(), (1,), (2,)]))))
    if isinstance(obj, list) and obj and isinstance(obj[0], bool):
        obj = [i for i, keep in enumerate(obj) if keep]   # NumPy's insert fails on masks
    check_op(lambda M, a, v: M.insert(a, obj, v, axis),
             lambda a, v: np.insert(a, obj, v, axis), x, values)


def test_insert_and_delete_need_static_indices():
    x, i = N.var("x", (4,)), N.var("i", (), np.int64)
    with pytest.raises(graphc.ShapeError, match="known while the graph is built"):
        N.delete(x, i)
    with pytest.raises(graphc.ShapeError, match="known while the graph is built"):
        N.insert(x, i, 1.0)


# -- index helpers --------------------------------------------------------------------------------
@given(n=st.integers(0, 5), m=st.none() | st.integers(0, 5), k=st.integers(-5, 5),
       ndim=st.integers(1, 3))
def test_index_helpers(n, m, k, ndim):
    for name in ("tril_indices", "triu_indices"):
        check_values(lambda M: list(getattr(M, name)(n, k, m)),
                     list(getattr(np, name)(n, k, m)))
    check_values(lambda M: list(M.diag_indices(n, ndim)), list(np.diag_indices(n, ndim)))
    for function in (np.triu, np.tril):
        check_values(lambda M: list(M.mask_indices(n, function, k)),
                     list(np.mask_indices(n, function, k)))
    check_values(lambda M: list(M.mask_indices(n, M.triu, k)),
                 list(np.mask_indices(n, np.triu, k)))


@given(data=st.data(), shape=shapes(min_dims=2, max_dims=2), k=st.integers(-3, 3))
def test_index_helpers_from_arrays(data, shape, k):
    x = data.draw(arrays(np.float32, shape))
    for name in ("tril_indices_from", "triu_indices_from"):
        check_op(lambda M, a: list(getattr(M, name)(a, k)), lambda a: list(getattr(np, name)(a, k)),
                 x)
    square = np.zeros((shape[0],) * 3, np.float32)
    check_op(lambda M, a: list(M.diag_indices_from(a)), lambda a: list(np.diag_indices_from(a)),
             square)
    check_op(lambda M, a: a[M.tril_indices_from(a, k)], lambda a: a[np.tril_indices_from(a, k)], x)


@given(data=st.data(), sizes=st.lists(st.integers(0, 4), min_size=1, max_size=3))
def test_ix(data, sizes):
    x = data.draw(arrays(np.int64, tuple(sizes)))
    index = [data.draw(st.lists(st.integers(0, s - 1), max_size=3)) if s else [] for s in sizes]
    masks = [data.draw(st.lists(st.booleans(), min_size=s, max_size=s)) for s in sizes]
    check_op(lambda M, a: a[M.ix_(*index)], lambda a: a[np.ix_(*index)], x)
    check_op(lambda M, a: a[M.ix_(*masks)], lambda a: a[np.ix_(*masks)], x)
    check_values(lambda M: list(M.ix_(*index)), list(np.ix_(*index)))


@given(data=st.data(), dtype=dtypes(*NUMERIC_DTYPES), shape=shapes(max_dims=3),
       default=st.sampled_from([0, 1.5, -2]))
def test_select(data, dtype, shape, default):
    x = data.draw(arrays(dtype, shape, **SMALL))
    y = data.draw(arrays(np.float32, shape[1:], **SMALL))
    check_op(lambda M, a, b: M.select([a < 0, b > 1], [a, b * 2], default),
             lambda a, b: np.select([a < 0, b > 1], [a, b * 2], default), x, y)
    check_op(lambda M, a, b: M.select([a > 0], [3], default),
             lambda a, b: np.select([a > 0], [3], default), x, y)


@given(data=st.data(), dtype=dtypes(*NUMERIC_DTYPES), shape=shapes(max_dims=3),
       mode=st.sampled_from(["raise", "wrap", "clip"]), n=st.integers(1, 4))
def test_choose_with_graph_and_constant_indices(data, dtype, shape, mode, n):
    low, high = (0, n - 1) if mode == "raise" else (-6, 6)
    index = data.draw(arrays(np.int64, shape, low=low, high=high))
    choices = [data.draw(arrays(dtype, shape[i % 2:])) for i in range(n)]
    check_op(lambda M, i, *c: M.choose(i, list(c), mode=mode),
             lambda i, *c: np.choose(i, list(c), mode=mode), index, *choices)
    check_values(lambda M: M.choose(index, choices, mode=mode),
                 np.choose(index, choices, mode=mode))


def test_choose_refuses_out_of_range_indices_while_building_or_running():
    with pytest.raises(graphc.IndexOutOfRange, match="choose"):
        N.choose(N.const(np.array([0, 3])), [np.zeros(2), np.ones(2)])
    i = N.var("i", (2,), np.int64)
    g = graphc.compile([i], N.choose(i, [np.zeros(2), np.ones(2)]))
    np.testing.assert_array_equal(g.run(np.array([1, 0])), [1.0, 0.0])
    for bad in ([0, 2], [-1, 0]):
        with pytest.raises(IndexError):
            g.run(np.array(bad))


# -- index tricks -------------------------------------------------------------------------------
@pytest.mark.parametrize("key", [np.s_[0:3], np.s_[0:3, 1:5:2], np.s_[-1:1:5j, 0:2],
                                 np.s_[0:1:3j], np.s_[2:0:-1, 0:2, 0:1]])
def test_mgrid_and_ogrid(key):
    for name in ("mgrid", "ogrid"):
        expected = getattr(np, name)[key]
        as_float32 = [e.astype(F32) if e.dtype == np.float64 else e for e in
                      (expected if isinstance(expected, tuple) else [expected])]
        check_values(lambda M: list(getattr(M, name)[key]) if isinstance(expected, tuple) else
                     getattr(M, name)[key], as_float32 if isinstance(expected, tuple)
                     else as_float32[0])


@given(data=st.data(), dtype=dtypes(*NUMERIC_DTYPES))
def test_r_and_c(data, dtype):
    a = data.draw(arrays(dtype, (3,)))
    b = data.draw(arrays(dtype, (2, 3)))
    check_op(lambda M, a, b: M.r_[a, 0, 2:5, a], lambda a, b: np.r_[a, 0, 2:5, a], a, b)
    check_op(lambda M, a, b: M.r_[b, a[None]], lambda a, b: np.r_[b, a[None]], a, b)
    check_op(lambda M, a, b: M.r_["0,2", a, a], lambda a, b: np.r_["0,2", a, a], a, b)
    check_op(lambda M, a, b: M.r_["1,2,0", a, a], lambda a, b: np.r_["1,2,0", a, a], a, b)
    check_op(lambda M, a, b: M.r_["-1", b, b], lambda a, b: np.r_["-1", b, b], a, b)
    check_op(lambda M, a, b: M.c_[a, a, b.T], lambda a, b: np.c_[a, a, b.T], a, b)
    check_op(lambda M, a, b: M.r_[0:1:4j, a], lambda a, b: np.r_[0:1:4j, a], a, b)


# -- errors ----------------------------------------------------------------------------------------
BAD_CALLS = [
    ("diag", lambda M: M.diag(M.zeros((2, 2, 2)))),
    ("diagonal", lambda M: M.diagonal(M.zeros((3,)))),
    ("diagonal", lambda M: M.diagonal(M.zeros((3, 3)), 0, 1, 1)),
    ("tril", lambda M: M.tril(M.zeros(()))),
    ("vander", lambda M: M.vander(M.zeros((2, 2)))),
    ("meshgrid", lambda M: M.meshgrid(M.zeros(2), indexing="yx")),
    ("vstack", lambda M: M.vstack([M.zeros(2), M.zeros(3)])),
    ("vstack", lambda M: M.vstack([])),
    ("block", lambda M: M.block([[M.zeros(2)], M.zeros(2)])),
    ("block", lambda M: M.block([])),
    ("array_split", lambda M: M.array_split(M.zeros(4), 0)),
    ("vsplit", lambda M: M.vsplit(M.zeros(4), 2)),
    ("hsplit", lambda M: M.hsplit(M.zeros((2, 3)), 2)),
    ("unstack", lambda M: M.unstack(M.zeros(()))),
    ("broadcast_arrays", lambda M: M.broadcast_arrays(M.zeros(2), M.zeros(3))),
    ("roll", lambda M: M.roll(M.zeros((2, 2)), 1, axis=2)),
    ("rot90", lambda M: M.rot90(M.zeros((2, 2)), axes=(0, 0))),
    ("fliplr", lambda M: M.fliplr(M.zeros(2))),
    ("rollaxis", lambda M: M.rollaxis(M.zeros((2, 2)), 0, 5)),
    ("matrix_transpose", lambda M: M.matrix_transpose(M.zeros(2))),
    ("resize", lambda M: M.resize(M.zeros(2), (-1, 2))),
    ("delete", lambda M: M.delete(M.zeros(3), 5)),
    ("select", lambda M: M.select([M.zeros(2) > 0], [])),
    ("diag_indices_from", lambda M: M.diag_indices_from(M.zeros((2, 3)))),
    ("tril_indices_from", lambda M: M.tril_indices_from(M.zeros(3))),
    ("ix_", lambda M: M.ix_(M.zeros((2, 2), np.int64))),
    ("r_", lambda M: M.r_[M.zeros(2), "0"]),
]


@pytest.mark.parametrize("name,call", BAD_CALLS, ids=[n for n, _ in BAD_CALLS])
def test_bad_arguments_raise_shape_errors_naming_the_function(name, call):
    for M in (N, E):
        with pytest.raises(graphc.ShapeError, match=name):
            call(M)


def test_dtype_errors():
    for M in (N, E):
        with pytest.raises(graphc.DTypeError, match="select"):
            M.select([M.zeros(2)], [M.zeros(2)])
        with pytest.raises(graphc.DTypeError, match="choose"):
            M.choose(M.zeros(2), [M.zeros(2)])
        with pytest.raises(graphc.DTypeError, match="block"):
            M.block(([M.zeros(2)],))
