"""``graphc.compile``: check a graph, plan its memory once, and return an
:class:`Executable` that evaluates it many times.

>>> import numpy as np, graphc, graphc.ndarray as N
>>> x = N.var("x", (2, 3)); w = N.var("w", (3,))
>>> g = graphc.compile(inputs=[x, w], outputs=[N.sum(x * w, axis=1)])
>>> g.run(x=np.ones((2, 3), np.float32), w=np.arange(3, dtype=np.float32))
[array([3., 3.], dtype=float32)]
"""
from __future__ import annotations

import time
from typing import Mapping, Optional, Sequence, Union

import numpy as np

from .engine.checker import check_plan
from .engine.cpu import CpuProgram
from .engine.liveness import analyse
from .engine.planners import make_plan
from .graph import Graph, to_dot
from .graph import save as save_graph
from .graph.stats import structure_stats
from .symbol.node import Node
from .type.errors import InputError


def compile(inputs: Sequence[Node] = (), outputs: Union[Node, Sequence[Node]] = (),
            updates: Optional[Mapping[Node, Node]] = None, *, plan: str = "blocks",
            seed=None, copy_outputs: bool = True, check: bool = False) -> "Executable":
    """Compile ``outputs`` (one node or a list) as functions of the variables
    ``inputs``; ``updates`` maps variables to the values they take after each
    run (a training step's weights).

    ``plan`` picks the memory planner: ``"blocks"`` (Owl's pool of blocks) or
    ``"offsets"`` (one arena, greedy by size). ``seed`` seeds the random ops.
    With ``copy_outputs=False`` ``run`` returns read-only views into the
    graph's memory, valid until the next run. ``check=True`` verifies the memory
    plan with the independent checker (slower; the tests always do).

    Example::

        g = graphc.compile(inputs=[x, w], outputs=[h, y])
        h1, y1 = g.run(x=X, w=W)
    """
    started = time.perf_counter()
    single = isinstance(outputs, Node)
    graph = Graph(inputs, [outputs] if single else list(outputs), updates)
    live = analyse(graph)
    memory = make_plan(live, plan)
    if check:
        check_plan(live, memory)
    program = CpuProgram(graph, live, memory, seed)
    return Executable(graph, live, memory, program, single=single, copy_outputs=copy_outputs,
                      build_seconds=time.perf_counter() - started)


def _describe(value) -> str:
    return f"shape {np.shape(value)} dtype {getattr(value, 'dtype', type(value).__name__)}"


