"""The converter of ONNX's ``Attention`` (opsets 23-25): scaled dot-product
attention over 4-D ``(batch, heads, sequence, head_size)`` or 3-D ``(batch,
sequence, hidden)`` inputs, with an optional additive or boolean mask, causal
and sliding-window masks, a key/value cache (``past_key``/``past_value`` or the
external cache's ``nonpad_kv_seqlen``), grouped-query heads, a softcap and the
``qk_matmul_output`` of any stage.

It is composed of graphc's matmul, softmax pieces and ``where``, so the graph
gets gradients, fusion and planning; masks that depend only on shapes are
NumPy constants. The order of operations follows the reference (``onnx.reference``):
Q and K are each scaled by ``sqrt(scale)``; a row whose every key is masked gives
zeros (not NaN).

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["Attention"]
>>> q = np.ones((1, 1, 2, 4), np.float32)
>>> ctx = NodeContext(NodeContext.for_test("Attention", []).node, 23, [q, q, q], {}, spec)
>>> spec.fn(ctx)[0].shape
(1, 1, 2, 4)
"""
from __future__ import annotations

import numpy as np

from ..registry import converter
from ..tensors import onnx_dtype

_ATTRS = {"is_causal": 0, "kv_num_heads": None, "q_num_heads": None,
          "qk_matmul_output_mode": 0, "scale": None, "softcap": 0.0,
          "softmax_precision": None, "left_window_size": -1, "right_window_size": -1}


