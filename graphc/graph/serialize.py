"""Save and load graphs in a format that cannot execute code: one ``.npz`` file
holding a JSON description of the nodes and the constants as plain arrays.

A file is untrusted input. Loading checks everything before it allocates: the
zip directory and each ``.npy`` header (:mod:`graphc.graph.npz_guard`) against
what the description declares, the description's size and nesting, the bytes
the graph's values would take (``max_bytes``), and every node by rebuilding it
the way construction does (:mod:`graphc.graph.rebuild`). Constants' digests are
computed from their arrays, never read from the file. Every failure is a
:class:`GraphError` naming the member, node or attribute.

>>> import graphc.ndarray as N, tempfile, os
>>> from graphc.graph.graph import Graph
>>> x = N.var("x", (3,))
>>> path = os.path.join(tempfile.mkdtemp(), "g.npz")
>>> save(Graph([x], [N.exp(x) * 2.0]), path)
>>> len(load(path).order)
4
>>> load(path, max_bytes=1000)
Traceback (most recent call last):
...
graphc.type.errors.GraphError: load: ... values take at least 1036 bytes ... max_bytes=1000; ...
"""
from __future__ import annotations

import json
import os

import numpy as np

from ..symbol.constants import saved_attributes
from ..symbol.node import Node
from ..type.errors import GraphError
from .graph import Graph
from .npz_guard import Archive
from .rebuild import NOT_SAVED, REBUILD, checked_leaf, const_op, decode, rebuild, shown

FORMAT = "graphc-graph"
VERSION = 1
#: the bytes a loaded graph's constants, and separately all its values together
#: (constants, variables and every computed value, as if none shared memory, plus
#: :data:`NODE_BYTES` a node), may take unless the caller passes another ``max_bytes``
DEFAULT_MAX_BYTES = 4 << 30
#: what one node's Python objects take, about (so a description of a million tiny
#: nodes counts for what it costs)
NODE_BYTES = 1 << 10
#: the largest JSON description read, and the most JSON arrays and objects in it
#: (what bounds the memory Python's parser takes: a few hundred MiB at most)
MAX_DESCRIPTION_BYTES = 64 << 20
MAX_CONTAINERS = 1 << 22
#: members a checkpoint keeps in a graph's file (``graphc.checkpoint.MEMBER_PREFIX``,
#: ``save(path, values=True)``): the checkpoint reader checks them; graph loading
#: skips them unread
CHECKPOINT_PREFIX = "checkpoint_"
_DOC_KEYS = {"format", "version", "nodes", "inputs", "outputs", "updates", "single_output"}
_NODE_KEYS = {"kind", "attrs", "parents", "name"}
#: every kind a file may hold
_LOADABLE = frozenset(REBUILD) | {"const"}


def _encode(value):
    if isinstance(value, tuple):
        return {"t": [_encode(v) for v in value]}
    if isinstance(value, np.dtype):
        return {"dtype": value.str}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, complex):             # a complex fill or pad value
        return {"complex": [value.real, value.imag]}
    if isinstance(value, np.generic):
        return _encode(value.item())
    raise GraphError(f"save: attribute value {value!r} cannot be saved (a delay node's Python "
                     "function, for instance, is code and is never serialised)")


