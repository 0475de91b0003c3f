"""What the CPU and device programs share: one planned graph bound to memory.

Every computed value is a view ``buffer[offset:offset + nbytes]`` reinterpreted
with its dtype and shape; variables own one array each; constants are their own
arrays (copied to the device for a device program); an update computed straight
into its variable is that variable's array; a value liveness made a *view*
(``live.views``: a slice, transpose, broadcast, flip or reshape whose readers all
read strided memory) is that view of its parent's array (:data:`VIEW_OF`), with no
bytes and no step of its own. A subclass says how to make an array in its memory
(:meth:`Program.empty`, :meth:`Program.constant`) and how to build each step's
kernel.

>>> import graphc.ndarray as N, numpy as np
>>> from graphc.graph import Graph
>>> from graphc.engine.liveness import analyse
>>> from graphc.engine.planners import plan_blocks
>>> from graphc.engine.cpu import CpuProgram
>>> x = N.var("x", (3,), np.float64); g = Graph([x], [N.exp(x)])
>>> p = CpuProgram(g, live := analyse(g), plan_blocks(live))
>>> p.values[id(g.outputs[0])].base is not None      # a view of a planned buffer
True
"""
from __future__ import annotations

import numpy as np

from ..shape.indexing import decode_basic
from .view_layout import reshaped

#: kind -> ``(op, parent's array, node) -> the node's value as a view of that array``:
#: the kinds liveness may make views (NumPy's and CuPy's arrays both have these views)
VIEW_OF = {
    # the trailing Ellipsis keeps a 0-d result a view (x[0] of a 1-D x is a scalar copy)
    "slice": lambda op, x, node: x[decode_basic(op["key"]) + (Ellipsis,)],
    "transpose": lambda op, x, node: x.transpose(op["axes"]),
    "broadcast_to": lambda op, x, node: np.broadcast_to(x, node.shape),
    "flip": lambda op, x, node: np.flip(x, op["axis"]),
    # of contiguous memory, or of strided memory where it needs no copy (liveness
    # checks, and :func:`.view_layout.reshaped` refuses a copy)
    "reshape": lambda op, x, node: reshaped(x, node.shape),
}


class Program:
    """Buffers, variables and value views of one compiled graph (see the module
    docstring); ``kernels[i]`` computes ``live.steps[i]`` (``None``: elided),
    ``steps`` are the kernels that run, in order. ``reads_views``: whether the
    subclass builds no kernel for a view and its kernels read views strided (the
    CPU program; a device program is given a liveness without views)."""

    reads_views = False
    #: inputs a run may bind to the caller's array instead of copying (the CPU
    #: program overrides it; a device program copies every input to the device)
    bindable: frozenset = frozenset()

    def can_bind(self, name: str, array) -> bool:
        """Whether ``array`` may be bound as input ``name`` (never, here)."""
        return False

    def bind_input(self, name: str, array=None) -> None:
        """Read input ``name`` from ``array`` (``None``: from the variable's array)."""
        raise NotImplementedError(f"{type(self).__name__} binds no inputs")

    def bind(self, graph, live, plan) -> None:
        """Make the buffers and variables and the view of every value."""
        if live.views and not self.reads_views:
            raise ValueError(f"{type(self).__name__}: this program cannot read values as "
                             f"views ({len(live.views)} in this liveness); analyse the "
                             "graph with views=False")
        self.buffers = [self.buffer(size) for size in plan.buffers]
        # uninitialised: run() refuses to start before every variable has been set
        self.variables = {v.name: self.empty(v.shape, v.dtype) for v in graph.inputs}
        values = {id(v): self.variables[v.name] for v in graph.inputs}
        for n in graph.order:
            if n.op.kind == "const":
                values[id(n)] = self.constant(n.value)
        views = live.views
        for n in live.steps:
            if id(n) in live.external:
                values[id(n)] = self.variables[live.external[id(n)]]
                continue
            if id(n) in views:    # the parent is bound already: steps are in order
                values[id(n)] = VIEW_OF[n.op.kind](n.op, values[id(n.parents[0])], n)
                continue
            buf, off = plan.place[id(n)]
            values[id(n)] = self.buffers[buf][off:off + n.nbytes].view(n.dtype).reshape(n.shape)
        self.values = values

    def buffer(self, size: int):
        """``size`` bytes of this program's memory (uint8)."""
        raise NotImplementedError

    def empty(self, shape, dtype):
        """An uninitialised array in this program's memory."""
        raise NotImplementedError

    def constant(self, array: np.ndarray):
        """A constant's array as this program reads it."""
        raise NotImplementedError

    def empty_like(self, array):
        """An uninitialised array of ``array``'s shape and dtype in this program's
        memory (where a run keeps the values it may have to put back)."""
        return self.empty(array.shape, array.dtype)

    def store(self, dst, src) -> None:
        """Copy ``src`` (a host array, or one in this program's memory) into ``dst``."""
        dst[...] = src

    def wrap_runner(self, runner):
        """The runner this program's runs go through (a device program may wrap it)."""
        return runner

    def device_stats(self) -> dict:
        """Figures only a device program has (none here)."""
        return {}

    def execute(self) -> None:
        """Run every step in the planned order."""
        for step in self.steps:
            step()
