"""Export a graph's nodes to networkx for analysis and drawing.

>>> from graphc.type import Op
>>> import numpy as np
>>> from graphc.symbol.node import Node
>>> x = Node.leaf(Op.make("var", name="x", shape=(3,), dtype=np.dtype("float32")))
>>> g = to_networkx([Node.apply(Op.make("exp"), [x])])
>>> g.number_of_nodes(), g.number_of_edges()
(2, 1)
"""
from __future__ import annotations

from typing import Sequence

import networkx as nx

from .traverse import topological_order


def to_networkx(outputs: Sequence) -> "nx.MultiDiGraph":
    """A ``MultiDiGraph`` keyed by node id, with op, shape, dtype, name and source
    line as node attributes; one edge per parent slot (``x * x`` gives two)."""
    graph = nx.MultiDiGraph()
    for node in topological_order(outputs):
        graph.add_node(node.id, kind=node.op.kind, op=node.op, shape=node.shape,
                       dtype=str(node.dtype), name=node.label(), where=node.where)
        for slot, p in enumerate(node.parents):
            graph.add_edge(p.id, node.id, slot=slot)
    return graph
