"""Export-time simplifications: values computed from constants only become
initializers, and a bias added to a convolution or a 2-D matmul becomes the
bias input of ONNX's ``Conv`` or ``Gemm``, as other exporters write them.

Folding uses graphc's own kernels (``graphc.eager.evaluate``), so the
initializers hold the very bits graphc computes; a value larger than all its
parents (a ``broadcast_to``, a ``tile``) stays an op, so the file does not grow.

Example::

    folded = fold_constants(order)          # id(node) -> array
    fused = bias_pairs(order, outputs, folded)
"""
from __future__ import annotations

import numpy as np


def fold_constants(order) -> dict:
    """``{id(node): array}`` for every node of ``order`` (a topological order)
    that is a constant or is computed, deterministically, from constants only
    and is no larger than its largest parent.

    Example: ``fold_constants(graph.order)[id(node)]``
    """
    from ..eager import evaluate
    from ..type.kinds import KINDS

    folded: dict = {}
    for node in order:
        kind = node.op.kind
        if kind == "const":
            folded[id(node)] = node.value
            continue
        if kind == "var" or not node.parents or KINDS[kind].stateful:
            continue
        if not all(id(p) in folded for p in node.parents):
            continue
        if node.size > max(max(p.size for p in node.parents), 1):
            continue
        with np.errstate(all="ignore"):
            folded[id(node)] = evaluate(node.op, [folded[id(p)] for p in node.parents])
    return folded


def bias_pairs(order, outputs, folded) -> dict:
    """``{id(add node): (producer node, bias array)}`` for each ``add`` of a folded
    bias to a producer whose kind has a biased form (``BIASED``), when the
    producer is used only by that add and is not an output.

    Example: ``bias_pairs(graph.order, graph.outputs, fold_constants(graph.order))``
    """
    from .export_shape import BIASED

    uses: dict = {}
    for node in order:
        for p in node.parents:
            uses[id(p)] = uses.get(id(p), 0) + 1
    for node in outputs:
        uses[id(node)] = uses.get(id(node), 0) + 1
    pairs = {}
    for node in order:
        if node.op.kind != "add" or id(node) in folded:
            continue
        for producer, bias in (node.parents, node.parents[::-1]):
            accepts = BIASED.get(producer.op.kind, (None,))[0]
            if accepts is None or id(bias) not in folded or uses.get(id(producer)) != 1:
                continue
            if not producer.dtype == bias.dtype == node.dtype or producer.shape != node.shape:
                continue
            if accepts(producer, bias.shape):
                pairs[id(node)] = (producer, folded[id(bias)])
                break
    return pairs
