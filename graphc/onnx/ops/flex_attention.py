"""The converter of ``FlexAttention`` (domain ``ai.onnx.preview``, version 1):
scaled dot-product attention over 4-D ``(batch, heads, sequence, head_size)``
inputs with grouped-query heads, whose scores and probabilities a model may
rewrite with the ``score_mod`` and ``prob_mod`` subgraphs.

It follows the reference's order of operations: Q and K are each scaled by
``sqrt(scale)`` (computed in float32, then in Q's type), the scores are cast to
the softmax's precision (``softmax_precision``, or float32 for float16 inputs,
else the inputs' type), the softmax and the product with V are computed in
that precision and the result is cast to V's type.

The ``score_mod`` and ``prob_mod`` subgraphs (one array in, one of its shape out:
a bias, a mask, a soft cap, a rescaling) are converted in line on the scores and
the probabilities, so they fold into the graph like the rest.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["ai.onnx.preview.FlexAttention"]
>>> q = np.ones((1, 2, 3, 4), np.float32)
>>> ctx = NodeContext(NodeContext.for_test("FlexAttention", []).node, 26, [q, q, q], {}, spec)
>>> spec.fn(ctx).shape
(1, 2, 3, 4)
"""
from __future__ import annotations


import numpy as np

from ..registry import converter
from ..subgraph import run_body

#: softmax_precision (an ONNX element type) -> the dtype the softmax is computed in
_PRECISIONS = {1: np.float32, 10: np.float16, 11: np.float64}

_ATTRS = {"scale": None, "softmax_precision": None, "score_mod": None, "prob_mod": None}


def _check(ctx):
    """``(q_heads, kv_heads)`` after checking the shapes of Q, K and V."""
    q, k, v = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        raise ctx.invalid(f"Q, K and V must be 4-D (batch, heads, sequence, head_size), "
                          f"got {q}, {k}, {v}")
    if not q[0] == k[0] == v[0] or k[1] != v[1] or k[2] != v[2] or q[3] != k[3]:
        raise ctx.invalid(f"Q {q}, K {k} and V {v} must share the batch; K and V their heads "
                          "and sequence; Q and K their head size")
    if q[1] % k[1]:
        raise ctx.invalid(f"Q's heads ({q[1]}) must be a multiple of K's and V's ({k[1]})")
    for i in range(3):
        if ctx.dtype(i).kind != "f":
            raise ctx.invalid(f"input {i} must be floating-point, got {ctx.dtype(i)}")
    return q[1], k[1]


def _softmax_dtype(ctx, dtype):
    precision = ctx.attr("softmax_precision")
    if precision is None:
        return np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    if int(precision) not in _PRECISIONS:
        raise ctx.unsupported(f"softmax_precision {precision} is not supported (graphc "
                              f"computes the softmax in the types {sorted(_PRECISIONS)})")
    return np.dtype(_PRECISIONS[int(precision)])


def _modified(ctx, name, value):
    """``value`` through the ``name`` subgraph (``score_mod`` or ``prob_mod``), which maps
    one ``(batch, q_heads, q_length, kv_length)`` array to one of that shape, taken in
    ``value``'s type as the reference does."""
    if not ctx.has_attr(name):
        return value
    graph = ctx.attr(name)
    if len(graph.input) != 1 or len(graph.output) != 1:
        raise ctx.invalid(f"the {name} graph must have one input and one output, got "
                          f"{len(graph.input)} and {len(graph.output)}")
    (result,) = run_body(ctx, graph, {graph.input[0].name: value})
    if tuple(np.shape(result)) != tuple(np.shape(value)):
        raise ctx.invalid(f"the {name} graph must keep its input's shape "
                          f"{tuple(np.shape(value))}, got {tuple(np.shape(result))}")
    return ctx.ns.astype(result, value.dtype) if result.dtype != value.dtype else result


@converter("FlexAttention", attrs=_ATTRS, min_opset=1, domain="ai.onnx.preview")
def flex_attention(ctx):
    ns = ctx.ns
    q_heads, kv_heads = _check(ctx)
    q, k, v = ctx.input(0), ctx.input(1), ctx.input(2)
    dtype = np.dtype(ctx.dtype(0))
    scale = ctx.attr("scale")
    scale = 1 / np.sqrt(ctx.shape(0)[3]) if scale is None else float(scale)
    root = dtype.type(np.sqrt(np.float32(scale)))
    if q_heads != kv_heads:  # each key/value head serves consecutive query heads
        k = ns.repeat(k, q_heads // kv_heads, axis=1)
        v = ns.repeat(v, q_heads // kv_heads, axis=1)
    scores = ns.matmul(ns.multiply(q, root), ns.swapaxes(ns.multiply(k, root), -1, -2))
    wide = _softmax_dtype(ctx, dtype)
    scores = _modified(ctx, "score_mod", ns.astype(scores, wide))
    probabilities = _modified(ctx, "prob_mod", ns.softmax(scores, axis=-1))
    out = ns.matmul(probabilities, ns.astype(v, wide))
    return ns.astype(out, ctx.dtype(2))
