"""Converters of ONNX's optimiser operators (domain ``ai.onnx.preview.training``):
Momentum, Adagrad and Adam, each one step of its update rule on one or more
tensors, composed of graphc's element-wise functions (so the update is fused and
planned in place like any other).

Every node reads ``R`` (the learning rate, a scalar), ``T`` (the step count, an
int64 scalar) and then groups of ``n`` tensors: ``X`` (the parameters), ``G``
(their gradients) and one or two groups of optimiser state; it returns the new
``X`` and the new state, group after group.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["ai.onnx.preview.training.Momentum"]
>>> node = NodeContext.for_test("Momentum", []).node
>>> r, t = np.array(0.1, np.float32), np.array(1)
>>> x, g, v = np.ones(2), np.ones(2), np.zeros(2)
>>> attrs = {"alpha": 0.9, "beta": 1.0, "mode": "standard", "norm_coefficient": 0.0}
>>> spec.fn(NodeContext(node, 1, [r, t, x, g, v], attrs, spec))
(array([0.9, 0.9]), array([1., 1.]))
"""
from __future__ import annotations

import numpy as np

from ..registry import REQUIRED, converter

DOMAIN = "ai.onnx.preview.training"


def _groups(ctx, n_groups: int):
    """``(r, t, groups)``: the learning rate and step count, each a float64 scalar
    value, and ``n_groups`` lists of ``n`` tensors (parameters, gradients, states)."""
    tensors = ctx.inputs[2:]
    if ctx.n_inputs < 2 or not tensors or len(tensors) % n_groups:
        raise ctx.invalid(f"takes R, T and {n_groups} groups of tensors of one count each; "
                          f"got {ctx.n_inputs} inputs")
    if any(v is None for v in ctx.inputs):
        raise ctx.invalid("no input may be omitted")
    for i in (0, 1):
        if ctx.shape(i) not in ((), (1,)):
            raise ctx.invalid(f"input {i} must be a scalar, got shape {ctx.shape(i)}")
    if ctx.dtype(0) not in (np.float32, np.float64):
        raise ctx.invalid(f"R must be float32 or float64, got {ctx.dtype(0)}")
    if ctx.dtype(1) != np.int64:
        raise ctx.invalid(f"T must be int64, got {ctx.dtype(1)}")
    n = len(tensors) // n_groups
    groups = [tensors[k * n:(k + 1) * n] for k in range(n_groups)]
    for i in range(n):
        members = [group[i] for group in groups]
        shapes = {tuple(np.shape(m)) for m in members}
        dtypes = {np.dtype(m.dtype) for m in members}
        if len(shapes) != 1 or len(dtypes) != 1 or dtypes - {np.dtype(np.float32),
                                                             np.dtype(np.float64)}:
            raise ctx.invalid(f"tensor {i} of each group must have one shape and one dtype "
                              f"(float32 or float64); got shapes {sorted(shapes)}, dtypes "
                              f"{sorted(map(str, dtypes))}")
    ns = ctx.ns
    r = ns.reshape(ns.astype(ctx.input(0), np.float64), ())
    t = ns.reshape(ns.astype(ctx.input(1), np.float64), ())
    return r, t, groups


def _number(ctx, name: str) -> float:
    value = ctx.attr(name)
    if not isinstance(value, (int, float)) or not np.isfinite(value):
        raise ctx.invalid(f"attribute {name!r} must be a finite number, got {value!r}")
    return float(value)


def _in(ns, scalar, like):
    """The float64 scalar value ``scalar`` in ``like``'s dtype."""
    return ns.astype(scalar, like.dtype)


def _regularised(ns, x, g, norm_coefficient):
    """The gradient of the loss plus ``norm_coefficient / 2 * ||x||^2``."""
    return g if norm_coefficient == 0 else ns.add(ns.multiply(x, norm_coefficient), g)


@converter("Momentum", domain=DOMAIN, attrs={"alpha": REQUIRED, "beta": REQUIRED,
                                             "mode": REQUIRED, "norm_coefficient": REQUIRED})
