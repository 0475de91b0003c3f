"""The converters of ONNX's sequence-model operators (graphc/onnx/ops/sequence_models.py,
linear_attention.py, flex_attention.py): random shapes and attributes against
onnx's reference implementation, each both as graph operations (graph inputs) and
folded while importing (initializers), and the errors a user sees."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

onnx = pytest.importorskip("onnx")
from onnx import helper as h, numpy_helper as nh  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import graphc.onnx  # noqa: E402
from graphc.onnx import OnnxModelError  # noqa: E402
from graphc.onnx.ops import linear_attention  # noqa: E402
from opcheck import examples  # noqa: E402

PREVIEW = "ai.onnx.preview"
#: opset -> the IR version that declares it
IR = {23: 11, 24: 11, 26: 12, 27: 13}


def _model(op_type, inputs: dict, attrs: dict, n_outputs: int, opset: int, constants=(),
           domain="", outputs=None):
    """A one-node model; ``inputs`` maps names to arrays or ``None`` (an omitted input);
    the names in ``constants`` become initializers. The outputs are declared with the
    shapes and types of the arrays ``outputs`` (else of the first input's rank)."""
    names = [name if value is not None else "" for name, value in inputs.items()]
    node = h.make_node(op_type, names, [f"y{i}" for i in range(n_outputs)], domain=domain,
                       **attrs)
    given_inputs = {k: v for k, v in inputs.items() if v is not None}
    infos = [h.make_tensor_value_info(k, h.np_dtype_to_tensor_dtype(v.dtype), v.shape)
             for k, v in given_inputs.items() if k not in constants]
    if outputs is None:  # the error tests: the first input's type and rank
        first = next(iter(given_inputs.values()))
        kinds = [(first.dtype, [f"d{j}" for j in range(first.ndim)])] * n_outputs
    else:
        kinds = [(a.dtype, a.shape) for a in outputs]
    outs = [h.make_tensor_value_info(f"y{i}", h.np_dtype_to_tensor_dtype(dtype), shape)
            for i, (dtype, shape) in enumerate(kinds)]
    inits = [nh.from_array(given_inputs[k], k) for k in constants]
    graph = h.make_graph([node], "g", infos, outs, initializer=inits)
    imports = [h.make_opsetid("", opset)] + ([h.make_opsetid(domain, 1)] if domain else [])
    model = h.make_model(graph, opset_imports=imports)
    model.ir_version = IR[opset]
    return model


def _compare(op_type, inputs: dict, attrs: dict, n_outputs=1, opset=27, domain="",
             rtol=1e-5, atol=1e-5, folded=False):
    """graphc's outputs against onnx's reference, the inputs fed at run time or (``folded``)
    as initializers the importer computes with."""
    given_inputs = {k: v for k, v in inputs.items() if v is not None}
    constants = tuple(given_inputs) if folded else ()
    want = ReferenceEvaluator(_model(op_type, inputs, attrs, n_outputs, opset, (),
                                     domain)).run(None, given_inputs)
    model = _model(op_type, inputs, attrs, n_outputs, opset, constants, domain, want)
    feeds = {k: v for k, v in given_inputs.items() if k not in constants}
    got = graphc.onnx.load(model).run(**feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                   atol=atol)


def _normal(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _tolerance(dtype):
    return {"rtol": 2e-2, "atol": 2e-2} if dtype == np.float16 else {}


# -- RotaryEmbedding ----------------------------------------------------------------------
@examples(25)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 4), st.sampled_from([2, 4, 6, 8]),
       st.booleans(), st.booleans(), st.booleans(), st.integers(0, 3), st.booleans(),
       st.integers(0, 2 ** 31))
