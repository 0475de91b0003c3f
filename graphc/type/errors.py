"""Errors graphc raises. Each names the operation, the shapes or dtypes involved and
what was expected; the symbol layer adds the user's source line.

They subclass the built-in exception a NumPy user would expect (``ValueError``
for shapes, ``TypeError`` for dtypes), so existing ``except`` clauses still work.
"""
from __future__ import annotations

from typing import Optional


class GraphcError(Exception):
    """Base class of every error graphc raises on purpose.

    ``location`` is the user's ``file:line`` that made the failing call, or
    ``None``; it is set once (by :func:`graphc.symbol.node.locate`, the innermost
    call that knows it) and shown at the end of the text. ``message`` is the text
    without it, for code that re-words an error raised on the user's behalf.

    >>> error = ShapeError("add: shapes (2,) and (3,) could not be broadcast")
    >>> error.location = "model.py:12"
    >>> str(error)
    'add: shapes (2,) and (3,) could not be broadcast (at model.py:12)'
    >>> error.message
    'add: shapes (2,) and (3,) could not be broadcast'
    """

    #: ``file:line`` of the user's call; an instance attribute once set, so that
    #: pickling (which keeps ``__dict__``) keeps it
    location: Optional[str] = None

    @property
    def message(self) -> str:
        """The error's text without its location."""
        return super().__str__()

    def __str__(self) -> str:
        text = super().__str__()
        return text if self.location is None else f"{text} (at {self.location})"


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


class DistributedError(GraphcError, RuntimeError):
    """A collective operation that cannot complete: a rank that died or never joined
    (after the communicator's timeout), or ranks whose graphs differ."""
