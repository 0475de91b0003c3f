"""Converters of ONNX's shape, data-movement and constant operators: Constant,
ConstantOfShape, Identity, Shape, Size, Reshape, Flatten, Transpose, Squeeze,
Unsqueeze, Concat, Split, Slice, Gather, GatherElements, Pad, Expand, Tile,
Dropout (inference), Range, EyeLike, OneHot, Trilu, DepthToSpace, SpaceToDepth.

graphc graphs have static shapes, so every shape-like input (Reshape's shape,
Slice's starts, Pad's pads, ...) must be known while importing
(``ctx.constant``), and Shape/Size of a graph value are NumPy constants: the
usual ``Shape -> Gather -> Concat -> Reshape`` chains then fold at import.
Every size such an input asks for is measured before anything is allocated
(``ctx.reserve``; the namespaces measure their own results).

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["Reshape"]
>>> node = NodeContext.for_test("Reshape", []).node
>>> spec.fn(NodeContext(node, 14, [np.zeros((2, 3)), np.array([0, -1])], {}, spec)).shape
(2, 3)
"""
from __future__ import annotations

import math

import numpy as np

from ..registry import REQUIRED, converter
from ..tensors import onnx_dtype


# -- helpers ------------------------------------------------------------------------------------
def _ints(ctx, i, optional=False):
    """Constant input ``i`` as a list of Python ints (None if absent and optional)."""
    value = ctx.constant(i, optional=optional)
    if value is None:
        return None
    if value.dtype.kind not in "iu":
        raise ctx.invalid(f"input {i} must be an integer tensor, got {value.dtype}")
    if value.ndim > 1:
        raise ctx.invalid(f"input {i} must be a 1-D list of integers, got shape {value.shape}")
    return [int(v) for v in np.ravel(value)]