def test_rotary_embedding_matches_the_reference(batch, heads, length, head_size, packed,
                                                interleaved, with_positions, rotary_halves,
                                                folded, seed):
    rng = np.random.default_rng(seed)
    rotary_dim = min(2 * rotary_halves, head_size) if rotary_halves else head_size
    x = _normal(rng, (batch, length, heads * head_size) if packed else
                (batch, heads, length, head_size))
    attrs = {"interleaved": int(interleaved)}
    if rotary_halves:
        attrs["rotary_embedding_dim"] = rotary_dim
    if packed:
        attrs["num_heads"] = heads
    if with_positions:
        positions = rng.integers(0, 10, (batch, length)).astype(np.int64)
        caches = (10, rotary_dim // 2)
    else:
        positions, caches = None, (batch, length, rotary_dim // 2)
    angles = rng.uniform(-3, 3, caches).astype(np.float32)
    inputs = {"x": x, "cos": np.cos(angles), "sin": np.sin(angles), "positions": positions}
    _compare("RotaryEmbedding", inputs, attrs, opset=23, folded=folded)


def test_rotary_embedding_in_float16():
    rng = np.random.default_rng(0)
    angles = rng.uniform(-3, 3, (8, 4)).astype(np.float16)
    inputs = {"x": _normal(rng, (2, 2, 3, 8), np.float16), "cos": np.cos(angles),
              "sin": np.sin(angles), "positions": rng.integers(0, 8, (2, 3))}
    _compare("RotaryEmbedding", inputs, {}, opset=23, **_tolerance(np.float16))


# -- TensorScatter ------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
@examples(8)
@given(st.integers(1, 3), st.integers(3, 4), st.data(), st.booleans(), st.booleans(),
       st.integers(0, 2 ** 31))
def test_tensor_scatter_matches_the_reference(mode, dtype, batch, rank, data, with_indices,
                                              folded, seed):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(1, rank - 1))
    dims = [batch] + [data.draw(st.integers(1, 4)) for _ in range(rank - 1)]
    capacity = dims[axis]
    count = data.draw(st.integers(1, capacity))
    rows = list(dims)
    rows[axis] = count
    cache = (rng.standard_normal(dims) * 5).astype(dtype)
    update = (rng.standard_normal(rows) * 5).astype(dtype)
    indices = None
    if with_indices:
        top = capacity - count if mode == "linear" else 2 * capacity
        indices = rng.integers(0, top + 1, (batch,)).astype(np.int64)
    attrs = {"mode": mode}
    if axis != rank - 2 or data.draw(st.booleans()):
        attrs["axis"] = axis if data.draw(st.booleans()) else axis - rank
    inputs = {"cache": cache, "update": update, "indices": indices}
    _compare("TensorScatter", inputs, attrs, opset=24, folded=folded)


# -- CausalConvWithState ------------------------------------------------------------------
@pytest.mark.parametrize("activation", ["none", "silu", "swish", None])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@examples(6)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 6), st.integers(1, 4),
       st.booleans(), st.booleans(), st.booleans(), st.integers(0, 2 ** 31))
def test_causal_conv_with_state_matches_the_reference(activation, dtype, batch, channels,
                                                      length, k, bias, past, folded, seed):
    rng = np.random.default_rng(seed)
    inputs = {"x": _normal(rng, (batch, channels, length), dtype),
              "w": _normal(rng, (channels, 1, k), dtype),
              "bias": _normal(rng, (channels,), dtype) if bias else None,
              "past": _normal(rng, (batch, channels, k - 1), dtype) if past else None}
    attrs = {} if activation is None else {"activation": activation}
    _compare("CausalConvWithState", inputs, attrs, n_outputs=2, folded=folded,
             **_tolerance(dtype))


# -- LinearAttention ----------------------------------------------------------------------
RULES = ["linear", "gated", "delta", "gated_delta"]


