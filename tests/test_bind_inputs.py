"""Inputs bound without a copy (``compile(bind_inputs=True)``, the default): a run
reads a large fed array in place instead of copying it into the graph.

Every test compares a graph that binds with the same graph compiled with
``bind_inputs=False`` (which copies every input in, the behaviour bound runs must
reproduce bit for bit: the plan and the kernels are the same, only the array the
readers read differs), and checks the caller's array is never written (a saved
copy, and read-only arrays). ``stats()["bound_inputs"]`` says whether binding
happened, so a test of the fallback (strided, unaligned, small, the graph's own
memory fed back) proves it copied.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.cpu_engine   # binding inputs is the CPU program's

import graphc
import graphc.ndarray as N
from graphc.engine.cpu import BIND_BYTES_PER_READER
from graphc.type.errors import InputError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._programs import PROGRAMS  # noqa: E402

F32 = np.float32
#: a (ROWS, COLS) float32 input holds enough bytes to be bound with four readers
ROWS, COLS = 1024, 1024
assert ROWS * COLS * 4 >= 4 * BIND_BYTES_PER_READER


def pair(inputs, outputs, updates=None, **options):
    """The graph compiled twice: binding inputs, and copying them."""
    return (graphc.compile(inputs, outputs, updates, **options),
            graphc.compile(inputs, outputs, updates, bind_inputs=False, **options))


def same(a, b) -> bool:
    """Exactly equal results (one array, or lists of them), NaNs included."""
    if isinstance(a, list):
        return len(a) == len(b) and all(same(p, q) for p, q in zip(a, b))
    return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def big(seed, shape=(ROWS, COLS), dtype=F32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def simple_graph():
    """Three readers of the large ``x`` (one through a slice view), one of ``w``."""
    x, w = N.var("x", (ROWS, COLS)), N.var("w", (COLS,))
    return [x, w], [N.sum(N.exp(x * 0.1) * w, axis=1), x[::2, 1:] * 2.0, N.max(x, axis=0)]


def simple_pair(**options):
    """``(bound, copied, X, W)``: :func:`simple_graph` compiled by :func:`pair`, and a
    large ``x`` and its ``w`` to feed it."""
    bound, copied = pair(*simple_graph(), **options)
    return bound, copied, big(0), big(1, (COLS,))


# -- random graphs ---------------------------------------------------------------------------
UNARY = ["tanh", "sin", "exp", "negative", "square"]
BINARY = ["add", "multiply", "maximum"]


@st.composite
def programs(draw):
    """Instructions over the values ``x`` (large, bindable), ``y`` (large) and ``s``
    (small): elementwise ops, reductions, slices and transposes (views of the
    inputs the readers read strided), some values as outputs."""
    instrs = []
    count = draw(st.integers(1, 6))
    for _ in range(count):
        kind = draw(st.sampled_from(["unary", "binary", "small", "slice", "transpose",
                                     "reduce"]))
        values = 3 + len(instrs)
        a = draw(st.integers(0, values - 1).filter(lambda i: i != 2))
        b = draw(st.integers(0, values - 1).filter(lambda i: i != 2))
        instrs.append((kind, draw(st.sampled_from(UNARY)), draw(st.sampled_from(BINARY)),
                       a, b, draw(st.sampled_from([0, 1]))))
    outputs = draw(st.lists(st.integers(3, 2 + count), min_size=1, max_size=3, unique=True))
    return instrs, outputs


def interpret(instrs, x, y, s):
    """The program's values: over lazy nodes (``N``) as over NumPy arrays."""
    M = np if isinstance(x, np.ndarray) else N
    vals = [x, y, s]
    for kind, unary, binary, a, b, axis in instrs:
        u, v = vals[a], vals[b]
        if kind == "unary":
            r = getattr(M, unary)(u * 0.25)
        elif kind == "binary":
            r = getattr(M, binary)(u, v) if u.shape == v.shape else getattr(M, binary)(u, u)
        elif kind == "small":
            r = u * s if u.shape == (ROWS, COLS) else u + 1.0
        elif kind == "slice":
            r = u[1::2] if u.ndim == 2 else u[::3]
        elif kind == "transpose":
            r = u.T if u.ndim == 2 else M.negative(u)
        else:
            r = M.sum(u, axis=axis if u.ndim == 2 else 0, keepdims=u.ndim == 2)
        vals.append(r)
    return vals


