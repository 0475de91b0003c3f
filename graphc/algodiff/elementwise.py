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

from ..type.program import operand
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
    instruction's own rule backwards: the gradient of an instruction's value sums
    what flows back through the accumulator and the registers that read it
    (:mod:`graphc.type.program`)."""
    from .rules import GRADIENTS  # the registry this module helps to fill

    program = op["program"]
    results, steps = [], []
    for inner, args in program:
        arrays = [operand(a, inputs, results) for a in args]
        results.append(ns._apply(inner, arrays))
        steps.append(arrays)
    grads = [None] * len(inputs)
    # the gradient of each instruction's value, summed as its readers pass it back
    flowing = [None] * (len(program) - 1) + [g]

    def add(slots, i, part):
        slots[i] = part if slots[i] is None else ns.add(slots[i], part)

    for k in reversed(range(len(program))):
        if flowing[k] is None:   # nothing flows back through this instruction
            continue
        (inner, args), arrays = program[k], steps[k]
        rule = GRADIENTS.get(inner.kind)
        parts = rule(ns, inner, arrays, results[k], flowing[k]) if rule else [None] * len(args)
        for a, part in zip(args, parts):
            if part is None:
                continue
            if a[0] == "in":
                add(grads, a[1], fit(ns, part, inputs[a[1]]))
            else:
                add(flowing, k - 1 if a[0] == "acc" else a[1], part)
    return [grad if wants(needs, i) else None for i, grad in enumerate(grads)]
