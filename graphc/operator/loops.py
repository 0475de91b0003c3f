"""Loops without unrolling: JAX's ``fori_loop``, ``scan`` and ``while_loop``.

The body is traced once, on placeholders for the carried values, the loop index
and the scanned slice, into a graph of its own; one ``loop`` node runs that body
graph (compiled and memory-planned once, the carried values updated in place as
variables are) as many times as the loop asks. A Python loop over graph values
would instead unroll into a copy of the body per iteration.

In eager mode the same functions run the body as a Python loop.

>>> import graphc.ndarray as N
>>> x = N.var("x", (3,))
>>> y = N.fori_loop(0, 100, lambda i, v: v * 0.5 + 1.0, x)
>>> y.op.kind, y.shape
('loop', (3,))
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

from ..symbol.traverse import topological_order
from ..type.errors import GraphError, ShapeError
from ..type.kinds import KINDS


# -- nested tuples, lists and dicts of arrays ("pytrees") -----------------------------
def flatten(tree) -> tuple[list, object]:
    """``(leaves, structure)`` of nested tuples, lists and dicts of arrays."""
    if isinstance(tree, (tuple, list)):
        parts = [flatten(t) for t in tree]
        return [leaf for p in parts for leaf in p[0]], (type(tree), [p[1] for p in parts])
    if isinstance(tree, dict):
        keys = sorted(tree)
        parts = [flatten(tree[k]) for k in keys]
        return [leaf for p in parts for leaf in p[0]], (dict, keys, [p[1] for p in parts])
    return [tree], None


def unflatten(structure, leaves):
    """The tree of ``structure`` (from :func:`flatten`) holding ``leaves``."""
    leaves = list(leaves)

    def build(s):
        if s is None:
            return leaves.pop(0)
        if s[0] is dict:
            return {k: build(sub) for k, sub in zip(s[1], s[2])}
        return s[0](build(sub) for sub in s[1])
    return build(structure)


@dataclass(frozen=True, eq=False)
class LoopBody:
    """A loop's body graph and how the ``loop`` node's parents and output map onto it.

    ``carries``/``xs``/``outer`` are the body's variables for the carried values, the
    scanned slices and the values from outside the loop (the node's parents, in that
    order); ``index`` is the loop index's variable (``None`` when unused);
    ``new_carries`` the carried values after one step and ``ys`` the per-step outputs
    (stacked along a new first axis). ``length`` steps run from ``start``
    (``reverse``: last first); a ``while_loop`` has ``length=None`` and goes on while
    its last ``ys`` entry (its condition on the new carry) holds, its first value
    being the node's last parent. ``parts``: ``(offset, shape, dtype)`` of each
    result in the node's bytes (the final carries, then the stacked ys), or ``None``
    when the node's value is its one result.
    """

    name: str
    carries: tuple
    xs: tuple
    outer: tuple
    index: object
    new_carries: tuple
    ys: tuple
    length: object
    start: int = 0
    reverse: bool = False
    parts: object = None

    @property
    def inputs(self) -> list:
        head = [self.index] if self.index is not None else []
        return head + list(self.carries) + list(self.xs) + list(self.outer)

    @property
    def stateful(self) -> bool:
        return any(KINDS[n.op.kind].stateful for n in topological_order(
            list(self.new_carries) + list(self.ys)))


def _aligned(offset: int, alignment: int = 64) -> int:
    return -(-offset // alignment) * alignment


def _layout(results) -> tuple:
    """``(offset, shape, dtype)`` of each result in one byte buffer, and its size."""
    parts, offset = [], 0
    for shape, dtype in results:
        offset = _aligned(offset)
        parts.append((offset, tuple(shape), np.dtype(dtype)))
        offset += int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return tuple(parts), max(offset, 1)


class LoopMixin:
    """``fori_loop``, ``scan`` and ``while_loop``, for every backend (its ``_loop``)."""

    def fori_loop(self, lower, upper, body_fun, init_val):
        """``body_fun(i, val)`` for ``i`` from ``lower`` to ``upper - 1`` (static ints),
        starting from ``init_val`` (an array or a tuple/list/dict of arrays), each step's
        result carried into the next; returns the last. The body is one graph, run
        ``upper - lower`` times (JAX's ``fori_loop``).

        Example: ``u = N.fori_loop(0, 50, lambda i, u: smooth(u), u0)``
        """
        lower, upper = operator.index(lower), operator.index(upper)
        step = (lambda i, carry, x: (body_fun(i, carry), ()))
        carry, _ = self._loop("fori_loop", step, init_val, (), max(upper - lower, 0),
                              start=lower)
        return carry

    def scan(self, f, init, xs=None, length=None, reverse=False):
        """``carry, y = f(carry, x)`` for each slice ``x`` of ``xs`` along its first axis
        (``xs`` may be a tuple/list/dict of arrays, or ``None`` with ``length``);
        returns the last carry and the ``y`` stacked along a new first axis (JAX's
        ``scan``).

        Example: ``total, partial = N.scan(lambda c, x: (c + x, c + x), 0.0 * x[0], x)``
        """
        leaves, _ = flatten(xs if xs is not None else ())
        lengths = {int(self._lift(leaf).shape[0]) if self._lift(leaf).ndim else -1
                   for leaf in leaves}
        if -1 in lengths:
            raise ShapeError("scan: every array of xs needs a first axis to scan along")
        if length is not None:
            lengths.add(operator.index(length))
        if len(lengths) != 1:
            raise ShapeError(f"scan: xs and length must agree on one length, got "
                             f"{sorted(lengths) or 'neither'}")
        return self._loop("scan", lambda i, carry, x: f(carry, x), init,
                          xs if xs is not None else (), lengths.pop(), reverse=reverse)

    def while_loop(self, cond_fun, body_fun, init_val):
        """``val = body_fun(val)`` while ``cond_fun(val)`` (a boolean scalar) holds; the
        carried values keep their shapes and dtypes (JAX's ``while_loop``). It has no
        gradient (the number of steps depends on the values).

        Example: ``n, x = N.while_loop(lambda s: s[1] > 1, lambda s: (s[0] + 1, s[1] / 2), (0, x))``
        """
        step = (lambda i, carry, x: (body_fun(carry), ()))
        carry, _ = self._loop("while_loop", step, init_val, (), None, cond=cond_fun)
        return carry

    # -- the common check of a step's carried values --------------------------------
    def _check_carry(self, name, init, new):
        """``new`` (one step's carry leaves) in the shapes and dtypes of ``init``."""
        if len(new) != len(init):
            raise ShapeError(f"{name}: the body returned {len(new)} carried values for "
                             f"{len(init)} given")
        return [self._in_place(name, a, self._lift(b, like=a), f"carried value {k}")
                for k, (a, b) in enumerate(zip(init, new))]

    def _loop(self, name, step, init, xs, length, start=0, reverse=False, cond=None):
        raise NotImplementedError


def check_condition(name, value):
    """A while-loop's condition must be one boolean."""
    if value.shape != () or value.dtype != np.bool_:
        raise GraphError(f"{name}: the condition must be a boolean scalar, got shape "
                         f"{value.shape} and dtype {value.dtype}")


__all__ = ["LoopMixin", "LoopBody", "flatten", "unflatten", "check_condition"]


def close_over(outputs, placeholders, make_var):
    """The body graph of ``outputs`` on ``placeholders``: every value it reads from
    outside (one that depends on no placeholder and draws nothing at random) becomes
    a new variable; returns ``(outputs, outside values, their variables)``."""
    order = topological_order(list(outputs))
    inside = {id(p) for p in placeholders}
    for n in order:
        if id(n) not in inside and (KINDS[n.op.kind].stateful or any(
                id(p) in inside for p in n.parents)):
            inside.add(id(n))
    mapped = {id(p): p for p in placeholders}
    outer, outer_vars = [], []

    def outside(n):
        if id(n) not in mapped:
            if n.op.kind == "const":
                mapped[id(n)] = n
            else:
                mapped[id(n)] = make_var(f"outer{len(outer)}", n.shape, n.dtype)
                outer.append(n)
                outer_vars.append(mapped[id(n)])
        return mapped[id(n)]
    for n in order:
        if id(n) in mapped or id(n) not in inside:
            continue
        parents = [mapped[id(p)] if id(p) in inside else outside(p) for p in n.parents]
        same = all(a is b for a, b in zip(parents, n.parents))
        mapped[id(n)] = n if same else type(n).apply(n.op, parents)
    return [mapped[id(o)] if id(o) in inside else outside(o) for o in outputs], outer, \
        outer_vars


def _declared(placeholders):
    return [p.declared if p.op.kind != "var" and p.declared is not None else p
            for p in placeholders]


def build_loop(ns, name, step, init, xs, length, start=0, reverse=False, cond=None):
    """A ``loop`` node (and ``loop_part`` nodes) for :meth:`LoopMixin._loop` in graph
    mode; returns ``(carry, ys)`` in the trees of the body's results."""
    init_leaves, carry_tree = flatten(init)
    init_leaves = [ns._lift(v) for v in init_leaves]
    x_leaves, x_tree = flatten(xs)
    x_leaves = [ns._lift(v) for v in x_leaves]
    carries = [ns.variable(f"carry{k}", v.shape, v.dtype) for k, v in enumerate(init_leaves)]
    slices = [ns.variable(f"x{k}", v.shape[1:], v.dtype) for k, v in enumerate(x_leaves)]
    index = ns.variable("index", (), np.int64)
    new, ys = step(index, unflatten(carry_tree, carries), unflatten(x_tree, slices))
    # a body that wrote into its arguments (u[1:-1] = ..., u += ...) made those objects
    # denote its new values: the variables are what they were declared as
    carries, slices = _declared(carries), _declared(slices)
    (index,) = _declared([index])
    new_leaves, new_tree = flatten(new)
    if new_tree != carry_tree:
        raise ShapeError(f"{name}: the body must return the carried values in the structure "
                         f"they were given ({len(init_leaves)} arrays)")
    new_leaves = ns._check_carry(name, init_leaves, new_leaves)
    y_leaves, y_tree = flatten(ys)
    y_leaves = [ns._lift(y) for y in y_leaves]
    parents = init_leaves + x_leaves
    if cond is not None:
        test = ns._lift(cond(unflatten(carry_tree, new_leaves)))
        check_condition(name, test)
        y_leaves, first = [test], ns._lift(cond(unflatten(carry_tree, init_leaves)))
        check_condition(name, first)
    body_outputs, outer, outer_vars = close_over(new_leaves + y_leaves,
                                                 [index] + carries + slices, ns.variable)
    uses_index = any(n is index for n in topological_order(body_outputs))
    results = [(v.shape, v.dtype) for v in init_leaves]
    if cond is None:
        results += [((length,) + tuple(y.shape), y.dtype) for y in y_leaves]
    parts, size = _layout(results) if len(results) != 1 else (None, 0)
    body = LoopBody(name, tuple(carries), tuple(slices), tuple(outer_vars),
                    index if uses_index else None, tuple(body_outputs[:len(carries)]),
                    tuple(body_outputs[len(carries):]), length, start, bool(reverse), parts)
    shape, dtype = results[0] if parts is None else ((size,), np.dtype(np.uint8))
    node = ns._op("loop", parents + outer + ([first] if cond is not None else []),
                  body=body, shape=tuple(shape), dtype=np.dtype(dtype))
    values = [node] if parts is None else [
        ns._op("loop_part", [node], offset=off, shape=s, dtype=d) for off, s, d in parts]
    carry_values, y_values = values[:len(carries)], values[len(carries):]
    return unflatten(carry_tree, carry_values), (unflatten(y_tree, y_values) if cond is None
                                                 else ())


def run_loop(ns, name, step, init, xs, length, start=0, reverse=False, cond=None):
    """:meth:`LoopMixin._loop` as a Python loop (eager mode)."""
    init_leaves, carry_tree = flatten(init)
    carry = unflatten(carry_tree, [ns._lift(v) for v in init_leaves])
    x_leaves, x_tree = flatten(xs)
    x_leaves = [ns._lift(v) for v in x_leaves]

    def advance(i, x):
        new, y = step(i, carry, x)
        leaves, tree = flatten(new)
        if tree != carry_tree:
            raise ShapeError(f"{name}: the body must return the carried values in the "
                             f"structure they were given ({len(init_leaves)} arrays)")
        return unflatten(carry_tree, ns._check_carry(name, flatten(carry)[0], leaves)), y
    if cond is not None:
        while True:
            go = ns._lift(cond(carry))
            check_condition(name, go)
            if not bool(np.asarray(go)):
                return carry, ()
            carry, _ = advance(None, ())
    per_step = [None] * length
    for t in range(length):
        position = length - 1 - t if reverse else t
        x = unflatten(x_tree, [leaf[position] for leaf in x_leaves])
        carry, per_step[position] = advance(np.int64(start + position), x)
    if not length:
        return carry, ()
    y_leaves = [flatten(y)[0] for y in per_step]
    _, y_tree = flatten(per_step[0])
    stacked = [ns.stack([leaves[k] for leaves in y_leaves]) for k in range(len(y_leaves[0]))]
    return carry, unflatten(y_tree, stacked)
