"""Save and load: a round trip gives the same results and stats; a file that is
not a graphc graph (pickles, wrong format or version, unknown ops, tampered
structure, garbage) raises ``GraphError`` and never runs code; graphs with
delay nodes refuse to save."""
from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest

import graphc
import graphc.ndarray as N

# The format must round-trip every op kind as written; the optimiser would merge
# many of them into fused nodes first, so it is off here (fused graphs are saved
# in tests/test_optimiser.py).
def compile_as_written(*args, **kwargs):
    return graphc.compile(*args, optimise=False, **kwargs)


def load_as_written(*args, **kwargs):
    return graphc.load(*args, optimise=False, **kwargs)

from graphc.demo import build as build_mlp

F32 = np.float32


def stats_without_time(g):
    s = g.stats()
    s.pop("build_seconds")
    return s


def read_doc(path):
    with np.load(path, allow_pickle=False) as data:
        doc = json.loads(bytes(data["graph_json"]).decode())
        arrays = {k: data[k] for k in data.files if k != "graph_json"}
    return doc, arrays


def write_doc(path, doc, arrays=None, text=None):
    raw = (text if text is not None else json.dumps(doc)).encode()
    np.savez(path, graph_json=np.frombuffer(raw, dtype=np.uint8), **(arrays or {}))


# -- round trips ---------------------------------------------------------------------
@pytest.mark.parametrize("plan", ["blocks", "offsets"])
def test_mlp_training_step_round_trip(tmp_path, plan):
    rng = np.random.default_rng(0)
    inputs, outputs, updates = build_mlp(16, 32, 24, 5)
    g = compile_as_written(inputs, outputs, updates, plan=plan)
    path = tmp_path / "mlp.npz"
    g.save(path)
    h = load_as_written(path, plan=plan, check=True)
    assert stats_without_time(h) == stats_without_time(g)
    assert h.input_names == g.input_names == ["x", "labels", "w1", "w2"]
    W1 = (rng.standard_normal((32, 24)) * 0.1).astype(F32)
    W2 = (rng.standard_normal((24, 5)) * 0.1).astype(F32)
    for step in (g, h):
        step.assign(w1=W1, w2=W2)
    for _ in range(3):
        X = rng.standard_normal((16, 32)).astype(F32)
        Y = rng.integers(0, 5, 16)
        np.testing.assert_array_equal(g.run(x=X, labels=Y)[0], h.run(x=X, labels=Y)[0])
        for name in ("w1", "w2"):
            np.testing.assert_array_equal(g.value(name), h.value(name))
    assert not np.array_equal(g.value("w1"), W1)          # the updates did run


def many_ops_graph():
    x = N.var("x", (4, 5))
    idx = N.var("idx", (3,), np.int64)
    flags = N.var("flags", (4, 5), np.bool_)
    c = N.const(np.linspace(-1, 1, 5).astype(F32), name="row")
    outs = [
        N.pad(x, 1, constant_values=np.inf), N.clip(x, 0.0, None), N.clip(x, -1.0, 2.0),
        x[idx], x[idx, 1:3], N.take(x, idx, axis=1), N.one_hot(idx, 4),
        N.tile(x, (2, 1)), N.repeat(x, 2, axis=1), N.flip(x, 1), N.argmax(x, axis=1),
        N.einsum("ij,kj->ik", x, x), N.dot(x, x.T), x @ x.T, N.broadcast_to(x[:1], (3, 5)),
        N.std(x, axis=(0, 1)), N.logsumexp(x, axis=-1), N.full((2,), 3),
        x.astype(np.int32), N.stack([x, x], axis=1), x[None, ..., ::-2],
        N.where(flags, x, c), N.mean(x, axis=0, keepdims=True), N.any(flags, axis=1),
        N.sigmoid(x) + N.erf(x), N.maximum(x, c) ** 2, N.concatenate([x, x * 2.0], axis=0),
        N.random.normal(0.0, 1.0, (2, 3)), N.random.uniform(0, 1, (3,)),
        N.random.bernoulli(0.5, (4,)), N.transpose(N.reshape(x, (2, 10)), (1, 0)),
    ]
    return [x, idx, flags], outs


