"""Seeded mutation fuzzing of saved graphs: byte flips, truncations, edits of the
JSON description, of ``.npy`` headers and of the zip directory, and swapped,
dropped, added or replaced members.

Every outcome must be one of:

- ``GraphError`` (nothing else: no MemoryError, RecursionError, TypeError...);
- a graph that loads and runs, giving the original graph's results on the same
  inputs; or, when the mutation made another valid graph (an axis 0 became 1, two
  constants swapped), giving what that graph gives unoptimised: the optimiser
  then cannot have been misled (merging constants by a stored digest, say).

Run with ``-s`` to see the count of each outcome.
"""
from __future__ import annotations

import collections
import copy
import io
import json
import struct
import zipfile
import zlib

import numpy as np
import pytest

import graphc
import graphc.ndarray as N
from graphc.demo import build as build_mlp
from graphc.type.kinds import KINDS

F32 = np.float32
SEED = 20240613
MUTATIONS = 1000
#: keeps each loaded graph small, so the fuzzing stays fast: bigger ones are refused
MAX_BYTES = 1 << 20


# -- the graphs --------------------------------------------------------------------------
def mlp_step():
    inputs, outputs, updates = build_mlp(4, 6, 5, 3)
    return inputs, outputs, updates


def many_ops():
    x = N.var("x", (3, 4))
    flags = N.var("flags", (3, 4), np.bool_)
    idx = N.const(np.array([0, 2, -1]))
    row = N.const(np.linspace(-1, 1, 4).astype(F32), name="row")
    outs = [N.pad(x, ((1, 0), (0, 2)), constant_values=1.5), N.clip(x, -0.5, None),
            x[idx], x[1:, ::-2], N.take(x, idx, axis=1), N.one_hot(N.const(np.array([1, 0])), 3),
            N.tile(x, (2, 1)), N.repeat(x, 2, axis=1), N.flip(x, 1), N.argmax(x, axis=1),
            N.einsum("ij,kj->ik", x, x), N.broadcast_to(x[:1], (2, 4)), N.mean(x, axis=0),
            N.where(flags, x, row), N.concatenate([x, x * 2.0], axis=0), N.full((2,), 3),
            N.transpose(N.reshape(x, (2, 6)), (1, 0)), x.astype(np.int32), N.sigmoid(x),
            N.max(x, axis=(0, 1), keepdims=True), N.any(flags, axis=1)]
    return [x, flags], outs, {}


def small_cnn():
    x = N.var("x", (2, 2, 6, 6))
    w = N.var("w", (3, 2, 3, 3))
    h = N.conv2d(x, w, stride=1, padding=1)
    p = N.max_pool2d(N.relu(h), 2)
    q = N.avg_pool2d(N.lrn(p, size=3), 2, padding=1, count_include_pad=False)
    loss = N.sum(q * q)
    (gw,) = N.grad(loss, [w])
    return [x, w], [loss, q], {w: w - 0.01 * gw}


def constants():
    x = N.var("x", (3,))
    zeros, ones = N.const(np.zeros(3, F32)), N.const(np.ones(3, F32))
    return [x], [x + zeros, x * ones, x - N.const(np.full(3, 2.0, F32))], {}


GRAPHS = {"mlp_step": mlp_step, "many_ops": many_ops, "small_cnn": small_cnn,
          "constants": constants}


def feeds_for(graph):
    """Inputs for every variable of ``graph``, chosen by name, shape and dtype only
    (so a loaded graph with the same inputs gets the same arrays)."""
    feeds = {}
    for v in graph.inputs:
        rng = np.random.default_rng(zlib.crc32(v.name.encode()))
        if v.dtype.kind == "b":
            feeds[v.name] = rng.random(v.shape) < 0.5
        elif v.dtype.kind in "iu":
            feeds[v.name] = np.zeros(v.shape, v.dtype)        # an index in every range
        elif v.dtype.kind == "c":
            feeds[v.name] = (rng.standard_normal(v.shape) + 1j).astype(v.dtype)
        else:
            feeds[v.name] = rng.standard_normal(v.shape).astype(v.dtype)
    return feeds


def results(executable):
    """Outputs of one run on :func:`feeds_for`, then every variable's value."""
    feeds = feeds_for(executable.source)
    out = executable.run(**feeds)
    out = [out] if isinstance(out, np.ndarray) else list(out)
    return out + [executable.value(name) for name in executable.input_names]


def equal(a, b, exact=True) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if exact and not np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"):
            return False
        if not exact and not np.allclose(x, y, rtol=1e-4, atol=1e-5, equal_nan=True):
            return False
    return True


# -- the file's parts --------------------------------------------------------------------
def members_of(data: bytes) -> dict:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {info.filename: z.read(info) for info in z.infolist()}


def archive(members: dict, compressed=False) -> bytes:
    out = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
    with zipfile.ZipFile(out, "w", method) as z:
        for name, content in members.items():
            z.writestr(name, content)
    return out.getvalue()


