"""ONNX export: the models of graphc.neural and random small graphs exported,
checked by onnx.checker (full check) and run by onnxruntime, whose outputs must
match graphc's; refusals and option errors; and the round trip through
graphc.onnx.load."""
from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import assume, given

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import graphc  # noqa: E402
import graphc.ndarray as N  # noqa: E402
import graphc.neural as nn  # noqa: E402
import graphc.onnx  # noqa: E402
from graphc.onnx import OnnxUnsupported  # noqa: E402
from graphc.onnx.export import exported_kinds, to_onnx  # noqa: E402
from graphc.onnx.export_ops import EXPORTERS  # noqa: E402
from graphc.type.program import registers  # noqa: E402
from neural_reference import trained_looking  # noqa: E402
from onnx_reference import onnxruntime_run  # noqa: E402
from opcheck import examples, quiet  # noqa: E402




def op_types(model):
    return [n.op_type for n in model.graph.node]


def assert_matches(got, want, rtol=1e-4, what=""):
    """onnxruntime's ``got`` against graphc's ``want``: same dtype and shape;
    integers and booleans equal, floats within ``rtol`` of the output's scale."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=f"{what}: non-finite cells")
    scale = float(np.abs(want[finite]).max()) if finite.any() else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(scale, 1e-30),
                               equal_nan=True, err_msg=what)


# -- the models ---------------------------------------------------------------------------------
MODELS = {"resnet50": (lambda: nn.resnet50(classes=10), (2, 3, 64, 64)),
          "inception_v3": (lambda: nn.inception_v3(classes=10), (1, 3, 299, 299))}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_inference_graph_matches_onnxruntime(name, tmp_path):
    make, shape = MODELS[name]
    model = make()
    predict = nn.compile_inference(model, trained_looking(model), shape)
    path = tmp_path / f"{name}.onnx"
    graphc.onnx.save(predict, path, output_names=["logits"])
    exported = onnx.load(str(path))
    onnx.checker.check_model(exported, full_check=True)
    # one Conv per convolution of the model, weights as initializers, x the only input
    kinds = [n.op.kind for n in predict.source.order]
    assert op_types(exported).count("Conv") == kinds.count("conv2d")
    assert [i.name for i in exported.graph.input] == ["x"]
    assert len(exported.graph.initializer) >= len(model.conv_bn_layers())
    # biases folded into Conv and Gemm: the classic form, no reshaped-bias adds left
    assert all(len(n.input) == 3 for n in exported.graph.node if n.op_type == "Conv")
    assert "Gemm" in op_types(exported) and "Reshape" not in op_types(exported)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    want = predict.run(x=x)
    (got,) = onnxruntime_run(exported, {"x": x})
    # a meaningful comparison: finite logits that differ between classes
    assert np.isfinite(want).all() and float(np.std(want)) > 1e-3 * float(np.abs(want).max())
    assert_matches(got, want, rtol=1e-4, what=name)
    # and back: graphc imports its own export (skipped while an operator is missing)
    try:
        loaded = graphc.onnx.load(exported)
    except OnnxUnsupported as exc:
        pytest.skip(f"the importer cannot load the exported {name} yet: {exc}")
    (again,) = loaded.run(x=x)
    assert_matches(again, want, rtol=1e-5, what=f"{name} through graphc.onnx.load")


# -- random small graphs --------------------------------------------------------------------------
# Each step maps the current value to a new one. ``exact`` steps have results
# that do not depend on rounding, so the discontinuous steps (floor, comparisons,
# argmax...) only follow exact ones: onnxruntime's exp or its summation order may
# differ from NumPy's in the last bit.
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
INTS = (np.dtype(np.int32), np.dtype(np.int64))

SMOOTH_FLOAT = {
    "exp": lambda x: N.exp(N.clip(x, -5.0, 5.0)), "tanh": N.tanh, "sigmoid": N.sigmoid,
    "sin": N.sin, "cos": N.cos, "erf": N.erf, "sqrt": lambda x: N.sqrt(N.abs(x)),
    "log": lambda x: N.log(N.abs(x) + 1.0), "log1p": lambda x: N.log1p(N.abs(x)),
    "log2": lambda x: N.log2(N.abs(x) + 1.0), "arcsin": lambda x: N.arcsin(N.tanh(x)),
    "arccos": lambda x: N.arccos(N.tanh(x)), "arctan": N.arctan,
    "sinh": lambda x: N.sinh(N.tanh(x)), "cosh": lambda x: N.cosh(N.tanh(x)),
    "arcsinh": N.arcsinh, "arccosh": lambda x: N.arccosh(N.abs(x) + 1.5),
    "arctanh": lambda x: N.arctanh(N.tanh(x) * 0.9),
    "log10": lambda x: N.log10(N.abs(x) + 1.0), "exp2": lambda x: N.exp2(N.tanh(x)),
    "expm1": lambda x: N.expm1(N.clip(x, -3.0, 3.0)),
    "reciprocal": lambda x: N.reciprocal(N.abs(x) + 1.0),
    "divide": lambda x: x / (N.abs(x) + 2.0), "hypot": lambda x: N.hypot(x, 1.5),
    "arctan2": lambda x: N.arctan2(x, x - 0.5), "power": lambda x: N.power(N.abs(x) + 0.5, 1.7),
    "mean": lambda x: N.mean(x, axis=-1), "prod": lambda x: N.prod(N.tanh(x), axis=0),
    "softmax": lambda x: N.softmax(x, axis=-1),
    "sum_float": lambda x: N.sum(x, axis=0, keepdims=True),
}
EXACT_ANY = {
    "negative": N.negative, "abs": N.abs, "relu": N.relu, "square": N.square,
    "add_self": lambda x: x + x[..., :1], "sub_const": lambda x: x - 2,
    "maximum": lambda x: N.maximum(x, x[::-1]), "minimum": lambda x: N.minimum(x, 1),
    "clip": lambda x: N.clip(x, -2, 3), "where": lambda x: N.where(x > 0, x, -x * 2),
    "transpose": lambda x: N.transpose(x), "flip": lambda x: N.flip(x, 0),
    "reshape": lambda x: N.reshape(x, (-1,)), "slice": lambda x: x[::-2, None],
    "index": lambda x: x[0] if x.ndim > 1 else x[1:], "pad": lambda x: N.pad(x, 1),
    "trunc": lambda x: N.trunc(x * 2.5),
    "tile": lambda x: N.tile(x, (2, 1)), "repeat": lambda x: N.repeat(x, 2, axis=0),
    "concat": lambda x: N.concatenate([x, -x], axis=0),
    "broadcast": lambda x: N.broadcast_to(x, (2,) + x.shape),
    "take": lambda x: N.take(x, np.array([0, -1, 0]), axis=0),
    # indices 0 and -1 are valid on any axis, whatever earlier steps left of its size
    "gather": lambda x: x[np.array([[0], [-1]]), :1] if x.ndim > 1 else x[np.array([-1, 0])],
    "gather_apart": lambda x: x[np.array([0, -1]), :, np.array([-1, 0])] if x.ndim > 2 else x,
    "max": lambda x: N.max(x, axis=0), "min": lambda x: N.min(x, keepdims=True),
    "sign": N.sign, "floor": N.floor, "ceil": N.ceil, "round": N.round,
    "astype": lambda x: N.astype(N.astype(x, np.int32), np.float32) * 1.0,
    "compare": lambda x: N.astype(x >= 0.5, x.dtype) + N.astype(x != 1, x.dtype),
    "argmax": lambda x: N.argmax(x, axis=0), "argmin": lambda x: N.argmin(x),
    "any_all": lambda x: N.astype(N.any(x > 1, axis=0), x.dtype) - N.all(x < 2),
    "one_hot": lambda x: N.one_hot(N.astype(N.abs(x), np.int64) % 3, 3, x.dtype),
    "remainder": lambda x: N.remainder(x, N.abs(x[..., :1]) + 2),
    "floor_divide": lambda x: N.floor_divide(x, N.abs(x[..., ::-1]) + 1),
    "sum": lambda x: N.sum(x, axis=-1),
}
#: steps whose result depends on rounding when given a float
ROUNDING_ON_FLOATS = {"sum"}
#: steps on floats only (ints would give another dtype family first)
FLOAT_ONLY = {"astype"}
#: ONNX defines Erf, Atan, Tan and Asin for doubles, but onnxruntime implements them for
#: floats only
ORT_FLOAT32_ONLY = {"erf", "arctan2", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh",
                    "arcsinh", "arccosh", "arctanh"}


@st.composite
def programs(draw):
    dtype = draw(st.sampled_from(FLOATS + INTS))
    shape = tuple(draw(st.lists(st.integers(2, 4), min_size=1, max_size=3)))
    if dtype.kind == "f":
        x = draw(st.lists(st.floats(-4, 4, width=32), min_size=int(np.prod(shape)),
                          max_size=int(np.prod(shape))))
        # two decimals: exact steps on these stay exact in either precision
        x = np.round(np.asarray(x, dtype).reshape(shape), 2)
    else:
        x = draw(st.lists(st.integers(-6, 6), min_size=int(np.prod(shape)),
                          max_size=int(np.prod(shape))))
        x = np.asarray(x, dtype).reshape(shape)
    steps = draw(st.lists(st.sampled_from(sorted(EXACT_ANY) + sorted(SMOOTH_FLOAT)),
                          min_size=1, max_size=4))
    return x, steps


def build(x_var, steps):
    """The chain of steps, skipping those that do not apply here; returns the
    outputs (the end of the chain and every value a step made)."""
    value, exact, outputs, used = x_var, True, [], []
    for name in steps:
        if name in SMOOTH_FLOAT:
            if value.dtype.kind != "f" or value.ndim == 0 or (
                    name in ORT_FLOAT32_ONLY and value.dtype != np.float32):
                continue
            value, exact = SMOOTH_FLOAT[name](value), False
        else:
            if not exact and name not in ("negative", "abs", "relu", "transpose", "flip",
                                          "reshape", "slice", "pad", "tile", "repeat",
                                          "concat", "broadcast", "take", "gather",
                                          "gather_apart", "index", "maximum", "minimum", "max",
                                          "min", "clip", "square", "add_self", "sub_const"):
                continue
            if value.ndim == 0 or (name in FLOAT_ONLY and value.dtype.kind != "f") or \
                    value.dtype == np.bool_:
                continue
            value = EXACT_ANY[name](value)
            exact = exact and not (name in ROUNDING_ON_FLOATS and value.dtype.kind == "f")
        used.append(name)
        outputs.append(value)
    return outputs, used


@examples(40)
@given(programs())
def test_random_small_graphs_match_onnxruntime(program):
    array, steps = program
    x = N.var("x", array.shape, array.dtype)
    outputs, used = build(x, steps)
    if not outputs:
        outputs = [N.negative(x)]
    exe = graphc.compile([x], outputs)
    with quiet():
        want = exe.run(x=array)
    model = to_onnx(exe)        # checked with full_check inside
    got = onnxruntime_run(model, {"x": array})
    for i, (g, w) in enumerate(zip(got, want)):
        assert_matches(g, w, rtol=1e-4, what=f"output {i} after steps {used[:i + 1]}")


@st.composite
def index_keys(draw):
    """An array shape and a NumPy key for it: integers, slices (any step), None, and
    integer index arrays broadcasting together (adjacent or apart)."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    common = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    key = []
    for d in shape[:draw(st.integers(1, len(shape)))]:
        form = draw(st.sampled_from(["int", "slice", "array", "none"]))
        if form == "none":
            key.append(None)
        if form == "int":
            key.append(draw(st.integers(-d, d - 1)))
        elif form == "array":
            sub = common[draw(st.integers(0, len(common))):]
            sub = tuple(1 if draw(st.booleans()) else n for n in sub)
            key.append(np.asarray(draw(st.lists(st.integers(-d, d - 1), min_size=int(
                np.prod(sub)), max_size=int(np.prod(sub)))), np.int64).reshape(sub))
        else:
            bound = st.one_of(st.none(), st.integers(-d - 1, d + 1))
            step = draw(st.one_of(st.none(), st.integers(-3, 3).filter(bool)))
            key.append(slice(draw(bound), draw(bound), step))
    return shape, tuple(key)