class Executable:
    """A compiled graph: ``run`` it, ``assign`` its variables, read ``stats``."""

    def __init__(self, graph, live, plan, program, *, single, copy_outputs, build_seconds):
        self.graph, self.liveness, self.plan, self.program = graph, live, plan, program
        self._single, self._copy = single, copy_outputs
        self._build_seconds = build_seconds
        self._vars = {v.name: v for v in graph.inputs}
        self._state = {v.name for v, _ in graph.updates}
        self._assigned: set[str] = set()
        self._outputs = [program.values[id(o)] for o in graph.outputs]
        self._updates = [(program.variables[v.name], program.values[id(u)], u.op.kind == "var")
                         for v, u in graph.updates]

    # -- inputs ------------------------------------------------------------------
    def _checked(self, feeds: Mapping) -> dict[str, np.ndarray]:
        checked = {}
        for name, value in feeds.items():
            var = self._vars.get(name)
            if var is None:
                raise InputError(f"run: unknown input {name!r}; the graph's inputs are "
                                 f"{sorted(self._vars)}")
            if isinstance(value, Node):
                raise InputError(f"run: input {name!r} got a lazy graph value; pass a NumPy "
                                 "array")
            if isinstance(value, (bool, int, float)) and var.shape == ():
                value = np.asarray(value, dtype=var.dtype)
            array = np.asarray(value)
            if array.shape != var.shape:
                raise InputError(f"run: input {name!r} expects shape {var.shape} but got shape "
                                 f"{array.shape}")
            if array.dtype != var.dtype:
                raise InputError(f"run: input {name!r} expects dtype {var.dtype} but got "
                                 f"{array.dtype}; convert it with .astype(np.{var.dtype})")
            checked[name] = array
        return checked

    def assign(self, **values) -> None:
        """Set variables (typically those with updates) to copies of ``values``.

        Example: ``step.assign(w=W0)``
        """
        for name, array in self._checked(values).items():
            np.copyto(self.program.variables[name], array)
            self._assigned.add(name)

    def value(self, name: str) -> np.ndarray:
        """A copy of the current value of variable ``name``. Example: ``step.value("w")``"""
        if name not in self._vars:
            raise InputError(f"value: unknown variable {name!r}; the graph's inputs are "
                             f"{sorted(self._vars)}")
        return self.program.variables[name].copy()

    # -- running -----------------------------------------------------------------
    def run(self, feeds: Optional[Mapping] = None, /, **kwargs):
        """Evaluate the graph. Inputs by name (``run(x=X)`` or ``run({"x": X})``); every
        input must be given except variables that have an update and already
        hold a value (from ``assign`` or an earlier run). Returns one array per
        output (a list, or the array itself if one node was compiled); then
        applies the updates.

        Example: ``h1, y1 = g.run(x=X, w=W)``
        """
        given = dict(feeds or {}, **kwargs)
        checked = self._checked(given)
        missing = [n for n in self._vars if n not in checked
                   and not (n in self._state and n in self._assigned)]
        if missing:
            raise InputError(f"run: missing value for input(s) {missing}; pass them by name "
                             f"(state variables with updates can be set once with assign)")
        variables = self.program.variables
        for name, array in checked.items():
            np.copyto(variables[name], array)
            self._assigned.add(name)
        self.program.execute()
        if self._copy:
            results = [o.copy() for o in self._outputs]
        else:
            results = [o.view() for o in self._outputs]
            for r in results:
                r.flags.writeable = False
        # updates are simultaneous: values read from other variables are staged first
        staged = [(dst, src.copy() if from_var else src) for dst, src, from_var in self._updates]
        for dst, src in staged:
            np.copyto(dst, src)
        return results[0] if self._single else results

    def seed(self, seed) -> None:
        """Restart the graph's random generator. Example: ``g.seed(0)``"""
        self.program.ctx.seed(seed)

    # -- inspection --------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return list(self._vars)

    def stats(self) -> dict:
        """Structure and memory figures: nodes, edges, blocks, planned_bytes,
        lower_bound_bytes (in-place aware), lower_bound_no_inplace_bytes,
        naive_bytes, plan_ratio, steps, build_seconds and more."""
        live, plan = self.liveness, self.plan
        lower = live.lower_bound_bytes()
        stats = structure_stats(self.graph)
        stats.update({
            "plan": plan.strategy,
            "blocks": len(plan.buffers),
            "planned_bytes": plan.planned_bytes,
            "lower_bound_bytes": lower,
            "lower_bound_no_inplace_bytes": live.lower_bound_bytes(inplace=False),
            "naive_bytes": live.naive_bytes(),
            "plan_ratio": plan.planned_bytes / lower if lower else 1.0,
            "inplace_values": len(plan.aliases),
            "steps": len(self.program.steps),
            "elided_steps": self.program.elided,
            "build_seconds": self._build_seconds,
        })
        return stats

    def memory_groups(self) -> dict[int, object]:
        """``id(node) -> key`` where nodes with the same key share memory: the block
        (``blocks`` plan) or the offset in the arena (``offsets`` plan)."""
        index = 0 if self.plan.strategy == "blocks" else 1
        return {key: place[index] for key, place in self.plan.place.items()}

    def to_dot(self) -> str:
        """Graphviz DOT text; nodes that share a buffer share a colour."""
        return to_dot(self.graph, self.memory_groups(),
                      title=f"graphc: {self.plan.strategy} plan, "
                            f"{self.plan.planned_bytes} bytes planned")

    def save(self, path) -> None:
        """Save the graph (not its plan or variable values) to ``path`` (``.npz``)."""
        save_graph(self.graph, path)

    def __repr__(self) -> str:
        s = self.stats()
        return (f"<graphc.Executable {s['nodes']} nodes, {s['steps']} steps, "
                f"{s['planned_bytes']} bytes planned ({s['plan']})>")


def load(path, **options) -> Executable:
    """Load a graph saved with ``Executable.save`` and compile it again
    (``options`` as for :func:`compile`). Example: ``g = graphc.load("model.npz")``"""
    from .graph.serialize import load as load_graph
    from .operator.lazy import Tensor

    graph = load_graph(path, node_class=Tensor)
    return compile(graph.inputs, graph.outputs, dict(graph.updates), **options)