def test_round_trip_of_many_op_kinds_with_names_constants_and_random_ops(tmp_path):
    inputs, outputs = many_ops_graph()
    g = compile_as_written(inputs, outputs, seed=5)
    path = tmp_path / "many.npz"
    g.save(path)
    h = load_as_written(path, seed=5)
    assert stats_without_time(h) == stats_without_time(g)
    kinds = set(stats_without_time(g)["ops"])
    assert {"pad", "clip", "gather", "take", "one_hot", "tile", "repeat", "flip", "argmax",
            "einsum", "dot", "matmul", "broadcast_to", "where", "random_normal",
            "random_uniform", "random_bernoulli", "fill", "astype", "concatenate",
            "slice", "reshape", "transpose"} <= kinds
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((4, 5)).astype(F32), "idx": np.array([0, 3, -1]),
             "flags": rng.random((4, 5)) < 0.5}
    for _ in range(2):                       # the random draws match run after run
        for a, b in zip(g.run(**feeds), h.run(**feeds)):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
    loaded_row = [n for n in h.graph.order if n.name == "row"]
    assert len(loaded_row) == 1 and not loaded_row[0].value.flags.writeable
    np.testing.assert_array_equal(loaded_row[0].value, np.linspace(-1, 1, 5).astype(F32))


def test_round_trip_of_complex_and_non_finite_attributes(tmp_path):
    z = N.var("z", (2,), np.complex64)
    r = N.var("r", (3,), np.float64)
    g = compile_as_written([z, r], [z * N.full((2,), 1 + 2j, np.complex64),
                                N.pad(z, 1, constant_values=-1j),
                                N.pad(r, (0, 2), constant_values=np.nan),
                                N.clip(r, -np.inf, np.float64(0.25))])
    g.save(tmp_path / "c.npz")
    h = load_as_written(tmp_path / "c.npz")
    Z, R = np.array([1 + 1j, 2], np.complex64), np.array([-1.0, 0.0, 1.0])
    for a, b in zip(g.run(z=Z, r=R), h.run(z=Z, r=R)):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(h.run(z=Z, r=R)[1], [-1j, 1 + 1j, 2, -1j])


def test_round_trip_keeps_inputs_the_outputs_do_not_read(tmp_path):
    x = N.var("x", (3,))
    unused = N.var("unused", (2,))
    w = N.var("w", (3,))                      # updated, but no output reads it
    g = compile_as_written([x, unused, w], [x * 2.0], {w: x + 1.0})
    path = tmp_path / "unused.npz"
    g.save(path)
    h = load_as_written(path)
    assert h.input_names == ["x", "unused", "w"]
    assert stats_without_time(h) == stats_without_time(g)
    X = np.arange(3, dtype=F32)
    for e in (g, h):
        np.testing.assert_array_equal(e.run(x=X, unused=np.zeros(2, F32), w=X)[0], X * 2)
        np.testing.assert_array_equal(e.value("w"), X + 1)


def test_round_trip_keeps_updates_swaps_and_variable_outputs(tmp_path):
    a, b = N.var("a", (2,)), N.var("b", (2,))
    g = compile_as_written([a, b], [a, a * b], {a: b, b: a})
    path = tmp_path / "swap.npz"
    g.save(path)
    h = load_as_written(path)
    for e in (g, h):
        e.assign(a=np.array([1, 2], F32), b=np.array([3, 4], F32))
    for _ in range(3):
        for r, s in zip(g.run(), h.run()):
            np.testing.assert_array_equal(r, s)
    np.testing.assert_array_equal(h.value("a"), [3, 4])


def test_saving_writes_no_values_of_variables(tmp_path):
    w = N.var("w", (1000,))
    g = compile_as_written([w], N.sum(w), {w: w * 0.5})
    g.assign(w=np.full(1000, 123.0, F32))
    g.save(tmp_path / "w.npz")
    doc, arrays = read_doc(tmp_path / "w.npz")
    # only constants are stored (here the 0.5), never the variables' values
    assert list(arrays) == ["const_2"] and arrays["const_2"] == np.float32(0.5)
    assert doc["format"] == "graphc-graph" and doc["version"] == 1
    assert [n["kind"] for n in doc["nodes"]] == ["var", "sum", "const", "multiply"]
    h = load_as_written(tmp_path / "w.npz")
    with pytest.raises(graphc.InputError, match="'w' has no value yet"):
        h.value("w")


