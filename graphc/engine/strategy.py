"""Kernel strategy: how the engine runs a node, decided here from the node alone,
so that liveness (what a node may write over) and the kernels (how they then
compute) agree.

The optimiser emits semantic programs only (a ``fused`` node is its program, shape
and dtype); whether its kernel streams through a scratch buffer, how big the chunks
are, and which inputs it may write over are the engine's choices:

- A fused program runs each instruction into its output buffer, the running value
  taking the place of the absorbed parent; it may then write over the inputs only
  its first instruction reads, in a position that instruction's kind may overwrite.
  Branches that end in registers compute first, in the registers' own memory, so
  there the first instruction of the last branch is the one that counts.
- A large one (:data:`STREAM_MIN` elements or more) whose inputs are full-size or
  single elements is *streamed*: chunk by chunk through a small scratch that stays
  in cache, every input of a chunk read before that chunk of the output is written,
  so it may write over any full-size input.
- An ``fma`` writing over its addend streams the same way (the kernel sees the
  overlap); liveness allows it only to compute an update into its variable.
- With generated kernels (``kernels="generated"``), an elementwise node whose every
  operation has a vector form runs as one generated loop (:func:`generated_wanted`),
  split across threads from :data:`PARALLEL_MIN` elements. The loop reads every
  input of an element before writing it, so it may write over whatever the NumPy
  kernel could.

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
import os

from ..type.kinds import is_elementwise
from ..type.kinds import may_overwrite as kind_may_overwrite
from ..type.program import last_branch

#: bytes of the scratch a streamed kernel works in (a chunk of every dtype fits)
SCRATCH_BYTES = 1 << 19
#: elements per chunk of a streamed fused node, and the size from which one streams
STREAM_CHUNK = 1 << 14
STREAM_MIN = 1 << 16


#: elements from which a generated kernel splits its loop across threads
PARALLEL_MIN = 1 << 15

#: the ``kernels=`` choices: NumPy calls only, or generated loops where they serve
KERNEL_CHOICES = ("numpy", "generated")
#: the environment variable giving the default choice
KERNELS_VARIABLE = "GRAPHC_KERNELS"


def kernel_choice(kernels=None) -> str:
    """``compile(kernels=...)`` resolved: an explicit choice is checked (generated
    kernels need Numba); ``None`` takes ``$GRAPHC_KERNELS``, else ``"generated"``
    where Numba can be imported and ``"numpy"`` where it cannot.

    >>> kernel_choice("numpy")
    'numpy'
    """
    from .numba_kernels import available
    explicit = kernels is not None
    if kernels is None:
        kernels = os.environ.get(KERNELS_VARIABLE) or "generated"
    if kernels not in KERNEL_CHOICES:
        source = "kernels=" if explicit else f"${KERNELS_VARIABLE}="
        raise ValueError(f"compile: unknown {source}{kernels!r}; expected one of "
                         f"{', '.join(map(repr, KERNEL_CHOICES))}")
    if kernels == "generated":
        problem = available()
        if problem is not None:
            if explicit:
                raise ImportError(f"compile(kernels='generated'): {problem}")
            return "numpy"
    return kernels


def generated_wanted(node) -> bool:
    """Whether ``node`` runs as a generated loop when the graph asks for them: an
    elementwise node whose every operation vectorises (a loop calling the C library's
    ``exp`` or ``tanh`` element by element is slower than NumPy's own vectorised ones,
    even on two cores; float32 ``exp`` is arithmetic that vectorises), and something to
    gain: a program of several instructions, or one op large enough to split across
    threads.

    >>> import numpy as np, graphc.ndarray as N
    >>> x, y = N.var("x", (1 << 16,), np.float32), N.var("y", (1 << 16,), np.float64)
    >>> generated_wanted(N.maximum(x, 0.0)), generated_wanted(N.exp(x))
    (True, True)
    >>> generated_wanted(N.exp(y)), generated_wanted(N.tanh(x))
    (False, False)
    """
    from .numba_codegen import DIALECT, vectorises
    from .expressions import program_lines
    if not is_elementwise(node.op.kind):
        return False
    if node.op.kind != "fused" and node.size < PARALLEL_MIN:
        return False
    try:
        names = [f"a{k}" for k in range(len(node.parents))]
        lines = program_lines(DIALECT, node.op, names, [p.dtype.name for p in node.parents],
                              node.dtype.name)
    except (NotImplementedError, KeyError):
        return False
    return vectorises(lines)


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
    # the output is first written by the first instruction of the last branch (earlier
    # ones compute in their registers): an input read there or before, and not after,
    # may go
    start = last_branch(program)
    first_op, first_args = program[start]

    def read(instructions):
        return {a[1] for _, args in instructions for a in args if a[0] == "in"}
    before, later = read(program[:start]), read(program[start + 1:])
    result = []
    for j in range(len(in_shapes)):
        positions = [k for k, a in enumerate(first_args) if a == ("in", j)]
        if j not in later and (j in before or positions) and all(
                kind_may_overwrite(first_op, k) for k in positions):
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
