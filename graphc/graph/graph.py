"""A graph: named inputs, outputs, update edges, and the checks that make it
compilable. It holds structure only; memory plans and kernels belong to the
engine.

>>> import graphc.ndarray as N
>>> x = N.var("x", (3,)); w = N.var("w", (3,))
>>> g = Graph([x, w], [N.sum(x * w)], updates={w: w - 0.1 * x})
>>> len(g.order), g.input_names
(7, ['x', 'w'])
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from ..symbol.node import Node
from ..symbol.traverse import topological_order
from ..type.errors import GraphError


def _where(node) -> str:
    return f" (created at {node.where})" if node.where else ""


def declared(value):
    """The variable ``value`` was declared as, when in-place updates (``x += 1``,
    ``x[0] = 0``) made the object denote an updated value since; else ``value``.

    So ``compile([u], [step(u)])`` takes the variable ``u`` as input even when
    ``step`` assigned into ``u``, as NumPy code assigns into its arguments.
    """
    if isinstance(value, Node) and value.op.kind != "var" and value.declared is not None:
        return value.declared
    return value


class Graph:
    """Inputs (variables), outputs and updates ``{variable: new value}``.

    ``order`` is the evaluation order: post-order DFS from the outputs and then
    from the update values. Raises :class:`GraphError` if an input is not a
    variable, two inputs share a name, a variable the outputs need is not an
    input, or an update's value does not match its variable's shape and dtype.
    """

    #: whether the graph was compiled from one output node rather than a list (kept
    #: by save and load, so a loaded graph's ``run`` returns what the original's did)
    single_output = False

    def __init__(self, inputs: Sequence[Node], outputs: Sequence[Node],
                 updates: Optional[Mapping[Node, Node]] = None):
        # one variable may stand for a list of one (as one output does); iterating
        # over it would give its rows
        inputs = [inputs] if isinstance(inputs, Node) else list(inputs)
        self.inputs = [declared(v) for v in inputs]
        self.outputs = list(outputs)
        if updates is not None and not isinstance(updates, Mapping):
            raise GraphError(f"compile: updates must be a mapping {{variable: new value}}, got "
                             f"{type(updates).__name__}")
        self.updates = [(declared(var), value) for var, value in (updates or {}).items()]
        self._check_inputs()
        if not self.outputs and not self.updates:
            raise GraphError("compile: a graph needs at least one output or update")
        for out in self.outputs:
            if not isinstance(out, Node):
                raise GraphError(f"compile: outputs must be graph values, got {type(out).__name__}")
        self._check_updates()
        self.order = topological_order(self.outputs + [value for _, value in self.updates])
        self._check_reachable_vars()

    @property
    def input_names(self) -> list[str]:
        return [v.name for v in self.inputs]

    def _check_inputs(self):
        names = set()
        for v in self.inputs:
            if not isinstance(v, Node) or v.op.kind != "var":
                what = v.op.kind if isinstance(v, Node) else type(v).__name__
                raise GraphError(f"compile: every input must be a variable made by N.var, "
                                 f"got a {what}{_where(v) if isinstance(v, Node) else ''}")
            if v.name in names:
                raise GraphError(f"compile: two inputs are named {v.name!r}; names must be unique")
            names.add(v.name)

    def _check_updates(self):
        input_ids = {id(v) for v in self.inputs}
        for var, value in self.updates:
            if not isinstance(var, Node) or id(var) not in input_ids:
                raise GraphError(f"compile: update target {getattr(var, 'name', var)!r} must be "
                                 "one of the graph's input variables")
            if not isinstance(value, Node):
                raise GraphError(f"compile: the update of {var.name!r} must be a graph value, "
                                 f"got {type(value).__name__}")
            if value.shape != var.shape or value.dtype != var.dtype:
                raise GraphError(f"compile: the update of {var.name!r} has shape {value.shape} "
                                 f"and dtype {value.dtype}, but the variable has shape "
                                 f"{var.shape} and dtype {var.dtype}{_where(value)}")

    def _check_reachable_vars(self):
        input_ids = {id(v) for v in self.inputs}
        for node in self.order:
            if node.op.kind == "var" and id(node) not in input_ids:
                raise GraphError(f"compile: variable {node.name!r}{_where(node)} is used by the "
                                 "outputs but is not among the inputs")
