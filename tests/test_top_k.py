"""``N.top_k`` (the ``top_k`` kind, issue 18): against a plain-Python ranking (hypothesis
over shapes, axes, k, dtypes, ties, NaN and -0.0, rows long enough for the partition
path), in graph and eager mode; the values' gradient against finite differences; the
errors; save/load; ONNX export (``TopK``) and import against onnxruntime."""
import hypothesis.strategies as st
import numpy as np
import pytest
from gradcheck import check_gradient, grid
from hypothesis import given
from opcheck import examples, quiet

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc import DTypeError, ShapeError


def reference_ranking(row, k, largest):
    """Indices of ``row``'s ``k`` best, one comparison key per element: NaN above
    every number, equal values by index."""
    def key(i):
        value = row[i]
        nan = value != value
        if largest:
            return (0 if nan else 1, 0.0 if nan else -float(value), i)
        return (1 if nan else 0, 0.0 if nan else float(value), i)
    return sorted(range(len(row)), key=key)[:k]


def reference(x, k, axis, largest):
    moved = np.moveaxis(x, axis, -1)
    indices = np.empty(moved.shape[:-1] + (k,), np.intp)
    for at in np.ndindex(moved.shape[:-1]):
        indices[at] = reference_ranking(list(moved[at]), k, largest)
    indices = np.moveaxis(indices, -1, axis)
    return np.take_along_axis(x, indices, axis), indices


@st.composite
def cases(draw):
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int32, np.bool_]))
    long_rows = draw(st.booleans())     # k * 8 <= n: a partition narrows each row first
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    if long_rows:
        shape[axis] = draw(st.integers(16, 60))
    n = shape[axis]
    k = draw(st.integers(0, max(n // 8, 1) if long_rows else n))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 31)))
    x = rng.integers(-3, 4, shape).astype(dtype)     # many ties
    if dtype in (np.float32, np.float64):
        specials = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf], dtype)
        where = rng.random(shape) < draw(st.sampled_from([0.0, 0.1, 0.6]))
        x[where] = rng.choice(specials, int(where.sum()))
    return x, k, axis, draw(st.booleans())


@examples(60)
@given(cases())
def test_top_k_ranks_as_the_reference(case):
    x, k, axis, largest = case
    want_values, want_indices = reference(x, k, axis, largest)
    v = N.var("x", x.shape, x.dtype)
    exe = graphc.compile([v], list(N.top_k(v, k, axis=axis, largest=largest)))
    with quiet():
        runs = [exe.run(x=x), E.top_k(x, k, axis=axis, largest=largest)]
    for values, indices in runs:
        assert indices.dtype == np.intp and values.dtype == x.dtype
        np.testing.assert_array_equal(indices, want_indices)
        # bits: -0.0 and 0.0 are equal values, yet the element chosen is the one returned
        assert values.tobytes() == want_values.tobytes()


def test_a_long_row_narrowed_by_a_partition_keeps_ties_in_index_order():
    x = np.zeros(4000, np.float32)
    x[[7, 3000, 11]] = 2.0
    x[[5, 2500, 3999, 17]] = 1.0
    values, indices = E.top_k(x, 5)
    assert indices.tolist() == [7, 11, 3000, 5, 17]
    assert values.tolist() == [2, 2, 2, 1, 1]
    _, indices = E.top_k(x, 3, largest=False)
    assert indices.tolist() == [0, 1, 2]
    x[[40, 9]] = np.nan
    assert E.top_k(x, 3)[1].tolist() == [9, 40, 7]
    assert E.top_k(-x, 2, largest=False)[1].tolist() == [7, 11]


def test_the_values_gradient_reaches_the_chosen_elements():
    rng = np.random.default_rng(3)
    x = grid(rng, (3, 7))
    check_gradient(lambda M, a: M.top_k(a, 3, axis=1)[0], x)
    check_gradient(lambda M, a: M.top_k(a, 2, axis=0, largest=False)[0] * 2.0, x,
                   optimised=True)


def test_top_k_errors_name_the_function_and_what_was_expected():
    x = N.var("x", (3, 5))
    with pytest.raises(ShapeError, match=r"top_k: k=6 must be in \[0, 5\].*\(3, 5\)"):
        N.top_k(x, 6)
    with pytest.raises(ShapeError, match="top_k: k=-1"):
        N.top_k(x, -1)
    with pytest.raises(ShapeError, match="top_k: k must be an int, got True"):
        N.top_k(x, True)
    with pytest.raises(ShapeError, match="top_k: k must be an int, got 2.0"):
        N.top_k(x, 2.0)
    with pytest.raises(ShapeError, match="top_k: largest must be True or False"):
        N.top_k(x, 2, largest=1)
    with pytest.raises(ShapeError, match="top_k.*axis 2"):
        N.top_k(x, 2, axis=2)
    with pytest.raises(ShapeError, match="top_k: the input must have at least one dim"):
        E.top_k(np.float32(1.0), 1)
    with pytest.raises(DTypeError, match="top_k: the values must be real.*complex64.*"):
        E.top_k(np.ones(3, np.complex64), 1)


def test_top_k_graphs_are_saved_and_loaded(tmp_path):
    x = N.var("x", (2, 40))
    values, indices = N.top_k(x, 4, axis=1)
    exe = graphc.compile([x], [values, indices, N.top_k(x, 1, axis=0, largest=False)[1]])
    exe.save(tmp_path / "g.npz")
    feeds = dict(x=np.random.default_rng(4).integers(-3, 3, x.shape).astype(np.float32))
    for got, want in zip(graphc.load(tmp_path / "g.npz").run(**feeds), exe.run(**feeds)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("largest", [True, False])
def test_top_k_exports_to_onnx_topk(largest):
    pytest.importorskip("onnxruntime")
    from onnx_reference import onnxruntime_run
    from test_onnx_export import op_types, to_onnx

    x = N.var("x", (3, 50))
    exe = graphc.compile([x], list(N.top_k(x, 5, axis=1, largest=largest)))
    model = to_onnx(exe)
    assert "TopK" in op_types(model)
    feeds = dict(x=np.random.default_rng(5).integers(-4, 4, x.shape).astype(np.float32))
    for got, want in zip(onnxruntime_run(model, feeds), exe.run(**feeds)):
        np.testing.assert_array_equal(got, want)


def test_onnx_topk_imports_as_one_top_k_step():
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper as h

    node = h.make_node("TopK", ["x", "k"], ["values", "indices"], axis=-1)
    graph = h.make_graph([node], "topk", [h.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                   [1, 3000])],
                         [h.make_tensor_value_info("values", TensorProto.FLOAT, [1, 6]),
                          h.make_tensor_value_info("indices", TensorProto.INT64, [1, 6])],
                         [h.make_tensor("k", TensorProto.INT64, [1], [6])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    x = np.random.default_rng(6).integers(-50, 50, (1, 3000)).astype(np.float32)
    loaded = graphc.onnx.load(model)
    got = loaded.run({"x": x})
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    for g, w in zip(got, session.run(None, {"x": x})):
        np.testing.assert_array_equal(g, w)
    kinds = [s.op.kind for s in loaded.executable.liveness.steps]
    assert "top_k" in kinds and len(kinds) <= 4, kinds   # no (n, n) comparison table