@settings(max_examples=12, deadline=None)
@given(programs())
def test_random_graphs_bound_runs_equal_copied_runs(program):
    instrs, picks = program
    x, y, s = N.var("x", (ROWS, COLS)), N.var("y", (ROWS, COLS)), N.var("s", (COLS,))
    vals = interpret(instrs, x, y, s)
    bound, copied = pair([x, y, s], [vals[i] for i in picks])
    X, Y, S = big(1), big(2), big(3, (COLS,))
    saved = X.copy(), Y.copy()
    assert same(bound.run(x=X, y=Y, s=S), copied.run(x=X, y=Y, s=S))
    assert same(bound.run(x=X, y=Y, s=S), copied.run(x=X, y=Y, s=S))    # the same arrays
    assert same(bound.run(x=Y, y=X), copied.run(x=Y, y=X))              # swapped
    assert np.array_equal(X, saved[0]) and np.array_equal(Y, saved[1])
    X *= 0.5                                                          # changed in place
    assert same(bound.run(x=X, y=X), copied.run(x=X, y=X))
    assert same(bound.run(), copied.run())                              # left out
    reference = interpret(instrs, X, X, S)          # NumPy itself, on the last values
    for out, i in zip(bound.run(), picks):
        np.testing.assert_allclose(out, reference[i], rtol=1e-4, atol=1e-3)


# -- the NumPy-style programs of the benchmarks ----------------------------------------------
def test_numpy_programs_bound_runs_equal_copied_runs():
    bound_any = 0
    for name, program in PROGRAMS.items():
        leaves = {n: N.var(n, shape, dtype) for n, (shape, dtype, _) in program.shapes.items()}
        outputs = list(program.outputs(N, leaves))
        bound, copied = pair(list(leaves.values()), outputs)
        for seed in (0, 1, 0):
            arrays = program.make_inputs(seed)
            saved = {n: a.copy() for n, a in arrays.items()}
            for a in arrays.values():
                a.flags.writeable = False
            assert same(bound.run(**arrays), copied.run(**arrays)), name
            assert all(np.array_equal(arrays[n], saved[n]) for n in arrays), name
        bound_any += bound.stats()["bound_inputs"]
    assert bound_any >= 5          # most programs read a large input a few times


# -- the caller's array ----------------------------------------------------------------------
@pytest.mark.parametrize("kernels", ["numpy", "generated"])
@pytest.mark.parametrize("schedule", ["serial", "parallel"])
def test_read_only_array_bound_and_never_written(kernels, schedule):
    bound, copied, X, W = simple_pair(kernels=kernels, schedule=schedule)
    saved = X.copy()
    X.flags.writeable = False
    assert same(bound.run(x=X, w=W), copied.run(x=X, w=W))
    assert bound.stats()["bound_inputs"] == 1 and copied.stats()["bound_inputs"] == 0
    assert bound.stats()["rollback_bytes"] == 0
    X2 = big(2)                                    # a writable one, then back
    assert same(bound.run(x=X2), copied.run(x=X2))
    assert same(bound.run(x=X), copied.run(x=X))
    assert np.array_equal(X, saved)
    assert np.array_equal(bound.value("x"), X)


def test_array_changed_in_place_is_read_again():
    bound, copied, X, W = simple_pair()
    bound.run(x=X, w=W)
    copied.run(x=X, w=W)
    steps = bound.stats()["steps_last_run"]
    X += 1.0          # the owner writes it between runs: the bound graph sees it
    assert same(bound.run(x=X), copied.run(x=X))
    X -= 3.0
    assert same(bound.run(), copied.run(x=X))      # left out: still recomputed
    assert bound.stats()["steps_last_run"] == steps
    assert np.array_equal(bound.value("x"), X)


def test_binding_is_kept_for_the_same_array_and_let_go_by_assign():
    bound, copied, X, W = simple_pair()
    bound.run(x=X, w=W)
    readers = [k.kernel for k in bound.program.kernels if hasattr(k, "kernel")]
    bound.run(x=X)
    assert [k.kernel for k in bound.program.kernels if hasattr(k, "kernel")] == readers
    bound.assign(x=X)                                # a copy: the graph lets X go
    assert bound.stats()["bound_inputs"] == 0
    copied.run(x=X.copy(), w=W)
    X += 2.0
    assert same(bound.run(), copied.run())


