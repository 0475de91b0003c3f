"""Traversal: the evaluation order (post-order DFS from the outputs, parents
left to right) and consumer counts within one graph.

The order is computed iteratively, so a chain of a million nodes does not
hit Python's recursion limit.

>>> from graphc.type import Op
>>> import numpy as np
>>> from graphc.symbol.node import Node
>>> x = Node.leaf(Op.make("var", name="x", shape=(), dtype=np.dtype("float64")))
>>> y = Node.apply(Op.make("exp"), [x]); z = Node.apply(Op.make("add"), [y, x])
>>> [n.label() for n in topological_order([z])][:2]
['x', 'exp#...']
"""
from __future__ import annotations

from typing import Iterable, Sequence


def topological_order(outputs: Sequence) -> list:
    """Every node reachable from ``outputs``, parents before children, in the order
    of a post-order depth-first search started at each output in turn."""
    order, seen = [], set()
    for root in outputs:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(root.parents))]
        while stack:
            node, parents = stack[-1]
            for p in parents:
                if id(p) not in seen:
                    seen.add(id(p))
                    stack.append((p, iter(p.parents)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


def consumer_counts(order: Iterable) -> dict[int, int]:
    """``id(node) -> number of edges leaving it`` within ``order`` (an edge per
    parent slot, so ``x * x`` counts twice)."""
    counts = {id(n): 0 for n in order}
    for n in order:
        for p in n.parents:
            counts[id(p)] += 1
    return counts


def edge_count(order: Iterable) -> int:
    """Number of parent slots (edges) among ``order``."""
    return sum(len(n.parents) for n in order)
