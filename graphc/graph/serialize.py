"""Save and load graphs in a format that cannot execute code: one ``.npz`` file
holding a JSON description of the nodes and the constants as plain arrays
(loaded with ``allow_pickle=False``).

>>> import graphc.ndarray as N, tempfile, os
>>> from graphc.graph.graph import Graph
>>> x = N.var("x", (3,))
>>> path = os.path.join(tempfile.mkdtemp(), "g.npz")
>>> save(Graph([x], [N.exp(x) * 2.0]), path)
>>> len(load(path).order)
4
"""
from __future__ import annotations

import json
import os

import numpy as np

from ..shape.rules import infer
from ..symbol.node import Node
from ..type.errors import GraphError
from ..type.kinds import KINDS
from ..type.op import Op
from .graph import Graph

FORMAT = "graphc-graph"
VERSION = 1


def _encode(value):
    if isinstance(value, tuple):
        return {"t": [_encode(v) for v in value]}
    if isinstance(value, np.dtype):
        return {"dtype": value.str}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.generic):
        return value.item()
    raise GraphError(f"save: attribute value {value!r} cannot be saved (a delay node's Python "
                     "function, for instance, is code and is never serialised)")


def _decode(value):
    if isinstance(value, dict):
        if "t" in value:
            return tuple(_decode(v) for v in value["t"])
        if "dtype" in value:
            return np.dtype(value["dtype"])
    return value


def save(graph: Graph, path) -> None:
    """Write ``graph`` to ``path`` (``.npz``): structure as JSON, constants as arrays."""
    index = {id(n): i for i, n in enumerate(graph.order)}
    nodes, arrays = [], {}
    for i, n in enumerate(graph.order):
        if n.op.kind == "delay":
            raise GraphError("save: graphs with delay nodes cannot be saved: a delay wraps "
                             "Python code, and the format never stores code")
        nodes.append({"kind": n.op.kind, "attrs": [[k, _encode(v)] for k, v in n.op.attrs],
                      "parents": [index[id(p)] for p in n.parents], "name": n.name})
        if n.op.kind == "const":
            arrays[f"const_{i}"] = n.value
    doc = {"format": FORMAT, "version": VERSION, "nodes": nodes,
           "inputs": [index[id(v)] for v in graph.inputs],
           "outputs": [index[id(o)] for o in graph.outputs],
           "updates": [[index[id(v)], index[id(u)]] for v, u in graph.updates]}
    text = json.dumps(doc).encode()
    with open(os.fspath(path), "wb") as f:
        np.savez(f, graph_json=np.frombuffer(text, dtype=np.uint8), **arrays)


def load(path, node_class=Node) -> Graph:
    """Read a graph written by :func:`save`; nodes are made with ``node_class``.
    Every op is re-checked by its shape rule, so a tampered file fails cleanly."""
    try:
        with np.load(os.fspath(path), allow_pickle=False) as data:
            doc = json.loads(bytes(data["graph_json"]).decode())
            arrays = {k: data[k] for k in data.files if k != "graph_json"}
    except (OSError, ValueError, KeyError) as exc:
        raise GraphError(f"load: {path} is not a graphc graph file: {exc}") from None
    if doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise GraphError(f"load: {path} has format {doc.get('format')!r} version "
                         f"{doc.get('version')!r}; expected {FORMAT!r} version {VERSION}")
    built: list[Node] = []
    for i, spec in enumerate(doc["nodes"]):
        if spec["kind"] not in KINDS:
            raise GraphError(f"load: unknown operation kind {spec['kind']!r} in {path}")
        op = Op(spec["kind"], tuple((k, _decode(v)) for k, v in spec["attrs"]))
        parents = tuple(built[p] for p in spec["parents"])
        if not parents and op.kind in ("var", "const"):
            value = arrays.get(f"const_{i}")
            if value is not None:
                value.flags.writeable = False
            built.append(node_class.leaf(op, value=value, name=spec["name"]))
        else:
            shape, dtype = infer(op, parents)
            built.append(node_class(op, parents, shape, dtype, name=spec["name"]))
    return Graph([built[i] for i in doc["inputs"]], [built[i] for i in doc["outputs"]],
                 {built[v]: built[u] for v, u in doc["updates"]})
