"""Converters of ONNX's unary maths (Exp, Sqrt, the trigonometric and hyperbolic
functions, IsNaN, IsInf, ...) and activations (LeakyRelu, Elu, Selu, Gelu, Clip,
PRelu, Swish, SwiGLU, Shrink, ...).

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["LeakyRelu"]
>>> node = NodeContext.for_test("LeakyRelu", []).node
>>> spec.fn(NodeContext(node, 16, [np.array([-1.0, 2.0])], {"alpha": 0.5}, spec))
array([-0.5,  2. ])
"""
from __future__ import annotations

import math

import numpy as np

from ..registry import converter

#: before opset 6 the unary operators carried this in-place hint (no effect on results)
LEGACY = {"consumed_inputs": None}


def _unary(op_type, function_name, attrs=LEGACY):
    def convert(ctx):
        return getattr(ctx.ns, function_name)(ctx.input(0))
    convert.__name__ = function_name
    converter(op_type, attrs=attrs)(convert)


for _op, _function in [("Neg", "negative"), ("Abs", "absolute"), ("Reciprocal", "reciprocal"),
                       ("Sqrt", "sqrt"), ("Exp", "exp"), ("Log", "log"), ("Floor", "floor"),
                       ("Ceil", "ceil"), ("Relu", "relu"), ("Sigmoid", "sigmoid"),
                       ("Tanh", "tanh")]:
    _unary(_op, _function)
for _op, _function in [("Round", "round"), ("Sign", "sign"), ("Erf", "erf"), ("Sin", "sin"),
                       ("Cos", "cos"), ("Tan", "tan"), ("Asin", "arcsin"), ("Acos", "arccos"),
                       ("Atan", "arctan"), ("Sinh", "sinh"), ("Cosh", "cosh"),
                       ("Asinh", "arcsinh"), ("Acosh", "arccosh"), ("Atanh", "arctanh")]:
    _unary(_op, _function, attrs={})


@converter("IsNaN")
def isnan(ctx):
    x = ctx.input(0)
    return ctx.ns.not_equal(x, x)


@converter("IsInf", attrs={"detect_negative": 1, "detect_positive": 1})
def isinf(ctx):
    ns, x = ctx.ns, ctx.input(0)
    positive, negative = ctx.attr("detect_positive"), ctx.attr("detect_negative")
    if positive and negative:
        return ns.equal(ns.absolute(x), math.inf)
    if positive or negative:
        return ns.equal(x, math.inf if positive else -math.inf)
    return ns.full(ctx.shape(0), False, bool)


# -- activations ----------------------------------------------------------------------------
def _negative_part(ns, x, negative, positive=None):
    """``negative`` where x < 0, else ``positive`` (x itself by default)."""
    return ns.where(ns.less(x, 0), negative, x if positive is None else positive)


@converter("LeakyRelu", attrs={"alpha": 0.01, **LEGACY})
def leaky_relu(ctx):
    ns, x = ctx.ns, ctx.input(0)
    return _negative_part(ns, x, ns.multiply(x, ctx.attr("alpha")))


@converter("Elu", attrs={"alpha": 1.0, **LEGACY})
def elu(ctx):
    ns, x = ctx.ns, ctx.input(0)
    return _negative_part(ns, x, ns.multiply(ns.expm1(x), ctx.attr("alpha")))


@converter("Selu", attrs={"alpha": 1.67326319217681884765625,
                          "gamma": 1.05070102214813232421875, **LEGACY})
def selu(ctx):
    ns, x = ctx.ns, ctx.input(0)
    gamma = ctx.attr("gamma")
    negative = ns.multiply(ns.expm1(x), ctx.attr("alpha") * gamma)
    return ns.where(ns.less_equal(x, 0), negative, ns.multiply(x, gamma))


@converter("Celu", attrs={"alpha": 1.0})
def celu(ctx):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    ns, x = ctx.ns, ctx.input(0)
    alpha = ctx.attr("alpha")
    return _negative_part(ns, x, ns.multiply(ns.expm1(ns.divide(x, alpha)), alpha))


def _hard_sigmoid(ns, x, alpha, beta):
    return ns.clip(ns.add(ns.multiply(x, alpha), beta), 0.0, 1.0)


@converter("HardSigmoid", attrs={"alpha": 0.2, "beta": 0.5, **LEGACY})
def hard_sigmoid(ctx):
    return _hard_sigmoid(ctx.ns, ctx.input(0), ctx.attr("alpha"), ctx.attr("beta"))


@converter("HardSwish")
def hard_swish(ctx):
    x = ctx.input(0)
    return ctx.ns.multiply(x, _hard_sigmoid(ctx.ns, x, 1 / 6, 0.5))


def _softplus(ns, x):
    """log(1 + e**x) as max(x, 0) + log1p(e**-|x|): no overflow for large x."""
    return ns.add(ns.maximum(x, 0), ns.log1p(ns.exp(ns.negative(ns.absolute(x)))))


@converter("Softplus")
def softplus(ctx):
    return _softplus(ctx.ns, ctx.input(0))


@converter("Softsign")
def softsign(ctx):
    ns, x = ctx.ns, ctx.input(0)
    return ns.divide(x, ns.add(ns.absolute(x), 1))


@converter("Mish")
def mish(ctx):
    ns, x = ctx.ns, ctx.input(0)
    return ns.multiply(x, ns.tanh(_softplus(ns, x)))