def _linear_attention_inputs(rng, rule, batch, length, kv_heads, group, d_k, d_v, past,
                             per_head_decay, shared_beta, dtype):
    q_heads = kv_heads * group
    key = _normal(rng, (batch, length, kv_heads, d_k))
    key /= np.linalg.norm(key, axis=-1, keepdims=True)  # the delta rules want unit keys
    inputs = {"q": _normal(rng, (batch, length, q_heads * d_k), dtype),
              "k": key.reshape(batch, length, kv_heads * d_k).astype(dtype),
              "v": _normal(rng, (batch, length, kv_heads * d_v), dtype),
              "past": _normal(rng, (batch, kv_heads, d_k, d_v), dtype) if past else None,
              "decay": None, "beta": None}
    if rule in ("gated", "gated_delta"):
        width = kv_heads if per_head_decay else kv_heads * d_k
        inputs["decay"] = -rng.uniform(0.01, 1.0, (batch, length, width)).astype(dtype)
    if rule in ("delta", "gated_delta"):
        width = 1 if shared_beta else kv_heads
        inputs["beta"] = rng.uniform(0.0, 1.0, (batch, length, width)).astype(dtype)
    return inputs


@pytest.mark.parametrize("rule", RULES)
@examples(12)
@given(st.integers(1, 2), st.integers(1, 6), st.integers(1, 2),
       st.integers(1, 3), st.integers(1, 4), st.integers(1, 4), st.booleans(), st.booleans(),
       st.booleans(), st.sampled_from([None, 0.5]), st.booleans(), st.integers(0, 2 ** 31))
def test_linear_attention_matches_the_reference(rule, batch, length, kv_heads, group, d_k,
                                                d_v, past, per_head_decay, shared_beta, scale,
                                                folded, seed):
    rng = np.random.default_rng(seed)
    inputs = _linear_attention_inputs(rng, rule, batch, length, kv_heads, group, d_k, d_v,
                                      past, per_head_decay, shared_beta, np.float32)
    attrs = {"update_rule": rule, "q_num_heads": kv_heads * group, "kv_num_heads": kv_heads}
    if scale is not None:
        attrs["scale"] = scale
    _compare("LinearAttention", inputs, attrs, n_outputs=2, folded=folded, rtol=1e-4,
             atol=1e-4)


@pytest.mark.parametrize("rule", RULES)
def test_linear_attention_in_float16_with_a_float32_state(rule):
    rng = np.random.default_rng(1)
    inputs = _linear_attention_inputs(rng, rule, 1, 5, 2, 2, 4, 3, False, False, False,
                                      np.float16)
    inputs["past"] = _normal(rng, (1, 2, 4, 3))
    attrs = {"update_rule": rule, "q_num_heads": 4, "kv_num_heads": 2}
    _compare("LinearAttention", inputs, attrs, n_outputs=2, **_tolerance(np.float16))


def test_linear_attention_scans_the_linear_rule_past_its_closed_form(monkeypatch):
    """Past ``_CLOSED_FORM_MAX`` tokens the linear rule runs as the scan the others use."""
    monkeypatch.setattr(linear_attention, "_CLOSED_FORM_MAX", 2)
    rng = np.random.default_rng(2)
    inputs = _linear_attention_inputs(rng, "linear", 2, 7, 2, 2, 3, 2, True, False, False,
                                      np.float32)
    attrs = {"update_rule": "linear", "q_num_heads": 4, "kv_num_heads": 2}
    _compare("LinearAttention", inputs, attrs, n_outputs=2, rtol=1e-4, atol=1e-4)


def test_linear_attention_is_one_loop_node_however_long_the_sequence():
    """The recurrence is a scan whose body is compiled once, not a copy per token."""
    rng = np.random.default_rng(3)
    counts = []
    for length in (8, 64):
        inputs = _linear_attention_inputs(rng, "gated_delta", 1, length, 1, 1, 2, 2, False,
                                          False, False, np.float32)
        attrs = {"q_num_heads": 1, "kv_num_heads": 1}
        feeds = {k: v for k, v in inputs.items() if v is not None}
        want = ReferenceEvaluator(_model("LinearAttention", inputs, attrs, 2, 27)).run(
            None, feeds)
        loaded = graphc.onnx.load(_model("LinearAttention", inputs, attrs, 2, 27,
                                         outputs=want))
        got = loaded.run(**feeds)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)
        stats = loaded.stats()
        assert stats["ops"]["loop"] == 1
        counts.append(stats["nodes"])
    assert counts[0] == counts[1]