def momentum(ctx):
    """Stochastic gradient descent with momentum (``mode`` "standard") or Nesterov's
    momentum ("nesterov"); the gradient's coefficient ``beta`` is 1 at step 0."""
    mode = ctx.attr("mode")
    if mode not in ("standard", "nesterov"):
        raise ctx.invalid(f"mode must be 'standard' or 'nesterov', got {mode!r}")
    alpha, beta = _number(ctx, "alpha"), _number(ctx, "beta")
    norm = _number(ctx, "norm_coefficient")
    ns = ctx.ns
    r, t, (xs, gs, vs) = _groups(ctx, 3)
    beta_now = ns.where(ns.greater(t, 0.0), beta, 1.0)
    new_x, new_v = [], []
    for x, g, v in zip(xs, gs, vs):
        g = _regularised(ns, x, g, norm)
        v = ns.add(ns.multiply(v, alpha), ns.multiply(_in(ns, beta_now, x), g))
        step = v if mode == "standard" else ns.add(g, ns.multiply(v, alpha))
        new_x.append(ns.subtract(x, ns.multiply(_in(ns, r, x), step)))
        new_v.append(v)
    return tuple(new_x + new_v)


@converter("Adagrad", domain=DOMAIN, attrs={"decay_factor": 0.0, "epsilon": 1e-6,
                                            "norm_coefficient": 0.0})
def adagrad(ctx):
    """ADAGRAD: the learning rate decays as ``R / (1 + T * decay_factor)`` and each
    element's step is scaled by the root of its accumulated squared gradients."""
    decay, epsilon = _number(ctx, "decay_factor"), _number(ctx, "epsilon")
    norm = _number(ctx, "norm_coefficient")
    ns = ctx.ns
    r, t, (xs, gs, hs) = _groups(ctx, 3)
    rate = ns.divide(r, ns.add(ns.multiply(t, decay), 1.0))
    new_x, new_h = [], []
    for x, g, h in zip(xs, gs, hs):
        g = _regularised(ns, x, g, norm)
        h = ns.add(h, ns.multiply(g, g))
        scale = ns.add(ns.sqrt(h), epsilon)
        new_x.append(ns.subtract(x, ns.divide(ns.multiply(_in(ns, rate, x), g), scale)))
        new_h.append(h)
    return tuple(new_x + new_h)


@converter("Adam", domain=DOMAIN, attrs={"alpha": 0.9, "beta": 0.999, "epsilon": 1e-6,
                                         "norm_coefficient": 0.0,
                                         "norm_coefficient_post": 0.0})
def adam(ctx):
    """Adam: moving averages of the gradient (``alpha``) and of its square
    (``beta``), with their bias corrected from step 1 on."""
    alpha, beta = _number(ctx, "alpha"), _number(ctx, "beta")
    epsilon, norm = _number(ctx, "epsilon"), _number(ctx, "norm_coefficient")
    norm_post = _number(ctx, "norm_coefficient_post")
    ns = ctx.ns
    r, t, (xs, gs, vs, hs) = _groups(ctx, 4)
    started = ns.greater(t, 0.0)
    # at step 0 there is no bias to correct: the where keeps 0/0 out of the rate
    numerator = ns.sqrt(ns.subtract(1.0, ns.power(beta, t)))
    denominator = ns.where(started, ns.subtract(1.0, ns.power(alpha, t)), 1.0)
    rate = ns.where(started, ns.divide(ns.multiply(r, numerator), denominator), r)
    new_x, new_v, new_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        g = _regularised(ns, x, g, norm)
        v = ns.add(ns.multiply(v, alpha), ns.multiply(g, 1.0 - alpha))
        h = ns.add(ns.multiply(h, beta), ns.multiply(ns.multiply(g, g), 1.0 - beta))
        step = ns.divide(v, ns.add(ns.sqrt(h), epsilon))
        x = ns.subtract(x, ns.multiply(_in(ns, rate, x), step))
        new_x.append(x if norm_post == 0 else ns.multiply(x, 1.0 - norm_post))
        new_v.append(v)
        new_h.append(h)
    return tuple(new_x + new_v + new_h)
