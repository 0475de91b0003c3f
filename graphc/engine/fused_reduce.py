"""A reduction fused with the elementwise program that feeds it (``fused_reduce``):
its NumPy kernel, the reference and fallback, and the geometry the generated one
walks (:func:`.numba_kernels.fused_reduce_kernel`).

A ``fused_reduce`` node computes ``reduce(program(inputs), axis, keepdims)``: the
``program`` of a ``fused`` node (or one elementwise op) over the elementwise shape
``full`` in ``dtype``, then ``sum``/``mean``/``max``/``min``/``prod`` over ``axis``.
Its inputs broadcast to ``full`` (a softmax's ``x - m``, ``m`` kept per row).

The NumPy kernel never holds the elementwise value whole: it computes it block by
block in the context's scratch (:data:`.strategy.SCRATCH_BYTES`, shared by the
kernels of a schedule worker), each block as many whole outer slices as fit, and
reduces each block into its part of the output (a block that covers only part of
a reduced axis is reduced into the rest of the scratch and combined). So no
unplanned full-size temporary, and the value stays in cache between its
computation and its reduction. Where one block holds everything, the bits are
NumPy's; otherwise sums may differ from NumPy's in the last places (another order).

>>> import numpy as np
>>> from graphc.type import Op
>>> program = ((Op.make("subtract"), (("in", 0), ("in", 1))), (Op.make("exp"), (("acc",),)))
>>> op = Op.make("fused_reduce", program=program, reduce="sum", axis=(1,), keepdims=False,
...              full=(2, 3), shape=(2,), dtype=np.dtype("float64"))
>>> x, m = np.zeros((2, 3)), np.zeros((2, 1))
>>> out = np.empty(2); fused_reduce(op, [x, m], out, None)(); out
array([3., 3.])
"""
from __future__ import annotations

import itertools
import math
from functools import partial

import numpy as np

from ..type.op import Op
from .strategy import SCRATCH_BYTES

#: the reductions a ``fused_reduce`` node may end with
FUSED_REDUCTIONS = ("sum", "mean", "max", "min", "prod")
#: reduction -> (its NumPy function over a block, the ufunc that combines two blocks'
#: partial results); a mean is summed block by block, then divided once as NumPy does
_BLOCKWISE = {"sum": (np.sum, np.add), "mean": (np.sum, np.add), "prod": (np.prod, np.multiply),
              "max": (np.max, np.maximum), "min": (np.min, np.minimum)}
_ALIGN = 64


def program_op(op) -> Op:
    """The ``fused`` op of a ``fused_reduce`` op's elementwise part (what the
    elementwise generators and gradient rules take).

    >>> from graphc.type import Op
    >>> fr = Op.make("fused_reduce", program=((Op.make("exp"), (("in", 0),)),), reduce="max",
    ...              axis=None, keepdims=False, full=(4,), shape=(), dtype=np.dtype("float32"))
    >>> program_op(fr).kind, program_op(fr)["shape"]
    ('fused', (4,))
    """
    return Op.make("fused", program=op["program"], shape=op["full"], dtype=op["dtype"])


def reduced_axes(op) -> tuple:
    """The axes of ``full`` a ``fused_reduce`` op reduces (``axis=None``: all)."""
    return tuple(range(len(op["full"]))) if op["axis"] is None else tuple(op["axis"])


def reduced_count(op) -> int:
    """How many elements each output element reduces (a mean divides by it)."""
    return math.prod(op["full"][a] for a in reduced_axes(op))


def _full_rank(array, rank):
    """``array`` with leading axes of size 1 up to ``rank`` (a view)."""
    return array.reshape((1,) * (rank - array.ndim) + array.shape)