def save(graph: Graph, path, single_output: bool = False) -> None:
    """Write ``graph`` to ``path`` (``.npz``): structure as JSON, constants as arrays.
    ``single_output`` records that the graph was compiled from one output node
    (so the loaded graph's ``run`` returns an array, not a list). The graph is
    the one a user wrote: nodes only the optimiser makes, and delay nodes (code),
    are refused."""
    # inputs the outputs do not use (an update target, say) are saved too
    in_order = {id(n) for n in graph.order}
    saved = graph.order + [v for v in graph.inputs if id(v) not in in_order]
    index = {id(n): i for i, n in enumerate(saved)}
    nodes, arrays = [], {}
    for i, n in enumerate(saved):
        if n.op.kind == "delay":
            raise GraphError("save: graphs with delay nodes cannot be saved: a delay wraps "
                             "Python code, and the format never stores code")
        if n.op.kind in NOT_SAVED:
            raise GraphError(f"save: operation kind {n.op.kind!r} is {NOT_SAVED[n.op.kind]}; "
                             "save the graph as written (Executable.save does), not an "
                             "optimised one")
        attrs = n.op.attrs
        if n.op.kind == "const":   # in the form files have always had (no distinct flag)
            attrs = saved_attributes(n.op)
            arrays[f"const_{i}"] = n.value
        nodes.append({"kind": n.op.kind, "attrs": [[k, _encode(v)] for k, v in attrs],
                      "parents": [index[id(p)] for p in n.parents], "name": n.name})
    doc = {"format": FORMAT, "version": VERSION, "nodes": nodes,
           "inputs": [index[id(v)] for v in graph.inputs],
           "outputs": [index[id(o)] for o in graph.outputs],
           "updates": [[index[id(v)], index[id(u)]] for v, u in graph.updates],
           "single_output": bool(single_output)}
    text = json.dumps(doc).encode()
    with open(os.fspath(path), "wb") as f:
        np.savez(f, graph_json=np.frombuffer(text, dtype=np.uint8), **arrays)


def load(path, node_class=Node, max_bytes=None) -> Graph:
    """Read a graph written by :func:`save`; nodes are made with ``node_class``.

    ``max_bytes`` (default :data:`DEFAULT_MAX_BYTES`, 4 GiB) bounds the bytes of
    the stored constants and, separately, of all the graph's values together (as
    if none shared memory, plus :data:`NODE_BYTES` a node); raise it for a larger
    graph from a source you trust. A file that is not such
    a graph, or asks for more, raises :class:`GraphError` before anything large
    is allocated."""
    if max_bytes is None:
        max_bytes = DEFAULT_MAX_BYTES
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, (int, np.integer)) \
            or max_bytes < 0:
        raise TypeError(f"load: max_bytes must be a non-negative int, got {max_bytes!r}")
    with Archive(path) as archive:
        return _Loader(archive, int(max_bytes), node_class).graph()


