"""graphc: a static computation-graph compiler for NumPy-style array programs.

Write NumPy code against ``graphc.ndarray``; nothing runs while you build.
``graphc.compile`` checks the graph and plans its memory once; the result runs
many times with no allocation.

>>> import numpy as np, graphc, graphc.ndarray as N
>>> x = N.var("x", (4,))
>>> g = graphc.compile(inputs=[x], outputs=N.exp(x) + 1.0)
>>> g.run(x=np.zeros(4, np.float32))
array([2., 2., 2., 2.], dtype=float32)
"""
from . import ops  # noqa: F401  (first: the op definitions fill every layer's tables)
from .compiler import Executable, compile, load
from .checkpoint import Checkpoint, read_checkpoint
from .tracing import State, TracedFunction, trace
from .type.errors import (CommitError, DeviceError, DistributedError, DTypeError, GraphcError,
                          GraphError, IndexOutOfRange, InputError, ShapeError)

__version__ = "0.1.0"
__all__ = ["compile", "load", "Executable", "trace", "TracedFunction", "State",
           "Checkpoint", "read_checkpoint",
           "GraphcError", "ShapeError", "DTypeError",
           "InputError", "GraphError", "DeviceError", "IndexOutOfRange", "CommitError",
           "DistributedError", "__version__"]
