"""What importing an ONNX model may cost: an ONNX file is untrusted input, and a
few bytes of it can ask for terabytes (``ConstantOfShape`` of ``[2**40]``) or
for millions of graph operations (a pooling window of ``2**20`` taps).

``ImportLimits`` holds the bounds, ``ImportBudget`` the accounting of one
import: every array the importer computes (constant folding) or builds and
every graph value it declares is measured *before* it is allocated.

- A value computed while importing (folding) may bring the bytes the import
  holds in folded values to at most ``fold_limit_bytes``; past that the node raises
  :class:`FoldTooLarge` and is converted again as graph operations, computed
  at run time (a value that exists only at import, such as ``Range``, is
  refused instead). Values of at most ``ALWAYS_FOLD_BYTES`` always fold (and
  count): shapes, axes and pads must be known while importing, so a budget
  spent on large folds must not turn ``Shape -> Gather -> Reshape`` into an
  error; one node makes a bounded number of them, so they stay proportional
  to the file's size.
- No single value of the graph may take more than ``value_limit_bytes``.
- No ONNX node may become more than ``ops_per_node`` graph operations.

>>> budget = ImportBudget(ImportLimits(fold_limit_bytes=1 << 10))
>>> budget.start_node(folding=True)
>>> budget.fold((16,), np.float64, "fill")        # 128 bytes: within the budget
>>> budget.fold((1 << 20,), np.float64, "fill")   # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
FoldTooLarge: fill: 8 MiB
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

from .errors import OnnxModelError, OnnxUnsupported

#: the default bounds (see ImportLimits)
DEFAULT_FOLD_BYTES = 16 << 20
DEFAULT_VALUE_BYTES = 4 << 30
DEFAULT_OPS_PER_NODE = 16384
#: folded values this small are never deferred to run time (see the module docstring)
ALWAYS_FOLD_BYTES = 1024


class FoldTooLarge(Exception):
    """A value computed while importing would pass the fold budget: the node is
    converted again as graph operations (never seen outside the importer)."""


class LimitExceeded(OnnxModelError):
    """A model asks for more than an :class:`ImportLimits` bound allows."""


def size_text(nbytes: int) -> str:
    """``nbytes`` for a person. Example: ``size_text(3 << 30) == '3 GiB'``"""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            value = nbytes / (1 << shift)
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{nbytes} bytes"


def nbytes_of(shape, dtype, what: str = "value") -> int:
    """The bytes of an array of ``shape`` and ``dtype``, computed in Python integers
    (no overflow) after checking that every dimension is a non-negative integer.

    Example: ``nbytes_of((2, 3), np.float32) == 24``
    """
    try:
        dims = [operator.index(d) for d in shape]
    except TypeError:
        raise OnnxModelError(f"{what}: the shape {shape!r} is not a list of integers") from None
    if any(d < 0 for d in dims):
        raise OnnxModelError(f"{what}: the shape {tuple(dims)} has a negative dimension")
    size = 1
    for d in dims:
        size *= d
    return size * np.dtype(dtype).itemsize


@dataclass(frozen=True)
class ImportLimits:
    """The bounds of one import (see the module docstring).

    ``fold_limit_bytes``: the most bytes of values computed while importing that the
    import holds at once. ``value_limit_bytes``: the most bytes of any one value of
    the graph. ``ops_per_node``: the most graph operations one ONNX node becomes.

    Example: ``ImportLimits(fold_limit_bytes=64 << 20)``
    """

    fold_limit_bytes: int = DEFAULT_FOLD_BYTES
    value_limit_bytes: int = DEFAULT_VALUE_BYTES
    ops_per_node: int = DEFAULT_OPS_PER_NODE

    def __post_init__(self):
        for name in ("fold_limit_bytes", "value_limit_bytes", "ops_per_node"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"onnx.load: {name} must be a non-negative integer, got "
                                 f"{value!r}")


class ImportBudget:
    """The accounting of one import against its :class:`ImportLimits`.

    ``held`` is the bytes of folded values the import holds now, ``peak`` the
    most it held; ``start_node`` begins one node's conversion, whose arrays
    (``pending``) and graph operations (``ops``) are counted as it makes them.
    """

    def __init__(self, limits: ImportLimits):
        self.limits = limits
        self.held = self.peak = 0
        self.pending = 0
        self.ops = 0
        self.folding = False

    def start_node(self, folding: bool) -> None:
        """Begin converting one node (``folding``: its inputs are all known)."""
        self.pending, self.ops, self.folding = 0, 0, folding

    def fold(self, shape, dtype, what: str) -> None:
        """Reserve an array computed while importing; :class:`FoldTooLarge` past the
        fold budget (or past ``value_limit_bytes``)."""
        nbytes = nbytes_of(shape, dtype, what)
        total = self.held + self.pending + nbytes
        limits = self.limits
        over_budget = total > limits.fold_limit_bytes and nbytes > ALWAYS_FOLD_BYTES
        if over_budget or nbytes > limits.value_limit_bytes:
            raise FoldTooLarge(f"{what}: {size_text(nbytes)} would bring the values computed "
                               f"while importing to {size_text(total)}, more than "
                               f"fold_limit_bytes={self.limits.fold_limit_bytes}")
        self.pending += nbytes

    def import_only(self, shape, dtype, what: str) -> None:
        """Reserve an array that exists only while importing (no graph operation can
        compute it at run time): past the fold budget the model is refused."""
        try:
            self.fold(shape, dtype, what)
        except FoldTooLarge as exc:
            raise LimitExceeded(f"{exc}; this value cannot be computed at run time "
                                "instead, so the model is refused (pass a larger "
                                "fold_limit_bytes to graphc.onnx.load to allow it)") from None

    def value(self, shape, dtype, what: str) -> None:
        """Check one value of the graph (or an array as large as one) against
        ``value_limit_bytes``."""
        nbytes = nbytes_of(shape, dtype, what)
        if nbytes > self.limits.value_limit_bytes:
            raise LimitExceeded(f"{what}: a value of shape {tuple(shape)} and dtype "
                                f"{np.dtype(dtype)} takes {size_text(nbytes)}, more than "
                                f"value_limit_bytes={self.limits.value_limit_bytes} "
                                f"({size_text(self.limits.value_limit_bytes)}); pass a larger "
                                "value_limit_bytes to graphc.onnx.load to allow it")

    def reserve(self, shape, dtype, what: str) -> None:
        """An array a converter makes itself: folded (``fold``) or a graph constant
        (``value``), as the node is converted."""
        if self.folding:
            self.fold(shape, dtype, what)
        else:
            self.value(shape, dtype, what)

    def count_op(self, what: str) -> None:
        """Count one graph operation (or eager computation) of the current node."""
        self.ops += 1
        if self.ops > self.limits.ops_per_node:
            raise OnnxUnsupported(f"converting this node takes more than "
                                  f"{self.limits.ops_per_node} graph operations (the last: "
                                  f"{what}); graphc composes it from smaller operations and "
                                  "refuses one this large")

    def hold(self, nbytes: int) -> None:
        """A folded value is kept (in the import's table, or adopted by the graph)."""
        self.held += nbytes
        self.peak = max(self.peak, self.held)

    def release(self, nbytes: int) -> None:
        """A folded value is no longer held."""
        self.held -= nbytes
