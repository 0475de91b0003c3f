"""The one-node softmax (graphc/optimiser/fuse_softmax.py, graphc/ops/softmax.py,
graphc/engine/softmax_kernels.py): where the rewrite fires and where not; the graph
with generated kernels against the unoptimised graph on NumPy's kernels over shapes,
axes, dtypes and special values; the generated kernel in place and out of place; the
NumPy kernel's bits; the gradient rule; ONNX export."""
import numpy as np
import pytest
from gradcheck import check_gradient, ns_of
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc
import graphc.ndarray as N
from graphc.engine import numba_kernels
from graphc.engine.softmax_kernels import SHORT_ROW, generated_softmax, numpy_softmax
from graphc.type import Op

needs_numba = pytest.mark.skipif(numba_kernels.available() is not None,
                                 reason="Numba is not installed")
pytestmark = pytest.mark.cpu_engine

#: the generated kernel's exp is within an ulp of the correctly rounded one, its sums
#: within 21 ulp (float32 lanes on short rows, float64 on long ones), its quotient a
#: product by a rounded reciprocal: a float32 result within 33 ulp of the NumPy engine's
RTOL = {np.float32: 4e-6, np.float64: 1e-13}


def kinds(exe) -> dict:
    return exe.stats()["ops"]


def softmax_graphs(shape, dtype, axis=-1, build=N.softmax):
    x = N.var("x", shape, dtype)
    return [graphc.compile([x], build(x, axis=axis), kernels=kernels, optimise=optimise)
            for kernels, optimise in (("generated", True), ("numpy", False))]


def assert_close_with_specials(got, want, dtype):
    assert got.dtype == want.dtype == dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=RTOL[dtype], atol=np.finfo(dtype).tiny)


# -- the rewrite --------------------------------------------------------------------------------
def test_the_rewrite_makes_one_node_with_generated_kernels_only():
    fused, plain = softmax_graphs((6, 10), np.float32)
    assert kinds(fused) == {"var": 1, "softmax": 1}
    assert "softmax" not in kinds(plain)
    x = N.var("x", (6, 10))
    numpy_engine = graphc.compile([x], N.softmax(x), kernels="numpy")
    assert "softmax" not in kinds(numpy_engine) and kinds(numpy_engine)["max"] == 1


def test_the_rewrite_keeps_values_that_something_else_reads():
    x = N.var("x", (6, 10))
    e = N.exp(x - N.max(x, axis=1, keepdims=True))
    s = N.sum(e, axis=1, keepdims=True)
    for outputs in ([e / s, e], [e / s, s * 2.0]):
        assert "softmax" not in kinds(graphc.compile([x], outputs, kernels="generated"))
    # a training graph's backward pass reads the exponentials: the nodes stay
    w = N.var("w", (6, 10))
    loss = N.sum(N.softmax(x) * w)
    (g,) = N.grad(loss, [x])
    assert "softmax" not in kinds(graphc.compile([x, w], [loss, g], kernels="generated"))


def test_the_rewrite_needs_one_axis_and_the_same_one_throughout():
    x = N.var("x", (6, 10))
    mixed = N.exp(x - N.max(x, axis=0, keepdims=True))
    for out in (mixed / N.sum(mixed, axis=1, keepdims=True),
                N.exp(x - N.max(x)) / N.sum(N.exp(x - N.max(x)), keepdims=True)):
        assert "softmax" not in kinds(graphc.compile([x], out, kernels="generated"))
    # a shift by something other than the maximum of x is not a softmax
    e = N.exp(x - N.mean(x, axis=1, keepdims=True))
    assert "softmax" not in kinds(graphc.compile([x], e / N.sum(e, axis=1, keepdims=True),
                                                 kernels="generated"))


# -- values ---------------------------------------------------------------------------------------
@st.composite
def softmax_cases(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=rank, max_size=rank)))
    if draw(st.booleans()):        # rows long enough for the vector loops and the threads
        shape = shape[:-1] + (draw(st.integers(17, 300)),)
    return dict(shape=shape, axis=draw(st.integers(-rank, rank - 1)),
                dtype=draw(st.sampled_from([np.float32, np.float64])),
                scale=draw(st.sampled_from([0.01, 1.0, 30.0, 1e4])),
                seed=draw(st.integers(0, 2 ** 16)))


