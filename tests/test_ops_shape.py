"""Shape functions and indexing match NumPy in graph mode (both memory plans) and eager
mode: reshape, transpose, swapaxes, moveaxis, expand_dims, squeeze, ravel,
broadcast_to, concatenate, stack, split, basic and integer-array indexing (constant
boolean masks included), take, pad, tile, repeat, flip, one_hot, astype."""
import sys

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

import graphc
import graphc.eager as E
import graphc.ndarray as N
from opcheck import (ALL_DTYPES, arrays, axis_args, check_op, check_values, dtypes, examples,
                     shapes)

ANY_ARRAY = dtypes().flatmap(lambda d: arrays(d, shapes()))


def _array(draw, min_dims=0, max_dims=4, min_side=0, max_side=4, dtype=None):
    dtype = draw(dtypes()) if dtype is None else dtype
    return draw(arrays(dtype, shapes(min_dims, max_dims, min_side, max_side)))


# -- reshapes ---------------------------------------------------------------------------
def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def reshape_case(draw):
    x = _array(draw)
    size = x.size
    if size == 0:
        dims = draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
        dims.insert(draw(st.integers(0, len(dims))), 0)
    else:
        dims, rest = [], size
        while rest > 1:
            d = draw(st.sampled_from(_divisors(rest)[1:]))
            dims.append(d)
            rest //= d
        for _ in range(draw(st.integers(0, 2))):
            dims.insert(draw(st.integers(0, len(dims))), 1)
    if dims and draw(st.booleans()):
        dims[draw(st.integers(0, len(dims) - 1))] = -1
    return x, tuple(dims)


@examples(60)
@given(case=reshape_case())
def test_reshape_matches_numpy(case):
    """Size-0 arrays included: NumPy refuses -1 next to a 0 (ShapeError here)."""
    x, dims = case
    check_op(lambda M, a: M.reshape(a, dims), lambda a: np.reshape(a, dims), x)
    check_op(lambda M, a: a.reshape(dims), lambda a: a.reshape(dims), x, eager=False)
    if dims:  # ndarray.reshape() needs at least one argument
        check_op(lambda M, a: a.reshape(*dims), lambda a: a.reshape(*dims), x, eager=False)


def test_reshape_of_the_wrong_size_names_shapes_and_line():
    x = N.var("x", (2, 3))
    with pytest.raises(graphc.ShapeError) as info:
        line = sys._getframe().f_lineno; x.reshape(4, -1)  # noqa: E702
    message = str(info.value)
    assert "reshape" in message and "(2, 3)" in message and "(4, -1)" in message
    assert f"test_ops_shape.py:{line}" in message


@given(x=ANY_ARRAY)
def test_ravel_and_flatten(x):
    check_op(lambda M, a: M.ravel(a), np.ravel, x)
    check_op(lambda M, a: a.flatten(), lambda a: a.flatten(), x, eager=False)
    check_op(lambda M, a: a.ravel(), lambda a: a.ravel(), x, eager=False)


@given(data=st.data(), x=ANY_ARRAY)
def test_expand_dims_matches_numpy(data, x):
    n = data.draw(st.integers(1, 3))
    out_ndim = x.ndim + n
    axes = data.draw(st.lists(st.integers(-out_ndim, out_ndim - 1), min_size=1, max_size=n))
    axis = axes[0] if len(axes) == 1 and data.draw(st.booleans()) else tuple(axes)
    check_op(lambda M, a: M.expand_dims(a, axis), lambda a: np.expand_dims(a, axis), x)


@given(data=st.data(), dtype=dtypes(), shape=shapes(max_side=2))
def test_squeeze_matches_numpy(data, dtype, shape):
    """axis None, or some of the size-1 axes; any other axis is a ShapeError."""
    x = data.draw(arrays(dtype, shape))
    axis = data.draw(axis_args(x.ndim))
    check_op(lambda M, a: M.squeeze(a, axis), lambda a: np.squeeze(a, axis), x)
    check_op(lambda M, a: a.squeeze(axis), lambda a: a.squeeze(axis), x, eager=False)