def test_failed_run_puts_the_binding_back():
    x, i = N.var("x", (ROWS, COLS)), N.var("i", (4,), np.int64)
    out = [N.take(N.sum(x * 2.0, axis=1), i), N.exp(x[:, :8])]
    bound, copied = pair([x, i], out)
    X, I = big(0), np.arange(4)
    assert same(bound.run(x=X, i=I), copied.run(x=X, i=I))
    for g in (bound, copied):
        with pytest.raises(IndexError):
            g.run(x=big(1), i=np.array([0, 1, 2, ROWS]))
    assert same(bound.run(), copied.run())          # X and I again
    assert np.array_equal(bound.value("x"), X)
    T = np.asfortranarray(big(2))                   # copied in, then a failed bound feed
    assert same(bound.run(x=T), copied.run(x=T))
    assert bound.stats()["bound_inputs"] == 0
    with pytest.raises(IndexError):
        bound.run(x=big(3), i=np.full(4, ROWS))
    assert same(bound.run(), copied.run())
    assert np.array_equal(bound.value("x"), T)


def test_incremental_runs_and_pinned_inputs():
    x, w = N.var("x", (ROWS, COLS)), N.var("w", (ROWS, COLS))
    outs = [N.sum(N.exp(w * 0.1), axis=0), N.sum(x * w, axis=1)]
    bound, copied = pair([x, w], outs, pinned=["w"])
    X, W = big(0), big(1)
    assert same(bound.run(x=X, w=W), copied.run(x=X, w=W))
    assert same(bound.run(x=big(2)), copied.run(x=big(2)))
    # w is pinned: copied in, so a run feeding only x skips what depends on w alone
    assert bound.stats()["bound_inputs"] == 1
    assert bound.stats()["steps_last_run"] == copied.stats()["steps_last_run"]


@pytest.mark.parametrize("feed", ["transposed", "strided", "unaligned", "small"])
def test_layouts_that_cannot_be_bound_are_copied(feed):
    inputs, outputs = simple_graph()
    bound, copied = pair(inputs, outputs)
    W = big(1, (COLS,))
    if feed == "transposed":
        X = big(0).T
    elif feed == "strided":
        X = big(0, (ROWS, 2 * COLS))[:, ::2]
    elif feed == "unaligned":
        raw = np.zeros(ROWS * COLS * 4 + 1, np.uint8)
        X = raw[1:].view(F32).reshape(ROWS, COLS)
        X[...] = big(0)
        assert not X.flags.aligned
    else:
        x = N.var("x", (64, 64))
        bound, copied = pair([x], [N.exp(x)])
        X, W = big(0, (64, 64)), None
    feeds = {"x": X} if W is None else {"x": X, "w": W}
    saved = X.copy()
    assert same(bound.run(**feeds), copied.run(**feeds))
    assert bound.stats()["bound_inputs"] == 0
    assert np.array_equal(X, saved)


def test_wrong_dtype_is_refused_and_keeps_the_binding():
    bound, copied, X, W = simple_pair()
    expected = copied.run(x=X, w=W)
    bound.run(x=X, w=W)
    for bad in (X.astype(np.float64), X.astype(">f4")):
        with pytest.raises(InputError, match="expects dtype float32"):
            bound.run(x=bad)
    assert same(bound.run(), expected)


def test_graph_memory_fed_back_is_copied():
    x = N.var("x", (ROWS, COLS))
    g = graphc.compile([x], [N.exp(x * 0.01), x * 2.0], copy_outputs=False)
    h = graphc.compile([x], [N.exp(x * 0.01), x * 2.0])
    X = big(0)
    out = g.run(x=X)
    assert g.stats()["bound_inputs"] == 1
    expected = h.run(x=h.run(x=X)[0])
    # the graph's own output as its input: a run writes over it, so it is copied
    assert same([a.copy() for a in g.run(x=out[0])], expected)
    assert g.stats()["bound_inputs"] == 0


