"""The converter of ONNX's ``LinearAttention`` (opset 27): attention whose
memory is a recurrent state ``S`` of shape ``(batch, kv_heads, d_k, d_v)``,
updated per token by one of four rules (``g``: the log-space ``decay``, ``b``:
the update rate ``beta``)::

    linear       S = S + k v^T
    gated        S = exp(g) S + k v^T
    delta        S = S + b k (v - S^T k)^T
    gated_delta  S = exp(g) S + b k (v - (exp(g) S)^T k)^T

and whose output is ``scale * q^T S`` after each update; a key/value head's
state serves ``q_heads / kv_heads`` consecutive query heads (grouped-query).
Like the reference, it computes in float32 whatever its inputs' type, and
returns the state in ``past_state``'s type (the query's without one).

How the recurrence over the sequence is computed:

- **scan** (``ns.scan``, graphc's loop op: the body is one graph compiled once,
  the state carried in place) for the gated and delta rules. Their closed forms
  are not worth it here: the gated one factors ``exp(G_t - G_s)`` (``G`` the
  cumulative decay) as ``exp(G_t) * exp(-G_s)``, and ``exp(-G_s)`` overflows
  float32 after a few hundred tokens of ordinary decay; the delta rule's chunked
  form (the WY representation) needs a triangular solve per chunk, exact only
  up to that solve's rounding, and is a GPU-kernel optimisation.
- **closed form** for the linear rule, which is exact: ``S_t = S_0 + sum_{s<=t}
  k_s v_s^T``, so the outputs are ``scale * (q S_0 + tril(q k^T) v)`` (a causally
  masked matmul: no loop at all) and the final state ``S_0 + k^T v``. Its
  ``(T, T)`` score matrix is quadratic in the length, so past ``_CLOSED_FORM_MAX``
  tokens the linear rule scans too.
- a single step with no loop when the sequence is one token (decoding).

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["LinearAttention"]
>>> q = np.ones((1, 3, 4), np.float32)
>>> attrs = {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear"}
>>> ctx = NodeContext(NodeContext.for_test("LinearAttention", []).node, 27, [q, q, q], attrs,
...                   spec)
>>> [np.shape(v) for v in spec.fn(ctx)]
[(1, 3, 4), (1, 2, 2, 2)]
"""
from __future__ import annotations

import numpy as np

from ..registry import REQUIRED, converter

#: update rule -> (gated: decays the state, delta: corrects the written value)
_RULES = {"linear": (False, False), "gated": (True, False), "delta": (False, True),
          "gated_delta": (True, True)}

#: the longest sequence the linear rule computes in closed form (its scores are T x T)
_CLOSED_FORM_MAX = 256

_ATTRS = {"chunk_size": 64, "kv_num_heads": REQUIRED, "q_num_heads": REQUIRED, "scale": 0.0,
          "update_rule": "gated_delta"}


def _rule(ctx):
    rule = ctx.attr("update_rule")
    rule = rule.decode() if isinstance(rule, bytes) else rule
    if rule not in _RULES:
        raise ctx.invalid(f"update_rule must be one of {list(_RULES)}, got {rule!r}")
    gated, delta = _RULES[rule]
    for i, name, needed in ((4, "decay", gated), (5, "beta", delta)):
        if needed != ctx.has_input(i):
            verb = "needs" if needed else "takes no"
            raise ctx.invalid(f"update_rule {rule!r} {verb} the {name} input")
    return rule, gated, delta


