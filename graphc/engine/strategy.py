"""Kernel strategy: how the engine runs a node, decided here from the node alone,
so that liveness (what a node may write over) and the kernels (how they then
compute) agree.

The optimiser emits semantic programs only (a ``fused`` node is its program, shape
and dtype); whether its kernel streams through a scratch buffer, how big the chunks
are, and which inputs it may write over are the engine's choices:

- A fused program runs each instruction into its output buffer, the running value
  taking the place of the absorbed parent; it may then write over the inputs only
  its first instruction reads, in a position that instruction's kind may overwrite.
- A large one (:data:`STREAM_MIN` elements or more) whose inputs are full-size or
  single elements is *streamed*: chunk by chunk through a small scratch that stays
  in cache, every input of a chunk read before that chunk of the output is written,
  so it may write over any full-size input.
- An ``fma`` writing over its addend streams the same way (the kernel sees the
  overlap); liveness allows it only to compute an update into its variable.

>>> import graphc.ndarray as N
>>> from graphc.type import Op
>>> prog = ((Op.make("multiply"), (("in", 0), ("in", 1))), (Op.make("add"), (("acc",), ("in", 2))))
>>> fused_overwritable(prog, [(4,), (4,), (4,)], (4,))
(0, 1)
>>> fused_overwritable(prog, [(STREAM_MIN,)] * 3, (STREAM_MIN,))
(0, 1, 2)
"""
from __future__ import annotations

import math

from ..type.kinds import may_overwrite as kind_may_overwrite

#: bytes of the scratch a streamed kernel works in (a chunk of every dtype fits)
SCRATCH_BYTES = 1 << 19
#: elements per chunk of a streamed fused node, and the size from which one streams
STREAM_CHUNK = 1 << 14
STREAM_MIN = 1 << 16


def stream_chunk(out_shape, in_shapes, itemsize: int) -> int:
    """Elements per chunk when a fused program of this geometry is streamed, else 0:
    large results whose inputs are full-size or single elements (no partial
    broadcasting). The chunk always fits the scratch.

    >>> stream_chunk((1 << 20,), [(1 << 20,), ()], 4), stream_chunk((8,), [(8,)], 4)
    (16384, 0)
    """
    size = math.prod(out_shape)
    if size < STREAM_MIN or not all(tuple(s) == tuple(out_shape) or math.prod(s) == 1
                                    for s in in_shapes):
        return 0
    return min(STREAM_CHUNK, SCRATCH_BYTES // max(itemsize, 1))


def fused_overwritable(program, in_shapes, out_shape, itemsize: int = 8) -> tuple:
    """The inputs (positions) a fused node's kernel may write its result over
    (subject to liveness: equal shape and dtype, the input dying there)."""
    if stream_chunk(out_shape, in_shapes, itemsize):
        return tuple(j for j, s in enumerate(in_shapes) if tuple(s) == tuple(out_shape))
    first_op, first_args = program[0]
    later = {a[1] for _, args in program[1:] for a in args if a[0] == "in"}
    result = []
    for j in range(len(in_shapes)):
        positions = [k for k, a in enumerate(first_args) if a == ("in", j)]
        if positions and j not in later and all(kind_may_overwrite(first_op, k)
                                                for k in positions):
            result.append(j)
    return tuple(result)


def may_overwrite(node, position: int) -> bool:
    """Whether ``node``'s kernel may write its result over its parent at ``position``:
    the kind's policy, or for a fused node what its program and streaming allow.

    >>> import graphc.ndarray as N
    >>> x = N.var("x", (4,))
    >>> may_overwrite(N.exp(x), 0), may_overwrite(N.matmul(N.var("a", (4, 4)), x), 0)
    (True, False)
    """
    if node.op.kind == "fused":
        return position in fused_overwritable(node.op["program"],
                                              [p.shape for p in node.parents], node.shape,
                                              node.dtype.itemsize)
    return kind_may_overwrite(node.op, position)


def streams_over_addend(node, position: int) -> bool:
    """An ``fma`` writing over its addend ``c``: its kernel then streams chunk by
    chunk through the scratch, which needs ``a`` and ``b`` full-size or single
    elements (an AdaGrad accumulator ``v + g * g`` updated into ``v``)."""
    return (node.op.kind == "fma" and position == 2
            and all(p.size in (node.size, 1) for p in node.parents[:2]))