def test_inputs_read_after_the_run_are_not_bound():
    x, w = N.var("x", (ROWS, COLS)), N.var("w", (ROWS, COLS))
    bound, copied = pair([x, w], [x, N.sum(x * w)], {w: w * 0.5})
    X, W = big(0), big(1)
    for _ in range(2):
        assert same(bound.run(x=X, w=W), copied.run(x=X, w=W))
    assert bound.stats()["bound_inputs"] == 0      # x is an output, w an update target
    assert np.array_equal(X, big(0)) and np.array_equal(W, big(1))


def test_matrix_vector_program_binds_its_matrix():
    a, v = N.var("a", (1024, 512), np.float64), N.var("v", (512,), np.float64)
    bound, copied = pair([a, v], [a @ v])
    A, V = big(0, (1024, 512), np.float64), big(1, (512,), np.float64)
    for _ in range(2):
        np.testing.assert_allclose(bound.run(a=A, v=V), copied.run(a=A, v=V), rtol=1e-12)
    assert bound.stats()["bound_inputs"] == 1


# -- a compiled Model holds its weights once -------------------------------------------------
def test_model_compile_holds_its_weights_once():
    import graphc.neural as nn
    from test_weights_once import SHAPE, reachable_arrays, tiny_resnet

    model = tiny_resnet()
    params = model.init(0)
    x = np.random.default_rng(3).random(SHAPE, dtype=np.float32)
    reference = nn.compile_inference(model, params, SHAPE, fold=False, kernels="numpy")
    model.compile([x], is_train=False, use_graph=True, params=params, kernels="numpy")
    np.testing.assert_array_equal(model(x), reference.run(x=x))
    np.testing.assert_array_equal(model(x), reference.run(x=x))
    arrays = [a for a in reachable_arrays(model) if a.size]
    distinct = [w for w in params.values() if np.ptp(w) > 0]     # not zeros or ones
    assert len(distinct) >= 5
    for w in distinct:        # the state and the graph's variable share one array
        spans = {(a.__array_interface__["data"][0], a.nbytes) for a in arrays
                 if a.shape == w.shape and a.dtype == w.dtype and np.array_equal(a, w)}
        assert len(spans) == 1, w.shape
    # a state assigned eagerly writes the array the graph reads: the next call sees it
    name = next(n for n in model.parameter_names() if n.endswith("weight"))
    params[name] = params[name] * 0.5
    model._states[name].assign(params[name])
    reference = nn.compile_inference(model, params, SHAPE, fold=False, kernels="numpy")
    np.testing.assert_array_equal(model(x), reference.run(x=x))
    np.testing.assert_array_equal(model._states[name].numpy(), params[name])


def test_many_readers_bind_an_array_fed_again_only():
    x = N.var("x", (512, 512))                   # 1 MiB read by six steps
    outs = [N.sum(N.sin(x) * k, axis=0) for k in range(1, 4)] + [N.max(x, axis=1),
                                                               N.min(x, axis=0), x @ x]
    bound, copied = pair([x], outs, optimise=False)
    X, Y = big(0, (512, 512)), big(1, (512, 512))
    counts = []
    for feed in (X, X, X, Y, X):
        assert same(bound.run(x=feed), copied.run(x=feed))
        counts.append(bound.stats()["bound_inputs"])
    # a new array is copied (rebuilding six kernels costs more); the same one again is bound
    assert counts == [0, 1, 1, 0, 0]
    X += 1.0
    assert same(bound.run(x=X), copied.run(x=X))
    assert bound.stats()["bound_inputs"] == 1


def test_state_held_by_a_dropped_graph_takes_its_value_back():
    import gc
    import warnings
    import weakref

    w = graphc.State(np.arange(6, dtype=F32), name="w")

    @graphc.trace(cache_size=1)
    def scaled(x):
        return w * N.sum(x)

    np.testing.assert_array_equal(scaled(np.ones(2, F32)), np.arange(6) * 2.0)
    dropped = weakref.ref(scaled.executable(np.ones(2, F32)))     # it holds w now
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # the recompiling warning
        np.testing.assert_array_equal(scaled(np.ones(3, F32)), np.arange(6) * 3.0)
    gc.collect()
    assert dropped() is None
    np.testing.assert_array_equal(w.numpy(), np.arange(6))
    w.assign(np.ones(6, F32))
    np.testing.assert_array_equal(scaled(np.ones(3, F32)), np.full(6, 3.0))
