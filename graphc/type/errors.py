"""Errors graphc raises. Each names the operation, the shapes or dtypes involved and
what was expected; the symbol layer adds the user's source line.

They subclass the built-in exception a NumPy user would expect (``ValueError``
for shapes, ``TypeError`` for dtypes), so existing ``except`` clauses still work.
"""


class GraphcError(Exception):
    """Base class of every error graphc raises on purpose."""


class ShapeError(GraphcError, ValueError):
    """Shapes, axes or indices that do not fit the operation."""


class DTypeError(GraphcError, TypeError):
    """Dtypes the operation does not accept."""


class InputError(GraphcError, ValueError):
    """A bad argument to ``run``/``assign``: missing, unknown, wrongly shaped or typed."""


class GraphError(GraphcError, ValueError):
    """A graph that cannot be compiled (unreachable vars, duplicate names, bad updates)."""


class IndexOutOfRange(ShapeError, IndexError):
    """An index outside its axis, found while the graph is built."""


class DeviceError(GraphcError, RuntimeError):
    """A device that cannot be used: its library (CuPy) missing, no GPU, an unknown name."""


class CommitError(GraphcError, RuntimeError):
    """A step that writes variables failed part-way through a run's commit (a bug,
    or memory exhausted): the variables it names may be partly updated, and the
    graph refuses to run until they are assigned again."""
