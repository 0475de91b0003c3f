"""In-place syntax on lazy arrays: ``a[key] = v``, ``a op= v``, ``x.at[key].<mode>(v)``,
NumPy's writing functions (``N.put``, ``N.copyto``, ...), and NumPy's own functions on
graph values (``np.sum(t)``, through ``__array_function__``).

Every update is checked against NumPy doing the same to a copy, in graph mode (both
memory plans) and, for the functions, eager mode; gradients against finite
differences; the ``scatter`` node against onnxruntime and through save/load.
"""
from __future__ import annotations

import io

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from numpy.testing import assert_array_equal

import graphc
import graphc.eager as E
import graphc.ndarray as N
from gradcheck import advanced_keys, basic_keys, check_gradient, smooth
from opcheck import check_op, examples
from graphc.type.errors import DTypeError, IndexOutOfRange, ShapeError

F32 = np.float32
#: scatter's modes and the NumPy ufunc whose ``at`` each follows
UFUNC_OF = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
            "divide": np.divide, "power": np.power, "min": np.minimum, "max": np.maximum}


def test_every_update_mode_has_a_kernel():
    from graphc.engine.update_kernels import UFUNCS
    from graphc.operator.updates import MODES
    assert set(MODES) == {"set"} | set(UFUNCS) == {"set"} | set(UFUNC_OF)


def updated(M, x, key, values, mode):
    """``x.at[key].<mode>(values)`` in graph mode, the same update in eager mode."""
    if M is N:
        return getattr(x.at[key], mode)(values)
    return E._NS._updated(x, key, values, mode)


def numpy_updated(x, key, values, mode):
    out = x.copy()
    if mode == "set":
        out[key] = values
    else:
        UFUNC_OF[mode].at(out, key, values)
    return out


def _values_for(rng, x, key, dtype=F32):
    return (rng.integers(1, 5, np.shape(x[key])) / 2).astype(dtype)


# -- a[key] = v and x.at[key] ------------------------------------------------------------
@examples(40)
@given(st.one_of(basic_keys(), advanced_keys()), st.integers(0, 2 ** 16))
def test_item_assignment_matches_numpy(shape_key, seed):
    shape, key = shape_key
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(F32)
    v = _values_for(rng, x, key)

    def assign(M, a, b):
        a[key] = b
        return a
    check_op(assign, lambda a, b: numpy_updated(a, key, b, "set"), x, v, eager=False)


@examples(40)
@given(advanced_keys(), st.sampled_from(["set"] + sorted(UFUNC_OF)), st.integers(0, 2 ** 16))
def test_at_updates_match_numpy_ufunc_at_with_repeated_indices(shape_key, mode, seed):
    shape, key = shape_key
    rng = np.random.default_rng(seed)
    x = (rng.integers(1, 4, shape) / 2).astype(F32)   # exact in float32 for every mode
    v = _values_for(rng, x, key)
    check_op(lambda M, a, b: updated(M, a, key, b, mode),
             lambda a, b: numpy_updated(a, key, b, mode), x, v)


def test_values_broadcast_and_cast_to_the_array():
    x = N.var("x", (3, 4), np.int32)
    y = x.at[:, 1].set(7.9)                  # cast as NumPy's assignment casts
    z = x.copy()
    z[1:] = np.ones((1, 1, 4), np.int64)     # leading axes of length 1 are dropped
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    got_y, got_z = graphc.compile([x], [y, z]).run(x=a)
    want_y, want_z = a.copy(), a.copy()
    want_y[:, 1] = 7.9
    want_z[1:] = np.ones((1, 1, 4), np.int64)
    assert_array_equal(got_y, want_y)
    assert_array_equal(got_z, want_z)


def test_bad_updates_name_the_operation_and_shapes():
    x = N.var("x", (3, 4))
    with pytest.raises(ShapeError, match=r"scatter: could not broadcast values of shape "
                                         r"\(3,\) into the indexed cells of shape \(2, 4\)"):
        x[1:] = np.ones(3, F32)
    with pytest.raises(IndexOutOfRange, match="setitem: index 5 is out of bounds"):
        x[np.array([5])] = 1.0
    with pytest.raises(ValueError, match="unknown update mode 'xor'"):
        E._NS._updated(np.zeros(3), 0, 1.0, "xor")
    assert x.op.kind == "var"                # a failed update changes nothing


