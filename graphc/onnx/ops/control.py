"""Converters of ONNX's control flow: If, Loop and Scan, onto ``N.where``,
``N.scan`` and ``N.while_loop`` (:mod:`graphc.operator.loops`: the body is one
compiled graph run once per step, its carried values updated in place).

graphc's graphs have static shapes, so:

- **If** whose condition is known while importing is its chosen branch, inline.
  Otherwise both branches are computed and each output is ``N.where(cond, then,
  else)``; branches whose outputs differ in shape need the condition's value, so the
  model is compiled for each value of the graph input it comes from.
- **Loop** with scan outputs, or whose body passes its condition through unchanged,
  runs a number of steps that must be known while importing (its trip count and first
  condition are then specialised on, like a shape fed as a graph input); it is an
  ``N.scan`` over the iteration numbers. A loop whose body computes its condition and
  has no scan outputs is an ``N.while_loop``.
- **Scan** is ``N.scan``, with each scan input's axis and direction moved to a
  forward scan over the first axis (and the scan outputs' moved back). Opset 8's
  batched Scan runs one scan per batch element.

>>> import onnx.helper as h, numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> body = h.make_graph([h.make_node("Add", ["s", "x"], ["t"]),
...                      h.make_node("Identity", ["t"], ["y"])], "body",
...     [h.make_tensor_value_info(n, 1, []) for n in ("s", "x")],
...     [h.make_tensor_value_info(n, 1, []) for n in ("t", "y")])
>>> node = h.make_node("Scan", ["s0", "xs"], ["final", "partial"], body=body,
...                    num_scan_inputs=1)
>>> spec = CONVERTERS["Scan"]
>>> ctx = NodeContext(node, 16, [np.zeros((), np.float32), np.arange(4, dtype=np.float32)],
...                   {"body": body, "num_scan_inputs": 1}, spec)
>>> [np.asarray(v).tolist() for v in spec.fn(ctx)]
[6.0, [0.0, 1.0, 3.0, 6.0]]
"""
from __future__ import annotations

import numpy as np

from ...symbol.node import Node
from ..errors import NeedsInputValue
from ..registry import REQUIRED, converter
from ..subgraph import run_body


def _known(value) -> bool:
    return isinstance(value, np.ndarray) or (isinstance(value, Node) and value.op.kind == "const")


def _truth(ctx, i) -> bool:
    value = np.asarray(ctx.constant(i))
    if value.size != 1:
        raise ctx.invalid(f"input {i} must hold one boolean, got shape {value.shape}")
    return bool(value.reshape(-1)[0])


# -- If ----------------------------------------------------------------------------------
@converter("If", attrs={"then_branch": REQUIRED, "else_branch": REQUIRED})
def if_(ctx):
    """The branch the condition chooses (see the module docstring)."""
    then_branch, else_branch = ctx.attr("then_branch"), ctx.attr("else_branch")
    if len(then_branch.output) != len(else_branch.output):
        raise ctx.invalid(f"the branches have {len(then_branch.output)} and "
                          f"{len(else_branch.output)} outputs")
    if _known(ctx.input(0)):
        return tuple(run_body(ctx, then_branch if _truth(ctx, 0) else else_branch, {}))
    then, other = run_body(ctx, then_branch, {}), run_body(ctx, else_branch, {})
    if any(np.shape(a) != np.shape(b) or a.dtype != b.dtype for a, b in zip(then, other)):
        return tuple(run_body(ctx, then_branch if _truth(ctx, 0) else else_branch, {}))
    cond = ctx.ns.reshape(ctx.input(0), ())
    return tuple(ctx.ns.where(cond, a, b) for a, b in zip(then, other))


# -- Loop --------------------------------------------------------------------------------
def _passes_condition_through(body) -> bool:
    """Whether the body's condition output is its condition input (through Identity
    nodes) or a constant true: the loop's length is then its trip count alone."""
    producer = {name: node for node in body.node for name in node.output}
    name = body.output[0].name
    while name in producer and producer[name].op_type == "Identity":
        name = producer[name].input[0]
    if name == body.input[1].name:
        return True
    node = producer.get(name)
    if node is not None and node.op_type == "Constant" and len(node.attribute) == 1:
        from ..tensors import attribute_value

        value = attribute_value(node.attribute[0], "Loop body")
        return bool(np.all(np.asarray(value)))
    return False