# -- axis permutations -------------------------------------------------------------------
@given(data=st.data(), x=ANY_ARRAY)
def test_transpose_matches_numpy(data, x):
    perm = data.draw(st.permutations(range(x.ndim)))
    axes = tuple(a - x.ndim if data.draw(st.booleans()) else a for a in perm)
    check_op(lambda M, a: M.transpose(a, axes), lambda a: np.transpose(a, axes), x)
    check_op(lambda M, a: M.transpose(a), np.transpose, x)
    check_op(lambda M, a: a.T, lambda a: a.T, x, eager=False)
    check_op(lambda M, a: a.transpose(*axes), lambda a: a.transpose(*axes), x, eager=False)
    check_op(lambda M, a: a.transpose(), lambda a: a.transpose(), x, eager=False)


@pytest.mark.parametrize("axes", [(0, 0, 1), (0, 1), (0, 1, 3)])
def test_transpose_with_bad_axes_is_a_shape_error(axes):
    with pytest.raises(ValueError):
        np.transpose(np.zeros((2, 3, 4)), axes)
    with pytest.raises(graphc.ShapeError, match="transpose"):
        N.transpose(N.var("x", (2, 3, 4)), axes)


@given(data=st.data(), dtype=dtypes(), shape=shapes(min_dims=1))
def test_swapaxes_matches_numpy(data, dtype, shape):
    x = data.draw(arrays(dtype, shape))
    i, j = (data.draw(st.integers(-x.ndim, x.ndim - 1)) for _ in range(2))
    check_op(lambda M, a: M.swapaxes(a, i, j), lambda a: np.swapaxes(a, i, j), x)
    check_op(lambda M, a: a.swapaxes(i, j), lambda a: a.swapaxes(i, j), x, eager=False)


@given(data=st.data(), dtype=dtypes(), shape=shapes(min_dims=1))
def test_moveaxis_matches_numpy(data, dtype, shape):
    """Repeated source or destination axes are a ShapeError (NumPy: ValueError)."""
    x = data.draw(arrays(dtype, shape))
    n = data.draw(st.integers(1, x.ndim))
    axis = st.integers(-x.ndim, x.ndim - 1)
    source = data.draw(st.lists(axis, min_size=n, max_size=n))
    destination = data.draw(st.lists(axis, min_size=n, max_size=n))
    if n == 1 and data.draw(st.booleans()):
        source, destination = source[0], destination[0]
    check_op(lambda M, a: M.moveaxis(a, source, destination),
             lambda a: np.moveaxis(a, source, destination), x)


@st.composite
def broadcast_case(draw):
    x = _array(draw, max_dims=3)
    lead = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
    target = lead + tuple(draw(st.integers(0, 3)) if d == 1 else d for d in x.shape)
    if draw(st.integers(0, 4)) == 0 and x.ndim:  # an incompatible target, sometimes
        target = target[:-1] + (target[-1] + 1 + (target[-1] == 0),)
    return x, target


@given(case=broadcast_case())
def test_broadcast_to_matches_numpy(case):
    x, target = case
    check_op(lambda M, a: M.broadcast_to(a, target), lambda a: np.broadcast_to(a, target), x)


# -- joins and splits ----------------------------------------------------------------------
@st.composite
def concatenate_case(draw):
    k = draw(st.integers(1, 3))
    base = draw(shapes(min_dims=1, max_dims=3))
    axis = draw(st.integers(-len(base), len(base) - 1))
    if draw(st.integers(0, 3)) == 0:  # flattened: any shapes
        arrays_ = [_array(draw, max_dims=3) for _ in range(k)]
        return arrays_, None
    arrays_ = []
    for _ in range(k):
        shape = list(base)
        shape[axis] = draw(st.integers(0, 3))
        arrays_.append(draw(arrays(draw(dtypes()), tuple(shape))))
    return arrays_, axis


