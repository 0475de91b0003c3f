"""An operation: its kind plus its attributes, immutable and hashable.

Two ``Op`` values are equal exactly when they would compute the same function
of the same parents, which is what common-subexpression elimination needs.

>>> Op.make("sum", axis=(1,), keepdims=True)
Op('sum', axis=(1,), keepdims=True)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def _typed(value):
    """``value`` with the type of every scalar in it, so ``0``, ``0.0`` and ``False``
    (equal in Python) make different ops: they give different dtypes."""
    if isinstance(value, tuple):
        return tuple(_typed(v) for v in value)
    return (type(value), value)


@dataclass(frozen=True, slots=True, eq=False)
class Op:
    """The kind of an operation and its attributes as sorted ``(name, value)`` pairs.

    Equality and hashing see the types of scalar attributes:

    >>> Op.make("fill", value=0) == Op.make("fill", value=0.0)
    False
    """

    kind: str
    attrs: tuple[tuple[str, Any], ...] = ()
    # (typed key, its hash), made on first use: rewrites hash ops often, and a
    # fused node's attributes hold its whole program
    _cache: Any = field(default=None, compare=False, repr=False)

    def _key(self):
        cache = self._cache
        if cache is None:
            key = (self.kind, tuple((k, _typed(v)) for k, v in self.attrs))
            cache = (key, hash(key))
            object.__setattr__(self, "_cache", cache)
        return cache

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, Op):
            return NotImplemented
        if self.kind != other.kind:
            return False
        a, b = self._key(), other._key()
        return a[1] == b[1] and a[0] == b[0]

    def __hash__(self):
        return self._key()[1]

    @staticmethod
    def make(kind: str, **attrs: Any) -> "Op":
        """Build an op; attribute values must be hashable (tuples, numbers, strings, None).

        >>> Op.make("reshape", shape=(2, 3))["shape"]
        (2, 3)
        """
        return Op(kind, tuple(sorted(attrs.items())))

    def __getitem__(self, name: str) -> Any:
        for key, value in self.attrs:
            if key == name:
                return value
        raise KeyError(f"op {self.kind!r} has no attribute {name!r}")

    def get(self, name: str, default: Any = None) -> Any:
        """The attribute ``name``, or ``default`` when the op has none."""
        for key, value in self.attrs:
            if key == name:
                return value
        return default

    def params(self) -> dict[str, Any]:
        """The attributes as a new dict."""
        return dict(self.attrs)

    def __repr__(self) -> str:
        inner = "".join(f", {k}={v!r}" for k, v in self.attrs)
        return f"Op({self.kind!r}{inner})"
