"""The converters of ONNX's optimisers (ai.onnx.preview.training), classic-ML
operators (ai.onnx.ml), STFT, MelWeightMatrix and Det, each against
``onnx.reference.ReferenceEvaluator`` on random shapes and attributes, and the
errors a user sees; and the importer's table of operators by domain."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper as h, numpy_helper as nh  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import graphc.onnx  # noqa: E402
from graphc.onnx import OnnxModelError, OnnxUnsupported  # noqa: E402
from graphc.onnx.registry import split_name  # noqa: E402
from opcheck import examples  # noqa: E402

TRAINING, ML = "ai.onnx.preview.training", "ai.onnx.ml"
#: the domain versions the models import (the default domain's too: graphc reads it)
VERSIONS = {"": 22, TRAINING: 1, ML: 5}


def _model(node, inputs: dict, outputs: dict, constants=()):
    """A one-node model; ``inputs`` maps names to arrays (``constants`` of them become
    initializers), ``outputs`` names to (dtype, rank)."""
    infos = [h.make_tensor_value_info(name, h.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for name, a in inputs.items() if name not in constants]
    outs = [h.make_tensor_value_info(name, h.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                     [f"{name}_{i}" for i in range(rank)])
            for name, (dtype, rank) in outputs.items()]
    inits = [nh.from_array(inputs[name], name) for name in constants]
    graph = h.make_graph([node], "g", infos, outs, initializer=inits)
    domains = {"", node.domain}
    model = h.make_model(graph, opset_imports=[h.make_opsetid(d, VERSIONS[d]) for d in domains])
    model.ir_version = 10
    return model


def _compare(node, inputs: dict, outputs: dict, constants=(), rtol=1e-5, atol=1e-6,
             check_dtype=True):
    """graphc's outputs of the one-node model against the reference evaluator's."""
    model = _model(node, inputs, outputs, constants)
    feeds = {k: v for k, v in inputs.items() if k not in constants}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reference's own overflow warnings
        want = ReferenceEvaluator(model).run(None, feeds)
    got = graphc.onnx.load(model).run(**feeds)
    assert len(got) == len(want)
    for g, w, (dtype, _) in zip(got, want, outputs.values()):
        assert g.shape == np.shape(w), (g.shape, np.shape(w))
        assert g.dtype == np.dtype(dtype)
        if check_dtype:
            assert g.dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return got


def _load_error(node, inputs: dict, outputs: dict, error, match):
    with pytest.raises(error, match=match):
        graphc.onnx.load(_model(node, inputs, outputs))


# -- the table of operators by domain ------------------------------------------------------------
def test_operators_of_other_domains_are_listed_by_qualified_name():
    names = set(graphc.onnx.supported_operators())
    assert {"Det", "STFT", "MelWeightMatrix", "ai.onnx.ml.TreeEnsemble", "ai.onnx.ml.Binarizer",
            "ai.onnx.ml.ArrayFeatureExtractor", "ai.onnx.preview.training.Adam"} <= names
    assert split_name("ai.onnx.ml.TreeEnsemble") == (ML, "TreeEnsemble")
    assert "Binarizer" not in names  # an ai.onnx.ml operator, not the default domain's


def test_an_operator_is_looked_up_in_its_own_domain():
    """(onnx's checker refuses such nodes in a model: the converter table is asked
    directly.)"""
    from graphc.onnx.context import Namespaces
    from graphc.onnx.convert import convert_node
    from graphc.onnx.limits import ImportBudget, ImportLimits

    def convert(node):
        env = {"x": np.ones((2, 2), np.float32)}
        return convert_node(node, 0, 22, env, Namespaces(ImportBudget(ImportLimits())),
                            domain_versions={ML: 5})

    assert convert(h.make_node("Binarizer", ["x"], ["y"], domain=ML))["y"].sum() == 4
    with pytest.raises(OnnxUnsupported, match="operator Binarizer is not supported"):
        convert(h.make_node("Binarizer", ["x"], ["y"]))  # the default domain has none
    with pytest.raises(OnnxUnsupported, match="operator ai.onnx.ml.Relu is not supported"):
        convert(h.make_node("Relu", ["x"], ["y"], domain=ML))
    with pytest.raises(OnnxUnsupported, match="operators of domain 'com.example' are not"):
        convert(h.make_node("Relu", ["x"], ["y"], domain="com.example"))
    node = h.make_node("TreeEnsemble", ["x"], ["y"], domain=ML)
    with pytest.raises(OnnxUnsupported, match="supported from ai.onnx.ml opset 5; the model "
                                              "uses ai.onnx.ml opset 3"):
        convert_node(node, 0, 22, {"x": np.ones((2, 2))},
                     Namespaces(ImportBudget(ImportLimits())), domain_versions={ML: 3})


# -- optimisers ------------------------------------------------------------------------------
_STATES = {"Momentum": 1, "Adagrad": 1, "Adam": 2}


def _optimiser_attrs(draw, op):
    number = st.floats(0.0, 1.0)
    if op == "Momentum":
        return {"alpha": draw(number), "beta": draw(number), "norm_coefficient": draw(number),
                "mode": draw(st.sampled_from(["standard", "nesterov"]))}
    if op == "Adagrad":
        return {"decay_factor": draw(number), "norm_coefficient": draw(number),
                "epsilon": draw(st.floats(1e-6, 1e-2))}
    return {"alpha": draw(st.floats(0.0, 0.99)),
            "beta": draw(st.floats(0.0, 0.99)), "norm_coefficient": draw(number),
            "norm_coefficient_post": draw(number), "epsilon": draw(st.floats(1e-6, 1e-2))}


@examples(30)
@given(st.data())
def test_optimisers_match_the_reference(data):
    op = data.draw(st.sampled_from(sorted(_STATES)))
    n = data.draw(st.integers(1, 2))
    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    shapes = [tuple(data.draw(st.lists(st.integers(1, 3), max_size=2))) for _ in range(n)]
    groups = ["X", "G"] + [f"S{k}" for k in range(_STATES[op])]
    inputs = {"R": np.array(rng.uniform(0.01, 1.0), dtype),
              "T": np.array(data.draw(st.sampled_from([0, 1, 7])), np.int64)}
    # Adagrad's state and Adam's second one hold (means of) squares
    squares = {"Adagrad": "S0", "Adam": "S1"}.get(op)
    for group in groups:
        for i, shape in enumerate(shapes):
            values = rng.standard_normal(shape)
            inputs[f"{group}{i}"] = (np.abs(values) if group == squares else values).astype(dtype)
    outputs = {f"{group}{i}_new": (dtype, len(shape))
               for group in ["X"] + groups[2:] for i, shape in enumerate(shapes)}
    node = h.make_node(op, list(inputs), list(outputs), domain=TRAINING,
                       **_optimiser_attrs(data.draw, op))
    constants = ("R", "T") if data.draw(st.booleans()) else ()
    # the reference's Adam mixes dtypes (float64 for one float32 tensor at T > 0, float32
    # for several float64 ones): its values are compared, graphc's dtype is X's
    _compare(node, inputs, outputs, constants, rtol=1e-4, atol=1e-5, check_dtype=op != "Adam")


def test_optimiser_errors():
    x = np.ones(2, np.float32)
    inputs = {"R": np.array(0.1, np.float32), "T": np.array(1, np.int64), "X": x, "G": x, "V": x}
    outs = {"X_new": (np.float32, 1), "V_new": (np.float32, 1)}
    attrs = {"alpha": 0.9, "beta": 0.1, "norm_coefficient": 0.0}
    node = h.make_node("Momentum", list(inputs), list(outs), domain=TRAINING, mode="heavy",
                       **attrs)
    _load_error(node, inputs, outs, OnnxModelError, "mode must be 'standard' or 'nesterov'")
    node = h.make_node("Momentum", list(inputs)[:-1], list(outs), domain=TRAINING,
                       mode="standard", **attrs)
    _load_error(node, dict(list(inputs.items())[:-1]), outs, OnnxModelError,
                "3 groups of tensors")
    wrong = dict(inputs, V=np.ones(3, np.float32))
    node = h.make_node("Momentum", list(wrong), list(outs), domain=TRAINING, mode="standard",
                       **attrs)
    _load_error(node, wrong, outs, OnnxModelError, "one shape and one dtype")


# -- ai.onnx.ml -----------------------------------------------------------------------------
_ML_DTYPES = [np.float32, np.float64, np.int64, np.int32]


@examples(20)
@given(st.sampled_from(_ML_DTYPES), st.lists(st.integers(1, 4), max_size=3),
       st.floats(-2, 2, width=32), st.integers(0, 2**16))
def test_binarizer_matches_the_reference(dtype, shape, threshold, seed):
    x = (np.random.default_rng(seed).standard_normal(shape) * 2).astype(dtype)
    node = h.make_node("Binarizer", ["x"], ["y"], domain=ML, threshold=threshold)
    _compare(node, {"x": x}, {"y": (dtype, len(shape))})


@examples(20)
@given(st.sampled_from(_ML_DTYPES), st.lists(st.integers(1, 4), min_size=1, max_size=3),
       st.sampled_from([(2,), (1, 3), (2, 2), (1,)]), st.booleans(), st.integers(0, 2**16))
def test_array_feature_extractor_matches_the_reference(dtype, shape, index_shape, constant,
                                                       seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    indices = rng.integers(0, shape[-1], index_shape).astype(np.int64)
    node = h.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain=ML)
    _compare(node, {"x": x, "i": indices}, {"y": (dtype, max(len(shape), 2))},
             constants=("i",) if constant else ())


def test_array_feature_extractor_refuses_indices_out_of_range():
    node = h.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain=ML)
    x, indices = np.ones((2, 3), np.float32), np.array([0, 3])
    model = _model(node, {"x": x, "i": indices}, {"y": (np.float32, 2)}, constants=("i",))
    with pytest.raises(OnnxModelError, match="must lie within the last axis, of 3"):
        graphc.onnx.load(model)


#: the values features and splits are drawn from, so that equality tests hold sometimes
_GRID = [-1.5, -1.0, 0.0, 0.5, 1.0, 2.0]


def _random_trees(draw, n_features, n_targets):
    """TreeEnsemble attributes of 1-3 random trees, nodes numbered depth first (true
    branch first): the order the reference evaluator reads membership_values in."""
    nodes, leaves, members = [], [], []

    def leaf():
        leaves.append((draw(st.integers(0, n_targets - 1)), draw(st.floats(-4, 4, width=32))))
        return len(leaves) - 1

    def tree(depth):
        index = len(nodes)
        mode = draw(st.integers(0, 6))
        nodes.append(None)
        if mode == 6:  # the reference stops a set at 0.0: sets hold other values
            chosen = draw(st.lists(st.sampled_from([v for v in _GRID if v]), min_size=1,
                                   max_size=3, unique=True))
            members.extend(chosen + [np.nan])
        children = []
        for _ in range(2):
            if depth == 0 or draw(st.booleans()):
                children.append((leaf(), 1))
            else:
                children.append((tree(depth - 1), 0))
        nodes[index] = (draw(st.integers(0, n_features - 1)), mode, draw(st.sampled_from(_GRID)),
                        children, draw(st.integers(0, 1)))
        return index

    roots = [tree(draw(st.integers(0, 3))) for _ in range(draw(st.integers(1, 3)))]
    attrs = {"tree_roots": roots, "n_targets": n_targets,
             "nodes_featureids": [n[0] for n in nodes],
             "nodes_modes": nh.from_array(np.array([n[1] for n in nodes], np.uint8)),
             "nodes_splits": [n[2] for n in nodes],
             "nodes_truenodeids": [n[3][0][0] for n in nodes],
             "nodes_trueleafs": [n[3][0][1] for n in nodes],
             "nodes_falsenodeids": [n[3][1][0] for n in nodes],
             "nodes_falseleafs": [n[3][1][1] for n in nodes],
             "nodes_missing_value_tracks_true": [n[4] for n in nodes],
             "leaf_targetids": [t for t, _ in leaves], "leaf_weights": [w for _, w in leaves]}
    if members:
        attrs["membership_values"] = members
    return attrs


def _tree_node(attrs, dtype, **extra):
    attrs = dict(attrs, **extra)
    for name in ("nodes_splits", "leaf_weights", "membership_values"):
        if name in attrs:
            attrs[name] = nh.from_array(np.array(attrs[name], dtype), name)
    return h.make_node("TreeEnsemble", ["x"], ["y"], domain=ML, **attrs)


def _features(rng, samples, n_features, dtype):
    values = rng.choice(np.array(_GRID + [0.25, -0.75, np.nan]), (samples, n_features))
    return values.astype(dtype)


@examples(40)
@given(st.data())
def test_tree_ensemble_matches_the_reference(data):
    n_features, n_targets = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    attrs = _random_trees(data.draw, n_features, n_targets)
    aggregate = data.draw(st.integers(0, 3))
    x = _features(np.random.default_rng(data.draw(st.integers(0, 2**16))),
                  data.draw(st.integers(1, 6)), n_features, dtype)
    node = _tree_node(attrs, dtype, aggregate_function=aggregate)
    # the reference gives float64 for MIN and MAX whatever X's dtype
    _compare(node, {"x": x}, {"y": (dtype, 2)}, check_dtype=aggregate < 2)


@examples(10)
@given(st.data())
def test_tree_ensemble_post_transforms_follow_the_spec(data):
    """SOFTMAX (1) and LOGISTIC (2) of the raw scores, as ONNX's spec numbers them (the
    reference evaluator ignores post_transform; onnxruntime 1.2x swaps the two)."""
    attrs = _random_trees(data.draw, 2, data.draw(st.integers(1, 3)))
    x = _features(np.random.default_rng(data.draw(st.integers(0, 2**16))), 5, 2, np.float64)
    raw, softmax, logistic = (
        graphc.onnx.load(_model(_tree_node(attrs, np.float64, post_transform=k), {"x": x},
                                {"y": (np.float64, 2)})).run(x=x)[0] for k in (0, 1, 2))
    shifted = np.exp(raw - raw.max(axis=1, keepdims=True))
    np.testing.assert_allclose(softmax, shifted / shifted.sum(axis=1, keepdims=True),
                               rtol=1e-12)
    np.testing.assert_allclose(logistic, 1 / (1 + np.exp(-raw)), rtol=1e-12)


_ONE_TREE = {"tree_roots": [0], "n_targets": 1, "nodes_featureids": [0],
             "nodes_modes": nh.from_array(np.array([0], np.uint8)), "nodes_splits": [0.5],
             "nodes_truenodeids": [0], "nodes_trueleafs": [1], "nodes_falsenodeids": [1],
             "nodes_falseleafs": [1], "leaf_targetids": [0, 0], "leaf_weights": [1.0, 2.0]}


@pytest.mark.parametrize("change, error, match", [
    ({"nodes_featureids": [2]}, OnnxModelError, r"nodes_featureids must name features"),
    ({"leaf_targetids": [0, 1]}, OnnxModelError, r"leaf_targetids must name targets"),
    ({"nodes_falsenodeids": [2]}, OnnxModelError, r"nodes_falsenodeids must name nodes"),
    ({"nodes_truenodeids": [0], "nodes_trueleafs": [0]}, OnnxModelError, r"form a cycle"),
    ({"nodes_modes": nh.from_array(np.array([6], np.uint8))}, OnnxModelError,
     r"need membership_values"),
    ({"nodes_modes": nh.from_array(np.array([9], np.uint8))}, OnnxModelError,
     r"nodes_modes must hold 0 to 6"),
    ({"aggregate_function": 7}, OnnxModelError, r"aggregate_function must be 0 to 3"),
    ({"post_transform": 4}, OnnxUnsupported, r"PROBIT\) is not supported"),
])
def test_tree_ensemble_errors(change, error, match):
    x = np.zeros((2, 2), np.float32)
    _load_error(_tree_node(dict(_ONE_TREE, **change), np.float32), {"x": x},
                {"y": (np.float32, 2)}, error, match)


# -- STFT, MelWeightMatrix, Det ----------------------------------------------------------------
@examples(30)
@given(st.data())
def test_stft_matches_the_reference(data):
    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    onesided = data.draw(st.integers(0, 1))
    channels = 1 if onesided else data.draw(st.integers(1, 2))
    batch, length = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 40))
    frame_length = data.draw(st.integers(1, length))
    step = data.draw(st.integers(1, 8))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    inputs = {"signal": rng.standard_normal((batch, length, channels)).astype(dtype),
              "step": np.array(step, np.int64)}
    names = ["signal", "step"]
    use_window, give_length = data.draw(st.booleans()), data.draw(st.booleans())
    if use_window:
        inputs["window"] = rng.uniform(0, 1, frame_length).astype(dtype)
    names.append("window" if use_window else "")
    if give_length or not use_window:
        inputs["frame_length"] = np.array(frame_length, np.int64)
        names.append("frame_length")
    node = h.make_node("STFT", names, ["y"], onesided=onesided)
    _compare(node, inputs, {"y": (dtype, 4)}, rtol=1e-4, atol=1e-4,
             constants=[k for k in ("step", "frame_length") if k in inputs])


def test_stft_errors():
    signal = np.zeros((1, 8, 2), np.float32)
    node = h.make_node("STFT", ["signal", "step"], ["y"])
    model = _model(node, {"signal": signal, "step": np.array(2)}, {"y": (np.float32, 4)},
                   constants=("step",))
    with pytest.raises(OnnxModelError, match="one-sided transform takes a real signal"):
        graphc.onnx.load(model)
    node = h.make_node("STFT", ["signal", "step", "", "length"], ["y"], onesided=0)
    inputs = {"signal": signal, "step": np.array(2), "length": np.array(9)}
    model = _model(node, inputs, {"y": (np.float32, 4)}, constants=("step", "length"))
    with pytest.raises(OnnxModelError, match="frame_length 9 must be from 1 to the signal's"):
        graphc.onnx.load(model)


@examples(30)
@given(st.integers(1, 40), st.integers(8, 1024), st.integers(1000, 48000),
       st.floats(0, 0.25), st.floats(0, 1), st.sampled_from([np.float32, np.float64]),
       st.sampled_from([TensorProto.FLOAT, TensorProto.DOUBLE]))
def test_mel_weight_matrix_matches_the_reference(mel_bins, dft_length, rate, low, high,
                                                 dtype, output_type):
    low = low * rate
    high = low + high * (rate / 2 - low)
    inputs = {"bins": np.array(mel_bins, np.int64), "length": np.array(dft_length, np.int64),
              "rate": np.array(rate, np.int64), "low": np.array(low, dtype),
              "high": np.array(high, dtype)}
    node = h.make_node("MelWeightMatrix", list(inputs), ["y"], output_datatype=output_type)
    out = np.float32 if output_type == TensorProto.FLOAT else np.float64
    _compare(node, inputs, {"y": (out, 2)}, constants=list(inputs))


def test_mel_weight_matrix_refuses_edges_past_the_spectrum():
    inputs = {"bins": np.array(4, np.int64), "length": np.array(16, np.int64),
              "rate": np.array(8000, np.int64), "low": np.array(0.0, np.float32),
              "high": np.array(10000.0, np.float32)}
    node = h.make_node("MelWeightMatrix", list(inputs), ["y"])
    model = _model(node, inputs, {"y": (np.float32, 2)}, constants=list(inputs))
    with pytest.raises(OnnxModelError, match="outside the spectrum's 0..8"):
        graphc.onnx.load(model)


@examples(20)
@given(st.lists(st.integers(0, 3), max_size=2), st.integers(1, 4),
       st.sampled_from([np.float32, np.float64]), st.integers(0, 2**16))
def test_det_matches_the_reference(batch, n, dtype, seed):
    x = np.random.default_rng(seed).standard_normal((*batch, n, n)).astype(dtype)
    node = h.make_node("Det", ["x"], ["y"])
    _compare(node, {"x": x}, {"y": (dtype, len(batch))}, rtol=1e-4, atol=1e-5)


def test_det_refuses_matrices_that_are_not_square():
    node = h.make_node("Det", ["x"], ["y"])
    _load_error(node, {"x": np.ones((2, 3), np.float32)}, {"y": (np.float32, 0)},
                OnnxModelError, r"square matrices in its last two axes, got shape \(2, 3\)")
