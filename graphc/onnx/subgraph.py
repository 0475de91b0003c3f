"""Control-flow bodies: the graphs an If, Loop or Scan node holds as attributes.

A body is converted like the main graph, node by node, each time its converter
calls :func:`run_body` with values for the body's inputs: inside ``N.scan`` or
``N.while_loop`` those are the loop's traced carries, so the body becomes the loop
node's one compiled graph. A body may read any value of the graphs around it by
name (ONNX's outer scope); :func:`outer_references` lists those names, so the
importer keeps them until the node that holds the body is converted.

>>> import onnx.helper as h
>>> body = h.make_graph([h.make_node("Add", ["a", "outside"], ["b"])], "body",
...     [h.make_tensor_value_info("a", 1, [])], [h.make_tensor_value_info("b", 1, [])])
>>> sorted(graph_references(body))
['outside']
"""
from __future__ import annotations

import collections
from typing import Mapping

import numpy as np

from .formats import rounded
from .tensors import to_array


def graph_references(graph) -> set:
    """Names ``graph`` (and the bodies nested in it) reads from enclosing graphs."""
    made = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    read = set()
    for node in graph.node:
        read.update(name for name in node.input if name and name not in made)
        read.update(outer_references(node) - made)
        made.update(name for name in node.output if name)
    read.update(v.name for v in graph.output if v.name not in made)
    return read


def outer_references(node) -> set:
    """Names the bodies of ``node`` read from the graph ``node`` sits in."""
    names = set()
    for attribute in node.attribute:
        if attribute.HasField("g"):
            names |= graph_references(attribute.g)
    return names


def run_body(ctx, graph, bound: Mapping[str, object]) -> list:
    """The output values of body ``graph`` converted with ``bound`` as the values of
    its inputs (by name), reading everything else from ``ctx``'s scope.

    Example: ``carry, y = run_body(ctx, ctx.attr("body"), {"sum_in": c, "next": x})``
    """
    from .convert import convert_node  # the converters import this module

    namespaces = ctx.namespaces
    # the body's nodes are of the default domain even where the node holding it is not
    opset = namespaces.opset if namespaces.opset is not None else ctx.opset
    missing = [v.name for v in graph.input if v.name not in bound]
    if missing:
        raise ctx.invalid(f"body {graph.name!r}: no value for its inputs {missing}")
    local = {t.name: to_array(t) for t in graph.initializer}
    # an eager loop's steps may hand NumPy scalars (a slice of a 1-D array): as 0-d
    # arrays they are known values, which the converters fold
    local.update({name: np.asarray(v) if isinstance(v, np.generic) else v
                  for name, v in bound.items()})
    scope = collections.ChainMap(local, namespaces.scope)
    outer, namespaces.scope = namespaces.scope, scope  # a body inside sees this one's values
    try:
        for index, node in enumerate(graph.node):
            for name, value in convert_node(node, index, opset, scope, namespaces,
                                            namespaces.domain_versions).items():
                local[name] = rounded(namespaces, name, value)
    finally:
        namespaces.scope = outer
    try:
        return [scope[v.name] for v in graph.output]
    except KeyError as exc:
        raise ctx.invalid(f"body {graph.name!r}: its output {exc.args[0]!r} is produced by "
                          "no node of it and no enclosing graph") from None