@given(case=concatenate_case())
def test_concatenate_matches_numpy(case):
    """Mixed dtypes promote as in NumPy; axis=None flattens first."""
    xs, axis = case
    check_op(lambda M, *a: M.concatenate(list(a), axis=axis),
             lambda *a: np.concatenate(a, axis=axis), *xs)


def test_concatenate_mismatch_names_shapes_and_line():
    a, b = N.var("a", (2, 3)), N.var("b", (2, 4))
    with pytest.raises(graphc.ShapeError) as info:
        line = sys._getframe().f_lineno; N.concatenate([a, b], axis=0)  # noqa: E702
    message = str(info.value)
    assert "concatenate" in message and "(2, 3)" in message and "(2, 4)" in message
    assert f"test_ops_shape.py:{line}" in message


@given(data=st.data(), shape=shapes(max_dims=3), k=st.integers(1, 3))
def test_stack_matches_numpy(data, shape, k):
    xs = [data.draw(arrays(data.draw(dtypes()), shape)) for _ in range(k)]
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    check_op(lambda M, *a: M.stack(list(a), axis=axis), lambda *a: np.stack(a, axis=axis), *xs)


def test_stack_of_different_shapes_names_shapes_and_line():
    a, b = N.var("a", (2, 3)), N.var("b", (3, 2))
    with pytest.raises(graphc.ShapeError) as info:
        line = sys._getframe().f_lineno; N.stack([a, b])  # noqa: E702
    message = str(info.value)
    assert "stack" in message and "(2, 3)" in message and "(3, 2)" in message
    assert f"test_ops_shape.py:{line}" in message


@given(data=st.data(), dtype=dtypes(), shape=shapes(min_dims=1, max_side=6))
def test_split_matches_numpy(data, dtype, shape):
    """Sections (an unequal division is a ShapeError) or indices: unsorted,
    negative or past the end, as NumPy slices them."""
    x = data.draw(arrays(dtype, shape))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    if data.draw(st.booleans()):
        how = data.draw(st.integers(1, 4))
    else:
        how = data.draw(st.lists(st.integers(-8, 8), max_size=4))
    check_op(lambda M, a: M.split(a, how, axis=axis), lambda a: np.split(a, how, axis=axis), x)


# -- indexing ----------------------------------------------------------------------------
@examples(60)
@given(data=st.data(), x=ANY_ARRAY)
def test_basic_indexing_matches_numpy(data, x):
    """Integers (negative too), slices with any step, None and Ellipsis."""
    key = data.draw(hnp.basic_indices(x.shape, min_dims=0, allow_newaxis=True,
                                      allow_ellipsis=True))
    check_op(lambda M, a: a[key], lambda a: a[key], x, eager=False)
    check_op(lambda M, a: M.getitem(a, key), lambda a: a[key], x)


@given(data=st.data(), dtype=dtypes(), shape=shapes(min_dims=1, min_side=1))
def test_negative_step_slices(data, dtype, shape):
    x = data.draw(arrays(dtype, shape))
    bound = st.one_of(st.none(), st.integers(-6, 6))
    key = tuple(slice(data.draw(bound), data.draw(bound), data.draw(st.sampled_from([-1, -2,
                                                                                     -3])))
                for _ in range(x.ndim))
    check_op(lambda M, a: a[key], lambda a: a[key], x, eager=False)


