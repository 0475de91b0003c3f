"""The node of a computation graph: an op applied to parent nodes, with its
inferred shape and dtype and the user's source line that created it.

>>> from graphc.type import Op
>>> import numpy as np
>>> x = Node.leaf(Op.make("var", name="x", shape=(2,), dtype=np.dtype("float32")))
>>> y = Node.apply(Op.make("exp"), [x])
>>> y.shape, y.dtype, y.parents[0] is x
((2,), dtype('float32'), True)
"""
from __future__ import annotations

import itertools
import os
import sys
import weakref
from typing import Optional, Sequence

import numpy as np

from ..shape.rules import infer
from ..type.errors import GraphcError
from ..type.op import Op

_ids = itertools.count()
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _caller_frame():
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    return frame


def user_location() -> str:
    """``file:line`` of the innermost caller outside the graphc package."""
    frame = _caller_frame()
    if frame is None:
        return "<unknown>"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def locate(error: GraphcError) -> GraphcError:
    """``error`` with the user's ``file:line`` as its location, unless an inner call
    already gave it one (that call is nearer to what went wrong); returns ``error``.

    Example: ``except GraphcError as exc: raise locate(exc).with_traceback(None) from None``
    """
    if error.location is None:
        error.location = user_location()
    return error


#: what a node is (everything but its identity and its weak references)
_STATE = ("op", "parents", "shape", "dtype", "name", "_where", "id", "_value", "_consumers",
          "declared")


class Deferred:
    """A constant's array held as a function of another array, made again on each read:
    a compiled graph that holds a constant only in another layout (a convolution kernel
    packed for oneDNN) lets its source graph's node keep it this way, so the weights are
    held once (``graphc.compile``).

    >>> import numpy as np
    >>> d = Deferred(lambda: np.arange(3.0))
    >>> d.array().tolist(), d.array().flags.writeable
    ([0.0, 1.0, 2.0], False)
    """

    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make

    def array(self) -> np.ndarray:
        array = self.make()
        array.flags.writeable = False
        return array


class Node:
    """One value of the graph. Immutable once built; identity is the node itself.

    ``value`` is set only for constants (a read-only array; held as a
    :class:`Deferred` where a compiled graph holds it in another layout). ``consumers`` are
    held weakly so that a variable used by many graphs does not keep dead
    graphs alive; graph-level passes count consumers within their own graph.
    """

    __slots__ = ("op", "parents", "shape", "dtype", "name", "_where", "id", "_value",
                 "_consumers", "declared", "__weakref__")

    def __init__(self, op: Op, parents: tuple, shape: tuple, dtype: np.dtype,
                 name: Optional[str] = None, value: Optional[np.ndarray] = None,
                 where: Optional[str] = None):
        self.op = op
        self.parents = parents
        self.shape = shape
        self.dtype = dtype
        self.name = name
        self.value = value
        if where is None:
            frame = _caller_frame()
            where = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else None
        self._where = where
        self.id = next(_ids)
        self._consumers: list = []
        # the variable this object was declared as, once an in-place update
        # (``x += 1``) made it denote another value (see :meth:`become`)
        self.declared = None
        for p in parents:
            p._consumers.append(weakref.ref(self))

    @property
    def value(self) -> Optional[np.ndarray]:
        value = self._value
        return value.array() if type(value) is Deferred else value

    @value.setter
    def value(self, value) -> None:
        self._value = value

    @classmethod
    def leaf(cls, op: Op, value: Optional[np.ndarray] = None, name: Optional[str] = None):
        """A parentless node whose shape and dtype are the op's attributes."""
        return cls(op, (), op["shape"], op["dtype"], name=name or op.get("name"), value=value)

    @classmethod
    def apply(cls, op: Op, parents: Sequence["Node"], name: Optional[str] = None):
        """Infer shape and dtype of ``op`` on ``parents`` and build the node.

        A shape or dtype error is re-raised with the user's source line added.
        """
        parents = tuple(parents)
        try:
            shape, dtype = infer(op, parents)
        except GraphcError as exc:
            raise locate(exc).with_traceback(None) from None
        return cls(op, parents, shape, dtype, name=name)

    def become(self, new: "Node") -> "Node":
        """Make this object denote ``new``'s value, as NumPy's in-place updates
        (``a[i] = v``, ``a += v``) make every name of an array see the new values.

        The value it denoted moves to a fresh node, which every node already built on
        it reads from now on (``new`` included: it was computed from the old value);
        returns that node. This object gets a new id; ``new`` stays as it was.

        Example: ``old = a.become(N.add(a, 1.0))`` (what ``a += 1.0`` does)
        """
        if new is self:
            return self
        old = object.__new__(type(self))
        for slot in _STATE:
            setattr(old, slot, getattr(self, slot))
        readers = self.consumers
        for reader in readers:
            reader.parents = tuple(old if p is self else p for p in reader.parents)
        old._consumers = [weakref.ref(r) for r in readers]
        for p in set(old.parents):
            p._consumers = [weakref.ref(old) if r() is self else r for r in p._consumers]
        for slot in ("op", "parents", "shape", "dtype", "_value", "_where"):
            setattr(self, slot, getattr(new, slot))
        self.name, self.id, self._consumers = None, next(_ids), []
        first = old.declared if old.declared is not None else old
        self.declared = first if first.op.kind == "var" else None
        for p in set(self.parents):
            p._consumers.append(weakref.ref(self))
        return old

    @property
    def where(self) -> str:
        """``file:line`` where the user's code created this node."""
        w = self._where
        if w is None:
            return "<unknown>"
        return w if isinstance(w, str) else f"{os.path.basename(w[0])}:{w[1]}"

    @property
    def kind(self) -> str:
        return self.op.kind

    @property
    def consumers(self) -> list["Node"]:
        """Nodes built on this one that are still alive (in any graph)."""
        return [c for c in (r() for r in self._consumers) if c is not None]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def label(self) -> str:
        """A short human-readable name: the user's name or ``kind#id``."""
        return self.name or f"{self.op.kind}#{self.id}"

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.label()} {self.op.kind} "
                f"shape={self.shape} dtype={self.dtype}>")
