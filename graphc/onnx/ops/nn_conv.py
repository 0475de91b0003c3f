"""Converters of ONNX's Conv and ConvTranspose.

A 2-D convolution is ``conv2d`` and a 2-D transposed one is
``conv2d_backward_input`` (its value is exactly the transposed convolution); a
1-D one runs as 2-D with a unit height. Higher ranks are composed along the
first spatial axis: each kernel tap along it is a lower-rank convolution with
that axis folded into the batch, and the taps are summed (for ConvTranspose,
each tap's result is spread ``stride`` apart and shifted into place).

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["Conv"]
>>> x, w = np.ones((1, 1, 4), np.float32), np.ones((1, 1, 3), np.float32)
>>> spec.fn(NodeContext(NodeContext.for_test("Conv", []).node, 11, [x, w], {}, spec))
array([[[3., 3.]]], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ..registry import converter
from .nn_window import kernel_of, window

_CONV_ATTRS = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None,
               "pads": None, "strides": None}


def _operands(ctx):
    x, w = ctx.input(0), ctx.input(1)
    xs, ws = ctx.shape(0), ctx.shape(1)
    if len(xs) < 3 or len(ws) != len(xs):
        raise ctx.invalid(f"the input (N, C, D1, ...) and the weight must have the same rank, "
                          f"at least 3; got input shape {xs}, weight shape {ws}")
    for i in (0, 1):
        if ctx.dtype(i).kind != "f":
            raise ctx.invalid(f"input {i} must be floating-point, got {ctx.dtype(i)}")
    group = int(ctx.attr("group"))
    if group < 1:
        raise ctx.invalid(f"group must be positive, got {group}")
    return x, w, xs, ws, group


def _bias(ctx, y, channels, rank):
    b = ctx.input(2, optional=True)
    if b is None:
        return y
    if ctx.shape(2) != (channels,):
        raise ctx.invalid(f"the bias must have shape ({channels},), got {ctx.shape(2)}")
    return ctx.ns.add(y, ctx.ns.reshape(b, (channels,) + (1,) * rank))


@converter("Conv", attrs=_CONV_ATTRS)
def conv(ctx):
    x, w, xs, ws, group = _operands(ctx)
    rank = len(xs) - 2
    kernel = kernel_of(ctx, rank, ws)
    strides, dilations, pads = window(ctx, xs[2:], kernel)
    if xs[1] != ws[1] * group or ws[0] % group:
        raise ctx.invalid(f"group={group}: the input's {xs[1]} channels must be the weight's "
                          f"axis 1 ({ws[1]}) times group, and group must divide the weight's "
                          f"{ws[0]} output channels (input shape {xs}, weight shape {ws})")
    for n, k, d, p in zip(xs[2:], kernel, dilations, pads):
        if n + p[0] + p[1] < (k - 1) * d + 1:
            raise ctx.invalid(f"the kernel {kernel} (dilations {dilations}) is larger than the "
                              f"padded input: input shape {xs}, pads {pads}")
    y = _conv(ctx.ns, x, w, strides, pads, dilations, group)
    return _bias(ctx, y, ws[0], rank)


def _conv(ns, x, w, strides, pads, dilations, group):
    """The N-d convolution of ``x`` with ``w`` (see the module docstring)."""
    rank = len(x.shape) - 2
    if rank == 2:
        return ns.conv2d(x, w, strides, pads, dilations, group)
    if rank == 1:
        n, c, length = x.shape
        y = ns.conv2d(ns.reshape(x, (n, c, 1, length)), ns.reshape(w, w.shape[:2] + (1,) +
                                                                   w.shape[2:]),
                      (1, strides[0]), ((0, 0), pads[0]), (1, dilations[0]), group)
        return ns.reshape(y, y.shape[:2] + y.shape[3:])
    n, c, depth = x.shape[:3]
    (begin, end), s, d, k = pads[0], strides[0], dilations[0], w.shape[2]
    padded = ns.pad(x, [(0, 0), (0, 0), (begin, end)] + [(0, 0)] * (rank - 1))
    out = (depth + begin + end - (k - 1) * d - 1) // s + 1
    total = None
    for tap in range(k):
        part = ns.getitem(padded, (slice(None), slice(None),
                                   slice(tap * d, tap * d + (out - 1) * s + 1, s)))
        part = ns.reshape(ns.moveaxis(part, 2, 1), (n * out, c) + tuple(x.shape[3:]))
        y = _conv(ns, part, ns.getitem(w, (slice(None), slice(None), tap)), strides[1:],
                  pads[1:], dilations[1:], group)
        total = y if total is None else ns.add(total, y)
    total = ns.reshape(total, (n, out) + tuple(total.shape[1:]))
    return ns.moveaxis(total, 1, 2)


@converter("ConvTranspose", attrs={**_CONV_ATTRS, "output_padding": None,
                                   "output_shape": None})
def conv_transpose(ctx):
    x, w, xs, ws, group = _operands(ctx)
    rank = len(xs) - 2
    kernel = kernel_of(ctx, rank, ws)
    if ws[0] != xs[1] or xs[1] % group:
        raise ctx.invalid(f"the weight's axis 0 ({ws[0]}) must be the input's {xs[1]} "
                          f"channels, divisible by group={group} (input shape {xs}, weight "
                          f"shape {ws})")
    strides, dilations, pads = _transpose_window(ctx, xs[2:], kernel)
    extra = ctx.attr("output_padding")
    extra = (0,) * rank if extra is None else tuple(int(e) for e in extra)
    if len(extra) != rank:
        raise ctx.invalid(f"output_padding {list(extra)} must hold {rank} values")
    # the output is the full transposed convolution, output_padding zeros appended, then
    # cropped by pads (negative ones, from output_shape, grow it with zeros instead)
    inner = tuple((max(b, 0), max(e - o, 0)) for (b, e), o in zip(pads, extra))
    full = [s * (n - 1) + (k - 1) * d + 1 for n, k, s, d in zip(xs[2:], kernel, strides,
                                                                 dilations)]
    out = tuple(f + o - b - e for f, o, (b, e) in zip(full, extra, pads))
    if min(out) < 1:
        raise ctx.invalid(f"pads {pads} leave no output (input shape {xs}, kernel {kernel}, "
                          f"strides {strides}, output_padding {list(extra)})")
    if any(f - b - e < 1 for f, (b, e) in zip(full, inner)):
        # the pads crop every computed cell: only output_padding's zeros remain
        ctx.reserve((xs[0], ws[1] * group) + out, ctx.dtype(0), "ConvTranspose's output")
        zeros = ctx.lift(np.zeros((xs[0], ws[1] * group) + out, ctx.dtype(0)))
        return _bias(ctx, zeros, ws[1] * group, rank)
    y = _conv_transpose(ctx.ns, x, w, strides, inner, dilations, group)
    grow = [(0, 0), (0, 0)] + [(max(-b, 0), max(o - e, 0)) for (b, e), o in zip(pads, extra)]
    y = ctx.ns.pad(y, grow)
    return _bias(ctx, y, ws[1] * group, rank)


def _transpose_window(ctx, spatial, kernel):
    """``(strides, dilations, pads)`` of a ConvTranspose node: pads from
    ``output_shape`` or ``auto_pad`` SAME as the spec gives them (possibly negative)."""
    rank = len(spatial)
    auto_pad = ctx.attr("auto_pad")
    shape = ctx.attr("output_shape")
    if shape is None and auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        return window(ctx, spatial, kernel)
    strides, dilations, _ = window(ctx, spatial, kernel)
    extra = ctx.attr("output_padding") or (0,) * rank
    if shape is None:
        shape = tuple(n * s for n, s in zip(spatial, strides))
    shape = tuple(int(v) for v in shape)[-rank:]
    pads = []
    for n, k, s, d, o, target in zip(spatial, kernel, strides, dilations, extra, shape):
        total = s * (n - 1) + int(o) + (k - 1) * d + 1 - target
        small, large = total // 2, total - total // 2
        pads.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
    return strides, dilations, tuple(pads)


def _conv_transpose(ns, x, w, strides, pads, dilations, group):
    """The N-d transposed convolution with non-negative ``pads`` cropped off."""
    rank = len(x.shape) - 2
    n, c = x.shape[:2]
    out_c = w.shape[1] * group
    lengths = tuple(s * (size - 1) + (k - 1) * d + 1 - b - e for size, k, s, d, (b, e) in
                    zip(x.shape[2:], w.shape[2:], strides, dilations, pads))
    if rank == 2:
        return ns.conv2d_backward_input(x, w, (n, out_c) + lengths, strides, pads, dilations,
                                        group)
    if rank == 1:
        y = ns.conv2d_backward_input(
            ns.reshape(x, (n, c, 1, x.shape[2])), ns.reshape(w, w.shape[:2] + (1, w.shape[2])),
            (n, out_c, 1, lengths[0]), (1, strides[0]), ((0, 0), pads[0]),
            (1, dilations[0]), group)
        return ns.reshape(y, (n, out_c, lengths[0]))
    depth, s, d, k = x.shape[2], strides[0], dilations[0], w.shape[2]
    full = s * (depth - 1) + (k - 1) * d + 1
    folded = ns.reshape(ns.moveaxis(x, 2, 1), (n * depth, c) + tuple(x.shape[3:]))
    total = None
    for tap in range(k):
        y = _conv_transpose(ns, folded, ns.getitem(w, (slice(None), slice(None), tap)),
                            strides[1:], pads[1:], dilations[1:], group)
        rest = tuple(y.shape[2:])
        y = ns.moveaxis(ns.reshape(y, (n, depth, out_c) + rest), 1, 2)
        # spread the depth slices ``s`` apart, then shift them to this tap
        y = ns.reshape(ns.pad(ns.reshape(y, (n, out_c, depth, 1) + rest),
                              [(0, 0), (0, 0), (0, 0), (0, s - 1)] + [(0, 0)] * len(rest)),
                       (n, out_c, depth * s) + rest)
        y = ns.getitem(y, (slice(None), slice(None), slice(0, (depth - 1) * s + 1)))
        y = ns.pad(y, [(0, 0), (0, 0), (tap * d, full - tap * d - (depth - 1) * s - 1)] +
                   [(0, 0)] * len(rest))
        total = y if total is None else ns.add(total, y)
    begin, end = pads[0]
    return ns.getitem(total, (slice(None), slice(None), slice(begin, full - end)))

