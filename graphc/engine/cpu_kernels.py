"""NumPy kernels: the builders the op definitions (:mod:`graphc.ops`) give their
kinds, and :data:`KERNELS`, the table they fill.

A kernel *builder* takes ``(op, inputs, out, ctx)`` (input arrays, the
pre-allocated output array, the run context) and returns a callable of no
arguments that writes the op's value into ``out``. Builders run once when a
graph is compiled; the returned callables run on every evaluation, so they are
bound NumPy calls with ``out=`` (``functools.partial``) wherever possible and
allocate nothing. The eager namespace calls the same builders on fresh arrays.

>>> import numpy as np
>>> from graphc.type import Op
>>> x, out = np.array([0.0, 1.0]), np.empty(2)
>>> _ = build_kernel(Op.make("exp"), [x], out, None)()
>>> out
array([1.        , 2.71828183])
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..shape.indexing import decode_basic, decode_with_arrays
from ..type.errors import GraphcError
from ..type.kinds import reference_function
from ..type.program import operand, registers
from .strategy import SCRATCH_BYTES, stream_chunk


class KernelError(GraphcError, RuntimeError):
    """A kernel that failed while the graph ran (a delay's function, say)."""


#: ufuncs for which NumPy deprecates a positional ``out``
_KEYWORD_OUT = frozenset({"maximum", "minimum"})


def ufunc(op, ins, out, ctx):
    # positional out is ~0.17 us cheaper per call, which matters for tiny arrays
    if op.kind in _KEYWORD_OUT:
        return partial(reference_function(op.kind), *ins, out=out)
    return partial(reference_function(op.kind), *ins, out)


def sigmoid(op, ins, out, ctx):
    """``scipy.special.expit`` (the reference); on the generated engine
    (``ctx.kernels``) the vectorised form of :mod:`.vector_sigmoid` where it applies."""
    if getattr(ctx, "kernels", "numpy") == "generated":
        from .vector_sigmoid import vector_sigmoid
        kernel = vector_sigmoid(ins[0], out)
        if kernel is not None:
            return kernel
    return ufunc(op, ins, out, ctx)


def relu(op, ins, out, ctx):
    # a zero of x's own dtype: a Python 0 would promote bool to int64
    return partial(np.maximum, ins[0], ins[0].dtype.type(0), out=out)


def round_(op, ins, out, ctx):
    if ins[0].dtype.kind in "fc":
        return partial(np.rint, ins[0], out)
    return partial(np.copyto, out, ins[0])


def copy(op, ins, out, ctx):
    return partial(np.copyto, out, ins[0], casting="unsafe")


def clip(op, ins, out, ctx):
    return partial(np.clip, ins[0], op["lo"], op["hi"], out=out)


def where(op, ins, out, ctx):
    cond, a, b = ins

    def where():
        np.copyto(out, b)
        np.copyto(out, a, where=cond)
    return where


def reduction(op, ins, out, ctx):
    return partial(reference_function(op.kind), ins[0], axis=op["axis"], out=out,
                   keepdims=op["keepdims"])


def arg_reduction(op, ins, out, ctx):
    axis = None if op["axis"] is None else op["axis"][0]
    return partial(reference_function(op.kind), ins[0], axis, out, keepdims=op["keepdims"])


def dot(op, ins, out, ctx):  # out is the third argument
    return partial(np.dot, ins[0], ins[1], out)


def einsum(op, ins, out, ctx):
    # The optimised path contracts operands in their own dtypes before promoting:
    # a bool operand is summed as logical-or (",f->" of 1.0 and [True, True] gives 1,
    # not 2) and a float32 one in float32 for a float64 result. Mixed dtypes take
    # NumPy's default path, which casts to the result dtype first.
    optimize = all(x.dtype == out.dtype for x in ins)
    return partial(np.einsum, op["subscripts"], *ins, out=out, optimize=optimize)


def _view_copy(view_of):
    """A builder copying a view of the input (reshape, transpose, slice, flip...)."""
    def build(op, ins, out, ctx):
        return partial(np.copyto, out, view_of(op, ins[0], out))
    return build


def reshape(op, ins, out, ctx):
    x = ins[0]
    # a view of whichever side is contiguous: reshaping a strided array would copy it
    # once, here, and the kernel would then never see its new values
    if x.flags.c_contiguous:
        return partial(np.copyto, out, x.reshape(out.shape))
    if out.flags.c_contiguous:
        return partial(np.copyto, out.reshape(x.shape), x)
    return lambda: np.copyto(out, x.reshape(out.shape))


transpose = _view_copy(lambda op, x, out: x.transpose(op["axes"]))
broadcast_to = _view_copy(lambda op, x, out: x)
# the trailing Ellipsis keeps a 0-d result a view (x[0] of a 1-D x is a scalar copy)
slice_ = _view_copy(lambda op, x, out: x[decode_basic(op["key"]) + (Ellipsis,)])
flip = _view_copy(lambda op, x, out: np.flip(x, op["axis"]))


def concatenate(op, ins, out, ctx):
    return partial(np.concatenate, tuple(ins), axis=op["axis"], out=out)


def gather(op, ins, out, ctx):
    key = decode_with_arrays(op["key"], dict(enumerate(ins)))
    x = ins[0]

    def gather():
        np.copyto(out, x[key])
    return gather


def take(op, ins, out, ctx):
    return partial(np.take, ins[0], ins[1], op["axis"], out)


def pad(op, ins, out, ctx):
    interior = out[tuple(slice(lo, lo + d) for (lo, _), d in zip(op["pad_width"], ins[0].shape))]
    value, x = op["value"], ins[0]

    def pad():
        out.fill(value)
        np.copyto(interior, x)
    return pad


def tile(op, ins, out, ctx):
    x, reps = ins[0], op["reps"]
    # out viewed as (r0, n0, r1, n1, ...) receives x viewed as (1, n0, 1, n1, ...)
    dst = out.reshape(tuple(v for r, n in zip(reps, x.shape) for v in (r, n)))
    src = x.reshape(tuple(v for n in x.shape for v in (1, n)))
    return partial(np.copyto, dst, src)


def repeat(op, ins, out, ctx):
    x, axis, r = ins[0], op["axis"], op["repeats"]
    dst = out.reshape(x.shape[:axis] + (x.shape[axis], r) + x.shape[axis + 1:])
    src = x.reshape(x.shape[:axis] + (x.shape[axis], 1) + x.shape[axis + 1:])
    return partial(np.copyto, dst, src)


class LabelOutOfRange(KernelError, IndexError):
    """A label fed to ``one_hot`` at run time outside ``[0, depth)``."""


def one_hot(op, ins, out, ctx, xp=np):
    """``xp``: the array module of ``ins`` and ``out`` (CuPy's for the device)."""
    labels, depth = ins[0], op["depth"]
    classes, column = xp.arange(depth, dtype=labels.dtype), labels[..., None]
    # seen as unsigned, a negative label is larger than any depth: one pass finds both
    unsigned = labels.view(labels.dtype.str.replace("i", "u"))

    def one_hot():
        # a label outside [0, depth) would give a silent row of zeros: refused before
        # anything is written
        if labels.size and unsigned.max() >= depth:
            bad = labels[(labels < 0) | (labels >= depth)]
            raise LabelOutOfRange(
                f"one_hot: label {int(bad.ravel()[0])} is out of range for depth {depth} "
                f"(labels must be in [0, {depth}); {bad.size} of the {labels.size} labels "
                f"of shape {labels.shape} are outside)")
        xp.equal(column, classes, out)
    return one_hot


def fill(op, ins, out, ctx):
    return partial(out.fill, op["value"])


def random_uniform(op, ins, out, ctx):
    low, span = op["low"], op["high"] - op["low"]

    def uniform():
        ctx.rng.random(dtype=out.dtype, out=out)
        np.multiply(out, span, out)
        np.add(out, low, out)
    return uniform


def random_normal(op, ins, out, ctx):
    loc, scale = op["loc"], op["scale"]

    def normal():
        ctx.rng.standard_normal(dtype=out.dtype, out=out)
        np.multiply(out, scale, out)
        np.add(out, loc, out)
    return normal


def random_bernoulli(op, ins, out, ctx):
    p = op["p"]

    def bernoulli():
        ctx.rng.random(dtype=out.dtype, out=out)
        np.less(out, p, out)
    return bernoulli


def delay(op, ins, out, ctx):
    fn = op["fn"]
    name = getattr(fn, "__name__", repr(fn))

    def delay():
        result = np.asarray(fn(*ins))
        if result.shape != out.shape or result.dtype != out.dtype:
            raise KernelError(f"delay: {name} returned shape {result.shape} dtype "
                              f"{result.dtype}, but the node declares shape {out.shape} "
                              f"dtype {out.dtype}")
        np.copyto(out, result)
    return delay


def _rows_view(array):
    """``array`` (..., m, k) as a (rows, k) view, or ``None`` where that needs a copy
    (``reshape`` would copy silently, and a copy made at build time goes stale)."""
    view = array.view()
    try:
        view.shape = (math.prod(array.shape[:-1]), array.shape[-1])
    except (AttributeError, ValueError):
        return None
    return view


def matmul_operands(op, ins, out):
    """``(a, b, out)`` of a ``matmul`` node as one product reads them: transposed
    operands as strided views (BLAS reads them without a copy), and a stack of
    matrices times one matrix as one GEMM over all their rows, not one GEMM per
    matrix (NumPy's loop): a transformer's (1, tokens, d) @ (d, e)."""
    a, b = ins
    if op.get("trans_a"):
        a = a.swapaxes(-1, -2)
    if op.get("trans_b"):
        b = b.swapaxes(-1, -2)
    if a.ndim > 2 and b.ndim == 2 and not op.get("trans_a"):
        rows, out_rows = _rows_view(a), _rows_view(out)
        if rows is not None and out_rows is not None:
            return rows, b, out_rows
    return a, b, out


def matmul(op, ins, out, ctx):
    return partial(np.matmul, *matmul_operands(op, ins, out))


def _scratch(ctx, nbytes):
    return ctx.scratch(nbytes) if ctx is not None and hasattr(ctx, "scratch") else \
        np.empty(nbytes, np.uint8)


def _flat_chunks(arrays, out, chunk):
    """Per chunk of ``out`` (flattened): the matching pieces of ``arrays`` (full-size
    arrays sliced, one-element arrays as 0-d) and of ``out``; ``None`` when some array
    neither matches ``out``'s size nor has one element."""
    n = out.size
    flats = []
    for a in arrays:
        if a.size == n and a.flags.c_contiguous:
            flats.append(a.reshape(-1))
        elif a.size == 1:
            flats.append(a.reshape(()))
        else:
            return None
    flat_out = out.reshape(-1)
    return [([f if f.ndim == 0 else f[i:i + chunk] for f in flats], flat_out[i:i + chunk])
            for i in range(0, n, chunk)]


def fma(op, ins, out, ctx):
    a, b, c = ins
    if np.shares_memory(out, c) and out.flags.c_contiguous:
        # writing a*b first would destroy c: stream it through a small scratch
        chunk = SCRATCH_BYTES // 2 // max(out.dtype.itemsize, 1)
        pieces = _flat_chunks([a, b, c], out, chunk)
        if pieces is not None:
            tmp = _scratch(ctx, chunk * out.dtype.itemsize).view(out.dtype)
            calls = []
            for (pa, pb, pc), po in pieces:
                t = tmp[:po.size]
                calls += [partial(np.multiply, pa, pb, t), partial(np.add, pc, t, po)]
            return run_all(calls)
        # never planned so (strategy.streams_over_addend); kept correct for direct callers
        product = np.empty(out.shape, out.dtype)

        def fma_via_temporary():
            np.multiply(a, b, product)
            np.add(product, c, out)
        return fma_via_temporary

    def fma():
        np.multiply(a, b, out)
        np.add(out, c, out)
    return fma


def run_all(calls):
    """One callable running ``calls`` (callables of no arguments) in order.

    Example: ``run_all([partial(np.add, a, b, out), partial(np.exp, out, out)])()``
    """
    calls = tuple(calls)
    if len(calls) == 1:
        return calls[0]

    def run():
        for call in calls:
            call()
    return run


def fused_adagrad(op, ins, out, ctx):
    (v,), lr, eps = ins, op["lr"], op["eps"]

    def fused_adagrad():
        np.add(v, eps, out)
        np.sqrt(out, out)
        np.divide(lr, out, out)
    return fused_adagrad


def work_array(ctx, shape, dtype) -> np.ndarray:
    """An array a kernel fills and uses within each call: the run context's shared
    workspace (:meth:`~.cpu.RunContext.workspace`) where there is one, else its own.

    Example: ``masks = work_array(ctx, y.shape, np.bool_)``"""
    if ctx is not None and hasattr(ctx, "workspace"):
        return ctx.workspace(shape, dtype)
    return np.empty(shape, dtype)


def register_space(program, size: int, dtype, ctx) -> dict:
    """Instruction -> a workspace of ``size`` elements holding its value, for each
    one a later instruction of ``program`` reads as a register."""
    return {k: work_array(ctx, (size,), dtype) for k in sorted(registers(program))}


def program_calls(program, inputs, work, last, space, ctx) -> list:
    """The kernels computing a fused ``program`` over ``inputs``: a branch that ends
    in a register computes in that register's part of ``space`` (:func:`register_space`,
    at least ``work``'s size); the last branch in ``work``, its last instruction
    into ``last``."""
    calls, results = [], []
    ends = sorted(space) + [len(program) - 1]    # the last instruction of each branch
    for k, (inner, args) in enumerate(program):
        end = next(e for e in ends if e >= k)
        target = (last if k == len(program) - 1 else work if end == ends[-1] else
                  space[end][:work.size].reshape(work.shape))
        operands = [operand(a, inputs, results) for a in args]
        calls.append(KERNELS[inner.kind](inner, operands, target, ctx))
        results.append(target)
    return calls


def _fused_streamed(op, ins, out, ctx, chunk):
    """The program run chunk by chunk: each chunk's instructions work in a small
    scratch that stays in cache, and only the last writes the chunk of ``out``. Every
    input of a chunk is read before that chunk of ``out`` is written, so ``out`` may
    share memory with any full-size input (:func:`.strategy.fused_overwritable`)."""
    pieces = _flat_chunks(ins, out, chunk)
    if pieces is None or not out.flags.c_contiguous:
        raise ValueError(f"fused: a streamed program needs contiguous inputs of {out.size} or 1 "
                         f"elements, got shapes {[a.shape for a in ins]}")
    acc = _scratch(ctx, chunk * out.dtype.itemsize).view(out.dtype)
    space = register_space(op["program"], chunk, out.dtype, ctx)
    calls = []
    for arrays, po in pieces:
        calls += program_calls(op["program"], arrays, acc[:po.size], po, space, ctx)
    return run_all(calls)


def fused(op, ins, out, ctx):
    """Each instruction writes into ``out``; ``("acc",)`` reads the running value,
    ``("reg", k)`` a workspace (:mod:`graphc.type.program`). Large programs stream
    (:func:`.strategy.stream_chunk` decides, as it decided what liveness let the node
    write over)."""
    chunk = stream_chunk(out.shape, [a.shape for a in ins], out.dtype.itemsize)
    if chunk:
        return _fused_streamed(op, ins, out, ctx, chunk)
    space = register_space(op["program"], out.size, out.dtype, ctx)
    steps = program_calls(op["program"], ins, out, out, space, ctx)
    if len(steps) == 2:
        first, second = steps

        def fused2():
            first()
            second()
        return fused2

    def fused():
        for step in steps:
            step()
    return fused


#: kind -> kernel builder, filled by the op definitions (:mod:`graphc.ops`)
KERNELS: dict = {}

#: kind -> builder of a generated kernel ``(op, ins, out, ctx, parallel) -> callable or
#: None`` (``None``: not for these arrays; the NumPy kernel runs instead), used with
#: ``kernels="generated"``; ``parallel`` says whether it may use every core. Filled by
#: the op definitions (their ``generated``); elementwise kinds need none (their
#: expressions are compiled, :mod:`.numba_kernels`).
GENERATED_KERNELS: dict = {}


def build_kernel(op, ins, out, ctx):
    """The callable that computes ``op`` from ``ins`` into ``out``."""
    return KERNELS[op.kind](op, ins, out, ctx)