def _blocks(full, budget):
    """Index tuples of slices cutting ``full`` into blocks of at most ``budget``
    elements: whole trailing slices, the first axis that does not fit cut into runs."""
    rank = len(full)
    split = next(j for j in range(rank + 1) if math.prod(full[j + 1:]) <= budget) \
        if rank else 0
    if split >= rank:
        return [()]
    step = max(1, min(full[split], budget // max(math.prod(full[split + 1:]), 1)))
    blocks = []
    for outer in itertools.product(*(range(n) for n in full[:split])):
        for start in range(0, full[split], step):
            blocks.append(tuple(slice(i, i + 1) for i in outer)
                          + (slice(start, min(start + step, full[split])),))
    return blocks


def _region(index, shape):
    """``index`` (slices of some leading axes) restricted to an array of ``shape``
    broadcasting against them: a size-1 axis is taken whole."""
    return tuple(slice(None) if n == 1 else s for s, n in zip(index, shape))


def _scratch(ctx, nbytes):
    if ctx is not None and hasattr(ctx, "scratch"):
        return ctx.scratch(nbytes)
    return np.empty(nbytes, np.uint8)   # an eager call: no context to lend one


def fused_reduce(op, ins, out, ctx):
    """The NumPy kernel of a ``fused_reduce`` node (see the module docstring)."""
    from .cpu_kernels import program_calls, register_space, run_all
    full, dtype, kind = tuple(op["full"]), np.dtype(op["dtype"]), op["reduce"]
    rank, axes = len(full), reduced_axes(op)
    views = [_full_rank(a, rank) for a in ins]
    kept_shape = tuple(1 if d in axes else n for d, n in enumerate(full))
    target = np.reshape(out, kept_shape, copy=False)
    # the scratch: the block's elementwise value, then (aligned) a block's partial result
    budget = max(1, (SCRATCH_BYTES - _ALIGN) // (dtype.itemsize + out.dtype.itemsize))
    size = math.prod(full)
    budget = min(budget, max(size, 1))
    second = -(-budget * dtype.itemsize // _ALIGN) * _ALIGN
    scratch = _scratch(ctx, second + budget * out.dtype.itemsize)
    values = scratch[:budget * dtype.itemsize].view(dtype)
    partials = scratch[second:second + budget * out.dtype.itemsize].view(out.dtype)
    reducer, combine = _BLOCKWISE[kind]
    space = register_space(op["program"], budget, dtype, ctx)
    if size == 0:   # nothing to compute: the reduction of an empty array (0, 1 or NaN)
        return partial(reducer if kind != "mean" else np.mean, np.empty(full, dtype),
                       axis=axes, out=target, keepdims=True)
    blocks = [index + (slice(None),) * (rank - len(index)) for index in _blocks(full, budget)]
    shapes = [tuple(len(range(*s.indices(n))) for s, n in zip(index, full)) for index in blocks]
    # whether each block holds every element its outputs reduce: then it is reduced
    # straight into them (a mean too); else partial results are combined
    complete = all(shape[d] == full[d] for shape in shapes for d in axes)
    calls, covered = [], set()
    for index, shape in zip(blocks, shapes):
        value = values[:math.prod(shape)].reshape(shape)
        arrays = [v[_region(index, v.shape) + (Ellipsis,)] for v in views]
        calls += program_calls(op["program"], arrays, value, value, space, ctx)
        region = target[tuple(slice(None) if d in axes else s for d, s in enumerate(index))]
        if complete:
            calls.append(partial(np.mean if kind == "mean" else reducer, value, axis=axes,
                                 out=region, keepdims=True))
            continue
        key = tuple((s.start, s.stop) for d, s in enumerate(index) if d not in axes)
        if key not in covered:
            covered.add(key)
            calls.append(partial(reducer, value, axis=axes, out=region, keepdims=True))
        else:
            part = partials[:region.size].reshape(region.shape)
            calls.append(partial(reducer, value, axis=axes, out=part, keepdims=True))
            calls.append(partial(combine, region, part, out=region))
    if kind == "mean" and not complete:
        # as numpy.mean: the sum divided by the count as an intp, in place
        calls.append(partial(np.true_divide, out, np.intp(reduced_count(op)), out=out,
                             casting="unsafe"))
    return run_all(calls)


def reduce_geometry(in_shapes, full, axes):
    """``(shape, roles, spans)``: the dimensions the generated kernel walks, in memory
    order. ``full`` without its sizes of 1, neighbours merged where both are kept or
    both reduced and every input spans both or neither (so a contiguous input is a
    view of that shape); ``roles`` says which are reduced (``"r"``) or kept (``"k"``),
    and ``spans`` which of them each input (of ``in_shapes``, broadcasting to
    ``full``) spans: ``None`` for a single element, else one flag per dimension (it
    has size 1 where it does not span).

    >>> reduce_geometry([(8, 3, 4, 4), (1, 3, 1, 1)], (8, 3, 4, 4), (0, 2, 3))
    ((8, 3, 16), 'rkr', [(True, True, True), (False, True, False)])
    >>> reduce_geometry([(5, 1), ()], (5, 7), (1,))
    ((5, 7), 'kr', [(True, False), None])
    """
    rank = len(full)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in in_shapes]
    dims = [d for d in range(rank) if full[d] != 1]
    shape = [full[d] for d in dims]
    roles = ["r" if d in axes else "k" for d in dims]
    spans = [[s[d] != 1 for d in dims] for s in padded]
    j = len(shape) - 1
    while j > 0:
        if roles[j - 1] == roles[j] and all(f[j - 1] == f[j] for f in spans):
            shape[j - 1] *= shape[j]
            del shape[j], roles[j]
            for f in spans:
                del f[j]
        j -= 1
    if "r" not in roles:   # nothing of more than one element reduced: one step of it
        shape.append(1)
        roles.append("r")
        for f in spans:
            f.append(False)
    return (tuple(shape), "".join(roles),
            [None if math.prod(s) == 1 else tuple(f) for s, f in zip(padded, spans)])


def kernel_view(array, shape, span):
    """``array`` as the generated kernel reads it: of ``shape`` where it spans a
    dimension, 1 where it does not (a view, contiguous where ``array`` is); a single
    element as a one-element array.

    >>> kernel_view(np.zeros((1, 3, 1, 1)), (8, 3, 16), (False, True, False)).shape
    (1, 3, 1)
    """
    if span is None:
        return array.reshape(1)
    own = tuple(n if f else 1 for n, f in zip(shape, span))
    try:
        return np.reshape(array, own, copy=False)
    except ValueError:   # a strided array whose dimensions do not merge that way
        return None
