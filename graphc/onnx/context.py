"""What a converter sees of one ONNX node: its inputs, attributes and opset.

``ctx.ns`` is the eager namespace when every input of the node is known while
importing (initializers, constants, shapes) and the lazy one otherwise, so a
converter written once both folds constant subgraphs and builds graph nodes.

>>> import numpy as np
>>> ctx = NodeContext.for_test("Relu", [np.array([-1.0, 2.0])])
>>> ctx.ns.relu(ctx.input(0))
array([0., 2.])
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..operator import NS as LAZY
from ..symbol.node import Node
from .errors import NeedsInputValue, OnnxModelError, OnnxUnsupported, describe
from .registry import REQUIRED, Converter


def _eager():
    from .. import eager  # the top-level eager namespace, built once

    return eager


class NodeContext:
    """One ONNX node being converted (see the module docstring)."""

    def __init__(self, node, opset: int, inputs: Sequence, attrs: dict, spec: Converter):
        self.node, self.opset, self.spec = node, opset, spec
        self._inputs = list(inputs)
        self._attrs = attrs
        known = all(x is None or isinstance(x, np.ndarray) for x in self._inputs)
        #: eager when every input is known at import time, else lazy
        self.ns = _eager() if known else LAZY
        self.folding = known

    @classmethod
    def for_test(cls, op_type: str, inputs, attrs=None, opset: int = 21):
        """A context outside a model (doctests and unit tests)."""
        from types import SimpleNamespace

        node = SimpleNamespace(op_type=op_type, name="", output=["y"], input=["x"])
        return cls(node, opset, inputs, dict(attrs or {}), Converter(op_type, None))

    # -- inputs -------------------------------------------------------------------
    @property
    def n_inputs(self) -> int:
        """How many inputs the node lists (an omitted optional one counts, as None)."""
        return len(self._inputs)

    @property
    def inputs(self) -> list:
        """Every input, ``None`` where an optional one is omitted."""
        return list(self._inputs)

    def input(self, i: int, optional: bool = False):
        """Input ``i`` (a lazy node or a NumPy array); ``None`` if it is optional and absent."""
        value = self._inputs[i] if i < len(self._inputs) else None
        if value is None and not optional:
            raise self.invalid(f"input {i} is required but missing")
        return value

    def has_input(self, i: int) -> bool:
        return i < len(self._inputs) and self._inputs[i] is not None

    def constant(self, i: int, optional: bool = False) -> Optional[np.ndarray]:
        """Input ``i`` as a NumPy array: it must be known while importing (a shape, an
        axis list), because graphc's graphs have static shapes."""
        value = self.input(i, optional)
        if value is None or isinstance(value, np.ndarray):
            return value
        if isinstance(value, Node) and value.op.kind == "const":
            return np.asarray(value.value)
        sources = _graph_inputs_behind(value) if isinstance(value, Node) else []
        if sources:
            # computed from graph inputs (a CenterCropPad's pads, a window's length):
            # the model is specialised on their values, one input at a time
            raise NeedsInputValue(f"{describe(self.node)}: input {i} ({self.node.input[i]!r}) "
                                  "must be known while importing; it is computed from the "
                                  f"graph input {sources[0]!r}, so the model is compiled for "
                                  "each of its values", sources[0])
        raise self.unsupported(f"input {i} ({self.node.input[i]!r}) must be a constant known "
                               "while importing (graphc graphs have static shapes), but it is "
                               "computed from the graph's inputs")

    def shape(self, i: int) -> tuple:
        return tuple(np.shape(self.input(i)))

    def dtype(self, i: int) -> np.dtype:
        value = self.input(i)
        return value.dtype if isinstance(value, (Node, np.ndarray)) else np.asarray(value).dtype

    # -- attributes ---------------------------------------------------------------
    def attr(self, name: str):
        """Attribute ``name``, or its declared default."""
        if name in self._attrs:
            return self._attrs[name]
        default = self.spec.attrs.get(name, REQUIRED)
        if default is REQUIRED:
            raise self.invalid(f"attribute {name!r} is required")
        return default

    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    @property
    def n_outputs(self) -> int:
        """How many outputs the node asks for (trailing omitted ones excluded)."""
        names = list(self.node.output)
        while names and not names[-1]:
            names.pop()
        return len(names)

    # -- errors ---------------------------------------------------------------------
    def unsupported(self, what: str) -> OnnxUnsupported:
        return OnnxUnsupported(f"{describe(self.node)}: {what}")

    def invalid(self, what: str) -> OnnxModelError:
        return OnnxModelError(f"{describe(self.node)}: {what}")

    def lift(self, value):
        """``value`` as a value of ``ns`` (arrays stay arrays in eager mode)."""
        if self.folding or isinstance(value, Node):
            return value
        return LAZY.const(np.asarray(value))


def _graph_inputs_behind(value: Node) -> list:
    """Names of the graph inputs (``var`` nodes) ``value`` is computed from."""
    names, seen, stack = [], set(), [value]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op.kind == "var":
            names.append(node.op["name"])
        stack.extend(node.parents)
    return sorted(names)