def test_load_accepts_str_and_pathlike_and_keeps_single_outputs(tmp_path):
    x = N.var("x", (2,))
    single = compile_as_written([x], N.exp(x))
    listed = compile_as_written([x], [N.exp(x)])
    single.save(str(tmp_path / "single.npz"))
    listed.save(tmp_path / "listed.npz")
    X = np.zeros(2, F32)
    for path in (str(tmp_path / "single.npz"), tmp_path / "single.npz"):
        out = load_as_written(path).run(x=X)
        assert isinstance(out, np.ndarray)          # as the original returned
        np.testing.assert_array_equal(out, [1.0, 1.0])
    out = load_as_written(tmp_path / "listed.npz").run(x=X)
    assert isinstance(out, list) and len(out) == 1


# -- delay nodes are code: never saved -----------------------------------------------
def test_graphs_with_delay_nodes_refuse_to_save(tmp_path):
    x = N.var("x", (3,))
    g = compile_as_written([x], N.delay(np.sort, [x], (3,), F32) + 1.0)
    path = tmp_path / "delay.npz"
    with pytest.raises(graphc.GraphError, match="delay nodes cannot be saved.*never stores "
                                                "code"):
        g.save(path)
    assert not path.exists()


# -- files that are not graphc graphs ------------------------------------------------
@pytest.fixture
def saved(tmp_path):
    x = N.var("x", (2, 3))
    c = N.const(np.ones(3, F32))
    g = compile_as_written([x], [N.sum(N.exp(x) * c, axis=1)])
    path = tmp_path / "good.npz"
    g.save(path)
    return path


def assert_refused(path, *fragments):
    with pytest.raises(graphc.GraphError) as info:
        load_as_written(path)
    msg = str(info.value)
    assert msg.startswith("load:")
    for f in fragments:
        assert f in msg, (f, msg)
    return msg