def npy(array) -> bytes:
    out = io.BytesIO()
    np.save(out, array, allow_pickle=False)
    return out.getvalue()


def doc_of(members) -> dict:
    raw = members["graph_json.npy"]
    return json.loads(np.load(io.BytesIO(raw), allow_pickle=False).tobytes().decode())


def with_doc(members, doc, text=None) -> dict:
    raw = (text if text is not None else json.dumps(doc)).encode()
    return {**members, "graph_json.npy": npy(np.frombuffer(raw, dtype=np.uint8))}


# -- mutations: each returns the mutated file's bytes ------------------------------------
INTERESTING = [0, 1, -1, 2, 3, 7, 2 ** 31, 2 ** 62, 2 ** 63, -2 ** 63 - 1, 10 ** 30, 0.5, -0.0,
               float("nan"), float("inf"), True, False, None, "x", "", [], {}, [1, 2],
               {"t": [1, 2]}, {"t": []}, {"t": [{"t": [0, 0]}]}, {"dtype": "<f16"},
               {"dtype": "|O"}, {"dtype": ">f4"}, {"dtype": "<c8"}, {"complex": [1, 2]},
               {"op": "exp", "attrs": []}, {"t": [-1]}, {"t": [2 ** 40]}]
DTYPES = ["<f4", "<f8", "<f2", "<f16", "|b1", "<i8", "<i4", "|u1", ">f4", "<c8", "|O", "<U3",
          "<M8[s]", "V8"]


def leaves(obj, path=()):
    """Every (path, value) in a JSON document, containers included."""
    yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from leaves(v, path + (i,))


def set_at(doc, path, value):
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def json_edit(rng, data):
    members = members_of(data)
    doc = doc_of(members)
    spots = [p for p, _ in leaves(doc) if p]
    path = spots[rng.integers(len(spots))]
    choice = rng.integers(8)
    if choice <= 2:                                       # a scalar or small structure
        set_at(doc, path, copy.deepcopy(INTERESTING[rng.integers(len(INTERESTING))]))
    elif choice == 3:                                     # a small integer nudge
        value = next(v for p, v in leaves(doc) if p == path)
        if type(value) is int:
            set_at(doc, path, value + int(rng.choice([-2, -1, 1, 2])))
        else:
            set_at(doc, path, int(rng.integers(-3, 8)))
    elif choice == 4:                                     # a dtype
        set_at(doc, path, {"dtype": DTYPES[rng.integers(len(DTYPES))]})
    elif choice == 5:                                     # a node of another kind
        node = doc["nodes"][rng.integers(len(doc["nodes"]))]
        node["kind"] = sorted(KINDS)[rng.integers(len(KINDS))]
    elif choice == 6:                                     # a key or element removed
        parent = path[:-1]
        container = doc
        for key in parent:
            container = container[key]
        del container[path[-1]]
    else:                                                 # deep nesting
        depth = int(rng.choice([10, 1000, 100_000]))
        return archive(with_doc(members, None, text=json.dumps(doc).replace(
            '"nodes"', '"deep": ' + "[" * depth + "]" * depth + ', "nodes"', 1)))
    return archive(with_doc(members, doc))


def attribute_edit(rng, data):
    """One number inside one node's attribute nudged or replaced: mostly another valid
    graph (an axis, a stride, a shape), or one construction refuses."""
    members = members_of(data)
    doc = doc_of(members)
    numbers = [p for p, v in leaves(doc) if len(p) > 4 and p[0] == "nodes" and p[2] == "attrs"
               and type(v) in (int, float)]
    if not numbers:
        return data
    path = numbers[rng.integers(len(numbers))]
    value = next(v for p, v in leaves(doc) if p == path)
    if rng.random() < 0.7:
        set_at(doc, path, type(value)(value + rng.choice([-2, -1, 1, 2])))
    else:
        set_at(doc, path, copy.deepcopy(INTERESTING[rng.integers(len(INTERESTING))]))
    return archive(with_doc(members, doc))


def byte_flips(rng, data):
    data = bytearray(data)
    for _ in range(rng.integers(1, 5)):
        data[rng.integers(len(data))] ^= 1 << int(rng.integers(8))
    return bytes(data)


def truncation(rng, data):
    if rng.random() < 0.5:
        return data[:rng.integers(len(data))]
    return data + rng.bytes(int(rng.integers(1, 64)))


