"""Exporters of the shape, indexing, creation and NCHW neural kinds (given to
their kinds by :mod:`graphc.ops`, which files them in
:data:`graphc.onnx.export_ops.EXPORTERS`).

Shapes are static, so a basic index or a squeeze is one ``Slice`` and one
``Reshape`` to the known result shape, and an advanced index is one ``Gather``
over the flattened array at flat positions computed in the graph.

Example::

    EXPORTERS["conv2d"](ctx, op, [x, w], out)   # emits one Conv node
"""
from __future__ import annotations

import math

import numpy as np

from ..shape.indexing import key_result_shape
from ..shape.neural import pool_output_size
from .export import Value
from .export_ops import _onnx_type, unsupported

#: Slice's "past the start" end for a negative step
_BEFORE_START = np.iinfo(np.int64).min


def reshape_export(ctx, op, ins, out):
    shape = op["shape"]
    # allowzero: a 0 in the shape is a length, not "copy this axis"
    return ctx.op("Reshape", [ins[0].name, ctx.ints(shape)], out=out.name,
                  allowzero=1 if 0 in shape else None)


def _reshaped(ctx, name, shape, out_name=None):
    return ctx.op("Reshape", [name, ctx.ints(shape)], out=out_name,
                  allowzero=1 if 0 in shape else None)


def transpose_export(ctx, op, ins, out):
    return ctx.op("Transpose", [ins[0].name], out=out.name, perm=list(op["axes"]))


def broadcast_to_export(ctx, op, ins, out):
    return ctx.op("Expand", [ins[0].name, ctx.ints(op["shape"])], out=out.name)


def concatenate_export(ctx, op, ins, out):
    parts = [ctx.cast(v, out.dtype) for v in ins]
    return ctx.op("Concat", parts, out=out.name, axis=op["axis"])


def _slice(ctx, name, ranges, out_name=None):
    """``Slice`` of ``name`` by ``ranges``: ``(axis, start, stop, step)`` in Python's
    resolved form (a negative stop with a negative step: past the start)."""
    ranges = [r for r in ranges]
    if not ranges:
        return name
    axes = [r[0] for r in ranges]
    starts = [r[1] for r in ranges]
    ends = [_BEFORE_START if r[3] < 0 and r[2] < 0 else r[2] for r in ranges]
    steps = [r[3] for r in ranges]
    return ctx.op("Slice", [name, ctx.ints(starts), ctx.ints(ends), ctx.ints(axes),
                            ctx.ints(steps)], out=out_name)


def slice_export(ctx, op, ins, out):
    x = ins[0]
    ranges, axis = [], 0
    for entry in op["key"]:
        if entry[0] == "n":
            continue
        dim = x.shape[axis]
        if entry[0] == "i":
            ranges.append((axis, entry[1], entry[1] + 1, 1))
        elif entry[1:] != (0, dim, 1):
            start, stop, step = entry[1:]
            if len(range(start, stop, step)) == 0:
                start, stop, step = 0, 0, 1
            ranges.append((axis, start, stop, step))
        axis += 1
    sliced = _slice(ctx, x.name, ranges)
    return _reshaped(ctx, sliced, out.shape, out.name)


def flip_export(ctx, op, ins, out):
    ranges = [(a, -1, -1, -1) for a in op["axis"] if ins[0].shape[a] > 0]
    if not ranges:
        return ctx.op("Identity", [ins[0].name], out=out.name)
    return _slice(ctx, ins[0].name, ranges, out.name)


def _index_positions(ctx, index: Value, dim: int) -> str:
    """``index`` as int64 with negative entries counted from the end."""
    i = ctx.cast(index, np.int64)
    negative = ctx.op("Less", [i, ctx.scalar(0, np.int64)])
    return ctx.op("Where", [negative, ctx.op("Add", [i, ctx.scalar(dim, np.int64)]), i])


