"""How elementwise gradients are written: a one-input rule from one line
``d(ns, op, x, y, g) -> dL/dx`` (given ``y = op(x)`` and ``g = dL/dy``), a
two-input rule from one such line per operand, summed back over broadcast axes
(:func:`~.common.fit`), and the rule of the optimiser's ``fused`` programs, which
replays each instruction's own rule. The lines themselves are in the op
definitions (:mod:`graphc.ops.elementwise`), next to the rest of each op.

>>> import numpy as np, graphc.eager as E
>>> rule = unary_rule(lambda ns, op, x, y, g: ns.multiply(g, y))   # exp's
>>> rule(E._NS, None, [np.zeros(2)], np.ones(2), np.full(2, 3.0))
[array([3., 3.])]
"""
from __future__ import annotations

from .common import fit, wants


def unary_rule(d):
    """A rule from ``d(ns, op, x, y, g)``.

    Example: ``unary_rule(lambda ns, op, x, y, g: ns.multiply(g, ns.cos(x)))`` for ``sin``.
    """
    def rule(ns, op, inputs, output, g, needs=None):
        return [fit(ns, d(ns, op, inputs[0], output, g), inputs[0])]
    return rule


def binary_rule(da, db):
    """A rule from one derivative per operand, summed back over broadcasting.

    Example: ``binary_rule(lambda ns, op, a, b, y, g: ns.multiply(g, b),
    lambda ns, op, a, b, y, g: ns.multiply(g, a))`` is the rule of ``multiply``.
    """
    def rule(ns, op, inputs, output, g, needs=None):
        a, b = inputs
        return [fit(ns, d(ns, op, a, b, output, g), x) if wants(needs, i) else None
                for i, (d, x) in enumerate(((da, a), (db, b)))]
    return rule


def fused_rule(ns, op, inputs, output, g, needs=None):
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
