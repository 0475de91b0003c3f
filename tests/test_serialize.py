"""Save and load: a round trip gives the same results and stats; a file that is
not a graphc graph (pickles, wrong format or version, unknown ops, tampered
structure, garbage) raises ``GraphError`` and never runs code; graphs with
delay nodes refuse to save. A file is untrusted input (issue 13, item 4): one
test per kind of defect mutated files showed, checked through ``graphc.load``;
tests/test_serialize_fuzz.py mutates files at random."""
from __future__ import annotations

import io
import json
import os
import pickle
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest
from untrusted import Payload

import graphc
import graphc.ndarray as N

# The format must round-trip every op kind as written; the optimiser would merge
# many of them into fused nodes first, so it is off here (an optimised graph is
# saved as written in tests/test_optimiser.py).
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
    labels = N.var("labels", (3,), np.int64)     # one_hot refuses negative labels
    c = N.const(np.linspace(-1, 1, 5).astype(F32), name="row")
    outs = [
        N.pad(x, 1, constant_values=np.inf), N.clip(x, 0.0, None), N.clip(x, -1.0, 2.0),
        x[idx], x[idx, 1:3], N.take(x, idx, axis=1), N.one_hot(labels, 4),
        N.tile(x, (2, 1)), N.repeat(x, 2, axis=1), N.flip(x, 1), N.argmax(x, axis=1),
        N.einsum("ij,kj->ik", x, x), N.dot(x, x.T), x @ x.T, N.broadcast_to(x[:1], (3, 5)),
        N.std(x, axis=(0, 1)), N.logsumexp(x, axis=-1), N.full((2,), 3),
        x.astype(np.int32), N.stack([x, x], axis=1), x[None, ..., ::-2],
        N.where(flags, x, c), N.mean(x, axis=0, keepdims=True), N.any(flags, axis=1),
        N.sigmoid(x) + N.erf(x), N.maximum(x, c) ** 2, N.concatenate([x, x * 2.0], axis=0),
        N.random.normal(0.0, 1.0, (2, 3)), N.random.uniform(0, 1, (3,)),
        N.random.bernoulli(0.5, (4,)), N.transpose(N.reshape(x, (2, 10)), (1, 0)),
    ]
    return [x, idx, flags, labels], outs


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
             "flags": rng.random((4, 5)) < 0.5, "labels": np.array([0, 3, 1])}
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


def test_pickled_content_is_never_unpickled(tmp_path, saved):
    marker = str(tmp_path / "code-ran")
    # 1. the graph description itself is an object array
    bad = tmp_path / "object-json.npz"
    np.savez(bad, graph_json=np.array([Payload(marker)], dtype=object))
    assert_refused(bad, "member 'graph_json.npy' holds Python objects", "allow_pickle")
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
    (lambda d, a: d["nodes"][1].pop("attrs"), "node 1 lacks attrs"),
    (lambda d, a: d.update(outputs=[99]), "node reference 99"),
    (lambda d, a: d.update(inputs=[1]), "invalid graph: compile: every input must be a "
                                        "variable"),
    (lambda d, a: d.update(inputs=[]), "invalid graph: compile: variable 'x'"),
    (lambda d, a: d.pop("nodes"), "the description lacks nodes"),
    (lambda d, a: d["nodes"][0]["attrs"].__setitem__(0, ["dtype", {"dtype": "|O"}]),
     "node 0 (var): attribute 'dtype': '|O' is not a boolean, integer, float or complex"),
    (lambda d, a: d["nodes"][0]["attrs"].__setitem__(0, ["dtype", {"dtype": "nonsense"}]),
     "node 0"),
    (lambda d, a: d["nodes"][0]["attrs"].__setitem__(2, ["shape", {"t": [-2, 3]}]),
     "negative dimension"),
    (lambda d, a: a.update({k: np.zeros(7, F32) for k in list(a)}),
     "holds shape (7,) dtype float32, but node 2 (const) is declared with shape (3,)"),
    (lambda d, a: a.update({k: np.zeros(3, np.float64) for k in list(a)}),
     "member 'const_2.npy' holds shape (3,) dtype float64, but node 2"),
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


