"""The reference evaluator: every value in a fresh array of its own, no memory
plan, no sharing. Planned runs are tested against it, and it against NumPy.

>>> import graphc.ndarray as N, numpy as np
>>> from graphc.graph import Graph
>>> x = N.var("x", (2,), np.float64)
>>> g = Graph([x], [N.exp(x) + x])
>>> evaluate_naive(g, {"x": np.zeros(2)})
[array([1., 1.])]
"""
from __future__ import annotations

import numpy as np

from .cpu import RunContext
from .cpu_kernels import build_kernel


def evaluate_naive(graph, feeds: dict, seed=None) -> list[np.ndarray]:
    """Evaluate ``graph.outputs`` then the update values (in that order), given
    ``feeds`` for every input by name; ``seed`` seeds random ops like a
    compiled graph's generator, so draws match a planned run with that seed."""
    ctx = RunContext(seed)
    values = {}
    for n in graph.order:
        kind = n.op.kind
        if kind == "var":
            values[id(n)] = np.array(feeds[n.name], dtype=n.dtype, copy=True)
        elif kind == "const":
            values[id(n)] = n.value
        else:
            out = np.empty(n.shape, n.dtype)
            build_kernel(n.op, [values[id(p)] for p in n.parents], out, ctx)()
            values[id(n)] = out
    return [values[id(o)] for o in graph.outputs] + [values[id(u)] for _, u in graph.updates]
