"""Concatenations that grow one from another, written once into one buffer (the kernels
``"generated"`` pipeline).

A DenseNet block concatenates every feature map made so far before each layer:
``concatenate([x0, f1])``, ``concatenate([x0, f1, f2])``, ... each a copy of all the
earlier ones, O(n^2) bytes over a block (DenseNet-121: 58 concatenations, 4.4 ms of a
31 ms run, channels last). Where concatenations along one axis each take the parts of
the one before plus more, they become one buffer of the largest's shape, filled part by
part: each part is written once into its slot (``scatter``, planned in place over the
buffer as it was), and each concatenation is the buffer's prefix holding its parts (a
slice, which its readers read strided as a view). The values are the concatenations'
exactly: the cells a prefix holds are its parts' copies, and no reader sees the rest.

This needs every concatenation of a chain at once, which no single node holds: it is a
whole-graph pass (:attr:`~.rewriter.Pass.graph_function`).

>>> import graphc.ndarray as N
>>> x = N.var("x", (1, 32, 32, 16))
>>> f1 = N.exp(x); a = N.concatenate([x, f1], axis=3)
>>> f2 = N.sin(a[..., :16]); b = N.concatenate([x, f1, f2], axis=3)
>>> (y,), changes = grown_concatenations([N.sum(a) + N.sum(b)])
>>> changes, sorted({n.op.kind for n in topological_order([y])} & {"concatenate", "scatter"})
(2, ['scatter'])
"""
from __future__ import annotations

from ..symbol.traverse import topological_order
from ..type.op import Op
from .build import make
from .rewriter import Pass, remake

#: the fewest concatenations a chain must have: two copy the first parts twice
MIN_CHAIN = 2
#: the fewest bytes of the largest concatenation: below, its copies cost little
MIN_BYTES = 64 << 10


def _chains(order) -> list:
    """The chains of concatenations (each a list, shortest first) along one axis, of
    one dtype, each taking the parts of the one before it plus more and coming after
    it in ``order`` (the buffer grows as the graph runs)."""
    position = {id(n): i for i, n in enumerate(order)}
    groups: dict = {}
    for node in order:
        if node.op.kind == "concatenate" and len(node.parents) >= 1:
            key = (id(node.parents[0]), node.op["axis"], node.dtype)
            groups.setdefault(key, []).append(node)
    chains = []
    for members in groups.values():
        members.sort(key=lambda n: len(n.parents))
        chain = [members[0]]
        for node in members[1:]:
            last = chain[-1]
            if (len(node.parents) > len(last.parents) and position[id(node)] > position[id(last)]
                    and all(a is b for a, b in zip(node.parents, last.parents))):
                chain.append(node)
        if len(chain) >= MIN_CHAIN and chain[-1].nbytes >= MIN_BYTES:
            chains.append(chain)
    return chains


def _slot(shape, axis: int, start: int, stop: int) -> tuple:
    """The basic key of ``[start, stop)`` along ``axis`` of an array of ``shape``."""
    return tuple(("s", start, stop, 1) if i == axis else ("s", 0, n, 1)
                 for i, n in enumerate(shape))


def grown_concatenations(roots):
    """``(new roots, concatenations replaced)``: each chain of growing concatenations
    (see the module) as one buffer filled part by part, each member its prefix.

    Example: ``roots, changes = grown_concatenations(roots)``"""
    order = topological_order(roots)
    plan = {}                # id(concatenation) -> (its chain, its place in the chain)
    for chain in _chains(order):
        for place, node in enumerate(chain):
            plan[id(node)] = (chain, place)
    if not plan:
        return list(roots), 0
    memo: dict = {}
    buffers: dict = {}       # id(chain's last node) -> (the buffer so far, parts in it)
    for node in order:
        parents = [memo[id(p)] for p in node.parents]
        if id(node) not in plan:
            changed = any(a is not b for a, b in zip(parents, node.parents))
            memo[id(node)] = remake(node, parents) if changed else node
            continue
        chain, place = plan[id(node)]
        last = chain[-1]
        axis = node.op["axis"] % len(node.shape)
        if place == 0:
            fill = Op.make("fill", shape=last.shape, dtype=last.dtype, value=0)
            buffer, held = make(node, fill, []), 0
        else:
            buffer, held = buffers[id(last)]
        offset = sum(p.shape[axis] for p in node.parents[:held])
        for part in parents[held:]:
            width = part.shape[axis]
            key = _slot(last.shape, axis, offset, offset + width)
            buffer = make(node, Op.make("scatter", key=key, mode="set"), [buffer, part])
            offset += width
        buffers[id(last)] = (buffer, len(node.parents))
        memo[id(node)] = buffer if node is last else make(
            node, Op.make("slice", key=_slot(last.shape, axis, 0, offset)), [buffer])
    return [memo[id(r)] for r in roots], len(plan)


GROW_CONCAT = Pass(
    "grow_concat", graph_function=grown_concatenations, matches=frozenset({"concatenate"}),
    produces=frozenset({"fill", "scatter", "slice"}), stage="fuse",
    doc="concatenations that each take the one before's parts plus more -> one buffer "
        "written part by part, each concatenation its prefix (DenseNet's blocks)")

__all__ = ["GROW_CONCAT", "MIN_BYTES", "MIN_CHAIN", "grown_concatenations"]