def member_edit(rng, data):
    members = members_of(data)
    names = sorted(members)
    choice = rng.integers(6)
    if choice == 0 and len(names) > 1:                     # two members swapped
        a, b = rng.choice(len(names), 2, replace=False)
        members[names[a]], members[names[b]] = members[names[b]], members[names[a]]
    elif choice == 1:                                      # one dropped
        del members[names[rng.integers(len(names))]]
    elif choice == 2:                                      # an extra one
        extra = ["const_999.npy", "weights.npy", "graph_json.npy.npy", "const_01.npy"]
        members[extra[rng.integers(len(extra))]] = npy(np.zeros(3, F32))
    elif choice == 3:                                      # a constant's array replaced
        consts = [n for n in names if n.startswith("const_")]
        if consts:
            name = consts[rng.integers(len(consts))]
            old = np.load(io.BytesIO(members[name]), allow_pickle=False)
            options = [np.ones_like(old), old.astype(np.float64), np.zeros(old.size + 1, old.dtype),
                       np.asfortranarray(np.ones(old.shape, old.dtype)),
                       old.astype(old.dtype.newbyteorder())]
            members[name] = npy(options[rng.integers(len(options))])
    elif choice == 4:                                      # an .npy header edited
        name = names[rng.integers(len(names))]
        raw = bytearray(members[name])
        end = 10 + struct.unpack("<H", raw[8:10])[0]
        edits = [lambda h: h.replace(b"'shape': (", b"'shape': (17179869184, "),
                 lambda h: h.replace(b"False", b"True"), lambda h: bytes(len(h)),
                 lambda h: h.replace(b"<f4", b"|O"), lambda h: h.replace(b"'descr'", b"'dtype'"),
                 lambda h: h.replace(b"}", b"'x': __import__('os')}")]
        header = edits[rng.integers(len(edits))](bytes(raw[10:end]))
        members[name] = bytes(raw[:8]) + struct.pack("<H", len(header)) + header + bytes(raw[end:])
    return archive(members, compressed=bool(choice == 5 or rng.random() < 0.2))


def directory_edit(rng, data):
    """A zip header field (sizes, method, version, name length) set to another value."""
    data = bytearray(data)
    spots = [(i, sig) for sig in (b"PK\x03\x04", b"PK\x01\x02")
             for i in _occurrences(bytes(data), sig)]
    at, sig = spots[rng.integers(len(spots))]
    # (offset, width) of: version needed, method, compressed size, uncompressed size, name length
    fields = [(4, 2), (8, 2), (18, 4), (22, 4), (26, 2)] if sig == b"PK\x03\x04" else \
        [(6, 2), (10, 2), (20, 4), (24, 4), (28, 2)]
    offset, width = fields[rng.integers(len(fields))]
    value = int(rng.choice([0, 1, 8, 12, 99, 2 ** (8 * width) - 1, 2 ** (8 * width - 1)]))
    data[at + offset:at + offset + width] = value.to_bytes(width, "little")
    return bytes(data)


def _occurrences(data: bytes, pattern: bytes):
    at = data.find(pattern)
    while at >= 0:
        yield at
        at = data.find(pattern, at + 1)


MUTATORS = [json_edit, json_edit, attribute_edit, attribute_edit, byte_flips, truncation,
            member_edit, member_edit, directory_edit]


# -- the oracle ----------------------------------------------------------------------------
def outcome(path, reference) -> str:
    try:
        loaded = graphc.load(path, max_bytes=MAX_BYTES)
    except graphc.GraphError as exc:
        return "refused: " + refusal_kind(str(exc))
    got = results(loaded)
    if equal(got, reference):
        return "loaded: the original graph's results"
    plain = graphc.load(path, max_bytes=MAX_BYTES, optimise=False)
    assert equal(got, results(plain), exact=False), \
        f"{path}: the optimised load differs from the unoptimised one"
    return "loaded: another valid graph, as it computes unoptimised"


def refusal_kind(message: str) -> str:
    for fragment in ("too much memory", "member", "not a graphc graph file", "node reference",
                     "invalid graph", "attribute", "cannot be loaded", "unknown operation kind",
                     "format", "malformed graph"):
        if fragment in message:
            return fragment
    return "other"


# a mutated graph may overflow or divide by zero: that is its result, not a failure
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_mutated_files_load_correctly_or_raise_graph_error(tmp_path):
    rng = np.random.default_rng(SEED)
    originals = {}
    for name, build in GRAPHS.items():
        inputs, outputs, updates = build()
        g = graphc.compile(inputs, outputs, updates)
        path = tmp_path / f"{name}.npz"
        g.save(path)
        originals[name] = (path.read_bytes(), results(graphc.load(path)))
    counts = collections.Counter()
    for i in range(MUTATIONS):
        name = sorted(originals)[i % len(originals)]
        data, reference = originals[name]
        mutate = MUTATORS[rng.integers(len(MUTATORS))]
        bad = tmp_path / f"m{i}.npz"
        bad.write_bytes(mutate(rng, data))
        try:
            counts[outcome(bad, reference)] += 1
        except BaseException as exc:          # MemoryError, RecursionError, a wrong result...
            raise AssertionError(f"mutation {i} ({mutate.__name__} of {name}) gave "
                                 f"{type(exc).__name__}: {exc}") from exc
        bad.unlink()
    print("\noutcomes of", MUTATIONS, "mutated files:")
    for kind, count in counts.most_common():
        print(f"  {count:4d}  {kind}")
    assert sum(counts.values()) == MUTATIONS
    # the fuzzing reaches both sides: files refused and files that load
    assert any(k.startswith("refused") for k in counts)
    assert any(k.startswith("loaded") for k in counts)
