"""Structural statistics of a graph (the engine adds memory-plan figures).

>>> import graphc.ndarray as N
>>> from graphc.graph.graph import Graph
>>> x = N.var("x", (3,))
>>> structure_stats(Graph([x], [N.exp(x) + x]))["nodes"]
3
"""
from __future__ import annotations

from collections import Counter

from ..symbol.traverse import edge_count


def structure_stats(graph) -> dict:
    """Counts of nodes, edges, inputs, outputs, updates and ops by kind, and the
    bytes held by input variables and by constants."""
    leaves = [n for n in graph.order if not n.parents]
    return {
        "nodes": len(graph.order),
        "edges": edge_count(graph.order),
        "inputs": len(graph.inputs),
        "outputs": len(graph.outputs),
        "updates": len(graph.updates),
        "input_bytes": sum(v.nbytes for v in graph.inputs),
        "const_bytes": sum(n.nbytes for n in leaves if n.op.kind == "const"),
        "ops": dict(sorted(Counter(n.op.kind for n in graph.order).items())),
    }
