"""Window geometry shared by ONNX's Conv, ConvTranspose and pooling converters:
the per-axis kernel, strides, dilations and ``(begin, end)`` pads of a node,
``auto_pad`` resolved, and the output length of a pooling window along one axis.

>>> same_pads("SAME_UPPER", 5, 3, 2, 1)
(1, 1)
>>> pool_length(5, 2, 2, 1, (0, 0), ceil_mode=True)
3
"""
from __future__ import annotations

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def same_pads(auto_pad: str, size: int, kernel: int, stride: int, dilation: int,
              clamp: bool = True) -> tuple:
    """``(begin, end)`` pads of ``SAME_UPPER``/``SAME_LOWER`` along one axis:
    ``ceil(size / stride)`` outputs, the odd cell at the end (UPPER) or the start
    (LOWER). The poolings' spec formula is not ``clamp``ed at 0: a stride longer
    than the window gives negative pads, which centre the windows.
    Example: ``same_pads("SAME_LOWER", 4, 2, 1, 1) == (1, 0)``"""
    out = -(-size // stride)
    total = (out - 1) * stride + (kernel - 1) * dilation + 1 - size
    total = max(total, 0) if clamp else total
    # halves truncate toward zero (C's division, onnxruntime's): a negative total
    # crops its odd cell at the end for both modes
    begin = int(total / 2) if auto_pad == "SAME_UPPER" else int((total + 1) / 2)
    return begin, total - begin


def window(ctx, spatial: tuple, kernel: tuple, clamp: bool = True) -> tuple:
    """``(strides, dilations, pads)`` of ``ctx``'s node for an input whose spatial
    shape is ``spatial``, with ``pads`` a tuple of ``(begin, end)`` per axis.

    Example: ``strides, dilations, pads = window(ctx, (8, 8), (3, 3))``
    """
    rank = len(spatial)
    strides = _ints(ctx, "strides", rank, 1)
    dilations = _ints(ctx, "dilations", rank, 1) if "dilations" in ctx.spec.attrs else (1,) * rank
    auto_pad = ctx.attr("auto_pad")
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    if auto_pad not in AUTO_PADS:
        raise ctx.invalid(f"auto_pad must be one of {AUTO_PADS}, got {auto_pad!r}")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = tuple(same_pads(auto_pad, n, k, s, d, clamp)
                     for n, k, s, d in zip(spatial, kernel, strides, dilations))
    elif auto_pad == "VALID":
        pads = ((0, 0),) * rank
    else:
        flat = ctx.attr("pads")
        flat = [0] * (2 * rank) if flat is None else [int(p) for p in flat]
        if len(flat) != 2 * rank:
            raise ctx.invalid(f"pads {flat} must hold 2 x {rank} values (begin of each "
                              "spatial axis, then end of each) for an input with "
                              f"spatial shape {spatial}")
        if min(flat) < 0:
            raise ctx.unsupported(f"negative pads {flat} are not supported")
        pads = tuple((flat[i], flat[rank + i]) for i in range(rank))
    return strides, dilations, pads


def kernel_of(ctx, spatial_rank: int, weight_shape=None) -> tuple:
    """The node's ``kernel_shape`` (required for pools; for convolutions it must agree
    with the weight's spatial shape). Example: ``kernel_of(ctx, 2, w.shape)``"""
    given = ctx.attr("kernel_shape")
    if weight_shape is not None:
        kernel = tuple(int(k) for k in weight_shape[2:])
        if given is not None and tuple(int(k) for k in given) != kernel:
            raise ctx.invalid(f"kernel_shape {list(given)} disagrees with the weight's spatial "
                              f"shape {kernel} (weight shape {tuple(weight_shape)})")
        return kernel
    if given is None:
        raise ctx.invalid("attribute 'kernel_shape' is required")
    kernel = tuple(int(k) for k in given)
    if len(kernel) != spatial_rank or min(kernel, default=1) < 1:
        raise ctx.invalid(f"kernel_shape {list(kernel)} must hold {spatial_rank} positive "
                          "values, one per spatial axis of the input")
    return kernel


def _ints(ctx, name: str, rank: int, default: int) -> tuple:
    value = ctx.attr(name)
    if value is None:
        return (default,) * rank
    value = tuple(int(v) for v in value)
    if len(value) != rank or min(value, default=1) < 1:
        raise ctx.invalid(f"{name} {list(value)} must hold {rank} positive values, one per "
                          "spatial axis of the input")
    return value


def pool_length(size: int, kernel: int, stride: int, dilation: int, pads: tuple,
                ceil_mode: bool) -> int:
    """Output length of a pooling along one axis as ONNX defines it: with
    ``ceil_mode`` a last window that would start in the end padding is dropped.
    Example: ``pool_length(4, 3, 2, 1, (1, 1), False) == 2``"""
    span = (kernel - 1) * dilation + 1
    room = size + pads[0] + pads[1] - span
    if room < 0:
        return 0
    out = (-(-room // stride) if ceil_mode else room // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pads[0]:
        out -= 1
    return out