@converter("Loop", attrs={"body": REQUIRED})
def loop(ctx):
    """The loop as ``N.scan`` over its iterations or as ``N.while_loop`` (see the module
    docstring)."""
    body = ctx.attr("body")
    carried = [ctx.input(i) for i in range(2, ctx.n_inputs)]
    n = len(carried)
    if len(body.input) != n + 2 or len(body.output) < n + 1:
        raise ctx.invalid(f"the body takes {len(body.input)} inputs and gives "
                          f"{len(body.output)} outputs for {n} carried values (it takes the "
                          "iteration number, the condition and the carried values, and "
                          "gives the condition, the carried values and the scan outputs)")
    names = [v.name for v in body.input]
    scans = len(body.output) - 1 - n
    if _passes_condition_through(body) or scans:
        if not _passes_condition_through(body):
            raise ctx.unsupported("a Loop with scan outputs whose body computes its "
                                  "condition has a number of steps known only at run time, "
                                  "so its scan outputs have no static shape")
        return _counted_loop(ctx, body, names, carried, n)
    return _while_loop(ctx, body, names, carried, n)


def _counted_loop(ctx, body, names, carried, n):
    if not ctx.has_input(0):
        raise ctx.unsupported("a Loop with no trip count whose condition never changes "
                              "runs forever or not at all")
    trips = int(np.asarray(ctx.constant(0)).reshape(-1)[0])
    steps = max(trips if not ctx.has_input(1) or _truth(ctx, 1) else 0, 0)
    ns, true = ctx.ns, np.array(True)

    def step(carry, i):
        try:
            outs = run_body(ctx, body, dict(zip(names, [i, true, *carry])))
        except NeedsInputValue as exc:
            if exc.input_name in {v.op["name"] for v in (i, *carry)
                                  if isinstance(v, Node) and v.op.kind == "var"}:
                raise _NeedsUnrolling() from exc
            raise
        return tuple(outs[1:n + 1]), tuple(outs[n + 1:])

    try:
        final, ys = ns.scan(step, tuple(carried), ns.arange(steps, dtype=np.int64))
    except _NeedsUnrolling:
        return _unrolled_loop(ctx, body, names, carried, n, steps)
    return (*final, *ys)


class _NeedsUnrolling(Exception):
    """The body needs a value of a step (its iteration number, to slice with) while
    importing: each step becomes its own graph nodes."""


#: the most steps a Loop is unrolled into (each one copies the body into the graph)
MAX_UNROLLED_STEPS = 1024


def _unrolled_loop(ctx, body, names, carried, n, steps):
    """The loop as ``steps`` copies of its body, each given its iteration number as a
    constant (a body that slices by it needs it while importing)."""
    if not 0 < steps <= MAX_UNROLLED_STEPS:
        raise ctx.unsupported(f"the body needs its iteration number while importing (to "
                              f"slice with it), so its {steps} steps would be unrolled; "
                              f"graphc unrolls from 1 to {MAX_UNROLLED_STEPS} steps")
    carry, ys = list(carried), []
    for i in range(steps):
        outs = run_body(ctx, body, dict(zip(names, [np.array(i, np.int64), np.array(True),
                                                    *carry])))
        carry, y = outs[1:n + 1], outs[n + 1:]
        ys.append(y)
    return (*carry, *[ctx.ns.stack(list(column), 0) for column in zip(*ys)])


def _while_loop(ctx, body, names, carried, n):
    ns = ctx.ns
    limit = ctx.input(0, optional=True)
    first = ctx.input(1, optional=True)
    first = np.array(True) if first is None else ns.reshape(first, ())

    def go_on(state):
        i, cond = state[0], state[1]
        return cond if limit is None else ns.logical_and(cond, ns.less(i, ns.reshape(limit, ())))

    def step(state):
        outs = run_body(ctx, body, dict(zip(names, state)))
        return (ns.add(state[0], np.int64(1)), ns.reshape(outs[0], ()), *outs[1:n + 1])

    final = ns.while_loop(go_on, step, (np.array(0, np.int64), first, *carried))
    return tuple(final[2:])