def test_an_update_reads_values_computed_from_the_array_itself():
    # the values are views of the memory the update writes in place: they must be read
    # before it is written (NumPy's a[1:] = a[:-1] shifts)
    def shift(M, a):
        a[1:] = a[:-1]
        a[:-1] += a[1:]
        return a

    def want(a):
        a = a.copy()
        a[1:] = a[:-1]
        a[:-1] += a[1:]
        return a
    check_op(shift, want, np.arange(6, dtype=F32), eager=False)


# -- augmented assignment and rebinding ---------------------------------------------------
@pytest.mark.parametrize("symbol", ["+", "-", "*", "/", "//", "%", "**"])
def test_augmented_assignment_rebinds_and_keeps_earlier_readers(symbol):
    a0 = np.arange(1, 7, dtype=F32).reshape(2, 3)
    b0 = np.full(3, 2.0, F32)
    x, b = N.var("x", (2, 3)), N.var("b", (3,))
    before = x * 1.0                         # built on the old value
    alias = x
    exec(f"x {symbol}= b")
    assert alias is x and x.op.kind != "var"
    got_x, got_before = graphc.compile([x, b], [x, before]).run(x=a0, b=b0)
    want = a0.copy()
    exec(f"want {symbol}= b0")
    assert_array_equal(got_x, want)
    assert_array_equal(got_before, a0)


def test_a_function_that_updates_its_argument_updates_the_callers_array():
    def step(u, v):                          # NumPy code written against np
        u += v
        u[0] = 0.0
        return None

    u, v = N.var("u", (4,)), N.var("v", (4,))
    step(u, v)
    g = graphc.compile([u, v], [u])           # the input is the variable u was declared as
    got = g.run(u=np.ones(4, F32), v=np.arange(4, dtype=F32))
    assert_array_equal(got[0], [0.0, 2.0, 3.0, 4.0])
    assert u.declared.name == "u" and u.declared.op.kind == "var"


def test_stencil_iterations_update_in_place_in_the_plan():
    def jacobi(u, iters):
        for _ in range(iters):
            u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        return u

    start = np.random.default_rng(0).random((16, 16)).astype(F32)
    u = N.var("u", (16, 16))
    g = graphc.compile([u], [jacobi(u, 4)])
    assert_array_equal(g.run(u=start)[0], jacobi(start.copy(), 4))
    stats = g.stats()
    # every update after the first writes over the array it updates: the plan holds the
    # input, one interior and one running array, no more
    assert stats["ops"]["scatter"] == 4 and stats["inplace_values"] >= 3
    assert stats["planned_bytes"] == stats["lower_bound_bytes"]


def test_in_place_results_keep_the_arrays_shape_and_dtype():
    i = N.var("i", (3,), np.int64)
    with pytest.raises(DTypeError, match=r"__iadd__: cannot cast the result of dtype float64 "
                                         r"to the array's dtype int64"):
        i += 1.5
    x = N.var("x", (3,))
    with pytest.raises(ShapeError, match=r"__iadd__: non-broadcastable output operand with "
                                         r"shape \(3,\)"):
        x += N.var("y", (2, 3))
    assert i.op.kind == "var" and x.op.kind == "var"
    h = N.var("h", (3,), np.float64)
    h += np.ones(3, F32)                     # same_kind casts are fine
    assert h.dtype == np.float64


# -- NumPy's writing functions -------------------------------------------------------------
WRITERS = {
    "put": (lambda M, a: M.put(a, [0, 5, -1], [9.0, 8.0]),
            lambda a: np.put(a, [0, 5, -1], [9.0, 8.0])),
    "put_wrap": (lambda M, a: M.put(a, [13, -20], 4.0, mode="wrap"),
                 lambda a: np.put(a, [13, -20], 4.0, mode="wrap")),
    "put_along_axis": (lambda M, a: M.put_along_axis(a, np.array([[1], [0], [2]]), -1.0, 1),
                       lambda a: np.put_along_axis(a, np.array([[1], [0], [2]]), -1.0, 1)),
    "putmask": (lambda M, a: M.putmask(a, a > 0, np.array([7.0, 8.0])),
                lambda a: np.putmask(a, a > 0, np.array([7.0, 8.0]))),
    "place": (lambda M, a: M.place(a, np.arange(12).reshape(3, 4) % 3 == 0, [1.0, 2.0]),
              lambda a: np.place(a, np.arange(12).reshape(3, 4) % 3 == 0, [1.0, 2.0])),
    "copyto": (lambda M, a: M.copyto(a, np.arange(4.0), where=np.arange(4) > 1),
               lambda a: np.copyto(a, np.arange(4.0), where=np.arange(4) > 1)),
    "fill_diagonal": (lambda M, a: M.fill_diagonal(a, [5.0, 6.0]),
                      lambda a: np.fill_diagonal(a, [5.0, 6.0])),
    "fill_diagonal_wrap": (lambda M, a: M.fill_diagonal(a, 1.0, wrap=True),
                           lambda a: np.fill_diagonal(a, 1.0, wrap=True)),
}