@converter("ThresholdedRelu", attrs={"alpha": 1.0})
def thresholded_relu(ctx):
    ns, x = ctx.ns, ctx.input(0)
    return ns.where(ns.greater(x, ctx.attr("alpha")), x, 0)


@converter("Swish", attrs={"alpha": 1.0})
def swish(ctx):
    """x * sigmoid(alpha * x)."""
    ns, x = ctx.ns, ctx.input(0)
    # (graphc's sigmoid widens float16 to float64: cast back to the input's dtype)
    gate = _typed(ctx, ns.sigmoid(ns.multiply(x, ctx.dtype(0).type(ctx.attr("alpha")))))
    return ns.multiply(x, gate)


@converter("SwiGLU", attrs={"alpha": 1.0})
def swiglu(ctx):
    """Swish(a) * b, for a and b of one shape."""
    ns, a, b = ctx.ns, ctx.input(0), ctx.input(1)
    if ctx.shape(0) != ctx.shape(1):
        raise ctx.invalid(f"A and B must have one shape (no broadcasting), got "
                          f"{ctx.shape(0)} and {ctx.shape(1)}")
    gate = _typed(ctx, ns.sigmoid(ns.multiply(a, ctx.dtype(0).type(ctx.attr("alpha")))))
    return ns.multiply(ns.multiply(a, gate), b)


@converter("Shrink", attrs={"bias": 0.0, "lambd": 0.5})
def shrink(ctx):
    """x + bias below -lambd, x - bias above lambd, 0 between."""
    ns, x = ctx.ns, ctx.input(0)
    lambd, bias = float(ctx.attr("lambd")), float(ctx.attr("bias"))
    below = ns.where(ns.less(x, -lambd), _typed(ctx, ns.add(x, bias)), ns.multiply(x, 0))
    return ns.where(ns.greater(x, lambd), _typed(ctx, ns.subtract(x, bias)), below)


def _typed(ctx, value):
    """``value`` in the input's dtype (a float bias must not widen an integer input)."""
    return value if value.dtype == ctx.dtype(0) else ctx.ns.astype(value, ctx.dtype(0))


@converter("Gelu", attrs={"approximate": "none"})
def gelu(ctx):
    """x * Phi(x), or its tanh approximation with ``approximate="tanh"``."""
    ns, x = ctx.ns, ctx.input(0)
    approximate = ctx.attr("approximate")
    if approximate == "none":
        phi = ns.add(ns.erf(ns.multiply(x, 1 / math.sqrt(2))), 1)
    elif approximate == "tanh":
        cube = ns.multiply(ns.multiply(x, x), x)
        inner = ns.multiply(ns.add(x, ns.multiply(cube, 0.044715)), math.sqrt(2 / math.pi))
        phi = ns.add(ns.tanh(inner), 1)
    else:
        raise ctx.invalid(f"attribute approximate={approximate!r} must be 'none' or 'tanh'")
    return ns.multiply(ns.multiply(x, phi), 0.5)


@converter("PRelu", attrs=LEGACY)
def prelu(ctx):
    """slope * x where x < 0; before opset 7 a slope of one value per channel applies
    along axis 1 (and one of size 1 everywhere)."""
    ns, x, slope = ctx.ns, ctx.input(0), ctx.input(1)
    x_shape, slope_shape = ctx.shape(0), ctx.shape(1)
    if ctx.opset < 7 and len(slope_shape) == 1 and len(x_shape) >= 2:
        if slope_shape[0] == 1:
            slope = ns.reshape(slope, ())
        elif slope_shape[0] == x_shape[1]:
            slope = ns.reshape(slope, (x_shape[1],) + (1,) * (len(x_shape) - 2))
    return _negative_part(ns, x, ns.multiply(x, slope))


@converter("Clip", attrs={"min": None, "max": None, **LEGACY})
def clip(ctx):
    """``x`` limited to [min, max] (attributes before opset 11, optional scalar inputs
    after); where min > max every element becomes max. A NaN bound limits nothing,
    as in onnxruntime (NumPy's maximum would spread the NaN)."""
    ns, x = ctx.ns, ctx.input(0)
    if ctx.opset < 11:
        low, high = ctx.attr("min"), ctx.attr("max")
        low, high = (None if b is None else np.asarray(b, ctx.dtype(0)) for b in (low, high))
    else:
        low, high = ctx.input(1, optional=True), ctx.input(2, optional=True)
        for i, bound in ((1, low), (2, high)):
            if bound is not None and ctx.shape(i) not in ((), (1,)):
                raise ctx.invalid(f"input {i} must be a scalar, got shape {ctx.shape(i)}")
    if low is None and high is None:
        return ns.copy(x)
    if low is not None:
        x = _limit(ns, x, low, ns.maximum, ns.less)
    return x if high is None else _limit(ns, x, high, ns.minimum, ns.greater)


def _limit(ns, x, bound, keep, past):
    """``x`` with the elements ``past`` the (one-element) bound replaced by it; a known
    bound that is not NaN is one ``keep`` (maximum or minimum), a NaN one changes
    nothing."""
    if isinstance(bound, np.ndarray):
        bound = bound.reshape(())
        if bound.dtype.kind in "fc" and np.isnan(bound):
            return x
        return keep(x, bound)
    bound = ns.reshape(bound, ())
    return ns.where(past(x, bound), bound, x)
