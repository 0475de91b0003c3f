"""Constant folding: a node whose parents are all constants becomes a constant,
computed once by the engine's own kernels (so folded and unfolded graphs give
the same bits). A size cap keeps folding from bloating the graph: the result
may be at most ``FOLD_LIMIT`` bytes or the size of the constants it reads (a
``relayout`` kind's, which replaces the constant it reads, any size).

>>> import numpy as np, graphc.ndarray as N, graphc.eager as E
>>> from graphc.optimiser.rewriter import rewrite
>>> c = N.const(np.arange(3.0)) * 2.0
>>> folded = rewrite([c], make_folder(E.evaluate))[0][0]
>>> folded.op.kind, folded.value
('const', array([0., 2., 4.]))
"""
from __future__ import annotations

import weakref

from ..type.kinds import KINDS
from .build import make_const
from .rewriter import Pass

#: results up to this many bytes may always be folded
FOLD_LIMIT = 1 << 16
#: ``id`` of a folded ``relayout`` kind's constant -> weak references to it and to the
#: node it laid out, and the ops from that node to it: what ``graphc.compile`` reads
#: (:func:`relaid`) to let the source graph hold that node's array as a function of the
#: result (:class:`~graphc.symbol.node.Deferred`); an entry goes with its constant
_RELAID: dict = {}


def _record(folded, original, ops) -> None:
    key = id(folded)
    _RELAID[key] = (weakref.ref(folded, lambda _: _RELAID.pop(key, None)),
                    weakref.ref(original), tuple(ops))


def relaid(node):
    """``(the node it laid out, the ops from it)`` where ``node`` is a folded
    ``relayout`` kind's constant whose source node is alive, else ``None``. A relayout of
    a relayout (a kernel packed from a folded transpose) names the first node, and both
    ops in order.

    Example: ``relaid(const_node)``"""
    entry = _RELAID.get(id(node))
    if entry is None or entry[0]() is not node or entry[1]() is None:
        return None
    return entry[1](), entry[2]


def make_folder(evaluate, limit: int = FOLD_LIMIT):
    """A node rewriter folding constants with ``evaluate(op, arrays) -> array``."""
    def fold(node, ctx):
        kind = KINDS[node.op.kind]
        if kind.stateful or kind.family == "leaf":
            return None
        if not all(p.op.kind == "const" for p in node.parents):
            return None
        if kind.relayout is None and node.nbytes > max(limit, sum(p.nbytes for p in node.parents)):
            return None
        folded = make_const(node, evaluate(node.op, [p.value for p in node.parents]))
        if kind.relayout is not None:
            earlier = relaid(node.parents[0])
            original, ops = earlier if earlier is not None else (node.parents[0], ())
            _record(folded, original, ops + (node.op,))
        return folded
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