@examples(30)
@given(index_keys(), st.sampled_from([np.float32, np.int64]))
def test_indexing_matches_numpy_and_onnxruntime(shape_key, dtype):
    shape, key = shape_key
    array = np.arange(np.prod(shape)).astype(dtype).reshape(shape)
    x = N.var("x", shape, dtype)
    try:
        want = array[key]
    except IndexError:
        return          # NumPy refuses the key (and graphc too, tested elsewhere)
    exe = graphc.compile([x], x[key] + 0)   # + 0: an output that is not x itself
    (got,) = onnxruntime_run(to_onnx(exe), {"x": array})
    assert_matches(got, exe.run(x=array), what=f"x{shape}[{key}]")
    assert_matches(got, want + 0, what=f"x{shape}[{key}] against NumPy")


@examples(15)
@given(st.sampled_from(["add", "subtract", "multiply", "divide", "maximum", "minimum",
                        "equal", "less", "greater_equal", "not_equal", "logical_and",
                        "logical_xor", "where", "power", "remainder", "floor_divide",
                        "arctan2", "hypot"]),
       st.sampled_from(FLOATS + INTS), st.sampled_from(FLOATS + INTS),
       st.sampled_from([((2, 3), (3,)), ((4, 1), (1, 5)), ((2, 1, 3), (4, 1)), ((), (3,))]),
       st.integers(0, 2 ** 16))