@st.composite
def advanced_key(draw, shape):
    """A key mixing integer index arrays (broadcastable shapes, negative indices),
    integers, slices and None: adjacent or separated index arrays."""
    ndim = len(shape)
    nonempty = [axis for axis, d in enumerate(shape) if d]
    if nonempty:
        n_arrays = draw(st.integers(1, len(nonempty)))
        positions = sorted(draw(st.permutations(nonempty))[:n_arrays])
        index_shapes = draw(hnp.mutually_broadcastable_shapes(
            num_shapes=n_arrays, max_dims=2, max_side=3)).input_shapes
    else:  # only an empty index array can index an empty axis
        positions, index_shapes = [draw(st.integers(0, ndim - 1))], [(0,)]
    key = []
    for axis, d in enumerate(shape):
        if axis in positions:
            ishape = index_shapes[positions.index(axis)]
            idx = draw(hnp.arrays(draw(st.sampled_from([np.int32, np.int64])), ishape,
                                  elements=st.integers(-d, max(d - 1, 0))))
            key.append(idx)
        else:
            kind = draw(st.sampled_from(["slice", "int", "full"] if d else ["slice", "full"]))
            if kind == "int":
                key.append(draw(st.integers(-d, d - 1)))
            elif kind == "slice":
                key.append(slice(draw(st.integers(-5, 5)), draw(st.integers(-5, 5)),
                                 draw(st.sampled_from([1, 2, -1]))))
            else:
                key.append(slice(None))
        if draw(st.integers(0, 5)) == 0:
            key.append(None)
    if draw(st.booleans()):  # drop trailing full slices
        while key and isinstance(key[-1], slice) and key[-1] == slice(None):
            key.pop()
    return tuple(key)


@examples(60)
@given(data=st.data(), dtype=dtypes(), shape=shapes(min_dims=1, max_dims=4, min_side=0))
def test_integer_array_indexing_matches_numpy(data, dtype, shape):
    x = data.draw(arrays(dtype, shape))
    key = data.draw(advanced_key(x.shape))
    check_op(lambda M, a: a[key], lambda a: a[key], x, eager=False)
    check_op(lambda M, a: M.getitem(a, key), lambda a: a[key], x)
    # the index arrays as graph inputs too (not known while building)
    slots = [i for i, k in enumerate(key) if isinstance(k, np.ndarray)]

    def with_inputs(M, a, *idx):
        full = list(key)
        for i, v in zip(slots, idx):
            full[i] = v
        return M.getitem(a, tuple(full))
    check_op(with_inputs, lambda a, *idx: a[key], x, *[key[i] for i in slots])


@given(data=st.data(), dtype=dtypes(), shape=shapes(min_dims=1, max_dims=3))
def test_constant_bool_mask_indexing_matches_numpy(data, dtype, shape):
    """A mask over some leading axes (after a slice, or an Ellipsis) or the whole array;
    a mask of the wrong shape is an IndexOutOfRange (NumPy: IndexError)."""
    x = data.draw(arrays(dtype, shape))
    start = data.draw(st.integers(0, x.ndim - 1))
    stop = data.draw(st.integers(start + 1, x.ndim))
    mask_shape = list(x.shape[start:stop])
    if data.draw(st.integers(0, 4)) == 0:  # a mismatched mask
        mask_shape[-1] += data.draw(st.sampled_from([-1, 1])) if mask_shape[-1] else 1
    mask = data.draw(hnp.arrays(np.bool_, tuple(mask_shape)))
    key = (slice(None),) * start + (mask,)
    if data.draw(st.booleans()) and stop == x.ndim and start:
        key = (Ellipsis, mask)
    check_op(lambda M, a: a[key], lambda a: a[key], x, eager=False)
    check_op(lambda M, a: M.getitem(a, key), lambda a: a[key], x)


def test_computed_bool_mask_is_refused_with_advice():
    x = N.var("x", (4,))
    with pytest.raises(graphc.ShapeError, match="where"):
        x[x > 0]  # noqa: B018


@pytest.mark.parametrize("key", [5, -5, (0, 3), (slice(None), -4), (np.array([0, 4]),),
                                 (slice(None), np.array([[0], [-4]])), (0, 0, 0)])
def test_out_of_range_constant_index_raises_index_out_of_range(key):
    x = N.var("x", (4, 3))
    with pytest.raises(IndexError):
        np.zeros((4, 3))[key]
    with pytest.raises(graphc.IndexOutOfRange) as info:
        x[key]  # noqa: B018
    assert isinstance(info.value, IndexError) and isinstance(info.value, graphc.ShapeError)
    assert "out of bounds" in str(info.value) or "too many" in str(info.value)


