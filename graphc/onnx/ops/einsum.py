"""The converter of ONNX's Einsum: each operand's repeated subscripts (diagonals) and
subscripts used nowhere else (sums) resolved alone, then the operands contracted
pairwise with graphc's two-operand ``einsum``, keeping only what the rest still needs;
``...`` is spelled as free letters.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["Einsum"]
>>> node = NodeContext.for_test("Einsum", []).node
>>> a = np.arange(6.0).reshape(2, 3)
>>> spec.fn(NodeContext(node, 12, [a, a], {"equation": "ij,ij->i"}, spec))
array([ 5., 50.])
"""
from __future__ import annotations

import numpy as np

from ..registry import REQUIRED, converter


@converter("Einsum", attrs={"equation": REQUIRED})
def einsum(ctx):
    ns = ctx.ns
    terms, output = _einsum_terms(ctx)
    values = list(ctx.inputs)
    sizes = {}
    for term, value in zip(terms, values):
        for letter, d in zip(term, np.shape(value)):
            if sizes.setdefault(letter, d) != d:
                raise ctx.unsupported(f"subscript {letter!r} has sizes {sizes[letter]} and {d} "
                                      "(broadcasting inside einsum is not supported)")
    # each operand alone: diagonals of repeated subscripts, sums of subscripts used nowhere else
    for i, (term, value) in enumerate(zip(terms, values)):
        while len(set(term)) != len(term):
            letter = next(c for c in term if term.count(c) > 1)
            keep = [p for p, c in enumerate(term) if c != letter]
            repeated = [p for p, c in enumerate(term) if c == letter]
            value = ns.transpose(value, tuple(keep + repeated))
            diagonal = np.arange(sizes[letter])
            value = ns.getitem(value, (slice(None),) * len(keep) + (diagonal,) * len(repeated))
            term = "".join(term[p] for p in keep) + letter
        elsewhere = output + "".join(terms[:i] + terms[i + 1:])
        summed = [p for p, c in enumerate(term) if c not in elsewhere]
        if summed:
            value = ns.sum(value, axis=tuple(summed))
            term = "".join(c for p, c in enumerate(term) if p not in summed)
        terms[i], values[i] = term, value
    term, value = terms[0], values[0]
    for i in range(1, len(terms)):  # pairwise, keeping what the rest still needs
        needed = output + "".join(terms[i + 1:])
        joined = "".join(dict.fromkeys(c for c in term + terms[i] if c in needed))
        value = ns.einsum(f"{term},{terms[i]}->{joined}", value, values[i])
        term = joined
    return ns.transpose(value, tuple(term.index(c) for c in output))


def _einsum_terms(ctx):
    """The operands' subscripts and the output's, with '...' spelled as letters."""
    equation = ctx.attr("equation").replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != ctx.n_inputs:
        raise ctx.invalid(f"equation {equation!r} names {len(terms)} operands, the node has "
                          f"{ctx.n_inputs}")
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
            if c not in equation]
    ranks = [len(ctx.shape(i)) - (len(t) - 3 if "..." in t else len(t)) for i, t in
             enumerate(terms)]
    if any(r < 0 or (r and "..." not in t) for r, t in zip(ranks, terms)):
        raise ctx.invalid(f"equation {equation!r} does not fit the operands' ranks "
                          f"{[len(ctx.shape(i)) for i in range(len(terms))]}")
    n_ellipsis = max(ranks, default=0)
    ellipsis = "".join(free[:n_ellipsis])
    terms = [t.replace("...", ellipsis[n_ellipsis - r:]) for t, r in zip(terms, ranks)]
    if arrow:
        output = rhs.replace("...", ellipsis)
    else:
        letters = "".join(terms)
        output = ellipsis + "".join(sorted(c for c in set(letters)
                                           if letters.count(c) == 1 and c not in ellipsis))
    if not all(c.isalpha() for c in "".join(terms) + output) or \
            len(set(output)) != len(output) or any(c not in "".join(terms) for c in output):
        raise ctx.invalid(f"cannot read equation {equation!r}")
    return terms, output
