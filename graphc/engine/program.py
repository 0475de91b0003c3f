"""What the CPU and device programs share: one planned graph bound to memory.

Every computed value is a view ``buffer[offset:offset + nbytes]`` reinterpreted
with its dtype and shape; variables own one array each; constants are their own
arrays (copied to the device for a device program); an update computed straight
into its variable is that variable's array. A subclass says how to make an array
in its memory (:meth:`Program.empty`, :meth:`Program.constant`) and how to build
each step's kernel.

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


class Program:
    """Buffers, variables and value views of one compiled graph (see the module
    docstring); ``kernels[i]`` computes ``live.steps[i]`` (``None``: elided),
    ``steps`` are the kernels that run, in order."""

    def bind(self, graph, live, plan) -> None:
        """Make the buffers and variables and the view of every value."""
        self.buffers = [self.buffer(size) for size in plan.buffers]
        # uninitialised: run() refuses to start before every variable has been set
        self.variables = {v.name: self.empty(v.shape, v.dtype) for v in graph.inputs}
        values = {id(v): self.variables[v.name] for v in graph.inputs}
        for n in graph.order:
            if n.op.kind == "const":
                values[id(n)] = self.constant(n.value)
        for n in live.steps:
            if id(n) in live.external:
                values[id(n)] = self.variables[live.external[id(n)]]
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

    def execute(self) -> None:
        """Run every step in the planned order."""
        for step in self.steps:
            step()
