"""Constant folding: a node whose parents are all constants becomes a constant,
computed once by the engine's own kernels (so folded and unfolded graphs give
the same bits). A size cap keeps folding from bloating the graph: the result
may be at most ``FOLD_LIMIT`` bytes or the size of the constants it reads.

>>> import numpy as np, graphc.ndarray as N, graphc.eager as E
>>> from graphc.optimiser.rewriter import rewrite
>>> c = N.const(np.arange(3.0)) * 2.0
>>> folded = rewrite([c], make_folder(E.evaluate))[0][0]
>>> folded.op.kind, folded.value
('const', array([0., 2., 4.]))
"""
from __future__ import annotations

from ..type.kinds import KINDS
from .build import make_const
from .rewriter import Pass

#: results up to this many bytes may always be folded
FOLD_LIMIT = 1 << 16


def make_folder(evaluate, limit: int = FOLD_LIMIT):
    """A node rewriter folding constants with ``evaluate(op, arrays) -> array``."""
    def fold(node, ctx):
        kind = KINDS[node.op.kind]
        if kind.stateful or kind.family == "leaf":
            return None
        if not all(p.op.kind == "const" for p in node.parents):
            return None
        if node.nbytes > max(limit, sum(p.nbytes for p in node.parents)):
            return None
        return make_const(node, evaluate(node.op, [p.value for p in node.parents]))
    return fold


def folding_pass(evaluate, limit: int = FOLD_LIMIT) -> Pass:
    """The ``fold`` pass around ``evaluate``: tried at any kind, it makes constants.

    >>> import graphc.eager as E
    >>> sorted(folding_pass(E.evaluate).produces)
    ['const']
    """
    return Pass("fold", function=make_folder(evaluate, limit), produces=frozenset({"const"}),
                doc=f"constant folding of arrays and scalars (results up to {limit} bytes "
                    "or the size of their inputs)")
