"""Gradient rules of the elementwise ops: unary maths, broadcasting binaries,
``where``, ``clip`` and the optimiser's ``fma``, ``fused_adagrad`` and ``fused``.

Each unary rule is one line, ``d(ns, op, x, y, g) -> dL/dx`` given ``y = op(x)``
and ``g = dL/dy``; each binary one a pair of such lines, one per operand, whose
results the wrapper sums back over broadcast axes (:func:`~.common.fit`).

Conventions at points where the derivative is not defined (documented choices,
the usual subgradients): ``relu`` and ``abs`` have derivative 0 at 0;
``maximum``/``minimum`` split the gradient evenly between equal operands;
``clip`` passes the gradient where ``lo <= x <= hi`` (bounds included);
``power`` gives the exponent no gradient where the base is <= 0 and the base
none where the exponent is 0; ``hypot`` gives none at the origin.

>>> import numpy as np, graphc.eager as E
>>> GRADIENTS["exp"](E._NS, None, [np.zeros(2)], np.ones(2), np.full(2, 3.0))
[array([3., 3.])]
"""
from __future__ import annotations

import math

from .common import fit, wants

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

#: kind -> d(ns, op, x, y, g): the gradient of a one-input elementwise op
UNARY = {
    "negative": lambda ns, op, x, y, g: ns.negative(g),
    "absolute": lambda ns, op, x, y, g: ns.multiply(g, ns.sign(x)),
    "exp": lambda ns, op, x, y, g: ns.multiply(g, y),
    "log": lambda ns, op, x, y, g: ns.divide(g, x),
    "log1p": lambda ns, op, x, y, g: ns.divide(g, ns.add(x, 1.0)),
    "expm1": lambda ns, op, x, y, g: ns.multiply(g, ns.add(y, 1.0)),
    "sqrt": lambda ns, op, x, y, g: ns.divide(ns.multiply(g, 0.5), y),
    "square": lambda ns, op, x, y, g: ns.multiply(g, ns.multiply(x, 2.0)),
    "reciprocal": lambda ns, op, x, y, g: ns.negative(ns.multiply(g, ns.square(y))),
    "sin": lambda ns, op, x, y, g: ns.multiply(g, ns.cos(x)),
    "cos": lambda ns, op, x, y, g: ns.negative(ns.multiply(g, ns.sin(x))),
    "tan": lambda ns, op, x, y, g: ns.multiply(g, ns.add(ns.square(y), 1.0)),
    "tanh": lambda ns, op, x, y, g: ns.multiply(g, ns.subtract(1.0, ns.square(y))),
    "erf": lambda ns, op, x, y, g: ns.multiply(
        g, ns.multiply(ns.exp(ns.negative(ns.square(x))), _TWO_OVER_SQRT_PI)),
    "sigmoid": lambda ns, op, x, y, g: ns.multiply(g, ns.multiply(y, ns.subtract(1.0, y))),
    # from the output, so the pre-activation need not live until the backward pass
    "relu": lambda ns, op, x, y, g: ns.where(ns.greater(y, 0), g, 0.0),
    "copy": lambda ns, op, x, y, g: g,
    # float -> float only (other casts carry no gradient); the driver casts g back
    "astype": lambda ns, op, x, y, g: g,
    # lr / sqrt(v + eps): d/dv = -y / (2 (v + eps))
    "fused_adagrad": lambda ns, op, x, y, g: ns.divide(
        ns.multiply(ns.multiply(g, y), -0.5), ns.add(x, op["eps"])),
}


def _clip(ns, op, x, y, g):
    inside = None
    for bound, compare in ((op["lo"], ns.greater_equal), (op["hi"], ns.less_equal)):
        if bound is not None:
            test = compare(x, bound)
            inside = test if inside is None else ns.logical_and(inside, test)
    return g if inside is None else ns.where(inside, g, 0.0)


UNARY["clip"] = _clip


def _maximum_share(ns, a, b, g, greater):
    """``a``'s share of ``g`` in ``maximum(a, b)`` (``minimum`` with ``less``):
    all of it where ``a`` wins, half of it on a tie."""
    return ns.where(greater(a, b), g, ns.where(ns.equal(a, b), ns.multiply(g, 0.5), 0.0))


def _power_base(ns, op, a, b, y, g):
    slope = ns.multiply(b, ns.power(a, ns.subtract(b, 1)))
    return ns.multiply(g, ns.where(ns.equal(b, 0), 0.0, slope))


def _power_exponent(ns, op, a, b, y, g):
    positive = ns.greater(a, 0)
    log_a = ns.log(ns.where(positive, a, 1.0))
    return ns.multiply(g, ns.where(positive, ns.multiply(y, log_a), 0.0))


def _hypot(which):
    def d(ns, op, a, b, y, g):
        part = (a, b)[which]
        zero = ns.equal(y, 0)
        return ns.multiply(g, ns.where(zero, 0.0, ns.divide(part, ns.where(zero, 1.0, y))))
    return d