@given(data=st.data(), dtype=dtypes(), shape=shapes(min_dims=1, max_dims=3))
def test_take_matches_numpy(data, dtype, shape):
    """Index arrays as constants and as graph inputs, scalar indices, axis None."""
    x = data.draw(arrays(dtype, shape))
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))
    d = x.size if axis is None else x.shape[axis]
    if not d:
        idx = np.zeros((0,), np.int64)
    elif data.draw(st.booleans()):
        idx = data.draw(st.integers(-d, d - 1))
    else:
        idx = data.draw(hnp.arrays(np.int64, shapes(max_dims=2, max_side=3),
                                   elements=st.integers(-d, d - 1)))
    check_op(lambda M, a: M.take(a, idx, axis=axis), lambda a: np.take(a, idx, axis=axis), x)
    check_op(lambda M, a: a.take(idx, axis=axis), lambda a: a.take(idx, axis=axis), x,
             eager=False)
    idx = np.asarray(idx)
    check_op(lambda M, a, i: M.take(a, i, axis=axis), lambda a, i: np.take(a, i, axis=axis),
             x, idx)


def test_take_out_of_range_raises_index_out_of_range():
    with pytest.raises(graphc.IndexOutOfRange):
        N.take(N.var("x", (4, 3)), [0, 3], axis=1)
    with pytest.raises(graphc.IndexOutOfRange):
        N.take(N.var("x", (4, 3)), 12)


# -- other copies ----------------------------------------------------------------------
@st.composite
def pad_width(draw, ndim):
    width = st.integers(0, 2)
    form = draw(st.sampled_from(["int", "pair", "per-axis"] if ndim else ["int", "pair"]))
    if form == "int":
        return draw(width)
    if form == "pair":
        return (draw(width), draw(width))
    return tuple((draw(width), draw(width)) for _ in range(ndim))


@given(data=st.data(), dtype=dtypes(), shape=shapes(max_dims=3),
       value=st.one_of(st.integers(-3, 3), st.floats(-3, 3), st.booleans()))
def test_pad_constant_matches_numpy(data, dtype, shape, value):
    x = data.draw(arrays(dtype, shape))
    widths = data.draw(pad_width(x.ndim))
    check_op(lambda M, a: M.pad(a, widths, constant_values=value),
             lambda a: np.pad(a, widths, constant_values=value), x)
    check_op(lambda M, a: M.pad(a, widths), lambda a: np.pad(a, widths), x)


def test_pad_refuses_other_modes_and_negative_widths():
    x = N.var("x", (2, 3))
    with pytest.raises(ValueError, match="mode"):
        N.pad(x, 1, mode="reflect")
    with pytest.raises(graphc.ShapeError, match="negative"):
        N.pad(x, -1)


@given(data=st.data(), x=ANY_ARRAY)
def test_tile_matches_numpy(data, x):
    reps = data.draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), max_size=5)
                               .map(tuple)))
    check_op(lambda M, a: M.tile(a, reps), lambda a: np.tile(a, reps), x)


@given(data=st.data(), x=ANY_ARRAY)
def test_repeat_matches_numpy(data, x):
    """An int, one count per element, or a single count for all; axis None or an int."""
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1))) if x.ndim else None
    n = x.size if axis is None else x.shape[axis]
    form = data.draw(st.sampled_from(["int", "per-element", "one"]))
    repeats = (data.draw(st.integers(0, 3)) if form == "int" else
               data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)) if
               form == "per-element" else [data.draw(st.integers(0, 3))])
    check_op(lambda M, a: M.repeat(a, repeats, axis=axis),
             lambda a: np.repeat(a, repeats, axis=axis), x)
    check_op(lambda M, a: a.repeat(repeats, axis=axis),
             lambda a: a.repeat(repeats, axis=axis), x, eager=False)