# -- Scan --------------------------------------------------------------------------------
def _axes(ctx, name, count, ranks):
    """A Scan's per-input axes attribute, normalised (default 0)."""
    axes = ctx.attr(name) or [0] * count
    if len(axes) != count:
        raise ctx.invalid(f"{name} has {len(axes)} entries for {count} values")
    out = []
    for axis, rank in zip(axes, ranks):
        if not -rank <= axis < rank:
            raise ctx.invalid(f"{name}: axis {axis} is out of range for rank {rank}")
        out.append(axis % rank)
    return out


def _directions(ctx, name, count):
    directions = ctx.attr(name) or [0] * count
    if len(directions) != count or any(d not in (0, 1) for d in directions):
        raise ctx.invalid(f"{name} must hold 0 (forward) or 1 (reverse) for each of the "
                          f"{count} values, got {directions}")
    return directions


def _scan(ctx, body, states, xs, in_dirs=None):
    """One Scan (opset 9's form) over ``xs``, starting from ``states``; ``in_dirs``
    replaces scan_input_directions (opset 8 calls them directions)."""
    ns, n, m = ctx.ns, len(states), len(xs)
    k = len(body.output) - n
    if len(body.input) != n + m or k < 0:
        raise ctx.invalid(f"the body takes {len(body.input)} inputs and gives "
                          f"{len(body.output)} outputs for {n} states and {m} scan inputs")
    in_axes = _axes(ctx, "scan_input_axes", m, [np.ndim(x) for x in xs])
    if in_dirs is None:
        in_dirs = _directions(ctx, "scan_input_directions", m)
    xs = [ns.moveaxis(x, axis, 0) for x, axis in zip(xs, in_axes)]
    xs = [ns.flip(x, 0) if d else x for x, d in zip(xs, in_dirs)]
    names = [v.name for v in body.input]

    def step(carry, x):
        outs = run_body(ctx, body, dict(zip(names, [*carry, *x])))
        return tuple(outs[:n]), tuple(outs[n:])

    final, ys = ns.scan(step, tuple(states), tuple(xs))
    out_dirs = _directions(ctx, "scan_output_directions", k)
    ys = [ns.flip(y, 0) if d else y for y, d in zip(ys, out_dirs)]
    out_axes = _axes(ctx, "scan_output_axes", k, [np.ndim(y) for y in ys])
    return (*final, *[ns.moveaxis(y, 0, axis) for y, axis in zip(ys, out_axes)])


@converter("Scan", attrs={"body": REQUIRED, "num_scan_inputs": REQUIRED,
                          "scan_input_axes": None, "scan_input_directions": None,
                          "scan_output_axes": None, "scan_output_directions": None,
                          "directions": None}, min_opset=8)
def scan(ctx):
    """``N.scan`` of the body (see the module docstring)."""
    body, m = ctx.attr("body"), int(ctx.attr("num_scan_inputs"))
    if ctx.opset >= 9:
        values = ctx.inputs
        return _scan(ctx, body, values[:len(values) - m], values[len(values) - m:])
    return _batched_scan(ctx, body, m)


def _batched_scan(ctx, body, m):
    """Opset 8: every input has a batch axis first (and scans along axis 1); the
    optional sequence_lens (input 0) must cover the whole sequence."""
    ns, values = ctx.ns, ctx.inputs[1:]
    if ctx.has_input(0):
        lengths = np.asarray(ctx.constant(0))
        if np.any(lengths != np.shape(values[-1])[1]):
            raise ctx.unsupported("sequence_lens shorter than the sequence (a ragged batch) "
                                  "is not supported")
    directions = _directions(ctx, "directions", m)
    batch = np.shape(values[0])[0]
    per_sample = [_scan(ctx, body, [ns.getitem(v, b) for v in values[:len(values) - m]],
                        [ns.getitem(v, b) for v in values[len(values) - m:]], directions)
                  for b in range(batch)]
    return tuple(ns.stack(list(outs), 0) for outs in zip(*per_sample))
