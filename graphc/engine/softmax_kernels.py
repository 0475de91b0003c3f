"""Kernels of the optimiser's ``softmax`` node (:mod:`graphc.optimiser.fuse_softmax`):
``exp(x - max(x)) / sum(exp(x - max(x)))`` along one axis, in one node.

Written out, a softmax is four nodes and four passes over memory: the row maxima, the
shifted exponentials (written out, since both the sum and the division read them),
their sums, the division. The generated kernel (:func:`generated_softmax`) makes one
pass per row instead, the row staying in cache between its three loops: the maximum
(C's ``fmax``, which vectorises; a row holding NaN gives NaN whatever its shift),
the exponentials written to the output while their sum accumulates (float32 lanes on
rows of at most :data:`SHORT_ROW` cells, float64 beyond), and the product by the
sum's reciprocal. One compilation per dtype serves every size; rows are
split across threads when the value is large. It covers float32 rows along the last
axis (float64's exp is the C library's, one element at a time, where NumPy's
vectorised calls win); elsewhere the NumPy kernel runs.

The NumPy kernel (:func:`numpy_softmax`) makes the written-out graph's calls in its
order, so it gives the NumPy engine's bits; the generated one differs in the last
places (its exp is within an ulp of the correctly rounded one, its float32 sums within
21 ulp, its quotients within 1.5). 4096 rows of 256 on 2 threads: 365 -> 242 us for the
exp of nonpositive values, the float32 sums and the reciprocal together.

>>> import numpy as np
>>> from graphc.type import Op
>>> x, out = np.array([[0.0, np.log(3.0)]]), np.empty((1, 2))
>>> numpy_softmax(Op.make("softmax", axis=1), [x], out, None)(); out
array([[0.25, 0.75]])
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from .cpu_kernels import work_array

#: dtypes the generated kernel computes in
GENERATED_DTYPES = frozenset({np.dtype(np.float32)})
#: the longest float32 row whose sum the generated kernel takes in float32
SHORT_ROW = 1024


def rows_of(shape, axis: int):
    """``(rows, n)``: ``shape`` as rows of ``n`` contiguous cells along ``axis``, when
    every later axis has size 1; else ``None``.

    >>> rows_of((2, 4, 196, 196), 3), rows_of((8, 10, 1), 1), rows_of((8, 10), 0)
    ((1568, 196), (8, 10), None)
    """
    if any(n != 1 for n in shape[axis + 1:]):
        return None
    return math.prod(shape[:axis]), shape[axis]


def numpy_softmax(op, ins, out, ctx):
    """The written-out softmax's NumPy calls into ``out`` (which may be ``x``): the
    maxima, ``exp(x - m)``, the sums, the division."""
    (x,) = ins
    axis = op["axis"]
    kept = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    shift, total = work_array(ctx, kept, x.dtype), work_array(ctx, kept, x.dtype)
    steps = [partial(np.max, x, axis=axis, out=shift, keepdims=True),
             partial(np.subtract, x, shift, out=out), partial(np.exp, out, out=out),
             partial(np.sum, out, axis=axis, out=total, keepdims=True),
             partial(np.divide, out, total, out=out)]

    def run():
        for step in steps:
            step()
    return run


def softmax_source(dtype, in_place: bool = False) -> str:
    """The module of a generated softmax over the rows of a 2-D array of ``dtype``:
    ``serial(out, x)`` and ``parallel(out, x)`` (rows split across threads). With
    ``in_place`` they read ``out`` and ignore ``x``: LLVM cannot prove that two arrays
    do not overlap, and where they do it runs its scalar loops (2-4x slower).

    >>> print(softmax_source("float32").split("def serial")[1].splitlines()[0])
    (out, x):
    """
    from .numba_codegen import GENERATOR_VERSION, NUMBA_TYPES, PRELUDE_DIGEST
    spelled, suffix, _ = NUMBA_TYPES[np.dtype(dtype).name]
    # the shifted values are <= 0 (or NaN): float32's exp for those takes fewer steps
    exp = "graphc_exp_nonpositive_f32" if suffix == "f32" else f"graphc_exp_{suffix}"
    lines = [f"# graphc generated softmax, generator version {GENERATOR_VERSION}, "
             f"prelude {PRELUDE_DIGEST}",
             f"# {'in place' if in_place else 'out of place'}",
             "import numpy as np", "from numba import njit, prange",
             "from graphc.engine.numba_prelude import *", ""]
    # a float32 row of at most SHORT_ROW cells sums in float32 lanes (each lane adds at
    # most 16 terms: within 21 ulp of the exact sum, 14% of the softmax's time to spare
    # against float64), a longer one in float64
    sums = ([("float32", f"if n <= {SHORT_ROW}:"), ("float64", "else:")] if suffix == "f32"
            else [(spelled, None)])
    for name, loop in (("serial", "range"), ("parallel", "prange")):
        # reassoc lets the sum run in vector lanes; it is the only reordered arithmetic
        # (each helper keeps its own flags when inlined)
        lines += [f"@njit(parallel={loop == 'prange'}, error_model='numpy', nogil=True, "
                  "cache=True, fastmath={'reassoc'})",
                  f"def {name}(out, x):",
                  "    rows, n = x.shape",
                  f"    for r in {loop}(rows):",
                  f"        row = {'out' if in_place else 'x'}[r]",
                  "        dst = out[r]",
                  # from -inf over the whole row: a trip count of n, not n - 1, leaves
                  # the vector loop no long scalar remainder (4096 rows of 256, one
                  # thread: 1.0 -> 0.7 ns a cell for the whole softmax)
                  f"        m = {spelled}(-np.inf)",
                  "        for j in range(n):",
                  "            m = graphc_maxnum(m, row[j])",
                  "        total = 0.0"]
        for accumulator, branch in sums:     # a variable per type: Numba types each once
            part, pad = f"part_{accumulator}", " " * (12 if branch else 8)
            lines += ([f"        {branch}"] if branch else []) + [
                f"{pad}{part} = {accumulator}(0.0)",
                f"{pad}for j in range(n):",
                f"{pad}    e = {exp}(row[j] - m)",
                f"{pad}    dst[j] = e",
                f"{pad}    {part} += e",
                f"{pad}total = float64({part})"]
        # one rounding of the reciprocal, one of each product: within 1.5 ulp of the
        # quotient
        lines += [f"        s = {spelled}(1.0 / total)",
                  "        for j in range(n):",
                  "            dst[j] = dst[j] * s", ""]
    return "\n".join(lines)


def generated_softmax(op, ins, out, ctx, parallel):
    """The generated kernel of a ``softmax`` node whose rows are contiguous (the last
    non-trivial axis) and of a :data:`GENERATED_DTYPES` dtype, on every core when the
    value is large and ``parallel``; ``None`` otherwise (the NumPy kernel runs)."""
    from . import numba_kernels as jit
    from .strategy import PARALLEL_MIN
    (x,) = ins
    geometry = rows_of(x.shape, op["axis"])
    if (jit.available() is not None or geometry is None or x.size == 0
            or x.dtype not in GENERATED_DTYPES or out.dtype != x.dtype
            or not x.flags.c_contiguous or not out.flags.c_contiguous):
        return None
    source = x.reshape(geometry).view()
    source.flags.writeable = False      # read-only, so every graph passes the same types
    args = (out.reshape(geometry), source)
    module = jit._load(softmax_source(x.dtype, jit.same_memory(*args)))
    split = parallel and x.size >= PARALLEL_MIN and geometry[0] > 1 and bool(jit.threading_layer())
    function = module.parallel if split else module.serial
    jit.load_compiled(function, tuple(jit._numba.typeof(a) for a in args))
    return partial(function, *args)
