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
import zipfile

import numpy as np

from ..shape.axes import as_shape
from ..shape.dtypes import as_dtype
from ..shape.rules import infer
from ..symbol.node import Node
from ..type.errors import GraphcError, GraphError
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
    if isinstance(value, complex):             # a complex fill or pad value
        return {"complex": [value.real, value.imag]}
    if isinstance(value, np.generic):
        return _encode(value.item())
    if isinstance(value, Op):                  # the instructions of a fused node
        if value.kind not in KINDS:
            raise GraphError(f"save: unknown operation kind {value.kind!r}")
        return {"op": value.kind, "attrs": [[k, _encode(v)] for k, v in value.attrs]}
    raise GraphError(f"save: attribute value {value!r} cannot be saved (a delay node's Python "
                     "function, for instance, is code and is never serialised)")


def _decode(value):
    if isinstance(value, dict):
        if "t" in value:
            return tuple(_decode(v) for v in value["t"])
        if "dtype" in value:
            return np.dtype(value["dtype"])
        if "complex" in value:
            real, imag = value["complex"]
            return complex(real, imag)
        if "op" in value:
            if value["op"] not in KINDS or value["op"] == "delay":
                raise GraphError(f"load: operation kind {value['op']!r} cannot be loaded")
            return Op(value["op"], tuple((k, _decode(v)) for k, v in value["attrs"]))
    return value


def save(graph: Graph, path, single_output: bool = False) -> None:
    """Write ``graph`` to ``path`` (``.npz``): structure as JSON, constants as arrays.
    ``single_output`` records that the graph was compiled from one output node
    (so the loaded graph's ``run`` returns an array, not a list)."""
    # inputs the outputs do not use (an update target, say) are saved too
    in_order = {id(n) for n in graph.order}
    saved = graph.order + [v for v in graph.inputs if id(v) not in in_order]
    index = {id(n): i for i, n in enumerate(saved)}
    nodes, arrays = [], {}
    for i, n in enumerate(saved):
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
           "updates": [[index[id(v)], index[id(u)]] for v, u in graph.updates],
           "single_output": bool(single_output)}
    text = json.dumps(doc).encode()
    with open(os.fspath(path), "wb") as f:
        np.savez(f, graph_json=np.frombuffer(text, dtype=np.uint8), **arrays)


def load(path, node_class=Node) -> Graph:
    """Read a graph written by :func:`save`; nodes are made with ``node_class``.
    Every op is re-checked by its shape rule, so a tampered file fails cleanly
    with :class:`GraphError`."""
    try:
        data = np.load(os.fspath(path), allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise GraphError(f"load: {path} is not a graphc graph file: {exc}") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise GraphError(f"load: {path} is not a graphc graph file: it holds a single "
                         "array, not an .npz archive")
    try:
        with data:
            doc = json.loads(bytes(data["graph_json"]).decode())
            arrays = {k: data[k] for k in data.files if k != "graph_json"}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise GraphError(f"load: {path} is not a graphc graph file: {exc}") from None
    if not isinstance(doc, dict):
        raise GraphError(f"load: {path} is not a graphc graph file: its description is a "
                         f"{type(doc).__name__}, not an object")
    if doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise GraphError(f"load: {path} has format {doc.get('format')!r} version "
                         f"{doc.get('version')!r}; expected {FORMAT!r} version {VERSION}")
    built: list[Node] = []
    try:
        for i, spec in enumerate(doc["nodes"]):
            built.append(_load_node(i, spec, built, arrays, node_class, path))
        parts = ([built[_index(i, built)] for i in doc["inputs"]],
                 [built[_index(i, built)] for i in doc["outputs"]],
                 {built[_index(v, built)]: built[_index(u, built)] for v, u in doc["updates"]})
        try:
            graph = Graph(*parts)
        except GraphError as exc:
            raise GraphError(f"load: {path} holds an invalid graph: {exc}") from None
        graph.single_output = doc.get("single_output", False) is True and len(graph.outputs) == 1
        return graph
    except GraphError:
        raise
    except (GraphcError, KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise GraphError(f"load: {path} holds a malformed graph (node {len(built)}): "
                         f"{type(exc).__name__}: {exc}") from None


def _index(i, built) -> int:
    """A reference to an already built node: a non-negative int in range."""
    if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(built):
        raise IndexError(f"node reference {i!r} is not one of the {len(built)} nodes before it")
    return i


def _load_node(i, spec, built, arrays, node_class, path):
    kind_name = spec["kind"]
    if kind_name not in KINDS:
        raise GraphError(f"load: unknown operation kind {kind_name!r} in {path}")
    if kind_name == "delay":
        raise GraphError(f"load: {path} has a delay node; the format never stores code")
    op = Op(kind_name, tuple((k, _decode(v)) for k, v in spec["attrs"]))
    parents = tuple(built[_index(p, built)] for p in spec["parents"])
    arity = KINDS[kind_name].arity
    if arity is not None and len(parents) != arity:
        raise ValueError(f"{kind_name} takes {arity} parent(s), got {len(parents)}")
    name = spec["name"]
    if name is not None and not isinstance(name, str):
        raise TypeError(f"a node name must be a string, got {name!r}")
    if kind_name in ("var", "const"):
        if parents:
            raise ValueError(f"a {kind_name} has no parents")
        shape, dtype = as_shape("load", op["shape"]), as_dtype("load", op["dtype"])
        value = arrays.get(f"const_{i}")
        if kind_name == "var" and value is not None or kind_name == "const" and value is None:
            raise ValueError(f"{kind_name} node {i} {'has' if value is not None else 'lacks'} "
                             "a stored array")
        if value is not None:
            if value.shape != shape or value.dtype != dtype:
                raise ValueError(f"constant {i} is declared with shape {shape} dtype {dtype} "
                                 f"but its array has shape {value.shape} dtype {value.dtype}")
            value.flags.writeable = False
        return node_class.leaf(op, value=value, name=name)
    shape, dtype = infer(op, parents)
    return node_class(op, parents, shape, dtype, name=name)