def test_binary_ops_promote_and_broadcast_as_graphc(kind, da, db, shapes, seed):
    if kind == "arctan2":
        assume(da == db == np.float32)
    rng = np.random.default_rng(seed)
    a = N.var("a", shapes[0], da)
    b = N.var("b", shapes[1], db)
    A = rng.integers(-5, 6, shapes[0]).astype(da)
    B = rng.integers(1, 6, shapes[1]).astype(db)      # positive: division, powers, modulo
    if kind == "power" and da.kind in "iu":
        A = np.asarray(np.abs(A))
    if kind == "where":
        out = N.where(a > 0, a, b)
    else:
        out = getattr(N, kind)(a, b)
    exe = graphc.compile([a, b], out)
    with quiet():
        want = exe.run(a=A, b=B)
    (got,) = onnxruntime_run(to_onnx(exe), {"a": A, "b": B})
    assert_matches(got, want, rtol=1e-6, what=f"{kind}({da}, {db})")


@examples(15)
@given(st.sampled_from(["sum", "mean", "max", "min", "prod", "any", "all", "argmax",
                        "argmin"]),
       st.sampled_from(FLOATS + INTS + (np.dtype(np.bool_),)),
       st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple),
       st.data())
def test_reductions_match_graphc(kind, dtype, shape, data):
    ndim = len(shape)
    if kind in ("argmax", "argmin"):
        axis = data.draw(st.sampled_from([None] + list(range(ndim))))
    else:
        axis = data.draw(st.one_of(st.none(), st.lists(st.integers(0, ndim - 1), unique=True)
                                   .map(tuple)))
    keepdims = data.draw(st.booleans())
    if dtype == np.bool_ and kind in ("mean", "prod", "sum"):
        dtype = np.dtype(np.int32)
    x = N.var("x", shape, dtype)
    X = np.random.default_rng(len(shape)).integers(-3, 4, shape).astype(dtype)
    exe = graphc.compile([x], getattr(N, kind)(x, axis=axis, keepdims=keepdims))
    (got,) = onnxruntime_run(to_onnx(exe), {"x": X})
    assert_matches(got, exe.run(x=X), rtol=1e-6, what=f"{kind} axis={axis} {dtype}")