class Payload:
    """Unpickling this would create ``marker``: proof that code ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_pickled_content_is_never_unpickled(tmp_path, saved):
    marker = str(tmp_path / "code-ran")
    # 1. the graph description itself is an object array
    bad = tmp_path / "object-json.npz"
    np.savez(bad, graph_json=np.array([Payload(marker)], dtype=object))
    assert_refused(bad, "not a graphc graph file", "allow_pickle")
    # 2. a valid description next to an object array among the constants
    doc, arrays = read_doc(saved)
    bad = tmp_path / "object-const.npz"
    const_key = next(iter(arrays))
    write_doc(bad, doc, {**arrays, const_key: np.array([Payload(marker)], dtype=object)})
    assert_refused(bad, "allow_pickle")
    # 3. a plain pickle file
    bad = tmp_path / "plain.pickle"
    bad.write_bytes(pickle.dumps(Payload(marker)))
    assert_refused(bad, "not a graphc graph file")
    assert not os.path.exists(marker)


def test_wrong_format_or_version(tmp_path, saved):
    doc, arrays = read_doc(saved)
    bad = tmp_path / "format.npz"
    write_doc(bad, {**doc, "format": "other-tool"}, arrays)
    assert_refused(bad, "format 'other-tool' version 1", "expected 'graphc-graph' version 1")
    write_doc(bad, {**doc, "version": 2}, arrays)
    assert_refused(bad, "version 2", "expected 'graphc-graph' version 1")
    write_doc(bad, {k: v for k, v in doc.items() if k != "version"}, arrays)
    assert_refused(bad, "version None")
    write_doc(bad, None, arrays, text="[1, 2, 3]")
    assert_refused(bad, "not a graphc graph file", "list")
    write_doc(bad, None, arrays, text="{not json")
    assert_refused(bad, "not a graphc graph file")
    write_doc(bad, None, arrays, text="\udcff".encode("utf-8", "surrogatepass").decode(
        "latin-1"))
    assert_refused(bad, "not a graphc graph file")


def test_unknown_op_kind(tmp_path, saved):
    doc, arrays = read_doc(saved)
    doc["nodes"][1]["kind"] = "rm_rf"
    bad = tmp_path / "kind.npz"
    write_doc(bad, doc, arrays)
    assert_refused(bad, "unknown operation kind 'rm_rf'")


def test_a_delay_node_in_a_file_is_refused(tmp_path, saved):
    doc, arrays = read_doc(saved)
    doc["nodes"][1] = {"kind": "delay", "attrs": [["fn", "os.system"],
                                                  ["shape", {"t": [2, 3]}],
                                                  ["dtype", {"dtype": "<f4"}]],
                       "parents": [0], "name": None}
    bad = tmp_path / "delay.npz"
    write_doc(bad, doc, arrays)
    assert_refused(bad, "delay")


@pytest.mark.parametrize("tamper,fragment", [
    (lambda d, a: d["nodes"][1].update(parents=[7]), "node reference 7"),
    (lambda d, a: d["nodes"][1].update(parents=[-1]), "node reference -1"),
    (lambda d, a: d["nodes"][1].update(parents=[1]), "node reference 1"),
    (lambda d, a: d["nodes"][1].update(parents=[0, 0]), "exp takes 1 parent(s), got 2"),
    (lambda d, a: d["nodes"][1].pop("attrs"), "KeyError"),
    (lambda d, a: d.update(outputs=[99]), "node reference 99"),
    (lambda d, a: d.update(inputs=[1]), "invalid graph: compile: every input must be a "
                                        "variable"),
    (lambda d, a: d.update(inputs=[]), "invalid graph: compile: variable 'x'"),
    (lambda d, a: d.pop("nodes"), "KeyError"),
    (lambda d, a: d["nodes"][0]["attrs"].__setitem__(0, ["dtype", {"dtype": "|O"}]),
     "dtype object is not supported"),
    (lambda d, a: d["nodes"][0]["attrs"].__setitem__(0, ["dtype", {"dtype": "nonsense"}]),
     "node 0"),
    (lambda d, a: d["nodes"][0]["attrs"].__setitem__(2, ["shape", {"t": [-2, 3]}]),
     "negative dimension"),
    (lambda d, a: a.update({k: np.zeros(7, F32) for k in list(a)}),
     "declared with shape (3,) dtype float32 but its array has shape (7,)"),
    (lambda d, a: a.update({k: np.zeros(3, np.float64) for k in list(a)}),
     "but its array has shape (3,) dtype float64"),
    (lambda d, a: a.clear(), "lacks a stored array"),
    (lambda d, a: d["nodes"][0].update(name=5), "node name must be a string"),
])
def test_tampered_structure_is_refused(tmp_path, saved, tamper, fragment):
    doc, arrays = read_doc(saved)
    assert [n["kind"] for n in doc["nodes"]][:3] == ["var", "exp", "const"]
    tamper(doc, arrays)
    bad = tmp_path / "tampered.npz"
    write_doc(bad, doc, arrays)
    assert_refused(bad, fragment)


def test_tampered_attributes_fail_the_shape_rules(tmp_path, saved):
    doc, arrays = read_doc(saved)
    bad = tmp_path / "rule.npz"
    doc["nodes"][1]["kind"] = "matmul"             # exp -> matmul of one array
    write_doc(bad, doc, arrays)
    assert_refused(bad, "malformed graph", "matmul takes 2 parent(s), got 1")
    doc, arrays = read_doc(saved)
    mul = next(n for n in doc["nodes"] if n["kind"] == "multiply")
    mul["parents"] = [0, 2, 0]
    write_doc(bad, doc, arrays)
    assert_refused(bad, "multiply takes 2 parent(s), got 3")
    doc, arrays = read_doc(saved)
    mul = next(n for n in doc["nodes"] if n["kind"] == "multiply")
    doc["nodes"][2]["attrs"] = [["dtype", {"dtype": "<f4"}], ["digest", "d"],
                                ["shape", {"t": [4]}]]
    write_doc(bad, doc, {k: np.ones(4, F32) for k in arrays})
    assert_refused(bad, "malformed graph", "could not be broadcast")


@pytest.mark.parametrize("content", [b"", b"garbage that is not a graph", b"PK\x03\x04broken",
                                     bytes(range(256)) * 4, b"\x93NUMPY"])
def test_garbage_files(tmp_path, content):
    bad = tmp_path / "garbage.npz"
    bad.write_bytes(content)
    assert_refused(bad, "not a graphc graph file")


def test_truncated_file(tmp_path, saved):
    data = saved.read_bytes()
    for cut in (10, len(data) // 2, len(data) - 5):
        bad = tmp_path / f"cut{cut}.npz"
        bad.write_bytes(data[:cut])
        assert_refused(bad)


def test_a_plain_npy_array_and_a_missing_file(tmp_path):
    bad = tmp_path / "array.npy"
    np.save(bad, np.zeros(3))
    assert_refused(bad, "not an .npz archive")
    assert_refused(tmp_path / "nope.npz", "No such file")
    other = tmp_path / "other.npz"
    np.savez(other, weights=np.zeros(3))
    assert_refused(other, "graph_json")