class _Loader:
    """One load: the description, then the constants' headers, then their data,
    then the nodes, each step checked before the next allocates."""

    def __init__(self, archive: Archive, max_bytes: int, node_class):
        self.archive, self.max_bytes, self.node_class = archive, max_bytes, node_class
        self.path = archive.path

    def error(self, message: str) -> GraphError:
        return GraphError(f"load: {self.path} {message}")

    def graph(self) -> Graph:
        doc = self.description()
        specs = self.node_specs(doc["nodes"])
        arrays = self.constants(specs)
        built = self.nodes(specs, arrays)
        return self.assemble(doc, specs, built)

    # -- the description ----------------------------------------------------------------
    def description(self) -> dict:
        archive = self.archive
        if "graph_json" not in archive.names:
            listed = ", ".join(repr(n + ".npy") for n in sorted(archive.names)[:5])
            raise self.error(f"is not a graphc graph file: it has no member 'graph_json.npy' "
                             f"(members: {listed or 'none'})")
        if archive.size("graph_json") > MAX_DESCRIPTION_BYTES + 4096 + 12:
            raise archive.member_error("graph_json", f"is {archive.size('graph_json')} bytes "
                                       f"long; a description has at most "
                                       f"{MAX_DESCRIPTION_BYTES} bytes")
        header = archive.header("graph_json")
        if header.dtype != np.uint8 or len(header.shape) != 1:
            raise archive.member_error("graph_json", f"holds shape {header.shape} dtype "
                                       f"{header.dtype}; the description is 1-D uint8")
        raw = archive.read("graph_json", header).tobytes()
        containers = raw.count(b"[") + raw.count(b"{")
        if containers > MAX_CONTAINERS:
            raise archive.member_error("graph_json", f"holds {containers} JSON arrays and "
                                       f"objects; at most {MAX_CONTAINERS} are read")
        try:
            doc = json.loads(raw.decode("utf-8"))
        except RecursionError:
            raise self.error("is not a graphc graph file: its description nests deeper than "
                             "JSON can be parsed here") from None
        except ValueError as exc:         # JSONDecodeError, UnicodeDecodeError
            raise self.error(f"is not a graphc graph file: {exc}") from None
        if not isinstance(doc, dict):
            raise self.error(f"is not a graphc graph file: its description is a "
                             f"{type(doc).__name__}, not an object")
        if doc.get("format") != FORMAT or doc.get("version") != VERSION:
            raise self.error(f"has format {shown(doc.get('format'))} version "
                             f"{shown(doc.get('version'))}; expected {FORMAT!r} version "
                             f"{VERSION}")
        self.fields(doc, _DOC_KEYS, {"single_output"}, "the description")
        return doc

    def fields(self, obj, keys, optional, what) -> None:
        """``obj`` (a JSON object) has ``keys``, all but ``optional`` ones, and no other."""
        missing = sorted(keys - optional - set(obj))
        extra = sorted(set(obj) - keys)
        if missing or extra:
            found = " and ".join(part for part in (
                "lacks " + ", ".join(missing) if missing else "",
                "has unknown keys " + ", ".join(map(repr, extra)) if extra else "") if part)
            raise self.error(f"holds a malformed graph: {what} {found}")

    def node_specs(self, nodes) -> list:
        if not isinstance(nodes, list):
            raise self.error(f"holds a malformed graph: 'nodes' is a {type(nodes).__name__}, "
                             "not a list")
        for i, spec in enumerate(nodes):
            if not isinstance(spec, dict):
                raise self.error(f"holds a malformed graph: node {i} is a "
                                 f"{type(spec).__name__}, not an object")
            self.fields(spec, _NODE_KEYS, set(), f"node {i}")
            kind = spec["kind"]
            if not isinstance(kind, str):
                raise self.error(f"holds a malformed graph: node {i} has kind {shown(kind)}")
            if kind == "delay":
                raise self.error(f"has a delay node (node {i}); the format never stores code")
            if kind not in NOT_SAVED and kind not in _LOADABLE:
                raise self.error(f"holds a malformed graph: node {i} has unknown operation "
                                 f"kind {shown(kind)}")
        return nodes

    # -- constants: every header checked before any data is read ------------------------
    def constants(self, specs) -> dict:
        archive = self.archive
        wanted = {f"const_{i}": i for i, s in enumerate(specs) if s["kind"] == "const"}
        for name in sorted(archive.names):
            if name != "graph_json" and name not in wanted and \
                    not name.startswith(CHECKPOINT_PREFIX):
                raise archive.member_error(name, "is not referenced by the graph (only "
                                                 "const_<i> of a const node i is); it was not "
                                                 "read")
        headers, total = {}, 0
        for name, i in wanted.items():
            if name not in archive.names:
                raise self.node_error(i, "const", f"lacks a stored array: no member "
                                                  f"{name + '.npy'!r}")
            attrs = self.attributes(i, specs[i])
            shape, dtype = self.checked(i, "const", lambda: checked_leaf("const", attrs))
            header = archive.header(name, (shape, dtype), f"node {i} (const)")
            total += header.nbytes
            if total > self.max_bytes:
                raise self.error(f"asks for too much memory: its constants take at least "
                                 f"{total} bytes (up to member {name + '.npy'!r}), more than "
                                 f"max_bytes={self.max_bytes}; pass a larger max_bytes to load "
                                 "a file you trust")
            headers[name] = header
        return {wanted[name]: archive.read(name, header) for name, header in headers.items()}

    # -- nodes ------------------------------------------------------------------------------
    def nodes(self, specs, arrays) -> list:
        built, total = [], 0
        for i, spec in enumerate(specs):
            kind = spec["kind"]
            attrs = self.attributes(i, spec)
            parents = self.references(spec["parents"], built, f"node {i}'s parents")
            name = spec["name"]
            if name is not None and not isinstance(name, str):
                raise self.node_error(i, kind, f"has name {shown(name)}; a node name must "
                                               "be a string or null")
            node = self.node(i, kind, attrs, parents, name, arrays.get(i))
            total += node.nbytes + NODE_BYTES
            if total > self.max_bytes:
                raise self.error(f"asks for too much memory: the graph's values take at least "
                                 f"{total} bytes ({NODE_BYTES} a node besides its value; up "
                                 f"to node {i} ({kind}), of shape "
                                 f"{node.shape} dtype {node.dtype}), more than "
                                 f"max_bytes={self.max_bytes}; pass a larger max_bytes to load "
                                 "a file you trust")
            built.append(node)
        return built

    def node(self, i, kind, attrs, parents, name, value):
        if kind == "const":
            if parents:
                raise self.node_error(i, kind, "has parents; a const has none")
            op = const_op(value)
            return self.node_class.leaf(op, value=value, name=name)
        stand_in = self.checked(i, kind, lambda: rebuild(kind, attrs, tuple(parents)))
        if kind == "var":
            if name != attrs["name"]:
                raise self.node_error(i, kind, f"is named {shown(name)} but declares the "
                                               f"variable {shown(attrs['name'])}")
            return self.node_class.leaf(stand_in.op, name=name)
        return self.node_class(stand_in.op, tuple(parents), stand_in.shape, stand_in.dtype,
                               name=name)

    def attributes(self, i, spec) -> dict:
        pairs = spec["attrs"]
        if not isinstance(pairs, list):
            raise self.node_error(i, spec["kind"], f"has attrs {shown(pairs)}; expected a "
                                                   "list of [name, value] pairs")
        attrs = {}
        for pair in pairs:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                raise self.node_error(i, spec["kind"], f"has attribute entry {shown(pair)}; "
                                                       "expected [name, value]")
            key, value = pair
            if key in attrs:
                raise self.node_error(i, spec["kind"], f"has attribute {shown(key)} twice")
            attrs[key] = self.checked(i, spec["kind"], lambda: decode(value),
                                      f"attribute {shown(key)}: ")
        return attrs

    def checked(self, i, kind, make, prefix=""):
        try:
            return make()
        except GraphError as exc:
            raise self.node_error(i, kind, f"{prefix}{exc}") from None

    def node_error(self, i, kind, message) -> GraphError:
        return self.error(f"holds a malformed graph: node {i} ({kind}): {message}")

    def references(self, refs, built, what) -> list:
        if not isinstance(refs, list):
            raise self.error(f"holds a malformed graph: {what} are {shown(refs)}, not a list")
        for r in refs:
            if type(r) is not int or not 0 <= r < len(built):
                raise self.error(f"holds a malformed graph: {what}: node reference "
                                 f"{shown(r)} is not one of the {len(built)} nodes before it")
        return [built[r] for r in refs]

    # -- the graph ----------------------------------------------------------------------------
    def assemble(self, doc, specs, built) -> Graph:
        n = len(built)
        inputs = self.references(doc["inputs"], built, "the inputs")
        outputs = self.references(doc["outputs"], built, "the outputs")
        pairs = doc["updates"]
        if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2
                                                  for p in pairs):
            raise self.error(f"holds a malformed graph: the updates are {shown(pairs)}; "
                             "expected [variable, value] pairs")
        updates, targets = {}, set()
        for target, value in (self.references(p, built, "an update") for p in pairs):
            if id(target) in targets:
                raise self.error(f"holds a malformed graph: variable {shown(target.name)} is "
                                 "updated twice")
            targets.add(id(target))
            updates[target] = value
        single = doc.get("single_output", False)
        if not isinstance(single, bool) or single and len(outputs) != 1:
            raise self.error(f"holds a malformed graph: single_output is {shown(single)} "
                             f"with {len(outputs)} outputs")
        try:
            graph = Graph(inputs, outputs, updates)
        except GraphError as exc:
            raise self.error(f"holds an invalid graph: {exc}") from None
        used = {id(node) for node in graph.order} | {id(v) for v in graph.inputs}
        for i in range(n):
            if id(built[i]) not in used:
                raise self.node_error(i, specs[i]["kind"], "is used by no output, update or "
                                                            "input; the writer saves none such")
        graph.single_output = single
        return graph


__all__ = ["save", "load", "FORMAT", "VERSION", "DEFAULT_MAX_BYTES"]