@examples(20)
@given(st.tuples(st.integers(1, 4), st.integers(1, 4)), st.tuples(st.integers(1, 4),
                                                                   st.integers(1, 4)),
       st.lists(st.integers(0, 3), min_size=4, max_size=4), st.integers(3, 7),
       st.booleans(), st.booleans(), st.integers(0, 2 ** 16))
def test_pooling_geometry_matches_onnxruntime(kernel, stride, pads, size, ceil_mode,
                                              count_pad, seed):
    """Asymmetric padding, strides and ceil_mode (PyTorch's rule: no last window
    starting in the padding) against onnxruntime."""
    # graphc wants every window to hold an input cell: each pad below the window
    padding = tuple((min(pads[2 * i], k - 1), min(pads[2 * i + 1], k - 1))
                    for i, k in enumerate(kernel))
    size = max(size, *kernel)
    x = N.var("x", (1, 2, size, size + 1))
    outs = [N.max_pool2d(x, kernel, stride, padding, ceil_mode),
            N.avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad=count_pad)]
    exe = graphc.compile([x], outs)
    X = np.random.default_rng(seed).standard_normal(x.shape).astype(np.float32)
    for got, want in zip(onnxruntime_run(to_onnx(exe), {"x": X}), exe.run(x=X)):
        assert_matches(got, want, rtol=1e-5)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
