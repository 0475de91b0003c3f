"""Converters of ONNX's sampling operators: GridSample (2-D and volumetric),
AffineGrid and DeformConv, composed of graphc functions (the sampling itself is
:func:`graphc.onnx.ops.sampling.sample`), so they differentiate like any graph.

AffineGrid is a constant grid of normalised coordinates times ``theta``;
GridSample maps the grid's normalised coordinates to cells and samples; a
deformable convolution samples the input bilinearly at each kernel tap's shifted
position (``offset``), scales by ``mask`` and contracts the samples with the
weight by one grouped ``matmul``.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["AffineGrid"]
>>> node = NodeContext.for_test("AffineGrid", []).node
>>> theta = np.array([[[1, 0, 0], [0, 1, 0]]], np.float32)
>>> spec.fn(NodeContext(node, 20, [theta, np.array([1, 1, 1, 2])], {}, spec))[0, 0]
array([[-0.5,  0. ],
       [ 0.5,  0. ]], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ..registry import converter
from .nn_window import kernel_of
from .sampling import MODES, PADDINGS, sample

#: GridSample's mode names before opset 20 -> the names of opset 20 on
_OLD_MODES = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def _float_input(ctx, i, what):
    if ctx.dtype(i).kind != "f":
        raise ctx.invalid(f"{what} must be floating-point, got {ctx.dtype(i)}")


# -- GridSample --------------------------------------------------------------------------------
def _grid_mode(ctx):
    old = ctx.opset < 20
    mode = _text(ctx.attr("mode"))
    if mode is None:
        mode = "bilinear" if old else "linear"
    names = _OLD_MODES if old else {m: m for m in MODES}
    if mode not in names:
        raise ctx.invalid(f"mode must be one of {sorted(names)} at opset {ctx.opset}, "
                          f"got {mode!r}")
    padding = _text(ctx.attr("padding_mode"))
    if padding not in PADDINGS:
        raise ctx.invalid(f"padding_mode must be one of {PADDINGS}, got {padding!r}")
    return names[mode], padding


def _denormalised(ns, n, size: int, align_corners: bool):
    """Normalised coordinates (-1 and 1 the first and last cells' centres, or
    edges without ``align_corners``) as cell coordinates along an axis of ``size``."""
    if align_corners:
        return ns.multiply(ns.divide(ns.add(n, 1), 2), size - 1)
    return ns.divide(ns.subtract(ns.multiply(ns.add(n, 1), size), 1), 2)


@converter("GridSample", attrs={"align_corners": 0, "mode": None, "padding_mode": "zeros"},
           min_opset=16)
def grid_sample(ctx):
    x, grid = ctx.input(0), ctx.input(1)
    xs, gs = ctx.shape(0), ctx.shape(1)
    rank = len(xs) - 2
    if rank < 1 or len(gs) != len(xs) or gs[0] != xs[0] or gs[-1] != rank:
        raise ctx.invalid(f"the grid must be (N, D1_out, ..., {max(rank, 1)}) for an input "
                          f"(N, C, D1, ...) of the same rank; got input shape {xs}, grid "
                          f"shape {gs}")
    if ctx.opset < 20 and rank != 2:
        raise ctx.invalid(f"GridSample before opset 20 samples 4-D inputs, got shape {xs}")
    _float_input(ctx, 1, "the grid")
    mode, padding = _grid_mode(ctx)
    if mode != "nearest" and ctx.dtype(0).kind != "f":
        raise ctx.unsupported(f"{mode} interpolation of a {ctx.dtype(0)} input (the reference "
                              "truncates its weights to integers)")
    align = bool(ctx.attr("align_corners"))
    ns = ctx.ns
    n, out = xs[0], tuple(gs[1:-1])
    points = int(np.prod(out, dtype=np.int64))
    flat = ns.reshape(grid, (n, points, rank))
    coords, bounds = [], []
    for axis, size in enumerate(xs[2:]):
        # the grid's last axis lists coordinates innermost first (x, y, z)
        normalised = ns.getitem(flat, (slice(None), slice(None), rank - 1 - axis))
        coords.append(_denormalised(ns, normalised, size, align))
        bounds.append((0.0, size - 1.0) if align else (-0.5, size - 0.5))
    y = sample(ns, x, coords, mode, padding, bounds)
    return ns.reshape(y, tuple(xs[:2]) + out)


# -- AffineGrid -------------------------------------------------------------------------------
def _base_grid(sizes, align_corners: bool) -> np.ndarray:
    """The identity transform's normalised coordinates, homogeneous: one row
    ``(x, y, [z,] 1)`` per cell of ``sizes``, in row-major order."""
    axes = []
    for size in sizes:
        steps = np.arange(size, dtype=np.float64)
        if align_corners:
            axes.append(steps * (2.0 / (size - 1)) - 1 if size > 1 else np.full(1, -1.0))
        else:
            axes.append((2 * steps + 1) / size - 1)
    mesh = np.meshgrid(*axes, indexing="ij")
    columns = [m.reshape(-1) for m in reversed(mesh)]
    return np.stack(columns + [np.ones_like(columns[0])], axis=1)


@converter("AffineGrid", attrs={"align_corners": 0}, min_opset=20)
def affine_grid(ctx):
    theta = ctx.input(0)
    size = ctx.constant(1)
    ts = ctx.shape(0)
    if size.ndim != 1 or size.dtype.kind not in "iu" or len(size) not in (4, 5) or (
            size < 1).any():
        raise ctx.invalid(f"size must be (N, C, H, W) or (N, C, D, H, W), positive integers; "
                          f"got {size.tolist()}")
    rank = len(size) - 2
    if ts != (int(size[0]), rank, rank + 1):
        raise ctx.invalid(f"theta must have shape ({int(size[0])}, {rank}, {rank + 1}) for "
                          f"size {size.tolist()}, got {ts}")
    _float_input(ctx, 0, "theta")
    spatial = tuple(int(s) for s in size[2:])
    ctx.reserve((int(np.prod(spatial)), rank + 1), np.float64, "AffineGrid's base grid")
    base = _base_grid(spatial, bool(ctx.attr("align_corners"))).astype(ctx.dtype(0))
    ns = ctx.ns
    grid = ns.matmul(ctx.lift(base), ns.swapaxes(theta, 1, 2))
    return ns.reshape(grid, (ts[0],) + spatial + (rank,))


# -- DeformConv -------------------------------------------------------------------------------
def _positive(ctx, name, rank, default):
    value = ctx.attr(name)
    value = (default,) * rank if value is None else tuple(int(v) for v in value)
    if len(value) != rank or min(value) < 1:
        raise ctx.invalid(f"{name} {list(value)} must hold {rank} positive values, one per "
                          "spatial axis of the input")
    return value


def _geometry(ctx, rank):
    """``(strides, dilations, pads)`` of a node with no ``auto_pad`` (DeformConv,
    Col2Im, MaxUnpool: no dilations), ``pads`` as ``(begin, end)`` per axis."""
    strides = _positive(ctx, "strides", rank, 1)
    dilations = _positive(ctx, "dilations", rank, 1) if "dilations" in ctx.spec.attrs \
        else (1,) * rank
    flat = ctx.attr("pads")
    flat = [0] * (2 * rank) if flat is None else [int(p) for p in flat]
    if len(flat) != 2 * rank or min(flat) < 0:
        raise ctx.invalid(f"pads {flat} must hold 2 x {rank} non-negative values (the begin "
                          "of each spatial axis, then the end of each)")
    return strides, dilations, tuple((flat[i], flat[rank + i]) for i in range(rank))


@converter("DeformConv", attrs={"dilations": None, "group": 1, "kernel_shape": None,
                                "offset_group": 1, "pads": None, "strides": None},
           min_opset=19)
def deform_conv(ctx):
    x, w, offset = ctx.input(0), ctx.input(1), ctx.input(2)
    xs, ws, os_ = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    rank = len(xs) - 2
    if rank < 1 or len(ws) != len(xs) or len(os_) != len(xs):
        raise ctx.invalid(f"X (N, C, D1, ...), W and offset must have one rank, at least 3; "
                          f"got shapes {xs}, {ws}, {os_}")
    for i, what in ((0, "X"), (1, "W"), (2, "offset")):
        _float_input(ctx, i, what)
    group, offset_group = int(ctx.attr("group")), int(ctx.attr("offset_group"))
    n, channels, out_channels = xs[0], xs[1], ws[0]
    if group < 1 or offset_group < 1 or channels != ws[1] * group or out_channels % group \
            or channels % offset_group:
        raise ctx.invalid(f"group={group}, offset_group={offset_group}: X's {channels} "
                          f"channels must be W's axis 1 ({ws[1]}) times group and divisible "
                          f"by offset_group, and group must divide W's {out_channels} output "
                          f"channels (X shape {xs}, W shape {ws})")
    kernel = kernel_of(ctx, rank, ws)
    strides, dilations, pads = _geometry(ctx, rank)
    out = tuple(os_[2:])
    want = tuple((d + b + e - (k - 1) * dl - 1) // s + 1 for d, k, s, dl, (b, e) in
                 zip(xs[2:], kernel, strides, dilations, pads))
    taps = int(np.prod(kernel, dtype=np.int64))
    if out != want or os_[:2] != (n, offset_group * taps * rank):
        raise ctx.invalid(f"offset must have shape {(n, offset_group * taps * rank) + want} "
                          f"(X shape {xs}, kernel {kernel}, strides {strides}, pads {pads}, "
                          f"dilations {dilations}), got {os_}")
    mask = ctx.input(4, optional=True)
    if mask is not None and ctx.shape(4) != (n, offset_group * taps) + out:
        raise ctx.invalid(f"mask must have shape {(n, offset_group * taps) + out}, got "
                          f"{ctx.shape(4)}")
    ns = ctx.ns
    points = int(np.prod(out, dtype=np.int64))
    ctx.reserve((n, channels, taps, points), ctx.dtype(0), "DeformConv's samples")
    shifts = ns.reshape(offset, (n * offset_group, taps, rank, points))
    # each tap's unshifted position: the window's corner plus the tap's dilated place
    grids = np.meshgrid(*(np.arange(o) * s - b for o, s, (b, _) in zip(out, strides, pads)),
                        indexing="ij")
    tap_places = np.meshgrid(*(np.arange(k) * d for k, d in zip(kernel, dilations)),
                             indexing="ij")
    coords = []
    for axis in range(rank):
        place = tap_places[axis].reshape(-1, 1) + grids[axis].reshape(1, -1)
        shift = ns.getitem(shifts, (slice(None), slice(None), axis))
        coords.append(ns.reshape(ns.add(shift, place.astype(shift.dtype)),
                                 (n * offset_group, taps * points)))
    image = ns.reshape(x, (n * offset_group, channels // offset_group) + tuple(xs[2:]))
    bounds = [(0.0, size - 1.0) for size in xs[2:]]
    samples = sample(ns, image, coords, "linear", "zeros", bounds)
    samples = ns.reshape(samples, (n, offset_group, channels // offset_group, taps, points))
    if mask is not None:
        samples = ns.multiply(samples, ns.reshape(mask, (n, offset_group, 1, taps, points)))
    columns = ns.reshape(samples, (n, group, channels // group * taps, points))
    weights = ns.reshape(w, (group, out_channels // group, channels // group * taps))
    y = ns.reshape(ns.matmul(weights, columns), (n, out_channels) + out)
    b = ctx.input(3, optional=True)
    if b is not None:
        if ctx.shape(3) != (out_channels,):
            raise ctx.invalid(f"the bias must have shape ({out_channels},), got {ctx.shape(3)}")
        y = ns.add(y, ns.reshape(b, (out_channels,) + (1,) * rank))
    return y