def _arctan2(which):
    def d(ns, op, a, b, y, g):
        norm = ns.add(ns.square(a), ns.square(b))
        part = b if which == 0 else ns.negative(a)
        return ns.multiply(g, ns.divide(part, norm))
    return d


#: kind -> (d/da, d/db), each d(ns, op, a, b, y, g) of the broadcast shape
BINARY = {
    "add": (lambda ns, op, a, b, y, g: g, lambda ns, op, a, b, y, g: g),
    "subtract": (lambda ns, op, a, b, y, g: g, lambda ns, op, a, b, y, g: ns.negative(g)),
    "multiply": (lambda ns, op, a, b, y, g: ns.multiply(g, b),
                 lambda ns, op, a, b, y, g: ns.multiply(g, a)),
    "divide": (lambda ns, op, a, b, y, g: ns.divide(g, b),
               lambda ns, op, a, b, y, g: ns.negative(ns.divide(ns.multiply(g, y), b))),
    "power": (_power_base, _power_exponent),
    # a - floor(a / b) * b, differentiable wherever floor(a / b) is locally constant
    "remainder": (lambda ns, op, a, b, y, g: g,
                  lambda ns, op, a, b, y, g: ns.negative(
                      ns.multiply(g, ns.floor_divide(a, b)))),
    "maximum": (lambda ns, op, a, b, y, g: _maximum_share(ns, a, b, g, ns.greater),
                lambda ns, op, a, b, y, g: _maximum_share(ns, b, a, g, ns.greater)),
    "minimum": (lambda ns, op, a, b, y, g: _maximum_share(ns, a, b, g, ns.less),
                lambda ns, op, a, b, y, g: _maximum_share(ns, b, a, g, ns.less)),
    "arctan2": (_arctan2(0), _arctan2(1)),
    "hypot": (_hypot(0), _hypot(1)),
}


def unary_rule(d):
    """A rule from ``d(ns, op, x, y, g)``.

    Example: ``unary_rule(lambda ns, op, x, y, g: ns.multiply(g, ns.cos(x)))`` for ``sin``.
    """
    def rule(ns, op, inputs, output, g, needs=None):
        return [fit(ns, d(ns, op, inputs[0], output, g), inputs[0])]
    return rule


def binary_rule(da, db):
    """A rule from one derivative per operand, summed back over broadcasting.

    Example: ``binary_rule(*BINARY["multiply"])`` is the rule of ``multiply``.
    """
    def rule(ns, op, inputs, output, g, needs=None):
        a, b = inputs
        return [fit(ns, d(ns, op, a, b, output, g), x) if wants(needs, i) else None
                for i, (d, x) in enumerate(((da, a), (db, b)))]
    return rule


def _where(ns, op, inputs, output, g, needs=None):
    cond, a, b = inputs
    return [None,
            fit(ns, ns.where(cond, g, 0.0), a) if wants(needs, 1) else None,
            fit(ns, ns.where(cond, 0.0, g), b) if wants(needs, 2) else None]


def _fma(ns, op, inputs, output, g, needs=None):
    a, b, c = inputs
    return [fit(ns, ns.multiply(g, b), a) if wants(needs, 0) else None,
            fit(ns, ns.multiply(g, a), b) if wants(needs, 1) else None,
            fit(ns, g, c) if wants(needs, 2) else None]


def _fused(ns, op, inputs, output, g, needs=None):
    """Replay the fused program to get its intermediates, then apply each
    instruction's own rule backwards; ``("acc",)`` carries the running value."""
    from .rules import GRADIENTS  # the registry this module helps to fill

    values = []
    for inner, args in op["program"]:
        arrays = [values[-1][3] if a[0] == "acc" else inputs[a[1]] for a in args]
        values.append((inner, args, arrays, ns._apply(inner, arrays)))
    grads = [None] * len(inputs)
    carried = g
    for inner, args, arrays, out in reversed(values):
        rule = GRADIENTS.get(inner.kind)
        parts = rule(ns, inner, arrays, out, carried) if rule else [None] * len(args)
        carried = None
        for a, part in zip(args, parts):
            if part is None:
                continue
            if a[0] == "acc":
                carried = part if carried is None else ns.add(carried, part)
            else:
                i = a[1]
                part = fit(ns, part, inputs[i])
                grads[i] = part if grads[i] is None else ns.add(grads[i], part)
        if carried is None:  # nothing flows further back through the accumulator
            break
    return [grad if wants(needs, i) else None for i, grad in enumerate(grads)]


GRADIENTS = {kind: unary_rule(d) for kind, d in UNARY.items()}
GRADIENTS.update({kind: binary_rule(*ds) for kind, ds in BINARY.items()})
GRADIENTS.update({"where": _where, "fma": _fma, "fused": _fused})

#: elementwise kinds whose gradient is zero wherever it is defined (piecewise
#: constant) or whose result is not a float
NON_DIFFERENTIABLE = {"sign", "floor", "ceil", "round", "floor_divide", "logical_not",
                      "equal", "not_equal", "less", "less_equal", "greater",
                      "greater_equal", "logical_and", "logical_or", "logical_xor"}