def _sizes(ctx):
    """``(batch, length, q_heads, kv_heads, d_k, d_v)`` after checking the shapes."""
    q_heads, kv_heads = int(ctx.attr("q_num_heads")), int(ctx.attr("kv_num_heads"))
    if q_heads <= 0 or kv_heads <= 0 or q_heads % kv_heads:
        raise ctx.invalid(f"q_num_heads ({q_heads}) must be a positive multiple of "
                          f"kv_num_heads ({kv_heads})")
    shapes = [ctx.shape(i) for i in range(3)]
    if any(len(s) != 3 for s in shapes) or len({s[:2] for s in shapes}) != 1:
        raise ctx.invalid(f"query, key and value must be 3-D (batch, sequence, heads * size) "
                          f"with one batch and sequence, got {shapes}")
    (batch, length, q_hidden), (_, _, k_hidden), (_, _, v_hidden) = shapes
    if q_hidden % q_heads or v_hidden % kv_heads or k_hidden != kv_heads * (q_hidden // q_heads):
        raise ctx.invalid(f"query {shapes[0]}, key {shapes[1]} and value {shapes[2]} must pack "
                          f"{q_heads} query heads, {kv_heads} key heads of the query's size "
                          f"and {kv_heads} value heads")
    for i in range(3):
        if ctx.dtype(i).kind != "f":
            raise ctx.invalid(f"input {i} must be floating-point, got {ctx.dtype(i)}")
    return batch, length, q_heads, kv_heads, q_hidden // q_heads, v_hidden // kv_heads


def _time_major(ns, x, batch, length, *heads):
    """``(batch, length, prod(heads))`` as float32 ``(length, batch, *heads)``."""
    x = ns.reshape(x, (batch, length) + heads)
    order = (1, 0) + tuple(range(2, 2 + len(heads)))
    return ns.astype(ns.transpose(x, order), np.float32)


def _gates(ctx, batch, length, kv_heads, d_k):
    """``exp(decay)`` as ``(length, batch, kv_heads, d_k or 1)`` and ``beta`` as
    ``(length, batch, kv_heads or 1, 1)`` (``None`` where the rule has none)."""
    ns, factor, rate = ctx.ns, None, None
    if ctx.has_input(4):
        last = ctx.shape(4)[-1]
        if ctx.shape(4) != (batch, length, last) or last not in (kv_heads, kv_heads * d_k):
            raise ctx.invalid(f"decay must have shape ({batch}, {length}, {kv_heads}) or "
                              f"({batch}, {length}, {kv_heads * d_k}), got {ctx.shape(4)}")
        width = 1 if last == kv_heads else d_k
        factor = ns.exp(_time_major(ns, ctx.input(4), batch, length, kv_heads, width))
    if ctx.has_input(5):
        last = ctx.shape(5)[-1]
        if ctx.shape(5) != (batch, length, last) or last not in (kv_heads, 1):
            raise ctx.invalid(f"beta must have shape ({batch}, {length}, {kv_heads}) or "
                              f"({batch}, {length}, 1), got {ctx.shape(5)}")
        rate = _time_major(ns, ctx.input(5), batch, length, last, 1)
    return factor, rate


def _step(ns, state, q, k, v, factor, rate):
    """One token: the new state and its output ``q^T S`` (unscaled).

    ``state`` (b, h, dk, dv); ``q`` (b, h, group, dk); ``k`` (b, h, dk); ``v`` (b, h, dv);
    ``factor`` (b, h, dk or 1) or None; ``rate`` (b, h or 1, 1) or None.
    """
    if factor is not None:
        state = ns.multiply(state, ns.expand_dims(factor, -1))
    if rate is not None:
        recalled = ns.squeeze(ns.matmul(ns.expand_dims(k, -2), state), -2)
        v = ns.multiply(rate, ns.subtract(v, recalled))
    state = ns.add(state, ns.multiply(ns.expand_dims(k, -1), ns.expand_dims(v, -2)))
    return state, ns.matmul(q, state)


def _recurrence(ns, state, q, k, v, factor, rate):
    """Every token's output ``(length, b, h, group, dv)`` and the last state, by a scan
    (one step without a loop for a single token)."""
    xs = [q, k, v] + [x for x in (factor, rate) if x is not None]
    gated, delta = factor is not None, rate is not None

    def step(carry, x):
        q_t, k_t, v_t = x[:3]
        rest = list(x[3:])
        factor_t = rest.pop(0) if gated else None
        rate_t = rest.pop(0) if delta else None
        return _step(ns, carry, q_t, k_t, v_t, factor_t, rate_t)

    if np.shape(q)[0] == 1:
        state, out = step(state, [ns.squeeze(x, 0) for x in xs])
        return state, ns.expand_dims(out, 0)
    return ns.scan(step, state, tuple(xs))


def _closed_form(ns, state, q, k, v):
    """The linear rule without a loop: ``q S_0 + tril(q k^T) v`` per head."""
    # (length, b, h, ...) -> (b, h, ..., length, size)
    q = ns.transpose(q, (1, 2, 3, 0, 4))                       # (b, h, g, T, dk)
    k = ns.expand_dims(ns.transpose(k, (1, 2, 0, 3)), 2)       # (b, h, 1, T, dk)
    v = ns.expand_dims(ns.transpose(v, (1, 2, 0, 3)), 2)       # (b, h, 1, T, dv)
    length = np.shape(q)[3]
    scores = ns.matmul(q, ns.swapaxes(k, -1, -2))              # (b, h, g, T, T)
    causal = np.tril(np.ones((length, length), bool))
    scores = ns.where(causal, scores, np.float32(0))
    out = ns.add(ns.matmul(scores, v), ns.matmul(q, ns.expand_dims(state, 2)))
    state = ns.add(state, ns.squeeze(ns.matmul(ns.swapaxes(k, -1, -2), v), 2))
    return state, ns.transpose(out, (3, 0, 1, 2, 4))           # (T, b, h, g, dv)


@converter("LinearAttention", attrs=_ATTRS, min_opset=27)
def linear_attention(ctx):
    ns = ctx.ns
    rule, gated, delta = _rule(ctx)
    batch, length, q_heads, kv_heads, d_k, d_v = _sizes(ctx)
    group = q_heads // kv_heads
    q = _time_major(ns, ctx.input(0), batch, length, kv_heads, group, d_k)
    k = _time_major(ns, ctx.input(1), batch, length, kv_heads, d_k)
    v = _time_major(ns, ctx.input(2), batch, length, kv_heads, d_v)
    factor, rate = _gates(ctx, batch, length, kv_heads, d_k)
    past = ctx.input(3, optional=True)
    state_shape = (batch, kv_heads, d_k, d_v)
    if past is None:
        state, state_dtype = ctx.lift(np.zeros(state_shape, np.float32)), ctx.dtype(0)
    else:
        if ctx.shape(3) != state_shape or ctx.dtype(3).kind != "f":
            raise ctx.invalid(f"past_state must be floating-point of shape {state_shape}, "
                              f"got {ctx.shape(3)} {ctx.dtype(3)}")
        state, state_dtype = ns.astype(past, np.float32), ctx.dtype(3)
    if rule == "linear" and 1 < length <= _CLOSED_FORM_MAX:
        state, out = _closed_form(ns, state, q, k, v)
    else:
        state, out = _recurrence(ns, state, q, k, v, factor, rate)
    scale = float(ctx.attr("scale")) or 1 / np.sqrt(d_k)
    out = ns.multiply(out, np.float32(scale))
    # (T, b, h, g, dv) -> (b, T, h * g * dv)
    out = ns.reshape(ns.transpose(out, (1, 0, 2, 3, 4)), (batch, length, q_heads * d_v))
    return ns.astype(out, ctx.dtype(0)), ns.astype(state, state_dtype)