@given(data=st.data(), x=ANY_ARRAY)
def test_flip_matches_numpy(data, x):
    axis = data.draw(axis_args(x.ndim))
    check_op(lambda M, a: M.flip(a, axis=axis), lambda a: np.flip(a, axis=axis), x)


@given(data=st.data(), dtype=dtypes(np.int32, np.int64), shape=shapes(max_dims=3),
       depth=st.integers(1, 5), out_dtype=st.sampled_from([None] + list(ALL_DTYPES)))
def test_one_hot_matches_numpy(data, dtype, shape, depth, out_dtype):
    """Labels in [0, depth); float32 by default."""
    idx = data.draw(arrays(dtype, shape, low=0, high=depth - 1))
    expected = (idx[..., None] == np.arange(depth)).astype(out_dtype or np.float32)
    check_values(lambda M, i: M.one_hot(i, depth, dtype=out_dtype), expected, idx)


@pytest.mark.parametrize("schedule", ["serial", "parallel"])
@pytest.mark.parametrize("bad", [3, 4, -1, -7])
def test_one_hot_refuses_a_label_out_of_range_at_run_time(bad, schedule):
    """Not a silent row of zeros: an IndexError naming one_hot, the depth and the label;
    the graph stays usable and computes the next good labels as before."""
    labels = N.var("labels", (4,), np.int64)
    g = graphc.compile([labels], [N.one_hot(labels, 3)], schedule=schedule, workers=2)
    good = np.array([0, 2, 1, 2])
    expected = (good[:, None] == np.arange(3)).astype(np.float32)
    np.testing.assert_array_equal(g.run(labels=good)[0], expected)
    with pytest.raises(IndexError, match=rf"one_hot: label {bad} is out of range for depth 3"):
        g.run(labels=np.array([0, 1, bad, 2]))
    np.testing.assert_array_equal(g.run(labels=good[::-1].copy())[0], expected[::-1])


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_one_hot_refuses_a_label_out_of_range_eagerly(dtype):
    labels = np.array([[0, 1], [5, 2]], dtype)
    with pytest.raises(IndexError, match="one_hot: label 5 is out of range for depth 3"):
        E.one_hot(labels, 3)
    with pytest.raises(IndexError, match="one_hot: label 0 is out of range for depth 0"):
        E.one_hot(labels, 0)
    np.testing.assert_array_equal(E.one_hot(np.zeros((0, 2), dtype), 0), np.zeros((0, 2, 0)))


def test_a_bad_label_leaves_the_variables_of_a_training_step_untouched():
    """one_hot may fail at run time, so it runs before any update is written."""
    x, labels = N.var("x", (4, 3)), N.var("labels", (4,), np.int64)
    w = N.var("w", (3, 3))
    loss = N.softmax_cross_entropy(x @ w, N.one_hot(labels, 3))
    (gw,) = N.grad(loss, [w])
    step = graphc.compile([x, labels, w], [loss], updates={w: w - 0.5 * gw})
    w0 = np.arange(9, dtype=np.float32).reshape(3, 3) / 10
    step.assign(w=w0)
    with pytest.raises(IndexError, match="one_hot"):
        step.run(x=np.ones((4, 3), np.float32), labels=np.array([0, 1, 2, 3]))
    np.testing.assert_array_equal(step.value("w"), w0)


@pytest.mark.parametrize("dtype", [np.float32, np.bool_])
def test_one_hot_refuses_non_integer_indices(dtype):
    with pytest.raises(graphc.DTypeError, match="one_hot"):
        N.one_hot(N.var("i", (3,), dtype), 4)


@given(data=st.data(), src=dtypes(), dst=dtypes(), shape=shapes())
def test_astype_matches_numpy(data, src, dst, shape):
    """Finite values in range: NaN, inf and overflow casts to integers are undefined."""
    x = data.draw(arrays(src, shape, specials=False, low=-20, high=20))
    check_op(lambda M, a: M.astype(a, dst), lambda a: a.astype(dst), x)
    check_op(lambda M, a: a.astype(dst), lambda a: a.astype(dst), x, eager=False)