def _axis(ctx, axis, rank, what="axis"):
    """``axis`` in ``[-rank, rank)`` made non-negative; an error naming the node otherwise."""
    axis = int(axis)
    if not -rank <= axis < rank:
        raise ctx.invalid(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _axes(ctx, axes, rank, what="axes"):
    out = [_axis(ctx, a, rank, what) for a in axes]
    if len(set(out)) != len(out):
        raise ctx.invalid(f"{what} {list(axes)} repeat an axis")
    return out


def _scalar(ctx, i):
    value = ctx.constant(i)
    if value.size != 1:
        raise ctx.invalid(f"input {i} must hold one value, got shape {value.shape}")
    return value.reshape(()).item()


def _attr_or_input(ctx, name, i, first_input_opset):
    """A list given as attribute ``name`` before ``first_input_opset``, as input ``i`` from it."""
    if ctx.opset < first_input_opset:
        value = ctx.attr(name)
        return None if value is None else [int(v) for v in value]
    if ctx.has_attr(name):
        raise ctx.invalid(f"{name!r} is an input from opset {first_input_opset}, not an "
                          f"attribute (the model uses opset {ctx.opset})")
    return _ints(ctx, i, optional=True)


# -- constants ----------------------------------------------------------------------------------
_CONSTANT_ATTRS = {"value": None, "value_float": None, "value_floats": None, "value_int": None,
                   "value_ints": None, "value_string": None, "value_strings": None,
                   "sparse_value": None}


@converter("Constant", attrs=_CONSTANT_ATTRS)
def constant(ctx):
    given = [name for name in _CONSTANT_ATTRS if ctx.has_attr(name)]
    if len(given) != 1:
        raise ctx.invalid(f"exactly one value attribute must be set, got {given}")
    name = given[0]
    value = ctx.attr(name)
    if name in ("value_string", "value_strings", "sparse_value"):
        raise ctx.unsupported(f"attribute {name!r}: string and sparse constants are not "
                              "supported (graphc computes on numeric arrays)")
    if name == "value":
        return np.asarray(value)
    dtype = np.float32 if name.startswith("value_float") else np.int64
    return np.asarray(value, dtype=dtype)


@converter("ConstantOfShape", attrs={"value": None})
def constant_of_shape(ctx):
    shape = _ints(ctx, 0)
    if any(d < 0 for d in shape):
        raise ctx.invalid(f"the shape {shape} has a negative dimension")
    value = ctx.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    if value.size != 1:
        raise ctx.invalid(f"attribute 'value' must hold one element, got shape {value.shape}")
    # a fill: folded when small, a graph operation (computed at run time) when large
    return ctx.ns.full(tuple(shape), value.reshape(()), dtype=value.dtype)


@converter("Identity")
def identity(ctx):
    return ctx.input(0)


@converter("Shape", attrs={"start": 0, "end": None})
def shape(ctx):
    dims = ctx.shape(0)
    start, end = int(ctx.attr("start")), ctx.attr("end")
    # Python's slice clamps out-of-range and negative bounds exactly as the spec says
    return np.array(dims[start:None if end is None else int(end)], dtype=np.int64)


@converter("Size")
def size(ctx):
    return np.array(math.prod(ctx.shape(0)), dtype=np.int64)


@converter("EyeLike", attrs={"dtype": None, "k": 0})
def eye_like(ctx):
    shape = ctx.shape(0)
    if len(shape) != 2:
        raise ctx.invalid(f"the input must be 2-D, got shape {shape}")
    dtype = ctx.dtype(0) if ctx.attr("dtype") is None else onnx_dtype(ctx.attr("dtype"),
                                                                        "attribute 'dtype'")
    ctx.reserve_import_only(shape, dtype, "EyeLike's identity")
    return np.eye(shape[0], shape[1], int(ctx.attr("k")), dtype=dtype)


@converter("Range")
def range_(ctx):
    start, limit, delta = (ctx.constant(i) for i in range(3))
    shapes = [v.shape for v in (start, limit, delta)]
    # onnx's own function bodies (AffineGrid's) pass one-element tensors, which its
    # reference takes as the scalar they hold
    if any(np.size(v) != 1 for v in (start, limit, delta)):
        raise ctx.invalid(f"start, limit and delta must be scalars, got shapes {shapes}")
    dtype = start.dtype
    start, limit, delta = (v.reshape(()).item() for v in (start, limit, delta))
    if delta == 0:
        raise ctx.invalid("delta must not be zero")
    count = max(math.ceil((limit - start) / delta), 0)
    # np.arange's values, scaled, then cast: two 8-byte arrays of count at most
    ctx.reserve_import_only((2, count), np.float64, "Range's values")
    return (start + np.arange(count) * delta).astype(dtype)


# -- reshapes -----------------------------------------------------------------------------------
@converter("Reshape", attrs={"shape": None, "allowzero": 0, "consumed_inputs": None})
def reshape(ctx):
    x, old = ctx.input(0), ctx.shape(0)
    target = ([int(d) for d in ctx.attr("shape")] if ctx.opset < 5 else _ints(ctx, 1))
    allowzero = bool(ctx.attr("allowzero"))
    if allowzero and 0 in target and -1 in target:
        raise ctx.invalid(f"with allowzero=1 the shape {target} cannot hold both 0 and -1")
    dims = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            if i >= len(old):
                raise ctx.invalid(f"shape {target}: 0 at position {i} copies an input "
                                  f"dimension, but the input {old} has rank {len(old)}")
            d = old[i]
        dims.append(d)
    size = math.prod(old)
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if dims.count(-1) > 1 or known == 0 or size % known:
            raise ctx.invalid(f"cannot reshape {old} into {target}")
        dims[dims.index(-1)] = size // known
    if any(d < 0 for d in dims) or math.prod(dims) != size:
        raise ctx.invalid(f"cannot reshape {old} (size {size}) into {target}")
    return ctx.ns.reshape(x, tuple(dims))


@converter("Flatten", attrs={"axis": 1})
def flatten(ctx):
    dims = ctx.shape(0)
    axis = int(ctx.attr("axis"))
    if not -len(dims) <= axis <= len(dims):
        raise ctx.invalid(f"axis {axis} is out of range for rank {len(dims)}")
    axis = axis + len(dims) if axis < 0 else axis
    return ctx.ns.reshape(ctx.input(0), (math.prod(dims[:axis]), math.prod(dims[axis:])))


@converter("Squeeze", attrs={"axes": None})
def squeeze(ctx):
    x, dims = ctx.input(0), ctx.shape(0)
    axes = _attr_or_input(ctx, "axes", 1, 13)
    if axes is None:
        axes = [i for i, d in enumerate(dims) if d == 1]
    axes = _axes(ctx, axes, len(dims))
    bad = [a for a in axes if dims[a] != 1]
    if bad:
        raise ctx.invalid(f"cannot squeeze axis {bad[0]} of shape {dims}: its size is not 1")
    return ctx.ns.reshape(x, tuple(d for i, d in enumerate(dims) if i not in axes))


@converter("Unsqueeze", attrs={"axes": None})
def unsqueeze(ctx):
    x, dims = ctx.input(0), ctx.shape(0)
    axes = _attr_or_input(ctx, "axes", 1, 13)
    if axes is None:
        raise ctx.invalid("the axes are required")
    rank = len(dims) + len(axes)
    axes = _axes(ctx, axes, rank)
    rest = iter(dims)
    return ctx.ns.reshape(x, tuple(1 if i in axes else next(rest) for i in range(rank)))


@converter("Transpose", attrs={"perm": None})
def transpose(ctx):
    rank = len(ctx.shape(0))
    perm = ctx.attr("perm")
    if perm is not None and any(not 0 <= int(p) < rank for p in perm):
        raise ctx.invalid(f"perm {list(perm)} must list the axes 0 to {rank - 1}")
    perm = list(reversed(range(rank))) if perm is None else _axes(ctx, perm, rank, "perm")
    if len(perm) != rank:
        raise ctx.invalid(f"perm {perm} must list each of the {rank} axes once")
    return ctx.ns.transpose(ctx.input(0), tuple(perm))


@converter("DepthToSpace", "SpaceToDepth", attrs={"blocksize": REQUIRED, "mode": "DCR"})
def depth_space(ctx):
    x, dims, b = ctx.input(0), ctx.shape(0), int(ctx.attr("blocksize"))
    mode = ctx.attr("mode")
    if len(dims) != 4 or b < 1:
        raise ctx.invalid(f"needs a 4-D (N, C, H, W) input and a positive blocksize, got "
                          f"shape {dims}, blocksize {b}")
    if mode not in ("DCR", "CRD"):
        raise ctx.invalid(f"mode must be 'DCR' or 'CRD', got {mode!r}")
    n, c, h, w = dims
    ns = ctx.ns
    if ctx.node.op_type == "DepthToSpace":
        if c % (b * b):
            raise ctx.invalid(f"the channels ({c}) must be a multiple of blocksize² ({b * b})")
        if mode == "DCR":
            y = ns.transpose(ns.reshape(x, (n, b, b, c // (b * b), h, w)), (0, 3, 4, 1, 5, 2))
        else:
            y = ns.transpose(ns.reshape(x, (n, c // (b * b), b, b, h, w)), (0, 1, 4, 2, 5, 3))
        return ns.reshape(y, (n, c // (b * b), h * b, w * b))
    if h % b or w % b:
        raise ctx.invalid(f"height and width {h, w} must be multiples of the blocksize {b}")
    y = ns.reshape(x, (n, c, h // b, b, w // b, b))
    y = ns.transpose(y, (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4))
    return ns.reshape(y, (n, c * b * b, h // b, w // b))


# -- joins and splits ---------------------------------------------------------------------------
@converter("Concat", attrs={"axis": None})
def concat(ctx):
    values = [v for v in ctx.inputs if v is not None]
    rank = len(np.shape(values[0]))
    axis = ctx.attr("axis")
    if axis is None:
        if ctx.opset >= 4:
            raise ctx.invalid("attribute 'axis' is required")
        axis = 1
    axis = _axis(ctx, axis, rank)
    # an empty part adds nothing (ONNX lets it differ in rank-compatible ways NumPy refuses)
    parts = [v for v in values if np.shape(v)[axis] or len(values) == 1]
    if not parts:
        return values[0]
    return ctx.ns.concatenate(parts, axis=axis)


@converter("Split", attrs={"axis": 0, "split": None, "num_outputs": None})
def split(ctx):
    x, dims = ctx.input(0), ctx.shape(0)
    axis = _axis(ctx, ctx.attr("axis"), len(dims))
    size, n = dims[axis], len(ctx.node.output)
    if ctx.opset < 13:
        sizes = ctx.attr("split")
        if sizes is None and ctx.has_input(1):  # opset 1 also took it as an input
            sizes = _ints(ctx, 1)
    else:
        sizes = _ints(ctx, 1, optional=True)
    if sizes is not None:
        if ctx.has_attr("num_outputs"):
            raise ctx.invalid("give either the 'split' input or num_outputs, not both")
        sizes = [int(s) for s in sizes]
        if len(sizes) != n or sum(sizes) != size or min(sizes) < 0:
            raise ctx.invalid(f"split sizes {sizes} must be {n} non-negative numbers adding up "
                              f"to the size {size} of axis {axis}")
    elif ctx.opset >= 18:
        num = ctx.attr("num_outputs")
        if num is None or int(num) != n:
            raise ctx.invalid(f"needs the 'split' input or num_outputs equal to the number of "
                              f"outputs ({n}), got num_outputs={num}")
        chunk = -(-size // n)
        sizes = [min(chunk, max(size - chunk * i, 0)) for i in range(n)]
    else:
        if size % n:
            raise ctx.invalid(f"axis {axis} of size {size} cannot be split into {n} equal parts")
        sizes = [size // n] * n
    prefix = (slice(None),) * axis
    out, start = [], 0
    for s in sizes:
        out.append(ctx.ns.getitem(x, prefix + (slice(start, start + s),)))
        start += s
    return tuple(out)


# -- indexing -----------------------------------------------------------------------------------
def _clamped_slice(start, end, step, dim):
    """The spec's effective bounds as a Python slice (NumPy clamps a negative-step start
    below 0 to an empty range where ONNX clamps it to 0)."""
    if dim == 0:
        return slice(0, 0, 1)
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return slice(start, end, step)
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return slice(start, None if end < 0 else end, step)


@converter("Slice", attrs={"starts": None, "ends": None, "axes": None})
def slice_(ctx):
    x, dims = ctx.input(0), ctx.shape(0)
    if ctx.opset < 10:
        starts, ends, axes, steps = (ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes"),
                                     None)
        if starts is None or ends is None:
            raise ctx.invalid("attributes 'starts' and 'ends' are required")
    else:
        starts, ends = _ints(ctx, 1), _ints(ctx, 2)
        axes, steps = _ints(ctx, 3, optional=True), _ints(ctx, 4, optional=True)
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.invalid(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} must "
                          "have the same length")
    key = [slice(None)] * len(dims)
    for a, s, e, st in zip(_axes(ctx, axes, len(dims)), starts, ends, steps):
        if st == 0:
            raise ctx.invalid("steps must not be zero")
        key[a] = _clamped_slice(int(s), int(e), int(st), dims[a])
    return ctx.ns.getitem(x, tuple(key))


def _indices(ctx, i, size):
    """Index input ``i`` checked against ``size`` when it is known."""
    indices = ctx.input(i)
    if indices.dtype.kind not in "iu":
        raise ctx.invalid(f"indices must be integers, got {indices.dtype}")
    if isinstance(indices, np.ndarray) and indices.size and (
            indices.min() < -size or indices.max() >= size):
        raise ctx.invalid(f"indices must lie in [{-size}, {size - 1}], got values from "
                          f"{indices.min()} to {indices.max()}")
    return indices


@converter("Gather", attrs={"axis": 0})
def gather(ctx):
    dims = ctx.shape(0)
    axis = _axis(ctx, ctx.attr("axis"), len(dims))
    indices = _indices(ctx, 1, dims[axis])
    return ctx.ns.take(ctx.input(0), indices, axis=axis)


@converter("GatherElements", attrs={"axis": 0})
def gather_elements(ctx):
    dims, index_shape = ctx.shape(0), ctx.shape(1)
    if len(dims) != len(index_shape):
        raise ctx.invalid(f"indices {index_shape} must have the rank of the data {dims}")
    axis = _axis(ctx, ctx.attr("axis"), len(dims))
    indices = _indices(ctx, 1, dims[axis])
    key = []
    for i, d in enumerate(index_shape):
        if i == axis:
            key.append(indices)
        else:  # the position along every other axis, broadcast over the indices' shape
            key.append(np.arange(d).reshape((d,) + (1,) * (len(dims) - i - 1)))
    return ctx.ns.getitem(ctx.input(0), tuple(key))


# -- padding and repetition ---------------------------------------------------------------------
_NUMPY_PAD_MODES = {"reflect": "reflect", "edge": "edge", "wrap": "wrap"}


@converter("Pad", attrs={"mode": "constant", "pads": None, "paddings": None, "value": 0.0})
def pad(ctx):
    x, dims = ctx.input(0), ctx.shape(0)
    rank, mode = len(dims), ctx.attr("mode")
    if ctx.opset < 11:
        pads = ctx.attr("pads" if ctx.opset >= 2 else "paddings")
        if pads is None:
            raise ctx.invalid("attribute 'pads' is required")
        value, axes = ctx.attr("value"), list(range(rank))
    else:
        pads = _ints(ctx, 1)
        value = ctx.input(2, optional=True)  # may be computed in the graph: it moves no shape
        if value is None or np.size(value) == 0:
            value = 0
        elif np.size(value) != 1:
            raise ctx.invalid(f"constant_value must be a scalar, got shape {np.shape(value)}")
        elif isinstance(value, np.ndarray):
            value = value.reshape(()).item()
        axes = _ints(ctx, 3, optional=True) if ctx.opset >= 18 else None
        axes = list(range(rank)) if axes is None else _axes(ctx, axes, rank)
    pads = [int(p) for p in pads]
    if len(pads) != 2 * len(axes):
        raise ctx.invalid(f"pads {pads} must hold two numbers per padded axis ({len(axes)})")
    widths = [(0, 0)] * rank
    for i, a in enumerate(axes):
        widths[a] = (pads[i], pads[i + len(axes)])
    if any(d + lo + hi < 0 for d, (lo, hi) in zip(dims, widths)):
        raise ctx.invalid(f"pads {pads} crop more than the input's shape {dims} holds")
    if mode != "constant" and mode not in _NUMPY_PAD_MODES:
        raise ctx.invalid(f"mode must be constant, reflect, edge or wrap, got {mode!r}")
    # negative pads crop first
    crop = tuple(slice(-lo if lo < 0 else 0, d + hi if hi < 0 else d)
                 for (lo, hi), d in zip(widths, dims))
    ns = ctx.ns
    if any(lo < 0 or hi < 0 for lo, hi in widths):
        x = ns.getitem(x, crop)
    widths = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
    if mode == "constant":
        if not isinstance(value, (int, float, bool, complex)):  # a graph value: pad, then fill
            ctx.reserve([d + lo + hi for d, (lo, hi) in zip(np.shape(x), widths)], np.bool_,
                        "Pad's mask")
            inside = np.pad(np.ones(np.shape(x), bool), widths)
            value = ns.astype(ns.reshape(value, ()), ctx.dtype(0))
            return ns.where(inside, ns.pad(x, widths), value)
        value = np.asarray(value).astype(ctx.dtype(0)).item()
        return ns.pad(x, widths, constant_values=value)
    for a, (lo, hi) in enumerate(widths):
        if lo or hi:
            size = np.shape(x)[a]
            if size == 0 or (mode == "reflect" and size == 1):
                raise ctx.invalid(f"{mode} padding of axis {a} needs more than "
                                  f"{size} element(s)")
            ctx.reserve((size + lo + hi,), np.int64, f"Pad's indices along axis {a}")
            index = np.pad(np.arange(size), (lo, hi), mode=_NUMPY_PAD_MODES[mode])
            x = ns.take(x, index, axis=a)
    return x


@converter("Expand")
def expand(ctx):
    target = _ints(ctx, 1)
    try:
        out = np.broadcast_shapes(ctx.shape(0), tuple(target))
    except ValueError:
        raise ctx.invalid(f"the input's shape {ctx.shape(0)} does not broadcast with "
                          f"{target}") from None
    x = ctx.input(0)
    if len(out) > len(ctx.shape(0)):
        x = ctx.ns.reshape(x, (1,) * (len(out) - len(ctx.shape(0))) + ctx.shape(0))
    return ctx.ns.broadcast_to(x, out)


@converter("Tile")
def tile(ctx):
    reps, dims = _ints(ctx, 1), ctx.shape(0)
    if len(reps) != len(dims) or min(reps, default=0) < 0:
        raise ctx.invalid(f"repeats {reps} must be one non-negative count per axis of {dims}")
    return ctx.ns.tile(ctx.input(0), tuple(reps))


# -- masks and one-hot --------------------------------------------------------------------------
@converter("Trilu", attrs={"upper": 1})
def trilu(ctx):
    x, dims = ctx.input(0), ctx.shape(0)
    if len(dims) < 2:
        raise ctx.invalid(f"the input must have rank 2 or more, got shape {dims}")
    ns = ctx.ns
    k = ctx.input(1, optional=True)
    if k is None:
        k = np.zeros((), np.int64)
    elif np.shape(k) not in ((), (1,)):
        raise ctx.invalid(f"k must be a scalar, got shape {np.shape(k)}")
    else:  # k moves no shape, so it may be computed in the graph
        k = ns.reshape(k, ())
    ctx.reserve(dims[-2:], np.int64, "Trilu's diagonals")
    diagonal = np.arange(dims[-1])[None, :] - np.arange(dims[-2])[:, None]
    keep = ns.greater_equal(diagonal, k) if ctx.attr("upper") else ns.less_equal(diagonal, k)
    return ns.where(keep, x, np.zeros((), ctx.dtype(0)))


@converter("OneHot", attrs={"axis": -1})
def one_hot(ctx):
    indices, rank = ctx.input(0), len(ctx.shape(0))
    depth = _scalar(ctx, 1)
    values = ctx.constant(2)
    if values.shape != (2,):
        raise ctx.invalid(f"values must be [off_value, on_value], got shape {values.shape}")
    depth = int(depth)
    if depth < 1:
        raise ctx.invalid(f"depth must be positive, got {depth}")
    axis = ctx.attr("axis")
    if not -rank - 1 <= axis <= rank:
        raise ctx.invalid(f"axis {axis} is out of range for an output of rank {rank + 1}")
    axis = axis + rank + 1 if axis < 0 else axis
    ns = ctx.ns
    # the spec casts indices to int64 (a float truncates, as in onnxruntime >= 1.32);
    # negative in-range indices count from the end, out-of-range ones match nothing
    kind = np.int64
    ctx.reserve((depth,), kind, "OneHot's classes")
    indices = ns.astype(indices, kind)
    indices = ns.where(ns.less(indices, 0), ns.add(indices, np.asarray(depth, kind)), indices)
    targets = np.arange(depth, dtype=kind).reshape((depth,) + (1,) * (rank - axis))
    hot = ns.equal(ns.expand_dims(indices, axis), targets)
    off, on = values.ravel()
    return ns.where(hot, np.asarray(on), np.asarray(off))


@converter("Dropout", attrs={"ratio": 0.5, "is_test": 0, "consumed_inputs": None, "seed": None})
def dropout(ctx):
    x, dims = ctx.input(0), ctx.shape(0)
    if ctx.opset < 7:
        training, ratio = not ctx.attr("is_test"), float(ctx.attr("ratio"))
    elif ctx.opset < 12:
        training, ratio = False, float(ctx.attr("ratio"))
    else:  # the ratio matters only when training, so only then must it be a constant
        training = bool(_scalar(ctx, 2)) if ctx.has_input(2) else False
        ratio = float(_scalar(ctx, 1)) if training and ctx.has_input(1) else 0.5
    if training and ratio != 0:
        raise ctx.unsupported(f"training-mode dropout (ratio {ratio}) draws a random mask; "
                              "only inference (or ratio 0) is supported")
    if ctx.n_outputs < 2:
        return x
    mask_dtype = np.bool_ if ctx.opset >= 10 else ctx.dtype(0)
    ctx.reserve(dims, mask_dtype, "Dropout's mask")
    return x, np.ones(dims, dtype=mask_dtype)