def gather_export(ctx, op, ins, out):
    """NumPy's advanced indexing: one ``Gather`` from the flattened array at the
    flat position of every result cell (:func:`_flat_positions`)."""
    x = ins[0]
    flat = _flat_positions(ctx, op["key"], x.shape, ins, out.shape)
    source = _reshaped(ctx, x.name, (-1,)) if x.shape else x.name
    return ctx.op("Gather", [source, flat], out=out.name, axis=0)


#: scatter's modes -> ScatterND's reduction (subtract adds the negated values)
_REDUCTIONS = {"set": "none", "add": "add", "subtract": "add", "multiply": "mul",
               "min": "min", "max": "max"}


def scatter_export(ctx, op, ins, out):
    """``x`` flattened, one ``ScatterND`` at the flat positions of the key's cells
    with the values expanded to the cells' shape, then the shape put back."""
    x, values, mode = ins[0], ins[1], op["mode"]
    if mode not in _REDUCTIONS:
        raise unsupported(ctx, f"scatter: an update by {mode} has no ONNX operator "
                               f"(ScatterND reduces by {sorted(set(_REDUCTIONS.values()))})")
    shapes = {i: v.shape for i, v in enumerate(ins) if i >= 2}
    cells = key_result_shape("scatter", op["key"], x.shape, shapes)
    flat = _flat_positions(ctx, op["key"], x.shape, ins, cells)
    new = values.name if mode != "subtract" else ctx.op("Neg", [values.name])
    new = ctx.op("Expand", [new, ctx.ints(cells)])
    indices = _reshaped(ctx, flat, tuple(cells) + (1,))
    source = _reshaped(ctx, x.name, (-1,))
    scattered = ctx.op("ScatterND", [source, indices, new], reduction=_REDUCTIONS[mode])
    return _reshaped(ctx, scattered, out.shape, out.name)


def _flat_positions(ctx, key, x_shape, ins, selected) -> str:
    """The flat position in ``x`` of every cell of ``x[key]`` (of shape ``selected``):
    a sum of one term per indexed axis (each shaped to broadcast against the cells),
    expanded to them."""
    rank = len(selected)
    strides = [math.prod(x_shape[a + 1:]) for a in range(len(x_shape))]
    advanced = [i for i, e in enumerate(key) if e[0] in "ai"]
    adjacent = not advanced or advanced == list(range(advanced[0], advanced[-1] + 1))
    arrays = [ins[e[1]] for e in key if e[0] == "a"]
    bshape = np.broadcast_shapes(*[a.shape for a in arrays])
    block = len(bshape)
    terms, axis, position, placed = [], 0, (None if adjacent else 0), False
    out_axis = block if not adjacent else 0
    for i, e in enumerate(key):
        if e[0] == "n":
            out_axis += 1
            continue
        stride = strides[axis]
        if e[0] in "ai":
            if not placed:
                position = out_axis if adjacent else 0
                if adjacent:
                    out_axis += block
                placed = True
            if e[0] == "i":
                terms.append(ctx.scalar(e[1] * stride, np.int64))
            else:
                v = ins[e[1]]
                pos = _index_positions(ctx, v, x_shape[axis])
                shape = ((1,) * position + (1,) * (block - len(v.shape)) + v.shape
                         + (1,) * (rank - position - block))
                pos = _reshaped(ctx, pos, shape)
                terms.append(ctx.op("Mul", [pos, ctx.scalar(stride, np.int64)]))
        else:
            start, stop, step = e[1:]
            n = len(range(start, stop, step))
            shape = [1] * rank
            shape[out_axis] = n
            cells = (start + step * np.arange(n, dtype=np.int64)) * stride
            terms.append(ctx.const(cells.reshape(shape)))
            out_axis += 1
        axis += 1
    flat = terms[0] if terms else ctx.scalar(0, np.int64)
    for term in terms[1:]:
        flat = ctx.op("Add", [flat, term])
    return ctx.op("Expand", [flat, ctx.ints(selected)])


