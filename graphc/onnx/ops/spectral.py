"""Converters of ONNX's short-time spectral operators: STFT, a framed DFT (frames
gathered with one static index matrix, each transformed by a matmul with the
Fourier matrices of :mod:`.signal`, in float64 as DFT is), and MelWeightMatrix,
computed while importing from its constant arguments.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["STFT"]
>>> node = NodeContext.for_test("STFT", []).node
>>> signal = np.array([[[1.0], [0.0], [0.0], [0.0], [1.0], [0.0]]])
>>> spec.fn(NodeContext(node, 17, [signal, np.array(2), None, np.array(4)], {}, spec))[..., 0]
array([[[ 1.,  1.,  1.],
        [ 1., -1.,  1.]]])
"""
from __future__ import annotations

import numpy as np

from ..registry import converter
from ..tensors import onnx_dtype
from .signal import _matrices


def _count(ctx, i: int, what: str, minimum: int = 1) -> int:
    """Input ``i``, a constant integer scalar of at least ``minimum``."""
    value = ctx.constant(i)
    if value.size != 1 or value.dtype.kind not in "iu" or int(value.reshape(-1)[0]) < minimum:
        raise ctx.invalid(f"{what} must be one integer of at least {minimum}, got {value!r}")
    return int(value.reshape(-1)[0])


def _frame_length(ctx, signal_length: int) -> int:
    window_length = ctx.shape(2)[0] if ctx.has_input(2) else None
    if ctx.has_input(2) and len(ctx.shape(2)) != 1:
        raise ctx.invalid(f"the window must be a vector, got shape {ctx.shape(2)}")
    if ctx.has_input(3):
        length = _count(ctx, 3, "frame_length")
        if window_length is not None and window_length != length:
            raise ctx.invalid(f"the window's length {window_length} differs from "
                              f"frame_length {length}")
    else:
        length = signal_length if window_length is None else window_length
    if not 1 <= length <= signal_length:
        raise ctx.invalid(f"frame_length {length} must be from 1 to the signal's length "
                          f"{signal_length}")
    return length


@converter("STFT", attrs={"onesided": 1}, min_opset=17)
def stft(ctx):
    """``(batch, frames, bins, 2)``: the DFT of each (windowed) frame of the signal,
    ``(batch, length, 1 or 2)``; ``bins`` is ``frame_length // 2 + 1`` when one-sided."""
    x, dims, dtype = ctx.input(0), ctx.shape(0), np.dtype(ctx.dtype(0))
    if len(dims) != 3 or dims[-1] not in (1, 2):
        raise ctx.invalid(f"the signal must have shape (batch, length, 1 or 2), got {dims}")
    if dtype.kind != "f":
        raise ctx.invalid(f"the signal must be floating-point, got {dtype}")
    if ctx.has_input(2) and ctx.dtype(2) != dtype:
        raise ctx.invalid(f"the window is {ctx.dtype(2)} but the signal is {dtype}")
    step = _count(ctx, 1, "frame_step")
    length = _frame_length(ctx, dims[1])
    onesided = bool(ctx.attr("onesided"))
    if onesided and dims[-1] == 2:
        raise ctx.invalid("a one-sided transform takes a real signal (last axis of 1)")
    frames = (dims[1] - length) // step + 1
    ns, wide = ctx.ns, np.dtype(np.float64)
    ctx.reserve((frames, length), np.int64, "STFT's frame indices")
    at = (np.arange(frames) * step)[:, None] + np.arange(length)[None, :]
    parts = []
    for k in range(dims[-1]):  # the real part, then any imaginary one
        part = ns.take(ns.astype(ns.getitem(x, (Ellipsis, k)), wide), at, axis=1)
        if ctx.has_input(2):
            part = ns.multiply(part, ns.astype(ctx.input(2), wide))
        parts.append(part)
    ctx.reserve((length, length), np.float64, "STFT's matrices")
    cos, sin, _ = _matrices(length, length, False, onesided)
    # forward transform: (a + ib)(cos - i sin) = a cos + b sin + i (b cos - a sin)
    real, imag = ns.matmul(parts[0], cos), ns.negative(ns.matmul(parts[0], sin))
    if len(parts) == 2:
        real = ns.add(real, ns.matmul(parts[1], sin))
        imag = ns.add(imag, ns.matmul(parts[1], cos))
    out = ns.stack([real, imag], axis=-1)
    return out if dtype == wide else ns.astype(out, dtype)


def _hertz(ctx, i: int, what: str) -> np.ndarray:
    value = ctx.constant(i)
    if value.size != 1 or value.dtype.kind != "f" or not np.isfinite(value).all():
        raise ctx.invalid(f"{what} must be one finite floating-point number, got {value!r}")
    return value.reshape(())


def _mel(hertz: np.ndarray) -> float:
    """``2595 log10(1 + f / 700)``, its logarithm taken in ``hertz``'s own precision as
    the reference implementation takes it (a filter's edge bin is a floor of it)."""
    return float(2595 * np.log1p(hertz / hertz.dtype.type(700))) / np.log(10)


def _hertz_of(mel):
    return 700.0 * np.expm1(mel / 2595.0 * np.log(10))


@converter("MelWeightMatrix", attrs={"output_datatype": 1}, min_opset=17)
def mel_weight_matrix(ctx):
    """``(dft_length // 2 + 1, num_mel_bins)``: triangular filters, evenly spaced on
    the mel scale between the edges, each peaking at 1 on its centre bin."""
    mel_bins = _count(ctx, 0, "num_mel_bins")
    dft_length = _count(ctx, 1, "dft_length")
    sample_rate = _count(ctx, 2, "sample_rate")
    low, high = _hertz(ctx, 3, "lower_edge_hertz"), _hertz(ctx, 4, "upper_edge_hertz")
    dtype = onnx_dtype(int(ctx.attr("output_datatype")), "attribute 'output_datatype'")
    spectrum_bins = dft_length // 2 + 1
    ctx.reserve_import_only((spectrum_bins, mel_bins), np.float64, "MelWeightMatrix")
    # ONNX spaces num_mel_bins + 2 edges by (high - low) / (num_mel_bins + 2) mels
    step = (_mel(high) - _mel(low)) / (mel_bins + 2)
    edges = _hertz_of(np.arange(mel_bins + 2) * step + _mel(low))
    edges = np.floor((dft_length + 1) * edges / sample_rate).astype(np.int64)
    left, centre, right = edges[:-2], edges[1:-1], edges[2:]
    # the bins the filters write (the reference implementation indexes them)
    written = np.concatenate([left[centre > left], centre[(centre >= left) | (right > centre)],
                              (right - 1)[right > centre]])
    if written.min() < 0 or written.max() >= spectrum_bins:
        raise ctx.invalid(f"the filters reach frequency bins {written.min()} to "
                          f"{written.max()}, outside the spectrum's 0..{spectrum_bins - 1} "
                          f"(edges {low} to {high} Hz at a sample rate of {sample_rate})")
    j = np.arange(spectrum_bins)[:, None]
    rising = np.where(centre > left, (j - left) / np.maximum(centre - left, 1), 1.0)
    falling = (right - j) / np.maximum(right - centre, 1)
    weights = np.where((j >= centre) & (j < right), falling,
                       np.where((j >= left) & (j <= centre), rising, 0.0))
    return weights.astype(dtype)