def test_lrn_and_grouped_dilated_convolution(size):
    x = N.var("x", (2, 6, 7, 5))
    w = N.var("w", (4, 3, 3, 2))
    y = N.conv2d(x, w, stride=(2, 1), padding=((1, 2), (0, 1)), dilation=(1, 2), groups=2)
    outs = [N.lrn(y, size=size, alpha=0.1, beta=0.6, k=1.5), N.lrn(x[:, :, 0], size=size)]
    exe = graphc.compile([x, w], outs)
    rng = np.random.default_rng(size)
    X = rng.standard_normal(x.shape).astype(np.float32)
    W = rng.standard_normal(w.shape).astype(np.float32)
    model = to_onnx(exe)
    assert ("LRN" in op_types(model)) == (size % 2 == 1)
    for got, want in zip(onnxruntime_run(model, {"x": X, "w": W}), exe.run(x=X, w=W)):
        assert_matches(got, want, rtol=1e-5)


def test_linear_algebra_and_creation():
    a = N.var("a", (3, 4))
    b = N.var("b", (5, 4))
    d = N.var("d", (2, 4, 3))
    v = N.var("v", (4,), np.int32)
    outs = [N.matmul(a, N.transpose(b)), N.dot(a, d), N.dot(a, v), N.dot(v, d), a @ v,
            N.einsum("ij,kj->ik", a, b), N.einsum("i,i->", v, v),
            N.zeros((2, 3), np.int64) + N.full((3,), 2.5) + N.sum(a),
            N.astype(a > 0, np.int32) @ N.astype(b < 0, np.int32).T,
            N.logical_not(a > 0), N.clip(a, None, 0.5), N.clip(v, 1, None),
            N.astype(a, np.bool_), N.astype(v, np.float64) / 3]
    exe = graphc.compile([a, b, d, v], outs)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in
             [("a", (3, 4)), ("b", (5, 4)), ("d", (2, 4, 3))]}
    feeds["v"] = np.array([1, -2, 3, 0], np.int32)
    for i, (got, want) in enumerate(zip(onnxruntime_run(to_onnx(exe), feeds),
                                        exe.run(**feeds))):
        assert_matches(got, want, rtol=1e-5, what=f"output {i}")


