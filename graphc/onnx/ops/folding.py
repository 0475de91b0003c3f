"""Converters of ONNX's Col2Im and MaxUnpool: values put back into an image.

Col2Im sums each sliding block's columns into the image cells they came from. A
2-D float one is graphc's ``col2im`` (the transpose of ``im2col``, the kind a
convolution's input gradient uses); any other rank or dtype is one ``scatter``
``add`` of the columns at static flat indices, computed here. MaxUnpool puts
each value at its (run-time) flat index in a zero image with one ``scatter``;
an ``output_shape`` larger than the unpooled one pads it at the end, as the
reference does.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["MaxUnpool"]
>>> node = NodeContext.for_test("MaxUnpool", []).node
>>> x, where = np.array([[[[5.0]]]]), np.array([[[[3]]]])
>>> spec.fn(NodeContext(node, 11, [x, where], {"kernel_shape": [2, 2]}, spec))[0, 0]
array([[0., 0.],
       [0., 5.]])
"""
from __future__ import annotations

import numpy as np

from ..registry import REQUIRED, converter
from .vision import _geometry


def _shape_input(ctx, i, what, rank=None):
    value = ctx.constant(i)
    if value.ndim != 1 or value.dtype.kind not in "iu" or (value < 1).any() or (
            rank is not None and len(value) != rank):
        raise ctx.invalid(f"{what} must be a 1-D list of positive integers"
                          f"{'' if rank is None else f' ({rank} of them)'}, got {value.tolist()}")
    return tuple(int(v) for v in value)


# -- Col2Im ---------------------------------------------------------------------------------------
def block_indices(image, block, strides, dilations, pads):
    """``(kept, cells)``: which entries of the flattened ``(K, L)`` columns (K block
    taps, L blocks, both row-major) fall inside the image, and the flat image cell
    each of those lands on.

    Example: ``block_indices((3,), (2,), (1,), (1,), ((0, 0),))`` gives
    ``kept`` all True and ``cells`` ``[0, 1, 1, 2]``.
    """
    blocks = [(n + b + e - (k - 1) * d - 1) // s + 1
              for n, k, s, d, (b, e) in zip(image, block, strides, dilations, pads)]
    rank = len(image)
    # per axis, the cell of (tap, block), broadcast to (K0, .., L0, ..)
    inside, cells = True, 0
    for axis, (n, k, s, d, (b, _), count) in enumerate(zip(image, block, strides, dilations,
                                                          pads, blocks)):
        place = np.arange(k).reshape(-1, 1) * d + np.arange(count).reshape(1, -1) * s - b
        shape = [1] * (2 * rank)
        shape[axis], shape[rank + axis] = k, count
        place = place.reshape(shape)
        inside = inside & (place >= 0) & (place < n)
        cells = cells * n + place
    full = tuple(block) + tuple(blocks)
    inside, cells = np.broadcast_to(inside, full).reshape(-1), np.broadcast_to(cells, full)
    return inside, cells.reshape(-1)[inside]


@converter("Col2Im", attrs={"dilations": None, "pads": None, "strides": None}, min_opset=18)
def col2im(ctx):
    x, xs = ctx.input(0), ctx.shape(0)
    image = _shape_input(ctx, 1, "image_shape")
    block = _shape_input(ctx, 2, "block_shape", len(image))
    rank = len(image)
    strides, dilations, pads = _geometry(ctx, rank)
    taps = int(np.prod(block, dtype=np.int64))
    blocks = [(n + b + e - (k - 1) * d - 1) // s + 1
              for n, k, s, d, (b, e) in zip(image, block, strides, dilations, pads)]
    if len(xs) != 3 or xs[1] % taps or min(blocks) < 1 or xs[2] != int(np.prod(blocks)):
        raise ctx.invalid(f"the input must be (N, C x {taps}, {int(np.prod(blocks))}): C "
                          f"channels of the {taps} taps of block {list(block)} in each of the "
                          f"{blocks} blocks of image {list(image)} (strides {list(strides)}, "
                          f"dilations {list(dilations)}, pads {list(pads)}); got shape {xs}")
    n, channels = xs[0], xs[1] // taps
    ns = ctx.ns
    if rank == 2 and ctx.dtype(0) in (np.float32, np.float64):
        return ns.col2im(x, (n, channels) + image, block, strides, pads, dilations)
    ctx.reserve((taps * xs[2],), np.int64, "Col2Im's indices")
    kept, cells = block_indices(image, block, strides, dilations, pads)
    values = ns.reshape(x, (n, channels, taps * xs[2]))
    if not kept.all():
        values = ns.take(values, np.flatnonzero(kept), axis=2)
    size = int(np.prod(image, dtype=np.int64))
    zeros = ns.zeros((n, channels, size), ctx.dtype(0))
    summed = ns._updated(zeros, (slice(None), slice(None), cells), values, "add", "Col2Im")
    return ns.reshape(summed, (n, channels) + image)


# -- MaxUnpool ------------------------------------------------------------------------------------
@converter("MaxUnpool", attrs={"kernel_shape": REQUIRED, "pads": None, "strides": None},
           min_opset=9)
def max_unpool(ctx):
    x, where = ctx.input(0), ctx.input(1)
    xs = ctx.shape(0)
    rank = len(xs) - 2
    if rank < 1 or ctx.shape(1) != xs:
        raise ctx.invalid(f"X (N, C, D1, ...) and I must have one shape; got {xs} and "
                          f"{ctx.shape(1)}")
    if ctx.dtype(1).kind not in "iu":
        raise ctx.invalid(f"I must hold integer indices, got {ctx.dtype(1)}")
    kernel = tuple(int(k) for k in ctx.attr("kernel_shape"))
    if len(kernel) != rank or min(kernel) < 1:
        raise ctx.invalid(f"kernel_shape {list(kernel)} must hold {rank} positive values")
    strides, _, pads = _geometry(ctx, rank)
    unpooled = tuple(xs[:2]) + tuple((d - 1) * s - b - e + k for d, s, (b, e), k in
                                     zip(xs[2:], strides, pads, kernel))
    if min(unpooled) < 1:
        raise ctx.invalid(f"kernel {list(kernel)}, strides {list(strides)} and pads "
                          f"{list(pads)} leave no output for X of shape {xs}")
    shape = unpooled
    if ctx.has_input(2):
        shape = _shape_input(ctx, 2, "output_shape", len(xs))
        if any(s < u for s, u in zip(shape, unpooled)) or shape[:2] != unpooled[:2]:
            raise ctx.invalid(f"output_shape {list(shape)} must keep N and C and be at least "
                              f"the unpooled shape {list(unpooled)}")
    ns = ctx.ns
    total = int(np.prod(unpooled, dtype=np.int64))
    known = where if isinstance(where, np.ndarray) else None
    if known is not None and known.size and (known.min() < -total or known.max() >= total):
        raise ctx.invalid(f"I holds indices outside the {total} cells of the unpooled "
                          f"shape {list(unpooled)}")
    zeros = ns.zeros((total,), ctx.dtype(0))
    flat = ns._updated(zeros, (ns.reshape(where, (-1,)),), ns.reshape(x, (-1,)), "set",
                       "MaxUnpool")
    y = ns.reshape(flat, unpooled)
    if shape != unpooled:
        y = ns.pad(y, [(0, s - u) for s, u in zip(shape, unpooled)])
    return y