def take_export(ctx, op, ins, out):
    x, index = ins
    positions = ctx.cast(index, np.int64)
    return ctx.op("Gather", [x.name, positions], out=out.name, axis=op["axis"])


def pad_export(ctx, op, ins, out):
    widths = op["pad_width"]
    pads = [lo for lo, _ in widths] + [hi for _, hi in widths]
    value = ctx.scalar(op["value"], out.dtype)
    return ctx.op("Pad", [ins[0].name, ctx.ints(pads), value], out=out.name, mode="constant")


def tile_export(ctx, op, ins, out):
    return ctx.op("Tile", [ins[0].name, ctx.ints(op["reps"])], out=out.name)


def repeat_export(ctx, op, ins, out):
    x, axis, r = ins[0], op["axis"], op["repeats"]
    split = x.shape[:axis + 1] + (1,) + x.shape[axis + 1:]
    wide = x.shape[:axis + 1] + (r,) + x.shape[axis + 1:]
    expanded = ctx.op("Expand", [_reshaped(ctx, x.name, split), ctx.ints(wide)])
    return _reshaped(ctx, expanded, out.shape, out.name)


def one_hot_export(ctx, op, ins, out):
    index = ctx.cast(ins[0], np.int64)
    # equality with 0..depth-1, as graphc's kernel: a negative index gives a zero row
    column = ctx.op("Unsqueeze", [index, ctx.ints([-1])])
    hot = ctx.op("Equal", [column, ctx.const(np.arange(op["depth"], dtype=np.int64))])
    return ctx.op("Cast", [hot], out=out.name, to=_onnx_type(out.dtype))


def fill_export(ctx, op, ins, out):
    from onnx import numpy_helper

    value = numpy_helper.from_array(np.asarray([op["value"]], dtype=out.dtype), "value")
    return ctx.op("ConstantOfShape", [ctx.ints(out.shape)], out=out.name, value=value)


# -- NCHW neural ops ----------------------------------------------------------------------------
def _pads(padding):
    (top, bottom), (left, right) = padding
    return [top, left, bottom, right]


def conv2d_export(ctx, op, ins, out):
    w = ins[1]   # a third input is the bias (BIASED)
    return ctx.op("Conv", [v.name for v in ins], out=out.name, kernel_shape=list(w.shape[2:]),
                  strides=list(op["stride"]), pads=_pads(op["padding"]),
                  dilations=list(op["dilation"]), group=op["groups"])


def _pool_extra(x_shape, op):
    """Extra bottom/right padding that makes ONNX's floor rule give graphc's
    (PyTorch's) output size: ``ceil_mode`` is never passed to ONNX, whose rule
    for a last window starting in the padding differs between versions."""
    extra = []
    for size, k, s, pad in zip(x_shape[2:], op["kernel"], op["stride"], op["padding"]):
        want = pool_output_size(size, k, s, pad, op["ceil_mode"])
        padded = size + pad[0] + pad[1]
        extra.append(max(0, (want - 1) * s + k - padded))
    return extra


def _with_extra(padding, extra):
    return tuple((lo, hi + e) for (lo, hi), e in zip(padding, extra))


def _pad_value(ctx, x: Value, padding, value):
    (top, bottom), (left, right) = padding
    pads = [0, 0, top, left, 0, 0, bottom, right]
    return ctx.op("Pad", [x.name, ctx.ints(pads), ctx.scalar(value, x.dtype)], mode="constant")


def _fits(padding, kernel):
    """ONNX runtimes want each pad smaller than its window."""
    return all(lo < k and hi < k for (lo, hi), k in zip(padding, kernel))