def test_the_optimised_graph_exports_too():
    """fused programs, fma and transposed matmuls (made by the optimiser)."""
    a = N.var("a", (3, 4))
    b = N.var("b", (5, 4))
    c = N.var("c", (5,))
    outs = [N.exp(N.matmul(a, b.T) * 0.5) + c * c, N.tanh(a.T @ a) - 1.0, a * a + 1.0]
    exe = graphc.compile([a, b, c], outs)
    kinds = {n.op.kind for n in exe.graph.order}
    assert "fused" in kinds and "matmul" in kinds
    rng = np.random.default_rng(1)
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in
             [("a", (3, 4)), ("b", (5, 4)), ("c", (5,))]}
    model = to_onnx(exe.graph)
    assert "Transpose" in op_types(model)
    for got, want in zip(onnxruntime_run(model, feeds), exe.run(**feeds)):
        assert_matches(got, want, rtol=1e-5)
    # branches meeting in one program (registers)
    u, v = N.exp(a) * 0.5, N.abs(a) + 1.0
    exe = graphc.compile([a], [N.sqrt(u * u + v * v)])
    assert any(registers(n.op["program"]) for n in exe.graph.order if n.op.kind == "fused")
    for got, want in zip(onnxruntime_run(to_onnx(exe.graph), {"a": feeds["a"]}),
                         exe.run(a=feeds["a"])):
        assert_matches(got, want, rtol=1e-5)
    b2 = N.var("b", (3, 4))
    c2 = N.var("c", (4,))
    exe = graphc.compile([a, b2, c2], [a * b2 + c2, 0.1 / N.sqrt(b2 + 1e-7)],
                         optimise=["fma", "adagrad"])
    assert {"fma", "fused_adagrad"} <= {n.op.kind for n in exe.graph.order}
    feeds.update(b=np.abs(feeds["a"]), c=feeds["c"][:4])
    for got, want in zip(onnxruntime_run(to_onnx(exe.graph), feeds), exe.run(**feeds)):
        assert_matches(got, want, rtol=1e-5)


def test_constant_subgraphs_fold_and_biases_join_their_op():
    x = N.var("x", (2, 3, 5, 5))
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = np.arange(4, dtype=np.float32)
    y = N.conv2d(x, w, padding=1) + N.reshape(N.const(b) * 2.0, (1, 4, 1, 1))
    shared = N.conv2d(x, w)                        # used twice: its bias add stays an Add
    z = N.flatten(shared + N.exp(N.const(b)).reshape(1, 4, 1, 1)) @ N.const(
        np.ones((36, 2), np.float32)) + N.const(np.ones(2, np.float32))
    big = N.broadcast_to(N.const(b), (3, 4)) + 1.0  # larger than its parent: stays an op
    outs = [y, z, shared, big]
    exe = graphc.compile([x], outs)
    X = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    want = exe.run(x=X)
    folded, plain = to_onnx(exe), to_onnx(exe, fold=False)
    types = op_types(folded)
    assert types.count("Conv") == 2 and types.count("Gemm") == 1 and "Exp" not in types
    assert "Expand" in types
    assert "Exp" in op_types(plain) and "Gemm" not in op_types(plain)
    for model in (folded, plain):
        for got, w_ in zip(onnxruntime_run(model, {"x": X}), want):
            assert_matches(got, w_, rtol=1e-5)


# -- inputs, initializers, names ----------------------------------------------------------------
def test_variables_with_values_become_initializers_unless_kept():
    x = N.var("x", (2, 4))
    w = N.var("w", (4, 3))
    b = N.var("b", (3,))
    exe = graphc.compile([x, w, b], [N.relu(x @ w + b), x @ w])
    rng = np.random.default_rng(0)
    W, B, X = (rng.standard_normal(s).astype(np.float32) for s in [(4, 3), (3,), (2, 4)])
    exe.assign(w=W, b=B)
    want = exe.run(x=X)
    model = to_onnx(exe)
    assert [i.name for i in model.graph.input] == ["x"]
    assert {t.name for t in model.graph.initializer} >= {"w", "b"}
    for got, w_ in zip(onnxruntime_run(model, {"x": X}), want):
        assert_matches(got, w_, rtol=1e-6)
    kept = to_onnx(exe, keep_inputs=["w"], output_names=["y", "xw"])
    assert [i.name for i in kept.graph.input] == ["x", "w"]
    assert [o.name for o in kept.graph.output] == ["y", "xw"]
    for got, w_ in zip(onnxruntime_run(kept, {"x": X, "w": W}), want):
        assert_matches(got, w_, rtol=1e-6)


def test_nodes_with_values_and_outputs_that_are_inputs_or_repeated():
    x = N.var("x", (3,), np.int64)
    s = N.var("s", (), np.int64)
    y = x * s
    model = to_onnx([y, x, y, N.const(np.arange(3))], [x, s], values={"s": np.int64(4)})
    assert [i.name for i in model.graph.input] == ["x"]
    X = np.array([1, -2, 3], np.int64)
    got = onnxruntime_run(model, {"x": X})
    for g, w in zip(got, [X * 4, X, X * 4, np.arange(3)]):
        assert_matches(g, w)