def test_index_arrays_that_do_not_broadcast_name_shapes_and_line():
    x, i, j = N.var("x", (4, 3)), np.array([0, 1, 2]), np.array([0, 1])
    with pytest.raises(IndexError):
        np.zeros((4, 3))[i, j]
    with pytest.raises(graphc.IndexOutOfRange) as info:
        line = sys._getframe().f_lineno; x[i, j]  # noqa: E702,B018
    message = str(info.value)
    assert "(3,)" in message and "(2,)" in message and "(4, 3)" in message
    assert f"test_ops_shape.py:{line}" in message


BAD_AXIS_CALLS = {
    "expand_dims": (lambda M, x: M.expand_dims(x, 3), lambda M, x: M.expand_dims(x, (0, 0))),
    "squeeze": (lambda M, x: M.squeeze(x, 2), lambda M, x: M.squeeze(x, 0)),
    "swapaxes": (lambda M, x: M.swapaxes(x, 0, 2), lambda M, x: M.swapaxes(x, -3, 1)),
    "moveaxis": (lambda M, x: M.moveaxis(x, 2, 0), lambda M, x: M.moveaxis(x, (0, 0), (0, 1))),
    "transpose": (lambda M, x: M.transpose(x, (0, 2)), lambda M, x: M.transpose(x, (1, 1))),
    "concatenate": (lambda M, x: M.concatenate([x, x], axis=2),
                    lambda M, x: M.concatenate([x, x], axis=-3)),
    "stack": (lambda M, x: M.stack([x, x], axis=3), lambda M, x: M.stack([x, x], axis=-4)),
    "split": (lambda M, x: M.split(x, 2, axis=1), lambda M, x: M.split(x, 3, axis=0)),
    "flip": (lambda M, x: M.flip(x, 2), lambda M, x: M.flip(x, (1, -1))),
    "take": (lambda M, x: M.take(x, [0], axis=2), lambda M, x: M.take(x, [0], axis=-3)),
    "repeat": (lambda M, x: M.repeat(x, 2, axis=2), lambda M, x: M.repeat(x, [1, 2], axis=1)),
    "reshape": (lambda M, x: M.reshape(x, (4, -1)), lambda M, x: M.reshape(x, (-1, -1))),
}


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("name", sorted(BAD_AXIS_CALLS))
def test_bad_axes_and_sizes_are_shape_errors_with_the_line(name, which):
    """What NumPy refuses with a ValueError (AxisError included) is a ShapeError naming
    the function and the caller's line."""
    call = BAD_AXIS_CALLS[name][which]
    with pytest.raises(ValueError):
        call(np, np.zeros((2, 3)))
    x = N.var("x", (2, 3))
    with pytest.raises(graphc.ShapeError) as info:
        call(N, x)
    assert name in str(info.value)
    # the user's line is the lambda's, in the table above
    assert f"test_ops_shape.py:{call.__code__.co_firstlineno}" in str(info.value)


@pytest.mark.parametrize("fn", [
    lambda M, a: M.reshape(a, np.array([4, 3])),
    lambda M, a: M.reshape(a, np.int64(12)),
    lambda M, a: M.split(a, np.array([1, 3]), axis=1),
    lambda M, a: M.split(a, np.int64(2), axis=1),
    lambda M, a: M.tile(a, np.array([2, 1])),
    lambda M, a: M.broadcast_to(a, np.array([2, 3, 4])),
    lambda M, a: M.tensordot(a, a, np.array([[0], [0]])),
    lambda M, a: M.repeat(a, np.array([1, 0, 2]), axis=0),
    lambda M, a: M.transpose(a, np.array([1, 0])),
])
def test_numpy_integers_and_arrays_as_shape_arguments(fn):
    """A 1-D integer array is a sequence (of sizes, indices, repetitions, axes), even
    though it has ``__index__`` too; a NumPy integer is an int."""
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    check_op(fn, lambda a: fn(np, a), x)