# -- FlexAttention ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@examples(10)
@given(st.integers(1, 2), st.integers(1, 2), st.integers(1, 3), st.integers(1, 4),
       st.integers(1, 4), st.integers(1, 5), st.integers(1, 5), st.sampled_from([None, 0.3]),
       st.sampled_from([None, 1, 11]), st.booleans(), st.integers(0, 2 ** 31))
def test_flex_attention_matches_the_reference(dtype, batch, kv_heads, group, q_length,
                                              kv_length, size, v_size, scale, precision,
                                              folded, seed):
    rng = np.random.default_rng(seed)
    inputs = {"q": _normal(rng, (batch, kv_heads * group, q_length, size), dtype),
              "k": _normal(rng, (batch, kv_heads, kv_length, size), dtype),
              "v": _normal(rng, (batch, kv_heads, kv_length, v_size), dtype)}
    attrs = {}
    if scale is not None:
        attrs["scale"] = scale
    if precision is not None:
        attrs["softmax_precision"] = precision
    _compare("FlexAttention", inputs, attrs, opset=26, domain=PREVIEW, folded=folded,
             **_tolerance(dtype))


def _mod_graph(nodes, constants):
    """A score_mod/prob_mod body: ``s`` (float32, rank 4) in, ``t`` out."""
    inits = [nh.from_array(np.asarray(v), k) for k, v in constants.items()]
    return h.make_graph(nodes, "mod", [h.make_tensor_value_info("s", 1, None)],
                        [h.make_tensor_value_info("t", 1, None)], initializer=inits)


def _positions(axis):
    """Nodes making ``i{axis}``: 0..n-1 of ``s``'s axis ``axis``, shaped to broadcast."""
    shape = [1, 1, 1, 1]
    shape[axis] = -1
    return [h.make_node("Shape", ["s"], [f"shape{axis}"], start=axis, end=axis + 1),
            h.make_node("Squeeze", [f"shape{axis}"], [f"n{axis}"]),
            h.make_node("Range", ["zero", f"n{axis}", "one"], [f"r{axis}"]),
            h.make_node("Reshape", [f"r{axis}", f"shape_of{axis}"], [f"i{axis}"])], \
        {f"shape_of{axis}": np.array(shape, np.int64)}


def _mods():
    """``{name: (attribute, body)}``: a soft cap, a causal mask and a relative-position
    bias on the scores, a rescaling of the probabilities."""
    cap = _mod_graph([h.make_node("Div", ["s", "cap"], ["a"]), h.make_node("Tanh", ["a"], ["b"]),
                      h.make_node("Mul", ["b", "cap"], ["t"])], {"cap": np.float32(3.0)})
    rows, row_constants = _positions(2)
    cols, col_constants = _positions(3)
    counters = {"zero": np.int64(0), "one": np.int64(1), **row_constants, **col_constants}
    causal = _mod_graph(rows + cols + [
        h.make_node("GreaterOrEqual", ["i2", "i3"], ["keep"]),
        h.make_node("Where", ["keep", "s", "minus_inf"], ["t"])],
        {**counters, "minus_inf": np.float32(-np.inf)})
    relative = _mod_graph(rows + cols + [
        h.make_node("Sub", ["i2", "i3"], ["d"]), h.make_node("Cast", ["d"], ["f"], to=1),
        h.make_node("Add", ["s", "f"], ["t"])], counters)
    halve = _mod_graph([h.make_node("Mul", ["s", "half"], ["t"])], {"half": np.float32(0.5)})
    return {"soft_cap": ("score_mod", cap), "causal": ("score_mod", causal),
            "relative": ("score_mod", relative), "halve": ("prob_mod", halve)}