@needs_numba
@settings(max_examples=50, deadline=None)
@given(softmax_cases())
def test_generated_graph_matches_the_unoptimised_numpy_graph(case):
    dtype, shape = case["dtype"], case["shape"]
    x = (np.random.default_rng(case["seed"]).standard_normal(shape) * case["scale"]).astype(dtype)
    fused, plain = softmax_graphs(shape, dtype, case["axis"])
    # (along an axis of one element the optimiser may simplify the reductions away)
    assert "softmax" in kinds(fused) or shape[case["axis"]] == 1
    with np.errstate(all="ignore"):
        got, want = fused.run(x=x), plain.run(x=x)
    assert_close_with_specials(got, want, dtype)
    assert np.all(x == (np.random.default_rng(case["seed"]).standard_normal(shape)
                        * case["scale"]).astype(dtype))    # the user's array is untouched


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values_give_the_numpy_engine_s_results(dtype):
    rows = np.array([[0.0, 1.0, 2.0, 3.0] * 5,
                     [np.nan] + [1.0] * 19,            # NaN anywhere: the row is NaN
                     [1.0] * 19 + [np.nan],
                     [np.inf] + [0.0] * 19,            # inf - inf: NaN
                     [-np.inf] * 20,                   # -inf - -inf: NaN
                     [-np.inf] + [2.0] * 19,           # exp(-inf) = 0
                     [1e30] + [-1e30] * 19,            # 1 and 0 exactly
                     [-80.0] * 10 + [0.0] * 10,        # subnormal exponentials
                     [5.0] * 20], dtype)
    fused, plain = softmax_graphs(rows.shape, dtype)
    with np.errstate(all="ignore"):
        got, want = fused.run(x=rows), plain.run(x=rows)
    assert_close_with_specials(got, want, dtype)
    assert np.all(np.isnan(got[1:5])) and np.all(got[6] == [1.0] + [0.0] * 19)


@needs_numba
@pytest.mark.parametrize("shape", [(3, 50), (700, 64)])     # serial and split across threads
def test_the_generated_kernel_in_place_gives_the_out_of_place_bits(shape):
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32) * 4
    op = Op.make("softmax", axis=1)
    apart = np.empty_like(x)
    run = generated_softmax(op, [x], apart, None, parallel=True)
    assert run is not None
    run()
    in_place = x.copy()
    run = generated_softmax(op, [in_place], in_place, None, parallel=True)
    assert run is not None
    run()
    np.testing.assert_array_equal(in_place, apart)
    np.testing.assert_allclose(apart.sum(axis=1), 1.0, rtol=1e-6)


@needs_numba
@pytest.mark.parametrize("n", [SHORT_ROW - 1, SHORT_ROW, SHORT_ROW + 1, 5000])
def test_rows_summed_in_float32_and_in_float64_match_the_numpy_engine(n):
    """Rows up to SHORT_ROW cells sum in float32 lanes, longer ones in float64; both
    within RTOL of the NumPy engine, on values whose exponentials span many binades."""
    x = np.random.default_rng(n).standard_normal((6, n)).astype(np.float32) * 8
    x[1] = 0.0                                     # equal cells: 1 / n each
    fused, plain = softmax_graphs(x.shape, np.float32)
    assert "softmax" in kinds(fused)
    got, want = fused.run(x=x), plain.run(x=x)
    assert_close_with_specials(got, want, np.float32)
    np.testing.assert_allclose(got.sum(axis=1, dtype=np.float64), 1.0, rtol=1e-5)


@needs_numba
def test_the_generated_kernel_declines_what_it_does_not_cover():
    op = Op.make("softmax", axis=0)
    x = np.ones((4, 3), np.float32)
    assert generated_softmax(op, [x], np.empty_like(x), None, True) is None   # columns
    op = Op.make("softmax", axis=1)
    x64 = np.ones((4, 3))
    assert generated_softmax(op, [x64], np.empty_like(x64), None, True) is None   # float64
    trailing = Op.make("softmax", axis=1)
    y = np.ones((4, 3, 1), np.float32)            # a last axis of one: rows still contiguous
    assert generated_softmax(trailing, [y], np.empty_like(y), None, False) is not None


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_the_numpy_kernel_gives_the_written_out_graph_s_bits(axis):
    x = np.random.default_rng(6).standard_normal((5, 7, 9)) * 10
    out = np.empty_like(x)
    numpy_softmax(Op.make("softmax", axis=axis), [x], out, None)()
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    np.testing.assert_array_equal(out, e / np.sum(e, axis=axis, keepdims=True))
    numpy_softmax(Op.make("softmax", axis=axis), [x], x, None)()     # in place
    np.testing.assert_array_equal(x, out)


def test_the_shape_rule_names_the_op_and_the_problem():
    x = N.var("x", (2, 3))
    with pytest.raises(graphc.ShapeError, match="softmax: axis 2"):
        ns_of(N)._op("softmax", [x], axis=2)
    with pytest.raises(graphc.DTypeError, match="softmax: expected a floating-point"):
        ns_of(N)._op("softmax", [N.var("i", (2, 3), np.int32)], axis=1)


@pytest.mark.parametrize("axis", [0, 1])
def test_gradient_matches_finite_differences(axis):
    rng = np.random.default_rng(7)

    def fn(M, x):
        return ns_of(M)._op("softmax", [x], axis=axis)
    check_gradient(fn, rng.standard_normal((4, 6)))


def test_export_writes_one_softmax(tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import graphc.onnx as G
    x = np.random.default_rng(8).standard_normal((3, 4, 5)).astype(np.float32)
    v = N.var("x", x.shape)
    y = ns_of(N)._op("softmax", [v], axis=1)
    path = tmp_path / "softmax.onnx"
    G.save(graphc.compile([v], [y], optimise=False, kernels="numpy"), str(path))
    assert [n.op_type for n in onnx.load(str(path)).graph.node] == ["Softmax"]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(session.run(None, {"x": x})[0], e / e.sum(axis=1, keepdims=True),
                               rtol=1e-5)