def max_pool2d_export(ctx, op, ins, out):
    x = ins[0]
    padding = _with_extra(op["padding"], _pool_extra(x.shape, op))
    name = x.name
    if not _fits(padding, op["kernel"]):   # padded cells never win: pad with -inf
        name, padding = _pad_value(ctx, x, padding, -np.inf), ((0, 0), (0, 0))
    return ctx.op("MaxPool", [name], out=out.name, kernel_shape=list(op["kernel"]),
                  strides=list(op["stride"]), pads=_pads(padding))


def avg_pool2d_export(ctx, op, ins, out):
    x = ins[0]
    extra = _pool_extra(x.shape, op)
    padding, name = op["padding"], x.name
    count_pad = op["count_include_pad"]
    if count_pad and (any(extra) or not _fits(padding, op["kernel"])):
        # PyTorch counts the real padding but not the part of a ceil_mode window past it
        name, padding, count_pad = _pad_value(ctx, x, padding, 0.0), ((0, 0), (0, 0)), False
    padding = _with_extra(padding, extra)
    if not _fits(padding, op["kernel"]):
        raise unsupported(ctx, f"padding {op['padding']} not smaller than the window "
                               f"{op['kernel']} without count_include_pad")
    return ctx.op("AveragePool", [name], out=out.name, kernel_shape=list(op["kernel"]),
                  strides=list(op["stride"]), pads=_pads(padding),
                  count_include_pad=int(count_pad))


def lrn_export(ctx, op, ins, out):
    x = ins[0]
    size, alpha, beta, k = op["size"], op["alpha"], op["beta"], op["k"]
    if size % 2 and len(x.shape) == 4:   # ONNX's window is PyTorch's for odd sizes
        return ctx.op("LRN", [x.name], out=out.name, size=size, alpha=alpha, beta=beta, bias=k)
    # PyTorch's window (size // 2 channels before, (size - 1) // 2 after) as an
    # average pooling over channels of x^2 laid out as (N, 1, C, rest)
    n, c = x.shape[:2]
    rest = math.prod(x.shape[2:])
    squares = _reshaped(ctx, ctx.op("Mul", [x.name, x.name]), (n, 1, c, rest))
    mean = ctx.op("AveragePool", [squares], kernel_shape=[size, 1],
                  pads=[size // 2, 0, (size - 1) // 2, 0], count_include_pad=1)
    base = ctx.op("Add", [ctx.op("Mul", [mean, ctx.scalar(alpha, x.dtype)]),
                          ctx.scalar(k, x.dtype)])
    scale = ctx.op("Pow", [base, ctx.scalar(-beta, x.dtype)])
    return ctx.op("Mul", [x.name, _reshaped(ctx, scale, x.shape)], out=out.name)


# -- biased forms: an add of a constant bias folded into the op (export_fold) -----------------------
def _conv_accepts(node, bias_shape):
    o = node.shape[1]
    return tuple(bias_shape) in ((1, o, 1, 1), (o, 1, 1))


def _conv_biased(ctx, op, ins, bias, out):
    b = ctx.const(np.ascontiguousarray(bias).reshape(-1))
    return conv2d_export(ctx, op, list(ins) + [Value(b, (bias.size,), out.dtype)], out)


def _matmul_accepts(node, bias_shape):
    a, b = node.parents
    return (len(a.shape) == len(b.shape) == 2 and node.dtype.kind == "f"
            and a.dtype == b.dtype == node.dtype and tuple(bias_shape) in
            ((node.shape[1],), (1, node.shape[1])))


def _matmul_biased(ctx, op, ins, bias, out):
    c = ctx.const(np.ascontiguousarray(bias))
    return ctx.op("Gemm", [ins[0].name, ins[1].name, c], out=out.name,
                  transA=int(bool(op.get("trans_a"))), transB=int(bool(op.get("trans_b"))))


#: kind -> (accepts(node, bias_shape), emit(ctx, op, ins, bias_array, out))
BIASED = {"conv2d": (_conv_accepts, _conv_biased), "matmul": (_matmul_accepts, _matmul_biased)}