def test_an_onnx_graph_exports_again():
    x = N.var("x", (2, 3))
    first = to_onnx(N.tanh(x) * 2.0, [x], output_names=["y"])
    loaded = graphc.onnx.load(first)
    again = to_onnx(loaded)
    assert [o.name for o in again.graph.output] == ["y"]
    X = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    assert_matches(onnxruntime_run(again, {"x": X})[0], np.tanh(X) * 2, rtol=1e-5)


# -- refusals and errors -------------------------------------------------------------------------
def test_training_graphs_and_random_draws_are_refused():
    w = N.var("w", (3,))
    step = graphc.compile([w], N.sum(w * w), {w: w - 0.1 * w})
    with pytest.raises(OnnxUnsupported, match="training step.*inference graphs only"):
        to_onnx(step)
    x = N.var("x", (3,))
    noisy = graphc.compile([x], x + N.random.normal(size=(3,)))
    with pytest.raises(OnnxUnsupported, match="'random_normal'.*random draw"):
        to_onnx(noisy)
    g = N.var("g", (1, 2, 3, 3))
    back = N.conv2d_backward_input(g, N.var("k", (2, 2, 1, 1)), (1, 2, 3, 3))
    with pytest.raises(OnnxUnsupported, match="'conv2d_backward_input'.*gradient"):
        to_onnx(back)


def test_an_unexported_kind_is_named(monkeypatch):
    monkeypatch.delitem(EXPORTERS, "tanh")
    x = N.var("x", (2,))
    with pytest.raises(OnnxUnsupported, match=r"op kind 'tanh' \(tanh\(\) of shapes \[\(2,\)\]"
                                              r".*no ONNX exporter"):
        to_onnx(N.tanh(x) + 1.0, [x])


def test_option_errors_name_what_is_wrong():
    x = N.var("x", (2,))
    exe = graphc.compile([x], N.exp(x))
    with pytest.raises(graphc.InputError, match="keep_inputs names \\['nope'\\]"):
        to_onnx(exe, keep_inputs=["nope"])
    with pytest.raises(graphc.InputError, match="output_names must give 1"):
        to_onnx(exe, output_names=["a", "b"])
    with pytest.raises(graphc.InputError, match="also input names"):
        to_onnx(exe, output_names=["x"])
    with pytest.raises(graphc.InputError, match="has shape \\(3,\\), but the variable"):
        to_onnx(exe, values={"x": np.zeros(3, np.float32)})
    with pytest.raises(graphc.InputError, match="expected an Executable"):
        to_onnx("model.onnx")
    with pytest.raises(OnnxUnsupported, match="opset 11"):
        to_onnx(exe, opset=11)


def test_exported_kinds_cover_the_models_and_common_ops():
    kinds = set(exported_kinds())
    assert {"conv2d", "max_pool2d", "avg_pool2d", "lrn", "matmul", "reshape", "concatenate",
            "mean", "relu", "add"} <= kinds
    assert not kinds & {"random_normal", "conv2d_backward_input", "im2col"}


# -- the round trip -----------------------------------------------------------------------------
STEP_ARRAYS = {"float32": np.round(np.linspace(-3, 3, 24, dtype=np.float32), 2).reshape(2, 3, 4),
               "int64": (np.arange(24, dtype=np.int64) % 7 - 3).reshape(2, 3, 4)}


@pytest.mark.parametrize("step", sorted(EXACT_ANY) + sorted(SMOOTH_FLOAT))
def test_round_trip_of_each_step_through_the_importer(step):
    """export -> graphc.onnx.load -> the same outputs (skipped while the importer
    lacks an operator the export uses)."""
    results = []
    for dtype, array in STEP_ARRAYS.items():
        if dtype != "float32" and (step in SMOOTH_FLOAT or step in FLOAT_ONLY):
            continue
        x = N.var("x", array.shape, array.dtype)
        exe = graphc.compile([x], (SMOOTH_FLOAT.get(step) or EXACT_ANY[step])(x))
        try:
            loaded = graphc.onnx.load(to_onnx(exe))
        except OnnxUnsupported as exc:
            pytest.skip(f"the importer cannot load it yet: {exc}")
        with quiet():
            want = exe.run(x=array)
            (got,) = loaded.run(x=array)
        results.append((got, want, dtype))
    for got, want, dtype in results:
        assert_matches(got, want, rtol=1e-5, what=f"{step} {dtype}")