def _heads_first(ctx, x, heads, what):
    """A 3-D ``(batch, sequence, hidden)`` input as ``(batch, heads, sequence, size)``."""
    batch, length, hidden = np.shape(x)
    if heads is None or heads <= 0 or hidden % heads:
        raise ctx.invalid(f"{what} of shape {np.shape(x)} needs a positive head count that "
                          f"divides its hidden size {hidden}, got {heads}")
    ns = ctx.ns
    return ns.transpose(ns.reshape(x, (batch, length, heads, hidden // heads)), (0, 2, 1, 3))


def _additive(ns, mask, dtype):
    """A boolean mask (True: attend) as 0 / -inf; a float mask as it is."""
    if mask.dtype == np.bool_:
        return ns.where(mask, dtype.type(0), dtype.type(-np.inf))
    return mask


def _band(q_len, kv_len, offset, lower, upper, dtype):
    """The additive bias allowing key ``j`` for query ``i`` where
    ``-lower <= j - (i + offset) <= upper`` (a bound of ``None`` is open), as a NumPy
    array; a per-batch ``offset`` array gives shape ``(batch, 1, q, kv)``."""
    i = np.arange(q_len).reshape(q_len, 1)
    j = np.arange(kv_len).reshape(1, kv_len)
    per_batch = np.ndim(offset) > 0
    diff = (i + (np.reshape(offset, (-1, 1, 1)) if per_batch else int(offset))) - j
    allowed = np.ones(diff.shape, bool)
    if lower is not None:
        allowed &= diff <= lower
    if upper is not None:
        allowed &= -diff <= upper
    bias = np.where(allowed, dtype.type(0), dtype.type(-np.inf))
    return bias.reshape(bias.shape[0], 1, q_len, kv_len) if per_batch else bias


def _band_of_graph_offset(ns, q_len, kv_len, offset, lower, upper, dtype):
    """``_band`` for a per-batch ``offset`` computed in the graph: ``(batch, 1, q, kv)``."""
    position = np.arange(q_len).reshape(1, q_len, 1) - np.arange(kv_len).reshape(1, 1, kv_len)
    diff = ns.add(ns.reshape(offset, (-1, 1, 1)), position)
    allowed = None
    for bound, sign in ((lower, 1), (upper, -1)):
        if bound is not None:
            ok = ns.less_equal(ns.multiply(diff, sign), bound)
            allowed = ok if allowed is None else ns.logical_and(allowed, ok)
    bias = ns.where(allowed, dtype.type(0), dtype.type(-np.inf))
    return ns.reshape(bias, (-1, 1, q_len, kv_len))


def _offset(ctx, nonpad, past_key, q_len):
    """Where the causal frontier of each batch lies: ``nonpad_kv_seqlen - q_len`` for
    the external cache, the cache's length for ``past_key``, else 0."""
    if past_key is None and nonpad is not None:
        if isinstance(nonpad, np.ndarray):
            return nonpad.reshape(-1).astype(np.int64) - q_len
        return ctx.ns.subtract(ctx.ns.reshape(ctx.ns.astype(nonpad, np.int64), (-1,)), q_len)
    return np.shape(past_key)[2] if past_key is not None else 0


def _with_band(ns, bias, q_len, kv_len, offset, lower, upper, dtype):
    if isinstance(offset, (int, np.ndarray)):
        band = _band(q_len, kv_len, offset, lower, upper, dtype)
    else:
        band = _band_of_graph_offset(ns, q_len, kv_len, offset, lower, upper, dtype)
    return band if bias is None else ns.add(bias, band)


def _bias(ctx, mask, nonpad, past_key, q_len, kv_len, dtype):
    """The additive bias of the scores: mask, causal band, sliding window and padding."""
    ns = ctx.ns
    if mask is not None and np.shape(mask)[-1] < kv_len:
        # a mask shorter than the keys (with a cache) masks the missing ones
        widths = [(0, 0)] * (len(np.shape(mask)) - 1) + [(0, kv_len - np.shape(mask)[-1])]
        fill = False if mask.dtype == np.bool_ else -np.inf
        mask = ns.pad(mask, widths, constant_values=fill)
    lower, upper = int(ctx.attr("left_window_size")), int(ctx.attr("right_window_size"))
    if lower < -1 or upper < -1:
        raise ctx.invalid(f"left_window_size and right_window_size must be -1 or "
                          f"non-negative, got {lower} and {upper}")
    windowed = lower >= 0 or upper >= 0
    zeros = np.zeros((q_len, kv_len), dtype)
    bias = None if mask is None else _additive(ns, mask, dtype)
    if ctx.attr("is_causal") or windowed:
        # a rank-1 mask broadcasts to (q, kv) before a band is added
        bias = zeros if bias is None else ns.add(bias, zeros)
    offset = _offset(ctx, nonpad, past_key, q_len)
    if ctx.attr("is_causal"):
        bias = _with_band(ns, bias, q_len, kv_len, offset, None, 0, dtype)
    if windowed:
        bias = _with_band(ns, bias, q_len, kv_len, offset, lower if lower >= 0 else None,
                          upper if upper >= 0 else None, dtype)
    if nonpad is not None:
        keys = np.arange(kv_len).reshape(1, 1, 1, kv_len)
        inside = ns.less(keys, ns.reshape(ns.astype(nonpad, np.int64), (-1, 1, 1, 1)))
        padding = ns.where(inside, dtype.type(0), dtype.type(-np.inf))
        bias = padding if bias is None else ns.add(bias, padding)
    return zeros if bias is None else bias


def _safe_softmax(ns, x):
    """Softmax over the last axis whose all -inf rows give zeros instead of NaN."""
    top = ns.max(x, axis=-1, keepdims=True)
    zero = x.dtype.type(0)
    top = ns.where(ns.equal(top, x.dtype.type(-np.inf)), zero, top)
    e = ns.exp(ns.subtract(x, top))
    total = ns.sum(e, axis=-1, keepdims=True)
    return ns.divide(e, ns.where(ns.equal(total, zero), x.dtype.type(1), total))


@converter("Attention", attrs=_ATTRS, min_opset=23)
def attention(ctx):
    ns = ctx.ns
    q, k, v = ctx.input(0), ctx.input(1), ctx.input(2)
    mask, past_key, past_value = (ctx.input(i, optional=True) for i in (3, 4, 5))
    nonpad = ctx.input(6, optional=True)
    dtype = np.dtype(ctx.dtype(0))
    if dtype.kind != "f":
        raise ctx.invalid(f"Q must be floating-point, got {dtype}")
    rank = len(ctx.shape(0))
    if rank not in (3, 4) or len(ctx.shape(1)) != rank or len(ctx.shape(2)) != rank:
        raise ctx.invalid(f"Q, K and V must all be 3-D or all 4-D, got shapes "
                          f"{ctx.shape(0)}, {ctx.shape(1)}, {ctx.shape(2)}")
    if (past_key is None) != (past_value is None):
        raise ctx.invalid("past_key and past_value must be given together")
    if nonpad is not None and past_key is not None:
        raise ctx.invalid("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    q_heads, kv_heads = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    if rank == 3:
        q = _heads_first(ctx, q, q_heads, "Q")
        k = _heads_first(ctx, k, kv_heads, "K")
        v = _heads_first(ctx, v, kv_heads, "V")
    elif ctx.opset >= 25 and (q_heads is not None or kv_heads is not None):
        raise ctx.invalid("q_num_heads and kv_num_heads must not be given for 4-D inputs")
    scale = ctx.attr("scale")
    scale = 1 / np.sqrt(np.shape(q)[3]) if scale is None else float(scale)
    root = dtype.type(np.sqrt(scale))
    if past_key is not None:
        k = ns.concatenate([past_key, k], axis=2)
        v = ns.concatenate([past_value, v], axis=2)
    present_key, present_value = k, v
    q_len, kv_len = np.shape(q)[2], np.shape(k)[2]
    bias = _bias(ctx, mask, nonpad, past_key, q_len, kv_len, dtype)
    n_q, n_k, n_v = np.shape(q)[1], np.shape(k)[1], np.shape(v)[1]
    if n_q != n_k:
        if n_q % n_k or n_k != n_v:
            raise ctx.invalid(f"query heads ({n_q}) must be a multiple of the key/value "
                              f"heads ({n_k}, {n_v}) for grouped-query attention")
        # each key/value head serves consecutive query heads: [h0, h0, h1, h1, ...]
        k = ns.repeat(k, n_q // n_k, axis=1)
        v = ns.repeat(v, n_q // n_k, axis=1)
    scores = ns.matmul(ns.multiply(q, root), ns.transpose(ns.multiply(k, root), (0, 1, 3, 2)))
    softcap = float(ctx.attr("softcap"))
    if softcap > 0:  # before the mask, so masked scores stay -inf
        scores = ns.multiply(ns.tanh(ns.divide(scores, dtype.type(softcap))),
                             dtype.type(softcap))
    biased = ns.add(scores, bias)
    mode = int(ctx.attr("qk_matmul_output_mode"))
    if mode not in (0, 1, 2, 3):
        raise ctx.invalid(f"qk_matmul_output_mode must be 0, 1, 2 or 3, got {mode}")
    precision = ctx.attr("softmax_precision")
    logits = biased
    if precision is not None:
        logits = ns.astype(biased, onnx_dtype(int(precision), "softmax_precision"))
    probabilities = _safe_softmax(ns, logits)
    # a row with no key to attend gives zeros, decided on the bias (its scores may be NaN)
    top = ns.max(bias, axis=-1, keepdims=True)
    masked_row = ns.equal(top, dtype.type(-np.inf))
    probabilities = ns.where(masked_row, probabilities.dtype.type(0), probabilities)
    qk_output = {0: scores, 1: scores, 2: biased, 3: probabilities}[mode]
    if qk_output.dtype != dtype:
        qk_output = ns.astype(qk_output, dtype)
    if probabilities.dtype != dtype:
        probabilities = ns.astype(probabilities, dtype)
    y = ns.matmul(probabilities, v)
    if rank == 3:
        batch, heads, length, size = np.shape(y)
        y = ns.reshape(ns.transpose(y, (0, 2, 1, 3)), (batch, length, heads * size))
    return y, present_key, present_value, qk_output