@pytest.mark.parametrize("name", sorted(WRITERS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_writing_functions_match_numpy(name, dtype):
    ours, theirs = WRITERS[name]
    a = np.random.default_rng(1).standard_normal((3, 4)).astype(dtype)
    if name.startswith("fill_diagonal_wrap"):
        a = np.zeros((7, 3), dtype)

    def with_ours(M, x):
        assert ours(M, x) is None            # they write, as NumPy's do, and return None
        return x

    def with_numpy(x):
        x = x.copy()
        theirs(x)
        return x
    check_op(with_ours, with_numpy, a)


def test_writing_into_a_numpy_array_from_graph_mode_is_refused():
    a = np.zeros(3, F32)
    with pytest.raises(TypeError, match="put: the array to write into must be a graph value"):
        N.put(a, [0], 1.0)
    assert not a.any()


# -- gradients -----------------------------------------------------------------------------
@examples(12)
@given(st.one_of(basic_keys(), advanced_keys()), st.sampled_from(["set", "add", "subtract"]),
       st.integers(0, 2 ** 16))
def test_gradients_of_updates(shape_key, mode, seed):
    shape, key = shape_key
    rng = np.random.default_rng(seed)
    x = smooth(rng, shape)
    v = smooth(rng, np.shape(x[key]))
    if mode == "set":  # where an index repeats, only the last write reaches the output
        flat = np.arange(x.size).reshape(shape)[key].ravel()
        if len(set(flat.tolist())) != flat.size:
            return
    check_gradient(lambda M, a, b: updated(M, a, key, b, mode), x, v)


def test_gradient_of_a_multiplying_update_with_distinct_indices():
    rng = np.random.default_rng(3)
    check_gradient(lambda M, a, b: updated(M, a, (np.array([2, 0]),), b, "multiply"),
                   smooth(rng, (4, 3)), smooth(rng, (2, 3)))


def test_gradient_of_an_update_by_a_maximum_is_refused_clearly():
    x = N.var("x", (4,))
    y = x.at[1:].max(0.5)
    with pytest.raises(graphc.GraphcError, match=r"gradient of an update by max"):
        N.grad(N.sum(y), [x])


# -- export, save and load ------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["set", "add", "subtract", "multiply", "min", "max"])
def test_updates_export_to_onnx_and_match_onnxruntime(mode):
    pytest.importorskip("onnxruntime")
    from graphc.onnx.export import to_onnx
    from onnx_reference import onnxruntime_run
    x, v = N.var("x", (4, 5)), N.var("v", (2, 5))
    idx = np.array([3, 1])
    y = updated(N, x, (idx, slice(None)), v, mode)
    z = updated(N, y, (slice(None), slice(1, 4)), 2.0, mode)
    exe = graphc.compile([x, v], [z])
    a = np.random.default_rng(0).standard_normal((4, 5)).astype(F32)
    b = np.random.default_rng(1).standard_normal((2, 5)).astype(F32)
    (got,) = onnxruntime_run(to_onnx(exe), {"x": a, "v": b})
    np.testing.assert_allclose(got, exe.run(x=a, v=b)[0], rtol=1e-6)


def test_updates_survive_save_and_load(tmp_path):
    x, v = N.var("x", (4,)), N.var("v", (2,))
    y = x.at[np.array([0, 0])].add(v)
    y[1:3] = 5.0
    exe = graphc.compile([x, v], [y])
    exe.save(tmp_path / "updates.npz")
    loaded = graphc.load(tmp_path / "updates.npz")
    feeds = {"x": np.arange(4, dtype=F32), "v": np.array([1.0, 2.0], F32)}
    assert_array_equal(loaded.run(**feeds)[0], exe.run(**feeds)[0])


# -- NumPy's functions on graph values -------------------------------------------------------
def test_numpy_functions_build_nodes():
    a = np.arange(6, dtype=F32).reshape(2, 3)
    x = N.var("x", (2, 3))
    outputs = [np.sum(x), np.mean(x, axis=0, keepdims=True), np.concatenate([x, x], axis=1),
               np.stack([x, x]), np.where(x > 2, x, 0.0), np.transpose(x), np.clip(x, 1, 4),
               np.reshape(x, (3, 2)), np.max(x, axis=1, out=None)]
    want = [np.sum(a), np.mean(a, axis=0, keepdims=True), np.concatenate([a, a], axis=1),
            np.stack([a, a]), np.where(a > 2, a, 0.0), np.transpose(a), np.clip(a, 1, 4),
            np.reshape(a, (3, 2)), np.max(a, axis=1)]
    got = graphc.compile([x], outputs).run(x=a)
    for g, w in zip(got, want):
        assert_array_equal(g, w.astype(g.dtype))
    assert np.shape(x) == (2, 3) and np.ndim(x) == 2 and np.size(x) == 6


def test_numpy_functions_graphc_lacks_or_arguments_it_refuses_say_so():
    x = N.var("x", (2, 3))
    with pytest.raises(TypeError, match=r"numpy\.\w+ has no graphc\.ndarray equivalent yet"):
        np.save(io.BytesIO(), x)
    with pytest.raises(TypeError, match=r"N\.sum\(\) got an unexpected keyword argument "
                                        r"'out'"):
        np.sum(x, out=np.empty(()))
    with pytest.raises(TypeError, match=r"N\.sum\(\) got an unexpected keyword argument "
                                        r"'where'"):
        np.sum(x, where=np.array([[True, False, True]] * 2))


# -- ndarray's methods ------------------------------------------------------------------
METHODS = {
    "sort": lambda a: (a.sort(axis=0), a)[1],
    "sum_dtype": lambda a: a.sum(1, np.float64),
    "mean_keepdims": lambda a: a.mean(None, None, None, True),
    "var_ddof": lambda a: a.var(0, None, None, 1),
    "cumsum": lambda a: a.cumsum(1),
    "cumprod": lambda a: a.cumprod(),
    "argsort": lambda a: a.argsort(axis=0, kind="stable"),
    "round": lambda a: a.round(1),
    "trace": lambda a: a.trace(1),
    "diagonal": lambda a: a.diagonal(),
    "searchsorted": lambda a: np.sort(a.ravel()).searchsorted(np.float32(0.5)),
    "partition_then_min": lambda a: (a.partition(1, axis=1), a[:, :2].max(axis=1))[1],
    "fill": lambda a: (a.fill(3.0), a)[1],
    "put": lambda a: (a.put([0, 5], [9.0, 8.0]), a)[1],
}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_ndarray_methods_match_numpy(name):
    a = np.random.default_rng(2).standard_normal((4, 5)).astype(F32)

    def ours(M, x):
        return METHODS[name](x if M is N else x.copy())
    check_op(ours, lambda x: METHODS[name](x.copy()), a, eager=False,
             rtol=1e-6 if name in ("var_ddof", "mean_keepdims", "sum_dtype") else None,
             atol=1e-6 if name in ("var_ddof", "mean_keepdims", "sum_dtype") else None)


def test_methods_that_need_data_or_out_say_why():
    x = N.var("x", (3,))
    with pytest.raises(TypeError, match=r"item\(\) of lazy graphc value x: it has no data"):
        x.item()
    with pytest.raises(TypeError, match=r"tolist\(\) of lazy graphc value x"):
        x.tolist()
    with pytest.raises(TypeError, match="sum: out= is not supported"):
        x.sum(out=np.empty(()))


@pytest.mark.parametrize("decimals", [-2, -1, 1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_round_to_decimals_gives_numpys_bits(decimals, dtype):
    a = (np.random.default_rng(4).standard_normal(200) * 1000).astype(dtype)
    check_op(lambda M, x: M.round(x, decimals), lambda x: np.round(x, decimals), a)