def test_round_trip_through_the_importer():
    model = nn.ResNet((1, 1, 1, 1), classes=5, width=8)
    shape = (2, 3, 32, 32)
    predict = nn.compile_inference(model, trained_looking(model), shape)
    exported = to_onnx(predict)
    try:
        loaded = graphc.onnx.load(exported)
    except OnnxUnsupported as exc:
        pytest.skip(f"the importer cannot load the exported model yet: {exc}")
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    want = predict.run(x=x)
    (got,) = loaded.run(x=x)
    assert_matches(got, want, rtol=1e-4)


def test_arctan2_keeps_numpy_s_signs_on_the_axes():
    """atan(y / x) and its turns: signed zeros of y, x = +-0 and NaN as NumPy has them
    (two infinite operands, NaN in the export, are left out)."""
    v = np.array([0.0, -0.0, 1.0, -2.5, np.nan], np.float32)
    y, x = (a.astype(np.float32) for a in np.meshgrid(v, np.concatenate([v, [-0.5, 3.0]])))
    ny, nx = N.var("y", y.shape), N.var("x", x.shape)
    exe = graphc.compile([ny, nx], [N.arctan2(ny, nx)])
    (got,) = onnxruntime_run(to_onnx(exe.graph), {"y": y, "x": x})
    want = np.arctan2(y, x)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    nonzero = want != 0       # which zero ORT's Where hands back is its own choice
    assert (np.signbit(got) == np.signbit(want))[nonzero].all()


BIT_KINDS = {"bitwise_and": N.bitwise_and, "bitwise_or": N.bitwise_or,
             "bitwise_xor": N.bitwise_xor, "left_shift": N.left_shift,
             "right_shift": N.right_shift, "invert": lambda a, b: N.invert(a),
             "fmod": N.fmod}


#: (kind, dtype): integers for all, booleans for the logical ones (NumPy shifts them
#: as int8), floats for fmod too
BIT_CASES = [(k, d) for k in sorted(BIT_KINDS)
             for d in INTS + (np.dtype(np.uint8), np.dtype(np.uint32), np.dtype(np.bool_))
             + FLOATS
             if (d.kind != "f" or k == "fmod") and
             not (d == np.bool_ and k in ("left_shift", "right_shift", "fmod"))]


@pytest.mark.parametrize("kind, dtype", BIT_CASES)
def test_bit_kinds_match_onnxruntime(kind, dtype):
    """BitwiseAnd/Or/Xor/Not and BitShift (unsigned only in ONNX: signed values shift
    as their bits, arithmetic to the right; amounts outside [0, bits) as NumPy's)."""
    rng = np.random.default_rng(5)
    if dtype.kind == "f":
        A, B = rng.uniform(-9, 9, (3, 4)).astype(dtype), rng.uniform(-3, 3, 4).astype(dtype)
    elif dtype == np.bool_:
        A, B = rng.random((3, 4)) < 0.5, rng.random(4) < 0.5
    else:
        info = np.iinfo(dtype)
        A = rng.integers(info.min, info.max, (3, 4), dtype=dtype, endpoint=True)
        low = 0 if dtype.kind == "u" else -3
        B = rng.integers(low, 70, 4).astype(dtype) if "shift" in kind else \
            rng.integers(max(info.min, -9), 9, 4).astype(dtype)
    a, b = N.var("a", A.shape, dtype), N.var("b", B.shape, dtype)
    exe = graphc.compile([a, b], BIT_KINDS[kind](a, b))
    with quiet():
        want = exe.run(a=A, b=B)
    (got,) = onnxruntime_run(to_onnx(exe), {"a": A, "b": B})
    assert_matches(got, want, rtol=1e-6, what=f"{kind}({dtype})")