# -- untrusted files: one test per kind of defect (issue 13, item 4) --------------------
def read_members(path) -> dict:
    with zipfile.ZipFile(path) as z:
        return {info.filename: z.read(info) for info in z.infolist()}


def write_members(path, members, method=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", method) as z:
        for name, content in members.items():
            z.writestr(name, content)


def npy_bytes(array) -> bytes:
    out = io.BytesIO()
    np.save(out, array, allow_pickle=False)
    return out.getvalue()


def edit_header(raw: bytes, old: bytes, new: bytes) -> bytes:
    """An .npy file's header with ``old`` replaced by ``new``, its padding adjusted so
    the header keeps its length."""
    end = 10 + struct.unpack("<H", raw[8:10])[0]
    header = raw[10:end].replace(old, new)
    header = header.rstrip(b" \n")
    header += b" " * (end - 10 - len(header) - 1) + b"\n"
    return raw[:10] + header + raw[end:]


def patch_member(path, name, **fields):
    """Overwrite fields of ``name``'s zip headers (local and central): ``size``
    (uncompressed), ``compressed``, ``version`` (needed to extract), ``flags``."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        local = z.getinfo(name).header_offset
    central = data.find(b"PK\x01\x02")
    while data[central + 46:central + 46 + len(name)] != name.encode():
        central = data.find(b"PK\x01\x02", central + 1)
    layout = {"size": ((22, 24), 4), "compressed": ((18, 20), 4), "version": ((4, 6), 2),
              "flags": ((6, 8), 2)}
    for field, value in fields.items():
        (at_local, at_central), width = layout[field]
        data[local + at_local:local + at_local + width] = value.to_bytes(width, "little")
        data[central + at_central:central + at_central + width] = value.to_bytes(width, "little")
    path.write_bytes(bytes(data))


def peak_bytes(function) -> int:
    """The most memory (Python and NumPy allocations) ``function()`` held at once."""
    tracemalloc.start()
    try:
        function()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def refused_cheaply(path, *fragments, max_bytes=None):
    """Refused with ``fragments`` in the message, without allocating 1 MiB."""
    caught = []

    def attempt():
        with pytest.raises(graphc.GraphError) as info:
            graphc.load(path, max_bytes=max_bytes)
        caught.append(str(info.value))
    assert peak_bytes(attempt) < 1 << 20
    for f in fragments:
        assert f in caught[0], (f, caught[0])
    return caught[0]


def two_constants_graph(first, second):
    x = N.var("x", first.shape, first.dtype)
    return compile_as_written([x], [x + N.const(first), x + N.const(second)])


def const_members(path):
    return sorted(n for n in read_members(path) if n.startswith("const_"))


def test_constant_digests_are_computed_from_the_arrays_never_read(tmp_path):
    # two equal constants share a digest; an edited array must not be merged with
    # the other by common-subexpression elimination, whatever the file says
    path = tmp_path / "c.npz"
    two_constants_graph(np.zeros(3, F32), np.zeros(3, F32)).save(path)
    members = read_members(path)
    first, second = const_members(path)
    members[second] = npy_bytes(np.ones(3, F32))
    write_members(path, members)
    X = np.arange(3, dtype=F32)
    out = graphc.load(path).run(x=X)               # optimised: CSE runs
    np.testing.assert_array_equal(out[0], X + 0)
    np.testing.assert_array_equal(out[1], X + 1)
    # a file whose digests claim that different constants are equal, small and large
    for size in (3, 20_000):                       # 80 KB: digested as "unique-..."
        path = tmp_path / f"d{size}.npz"
        two_constants_graph(np.zeros(size, F32), np.ones(size, F32)).save(path)
        doc, arrays = read_doc(path)
        for node in doc["nodes"]:
            if node["kind"] == "const":
                node["attrs"] = [[k, "same" if k == "digest" else v] for k, v in node["attrs"]]
        write_doc(path, doc, arrays)
        X = np.full(size, 5, F32)
        out = graphc.load(path).run(x=X)
        np.testing.assert_array_equal(out[0], X)
        np.testing.assert_array_equal(out[1], X + 1)


@pytest.mark.parametrize("large", [False, True])
def test_constants_are_saved_in_one_form_and_large_ones_stay_unmerged(tmp_path, large):
    # in memory a constant too large to digest carries a never-merge flag; a file
    # holds every constant as digest, dtype and shape, the form it always had
    from graphc.symbol.constants import DIGEST_LIMIT
    size = DIGEST_LIMIT // 4 + 1 if large else 3
    path = tmp_path / "equal.npz"
    two_constants_graph(np.ones(size, F32), np.ones(size, F32)).save(path)
    doc, _ = read_doc(path)
    consts = [dict(node["attrs"]) for node in doc["nodes"] if node["kind"] == "const"]
    assert len(consts) == 2
    for attrs in consts:
        assert set(attrs) == {"digest", "dtype", "shape"} and isinstance(attrs["digest"], str)
    merged = graphc.load(path, optimise=["cse"])
    assert merged.stats()["ops"]["const"] == (2 if large else 1)
    X = np.full(size, 5, F32)
    for out in merged.run(x=X):
        np.testing.assert_array_equal(out, X + 1)


def test_a_construction_error_in_a_file_names_no_line_of_the_caller(tmp_path, saved):
    # the shape rule's error would carry the line that called load(), which says
    # nothing about the file
    doc, arrays = read_doc(saved)
    doc["nodes"][2]["attrs"] = [["dtype", {"dtype": "<f4"}], ["digest", "d"],
                                ["shape", {"t": [4]}]]
    bad = tmp_path / "broadcast.npz"
    write_doc(bad, doc, {k: np.ones(4, F32) for k in arrays})
    with pytest.raises(graphc.GraphError) as info:
        load_as_written(bad)
    assert "could not be broadcast" in str(info.value)
    assert info.value.location is None and " (at " not in str(info.value)


def test_an_npy_header_claiming_a_huge_array_is_refused_before_allocating(tmp_path, saved):
    members = read_members(saved)
    (name,) = const_members(saved)
    members[name] = edit_header(members[name], b"'shape': (3,)", b"'shape': (17179869184,)")
    write_members(saved, members)
    refused_cheaply(saved, f"member {name!r} holds shape (17179869184,) dtype float32, but "
                           "node 2 (const) is declared with shape (3,) dtype float32")
    # the description agreeing with the header: the zip directory gives the lie
    doc = json.loads(np.load(io.BytesIO(members["graph_json.npy"])).tobytes())
    const = next(n for n in doc["nodes"] if n["kind"] == "const")
    const["attrs"] = [[k, {"t": [17179869184]} if k == "shape" else v] for k, v in const["attrs"]]
    members["graph_json.npy"] = npy_bytes(np.frombuffer(json.dumps(doc).encode(), np.uint8))
    write_members(saved, members)
    refused_cheaply(saved, f"member {name!r} is", "bytes long (zip directory), but its header "
                           "declares shape (17179869184,) dtype float32")


def test_an_unreferenced_member_is_refused_unread_however_large(tmp_path, saved):
    members = read_members(saved)
    members["extra.npy"] = npy_bytes(np.zeros(1000, F32))
    write_members(saved, members, zipfile.ZIP_DEFLATED)
    patch_member(saved, "extra.npy", size=0xFFFF_FFF0)        # "4 GiB" in the directory
    refused_cheaply(saved, "member 'extra.npy' is not referenced by the graph", "not read")


def test_members_whose_sizes_disagree_with_the_graph_are_refused(tmp_path, saved):
    members = read_members(saved)
    (name,) = const_members(saved)
    write_members(saved, members, zipfile.ZIP_DEFLATED)
    patch_member(saved, name, size=0xFFFF_FFF0)               # a zip bomb's claim
    refused_cheaply(saved, f"member {name!r} is 4294967280 bytes long (zip directory)")
    # a deflated stream longer than its directory says: zip's CRC-32 catches it
    members[name] = npy_bytes(np.ones(3, F32)) + bytes(10_000)
    write_members(saved, members, zipfile.ZIP_DEFLATED)
    patch_member(saved, name, size=len(npy_bytes(np.ones(3, F32))))
    refused_cheaply(saved, f"member {name!r} is corrupt while reading", "Bad CRC-32")
    # a member cut short, stored
    members[name] = npy_bytes(np.ones(3, F32))[:-4]
    write_members(saved, members)
    refused_cheaply(saved, f"member {name!r} is 136 bytes long (zip directory), but its header "
                           "declares shape (3,) dtype float32: 128 + 12 bytes")


@pytest.mark.parametrize("change,fragment", [
    # was NotImplementedError: zipfile finds it reading the directory, before any member
    (dict(version=99), "not a graphc graph file: NotImplementedError: zip file version 9.9"),
    (dict(flags=1), "member 'const_2.npy' is encrypted"),
])
def test_zip_features_graphc_does_not_write_are_refused(tmp_path, saved, change, fragment):
    (name,) = const_members(saved)
    assert name == "const_2.npy"
    patch_member(saved, name, **change)
    assert_refused(saved, fragment)


def test_other_compression_methods_and_duplicate_members_are_refused(tmp_path, saved):
    members = read_members(saved)
    bad = tmp_path / "bz.npz"
    write_members(bad, members, zipfile.ZIP_BZIP2)
    assert_refused(bad, "compression method 12; expected stored (0) or deflated (8)")
    with zipfile.ZipFile(bad, "w") as z:
        for name, content in members.items():
            z.writestr(name, content)
        with pytest.warns(UserWarning, match="Duplicate name"):
            z.writestr("graph_json.npy", members["graph_json.npy"])
    assert_refused(bad, "member 'graph_json.npy' appears twice")
    good = tmp_path / "deflated.npz"                 # savez_compressed's files load
    write_members(good, members, zipfile.ZIP_DEFLATED)
    X = np.ones((2, 3), F32)
    np.testing.assert_array_equal(load_as_written(good).run(x=X)[0],
                                  load_as_written(saved).run(x=X)[0])


@pytest.mark.parametrize("header", [
    b"\x00" * 118 + b"\n",                                          # was tokenize.TokenError
    b"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': __import__('os').getcwd()}\n",
    b"{'descr': '<f4', 'fortran_order': False, 'shape': [3], }" + b" " * 60 + b"\n",
    b"{'descr': '|O', 'fortran_order': False, 'shape': (3,), }" + b" " * 61 + b"\n",
])
def test_malformed_npy_headers_are_refused_without_evaluating_them(tmp_path, saved, header):
    members = read_members(saved)
    (name,) = const_members(saved)
    raw = members[name]
    end = 10 + struct.unpack("<H", raw[8:10])[0]
    members[name] = raw[:8] + struct.pack("<H", len(header)) + header + raw[end:]
    write_members(saved, members)
    msg = assert_refused(saved, f"member {name!r}")
    assert "malformed .npy header" in msg or "pickled data" in msg


def test_json_nested_100000_deep_is_a_graph_error(tmp_path, saved):
    doc, arrays = read_doc(saved)
    text = json.dumps(doc).replace('"nodes"', '"deep": ' + "[" * 100_000 + "]" * 100_000
                                   + ', "nodes"', 1)
    write_doc(saved, None, arrays, text=text)
    assert_refused(saved, "nests deeper than JSON can be parsed")
    write_doc(saved, None, arrays, text="[" * 5_000_000 + "]" * 5_000_000)
    assert_refused(saved, "5000000 JSON arrays and objects; at most 4194304")


def tampered(saved, tmp_path, edit):
    doc, arrays = read_doc(saved)
    edit(doc, arrays)
    bad = tmp_path / "tampered.npz"
    write_doc(bad, doc, arrays)
    return bad


def set_attr(node, name, value):
    node["attrs"] = [[k, value if k == name else v] for k, v in node["attrs"]]


def sum_node(doc):
    return next(n for n in doc["nodes"] if n["kind"] == "sum")


@pytest.mark.parametrize("edit,fragment", [
    # a list where the writer puts a tuple (was TypeError at hashing)
    (lambda d, a: set_attr(sum_node(d), "axis", [1]),
     "node 4 (sum): attribute 'axis': [1] is not an attribute value the writer produces"),
    # axes out of range (was OverflowError, or "integer won't fit into a C int" at run time)
    (lambda d, a: set_attr(sum_node(d), "axis", {"t": [2 ** 62]}),
     "axis 4611686018427387904 is out of bounds for an array of dimension 2"),
    (lambda d, a: set_attr(sum_node(d), "axis", {"t": [7]}), "axis 7 is out of bounds"),
    # a form construction never writes
    (lambda d, a: set_attr(sum_node(d), "axis", {"t": [-1]}),
     "attribute 'axis' is (-1,); construction makes it (1,)"),
    (lambda d, a: set_attr(sum_node(d), "keepdims", 0),
     "attribute 'keepdims' is 0; construction makes it False"),
    (lambda d, a: sum_node(d)["attrs"].append(["evil", 1]),
     "sum has the attributes axis, keepdims; unexpected evil"),
    (lambda d, a: sum_node(d)["attrs"].pop(), "sum has the attributes axis, keepdims; missing"),
    (lambda d, a: sum_node(d)["attrs"].append(["axis", None]), "attribute 'axis' twice"),
    # ints that do not fit, dtypes graphc does not support
    (lambda d, a: set_attr(sum_node(d), "axis", {"t": [2 ** 64]}),
     "the integer 18446744073709551616 does not fit in 64 bits"),
    (lambda d, a: set_attr(d["nodes"][0], "dtype", {"dtype": "<U3"}),
     "'<U3' is not a boolean, integer, float or complex dtype"),
    (lambda d, a: set_attr(d["nodes"][0], "dtype", {"dtype": "<f3"}), "node 0 (var)"),
    (lambda d, a: set_attr(d["nodes"][0], "shape", [2, 3]), "attribute 'shape': [2, 3]"),
    (lambda d, a: set_attr(d["nodes"][0], "name", "y"), "is named 'x' but declares the "
                                                        "variable 'y'"),
    # the optimiser's kinds are never written, so never read
    (lambda d, a: d["nodes"][1].update(kind="fused", attrs=[["program", {"t": []}]]),
     "operation kind 'fused' cannot be loaded: made by the optimiser only"),
    (lambda d, a: d["nodes"][1].update(kind="fma"), "'fma' cannot be loaded"),
    # structure
    (lambda d, a: d["nodes"].append({"kind": "exp", "attrs": [], "parents": [0],
                                      "name": None}),
     "node 5 (exp): is used by no output, update or input"),
    (lambda d, a: d.update(extra=1), "the description has unknown keys 'extra'"),
    (lambda d, a: d["nodes"][1].update(colour="red"), "node 1 has unknown keys 'colour'"),
    (lambda d, a: d.update(single_output="yes"), "single_output is 'yes' with 1 outputs"),
    (lambda d, a: d.update(updates=[[0, 4]]), "the update of 'x' has shape (2,)"),
])
def test_attributes_pass_the_checks_of_construction(tmp_path, saved, edit, fragment):
    assert_refused(tampered(saved, tmp_path, edit), fragment)


def test_an_update_given_twice_is_refused(tmp_path):
    w = N.var("w", (2,))
    path = tmp_path / "u.npz"
    compile_as_written([w], [N.sum(w)], {w: w * 2.0}).save(path)
    doc, arrays = read_doc(path)
    doc["updates"] = doc["updates"] * 2
    write_doc(path, doc, arrays)
    assert_refused(path, "variable 'w' is updated twice")


@pytest.mark.parametrize("build,kind,name,value,fragment", [
    # attributes NumPy's kernels fail on at run time, which load refuses up front
    (lambda x: N.random.normal(0.0, 1.0, (2,)) + x, "random_normal", "dtype",
     {"dtype": "<f2"}, "numpy.random draws float32 or float64 only, got dtype float16"),
    (lambda x: N.random.uniform(0.0, 1.0, (2,)) + x, "random_uniform", "dtype",
     {"dtype": "<f16"}, "draws float32 or float64 only"),
    (lambda x: N.pad(x, 1), "pad", "value", {"complex": [1, 2]},
     "pad: the value (1+2j) cannot fill an array of dtype float32"),
    (lambda x: N.pad(x, 1), "pad", "value", 2 ** 62, None),            # fine for float32
    (lambda x: N.repeat(x, 2, axis=0), "repeat", "repeats", -3, "negative dimension"),
    # counts per element: construction would build an index array of 2**40 first
    (lambda x: N.repeat(x, 2, axis=0), "repeat", "repeats", {"t": [2 ** 40]},
     "attribute 'repeats' is (1099511627776,); construction makes it one int"),
    (lambda x: N.one_hot(N.const(np.array([1, 0])), 3) + x[0], "one_hot", "depth", -2,
     "negative dimension"),
    (lambda x: N.one_hot(N.const(np.array([1, 0])), 3) + x[0], "one_hot", "depth", 1,
     "one_hot: constant label 1 is out of range for depth 1"),
    (lambda x: N.tile(x, (3,)), "tile", "reps", {"t": [2 ** 62]}, "larger than any array"),
    (lambda x: x[::2], "slice", "key", {"t": [{"t": ["s", 0, 2, 0]}]}, "zero step"),
    (lambda x: x[::2], "slice", "key", {"t": [{"t": ["s", 0, 9, 2]}]},
     "construction makes it (('s', 0, 2, 2),)"),
    (lambda x: x[N.const(np.array([0, 1]))] * 1.0, "take", "axis", 1,
     "axis 1 is out of bounds"),
    (lambda x: N.clip(x, 0.0, 1.0), "clip", "dtype", {"dtype": "<f8"},
     "attribute 'dtype' is dtype('float64'); construction makes it dtype('float32')"),
    (lambda x: N.einsum("i,i->", x, x), "einsum", "subscripts", "i,i->ii",
     "output subscripts of 'i,i->ii' must appear once"),
    (lambda x: N.random.bernoulli(0.5, (2,)) + x, "random_bernoulli", "p", 1.5,
     "p must be in [0, 1], got 1.5"),
    (lambda x: N.random.normal(0.0, 1.0, (2,)) + x, "random_normal", "loc", 0,
     "attribute 'loc' is 0; construction makes it 0.0"),
    (lambda x: N.full((2,), 1.5) + x, "fill", "value", 2 ** 70, "does not fit in 64 bits"),
    (lambda x: N.full((2,), 1.5) + x, "fill", "value", 2 ** 62,
     "attribute 'value' is 4611686018427387904; construction makes it 4.611686018427388e+18"),
    (lambda x: N.full((2,), 3, np.int32) + x, "fill", "value", 2 ** 62,    # wraps in int32
     "attribute 'value' is 4611686018427387904; construction makes it 0"),
])
def test_attributes_that_would_fail_at_run_time_are_refused_at_load(tmp_path, build, kind,
                                                                      name, value, fragment):
    x = N.var("x", (2,))
    path = tmp_path / "k.npz"
    compile_as_written([x], [build(x)]).save(path)
    doc, arrays = read_doc(path)
    node = next(n for n in doc["nodes"] if n["kind"] == kind)
    set_attr(node, name, value)
    write_doc(path, doc, arrays)
    if fragment is None:                             # the edit is a valid graph: it runs
        g = graphc.load(path)
        assert g.run(x=np.ones(2, F32))[0].shape == (4,)
    else:
        assert_refused(path, f"({kind})", fragment)


def test_a_graph_whose_shapes_ask_for_terabytes_is_refused(tmp_path, saved):
    doc, arrays = read_doc(saved)
    set_attr(doc["nodes"][0], "shape", {"t": [2 ** 20, 2 ** 20]})
    bad = tmp_path / "tb.npz"
    write_doc(bad, doc, arrays)
    msg = refused_cheaply(bad, "asks for too much memory", "node 0 (var), of shape "
                          "(1048576, 1048576) dtype float32", "max_bytes=4294967296")
    assert "pass a larger max_bytes" in msg
    from graphc.graph import Graph, save as save_graph

    x = N.var("x", (3,))
    save_graph(Graph([x], [x + N.full((2 ** 40, 3), 1.0)]), bad)    # never compiled
    refused_cheaply(bad, "node 1 (fill), of shape (1099511627776, 3)")


@pytest.mark.cpu_engine   # compares with NumPy's bits
def test_max_bytes_bounds_constants_and_values_and_can_be_raised(tmp_path):
    x = N.var("x", (1000,))
    path = tmp_path / "m.npz"
    compile_as_written([x], [N.exp(x) + N.const(np.arange(1000, dtype=F32))]).save(path)
    refused_cheaply(path, "its constants take at least 4000 bytes", "max_bytes=3999",
                    max_bytes=3999)
    refused_cheaply(path, "the graph's values take at least", "max_bytes=10000",
                    max_bytes=10_000)
    X = np.ones(1000, F32)
    for limit in (None, 4 * 4000 + 4 * 1024):          # the default, and just enough
        np.testing.assert_array_equal(graphc.load(path, max_bytes=limit).run(x=X)[0],
                                      np.exp(X) + np.arange(1000, dtype=F32))
    for bad in (-1, 1.5, True, "1"):
        with pytest.raises(TypeError, match="max_bytes must be a non-negative int"):
            graphc.load(path, max_bytes=bad)


def test_only_kinds_the_writer_produces_are_saved_and_loaded(tmp_path):
    from graphc.graph import save as save_graph
    from graphc.graph.rebuild import NOT_SAVED, REBUILD
    from graphc.type.kinds import KINDS

    # every kind is either rebuilt through construction on load, or never saved
    assert set(REBUILD) | {"const"} | set(NOT_SAVED) == set(KINDS)
    assert not set(REBUILD) & set(NOT_SAVED)
    x = N.var("x", (5,))
    g = graphc.compile([x], N.tanh(N.exp(x) * 2.0 + 1.0))
    assert "fused" in g.stats()["ops"]
    with pytest.raises(graphc.GraphError, match="'fused' is made by the optimiser only; save "
                                                "the graph as written"):
        save_graph(g.graph, tmp_path / "optimised.npz")
    g.save(tmp_path / "written.npz")                   # Executable.save: as written
    np.testing.assert_array_equal(graphc.load(tmp_path / "written.npz").run(x=np.ones(5, F32)),
                                  g.run(x=np.ones(5, F32)))


def test_a_checkpoint_kept_in_the_graph_file_is_skipped_unread(tmp_path, saved):
    from graphc.checkpoint import MEMBER_PREFIX
    from graphc.graph.serialize import CHECKPOINT_PREFIX

    assert CHECKPOINT_PREFIX == MEMBER_PREFIX
    members = read_members(saved)
    members[MEMBER_PREFIX + "json.npy"] = b"not even an array"
    write_members(saved, members)
    # the graph loader leaves those members to graphc.checkpoint ...
    from graphc.graph.serialize import load as load_graph
    assert len(load_graph(saved).outputs) == 1
    # ... which reads them when graphc.load restores the values, and refuses a damaged one
    with pytest.raises(graphc.GraphError, match="damaged graphc checkpoint"):
        graphc.load(saved)


def test_a_zip_directory_too_large_to_parse_cheaply_is_refused(tmp_path, saved, monkeypatch):
    from graphc.graph import npz_guard

    members = read_members(saved)
    for i in range(100):                 # entries zipfile would parse into objects
        members[f"checkpoint_{i}.npy"] = b""
    write_members(saved, members)
    X = np.ones((2, 3), F32)
    expected = load_as_written(saved).run(x=X)
    monkeypatch.setattr(npz_guard, "MAX_DIRECTORY_BYTES", 4096)   # small, for a small file
    refused_cheaply(saved, "its zip directory declares", "at most 4096")
    monkeypatch.setattr(npz_guard, "MAX_DIRECTORY_BYTES", 1 << 20)
    np.testing.assert_array_equal(load_as_written(saved).run(x=X), expected)
