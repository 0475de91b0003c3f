"""A compiled graph holds its weights once, in the layout its kernels read.

The optimiser may fold a constant into another layout (``OpKind.relayout``: a
convolution kernel packed for oneDNN's primitive, :mod:`graphc.ops.conv_nhwc`). The
compiled graph then reads only the result, but the graph as written
(``Executable.source``, which export and checkpoints read) still holds the original
array: every weight twice. :func:`hold_once` lets that source node hold its array as
a function of the packed one instead (:class:`~graphc.symbol.node.Deferred`, the same
bits, made again when read), wherever nothing else the compiled graph holds reads
the original's memory. A caller's own array is never touched: where the caller still
holds it, it stays as it was, and only graphc's reference goes.

>>> import graphc, graphc.ndarray as N
>>> x = N.var("x", (2,))
>>> exe = graphc.compile(inputs=[x], outputs=[x * 2.0])    # no constant relaid out
>>> hold_once(exe.source, exe.graph)
0
"""
from __future__ import annotations

from functools import partial

import numpy as np

from .optimiser.fold import relaid as relaid_from
from .symbol.node import Deferred
from .type.kinds import KINDS


def hold_once(source, compiled) -> int:
    """Let ``source``'s constants that ``compiled`` holds only relaid out be held as
    functions of the relaid arrays; returns how many.

    Example: ``hold_once(executable.source, executable.graph)``"""
    consts = [n for n in compiled.order if n.op.kind == "const"]
    relaid = {id(n): relaid_from(n) for n in consts if relaid_from(n) is not None}
    if not relaid:
        return 0
    sources = {id(n) for n in source.order if n.op.kind == "const"}
    kept = [n.value for n in consts if id(n) not in relaid and n.value is not None]
    count = 0
    for node in consts:
        if id(node) not in relaid:
            continue
        original, ops = relaid[id(node)]
        if id(original) not in sources or type(original._value) is Deferred:
            continue
        array = original._value
        if any(np.shares_memory(array, other) for other in kept):
            continue          # the compiled graph still reads it (another consumer)
        original.value = Deferred(partial(_laid_back, ops, node.value))
        count += 1
    return count


def _laid_back(ops, array):
    """The array the relayouts ``ops`` (in the order applied) made ``array`` from."""
    for op in reversed(ops):
        array = KINDS[op.kind].relayout(op, array)
    return array


__all__ = ["hold_once"]
