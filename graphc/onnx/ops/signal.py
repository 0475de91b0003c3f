"""Converters of ONNX's signal operators: the windows (HannWindow, HammingWindow,
BlackmanWindow), computed while importing from their constant length, and DFT,
a matmul with the (static) Fourier matrices, so it gets gradients and fusion.

ONNX holds a complex signal as a trailing axis of 2 (real, imaginary); a real
one has a trailing axis of 1. The transform is computed in float64 and rounded to
the input's dtype, as the reference and onnxruntime compute it: in float32 the
sums of a long transform lose the small components (an inverse's imaginary
residue) that they keep.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["DFT"]
>>> node = NodeContext.for_test("DFT", []).node
>>> x = np.array([[[1.0], [0.0], [0.0], [0.0]]])
>>> spec.fn(NodeContext(node, 17, [x], {}, spec))[0, :, 0]
array([1., 1., 1., 1.])
"""
from __future__ import annotations

import numpy as np

from ..registry import converter
from ..tensors import onnx_dtype
from .shape import _axis


# -- windows ------------------------------------------------------------------------------------
def _hann(n, period):
    return 0.5 - 0.5 * np.cos(2 * np.pi * n / period)


def _hamming(n, period):
    alpha = 25 / 46
    return alpha - (1 - alpha) * np.cos(2 * np.pi * n / period)


def _blackman(n, period):
    return 0.42 - 0.5 * np.cos(2 * np.pi * n / period) + 0.08 * np.cos(4 * np.pi * n / period)


_WINDOWS = {"HannWindow": _hann, "HammingWindow": _hamming, "BlackmanWindow": _blackman}


@converter(*_WINDOWS, attrs={"output_datatype": 1, "periodic": 1})
def window(ctx):
    size = ctx.constant(0)
    if size.size != 1 or size.dtype.kind not in "iu" or int(size.reshape(-1)[0]) < 0:
        raise ctx.invalid(f"size must be one non-negative integer, got {size!r}")
    size = int(size.reshape(-1)[0])
    dtype = onnx_dtype(int(ctx.attr("output_datatype")), "attribute 'output_datatype'")
    ctx.reserve_import_only((size,), np.float64, f"{ctx.node.op_type}'s values")
    period = size if ctx.attr("periodic") else size - 1
    n = np.arange(size, dtype=np.float64)
    return _WINDOWS[ctx.node.op_type](n, max(period, 1)).astype(dtype)


# -- DFT ------------------------------------------------------------------------------------------
def _matrices(n_in, length, inverse, onesided):
    """``(cos, sin, out_len)``: the real matrices, ``(n_in, out_len)``, of the transform
    of a signal of ``n_in`` samples (zero-padded or truncated to ``length``)."""
    used = min(n_in, length)
    if inverse and onesided:
        out_len = length  # rows are frequencies, columns samples
    else:
        out_len = length // 2 + 1 if onesided else length
    rows = np.arange(used)[:, None]
    angle = 2 * np.pi * ((rows * np.arange(out_len)[None, :]) % length) / length
    return np.cos(angle), np.sin(angle), out_len


@converter("DFT", attrs={"axis": 1, "inverse": 0, "onesided": 0}, min_opset=17)
def dft(ctx):
    x, dims = ctx.input(0), ctx.shape(0)
    rank = len(dims)
    if rank < 2 or dims[-1] not in (1, 2):
        raise ctx.invalid(f"the input's last axis must hold 1 (real) or 2 (complex) values, "
                          f"got shape {dims}")
    if ctx.dtype(0).kind != "f":
        raise ctx.invalid(f"the input must be floating-point, got {ctx.dtype(0)}")
    if ctx.opset >= 20:
        if ctx.has_attr("axis"):
            raise ctx.invalid("from opset 20 the axis is the third input, not an attribute")
        given = ctx.constant(2, optional=True)
        axis = -2 if given is None else int(np.reshape(given, -1)[0])
    else:
        axis = int(ctx.attr("axis"))
    axis = _axis(ctx, axis, rank)
    if axis == rank - 1:
        raise ctx.invalid("the transformed axis cannot be the last (real, imaginary) axis")
    inverse, onesided = bool(ctx.attr("inverse")), bool(ctx.attr("onesided"))
    n_in = dims[axis]
    length = ctx.constant(1, optional=True)
    if length is None or length.size == 0:
        length = 2 * (n_in - 1) if inverse and onesided else n_in
    else:
        length = int(np.reshape(length, -1)[0])
    if length < 1:
        raise ctx.invalid(f"dft_length must be positive, got {length}")
    if onesided and not inverse and dims[-1] == 2:
        raise ctx.invalid("a one-sided transform takes a real input (last axis of 1)")
    ns, out_dtype = ctx.ns, np.dtype(ctx.dtype(0))
    dtype = np.dtype(np.float64)
    if out_dtype != dtype:
        x = ns.astype(x, dtype)
    used = min(n_in, length)
    cut = (slice(None),) * axis + (slice(0, used),)
    real = ns.moveaxis(ns.getitem(x, cut + (Ellipsis, 0)), axis, -1)
    imag = ns.moveaxis(ns.getitem(x, cut + (Ellipsis, 1)), axis, -1) if dims[-1] == 2 else None
    ctx.reserve((used, length), np.float64, "DFT's matrices")
    cos, sin, _ = _matrices(n_in, length, inverse, onesided)
    if inverse and onesided:
        # the other half of a real signal's spectrum mirrors this one (numpy's irfft)
        weights = np.full(used, 2.0)
        weights[0] = 1.0
        if length % 2 == 0 and length // 2 < used:
            weights[length // 2] = 1.0
        weights[length // 2 + 1:] = 0.0  # numpy's irfft reads frequencies 0..length//2
        cos, sin = cos * weights[:, None] / length, sin * weights[:, None] / length
        out = ns.matmul(real, cos.astype(dtype))
        if imag is not None:
            out = ns.subtract(out, ns.matmul(imag, sin.astype(dtype)))
        return _as(ns, ns.expand_dims(ns.moveaxis(out, -1, axis), -1), out_dtype)
    sign = 1.0 if inverse else -1.0
    scale = 1.0 / length if inverse else 1.0
    c, s = (cos * scale).astype(dtype), (sin * sign * scale).astype(dtype)
    # (a + ib)(cos + i s) = a cos - b s + i (a s + b cos)
    out_real, out_imag = ns.matmul(real, c), ns.matmul(real, s)
    if imag is not None:
        out_real = ns.subtract(out_real, ns.matmul(imag, s))
        out_imag = ns.add(out_imag, ns.matmul(imag, c))
    parts = [ns.moveaxis(v, -1, axis) for v in (out_real, out_imag)]
    return _as(ns, ns.stack(parts, axis=-1), out_dtype)


def _as(ns, value, dtype):
    return value if value.dtype == dtype else ns.astype(value, dtype)