@pytest.mark.parametrize("mod", sorted(_mods()))
@pytest.mark.parametrize("folded", [False, True])
def test_flex_attention_applies_its_subgraphs(mod, folded):
    rng = np.random.default_rng(4)
    inputs = {"q": _normal(rng, (2, 4, 3, 5)), "k": _normal(rng, (2, 2, 4, 5)),
              "v": _normal(rng, (2, 2, 4, 3))}
    name, body = _mods()[mod]
    _compare("FlexAttention", inputs, {name: body}, opset=26, domain=PREVIEW, folded=folded)


# -- errors -------------------------------------------------------------------------------
def _x(*shape):
    return np.zeros(shape, np.float32)


BAD = [
    ("LinearAttention", {"q": _x(1, 2, 4), "k": _x(1, 2, 4), "v": _x(1, 2, 4)},
     {"q_num_heads": 1, "kv_num_heads": 1, "update_rule": "fast"}, 27, "update_rule"),
    ("LinearAttention", {"q": _x(1, 2, 4), "k": _x(1, 2, 4), "v": _x(1, 2, 4)},
     {"q_num_heads": 1, "kv_num_heads": 1, "update_rule": "gated"}, 27, "decay"),
    ("LinearAttention", {"q": _x(1, 2, 6), "k": _x(1, 2, 4), "v": _x(1, 2, 4)},
     {"q_num_heads": 3, "kv_num_heads": 2, "update_rule": "linear"}, 27, "multiple"),
    ("LinearAttention", {"q": _x(1, 2, 4), "k": _x(1, 2, 4), "v": _x(1, 2, 4),
                         "past": _x(1, 1, 3, 4)},
     {"q_num_heads": 1, "kv_num_heads": 1, "update_rule": "linear"}, 27, "past_state"),
    ("CausalConvWithState", {"x": _x(1, 2, 3), "w": _x(2, 1, 2)}, {"activation": "gelu"}, 27,
     "activation"),
    ("CausalConvWithState", {"x": _x(1, 2, 3), "w": _x(3, 1, 2)}, {}, 27, "weight"),
    ("TensorScatter", {"c": _x(2, 3, 4), "u": _x(2, 1, 4)}, {"axis": 0}, 24, "axis"),
    ("TensorScatter", {"c": _x(2, 3, 4), "u": _x(2, 1, 4)}, {"mode": "ring"}, 24, "mode"),
    ("TensorScatter", {"c": _x(2, 3, 4), "u": _x(2, 4, 4)}, {}, 24, "update"),
    ("RotaryEmbedding", {"x": _x(1, 2, 8), "cos": _x(1, 2, 4), "sin": _x(1, 2, 4)}, {}, 23,
     "num_heads"),
    ("RotaryEmbedding", {"x": _x(1, 1, 2, 8), "cos": _x(1, 2, 3), "sin": _x(1, 2, 3)}, {}, 23,
     "rotary_dim"),
    ("RotaryEmbedding", {"x": _x(1, 1, 2, 8), "cos": _x(1, 2, 2), "sin": _x(1, 2, 2)},
     {"rotary_embedding_dim": 3}, 23, "rotary_embedding_dim"),
]


@pytest.mark.parametrize("op_type, inputs, attrs, opset, words", BAD,
                         ids=[f"{b[0]}-{b[4]}" for b in BAD])
def test_bad_nodes_are_refused_with_a_clear_error(op_type, inputs, attrs, opset, words):
    n_outputs = {"LinearAttention": 2, "CausalConvWithState": 2}.get(op_type, 1)
    model = _model(op_type, inputs, attrs, n_outputs, opset)
    with pytest.raises(OnnxModelError, match=words) as caught:
        graphc.onnx.load(model)
    assert op_type in str(caught.value)


def test_flex_attention_refuses_mismatched_head_sizes():
    model = _model("FlexAttention", {"q": _x(1, 2, 3, 4), "k": _x(1, 2, 3, 5),
                                     "v": _x(1, 2, 3, 4)}, {}, 1, 26, domain=PREVIEW)
    with pytest.raises(OnnxModelError, match="head size"):
        graphc.onnx.load(model)
