"""What a converter sees of one ONNX node: its inputs, attributes and opset.

``ctx.ns`` is the eager namespace when every input of the node is known while
importing (initializers, constants, shapes) and the lazy one otherwise, so a
converter written once both folds constant subgraphs and builds graph nodes.
Both measure what they make against the import's budget
(:mod:`graphc.onnx.limits`); an array a converter makes itself with NumPy is
reserved first with ``ctx.reserve`` (or ``ctx.reserve_import_only``).

>>> import numpy as np
>>> ctx = NodeContext.for_test("Relu", [np.array([-1.0, 2.0])])
>>> ctx.ns.relu(ctx.input(0))
array([0., 2.])
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..symbol.node import Node
from .errors import NeedsInputValue, OnnxModelError, OnnxUnsupported, describe
from .limits import ImportBudget, ImportLimits
from .namespaces import FoldingNamespace, GraphNamespace
from .registry import REQUIRED, Converter


class Namespaces:
    """The folding and graph namespaces of one import, sharing its budget.

    Example: ``Namespaces(ImportBudget(ImportLimits()))``
    """

    def __init__(self, budget: ImportBudget, formats: Optional[dict] = None):
        self.budget = budget
        self.folding = FoldingNamespace(budget)
        self.graph = GraphNamespace(budget)
        #: value name -> the narrow format of its ONNX type (:mod:`graphc.onnx.formats`)
        self.formats = dict(formats or {})
        #: every value visible by name where the node being converted sits (the
        #: enclosing graphs' too): what a control-flow body reads from outside it
        self.scope: dict = {}
        #: ``{domain: version}`` of the model's other domains (ai.onnx.ml, ...)
        self.domain_versions: dict = {}
        #: the model's default-domain opset, which a body's nodes are converted at
        #: (a node of another domain has that domain's version as its ``ctx.opset``)
        self.opset: Optional[int] = None

    def typed(self, names: Sequence[str], values: Sequence) -> list:
        """``values`` as the type checker must see them: a value of a narrow format
        (held in its compute dtype) stands for its format's dtype."""
        return [_Typed(self.formats[name]) if name in self.formats and value is not None
                else value for name, value in zip(names, values)]


class _Typed:
    """A value's element type alone: what the type checker reads of a narrow value."""

    def __init__(self, fmt: str):
        from ..type.formats import NARROW_FORMATS

        self.dtype = NARROW_FORMATS[fmt].storage_dtype()


class NodeContext:
    """One ONNX node being converted (see the module docstring).

    ``fold=False`` builds graph nodes even when every input is known (the
    importer's second try at a node whose folded value is over budget);
    ``index`` is the node's position in the graph, for the errors.
    """

    def __init__(self, node, opset: int, inputs: Sequence, attrs: dict, spec: Converter,
                 namespaces: Optional[Namespaces] = None, fold: bool = True,
                 index: Optional[int] = None):
        self.node, self.opset, self.spec, self.index = node, opset, spec, index
        self._inputs = list(inputs)
        self._attrs = attrs
        self.namespaces = namespaces or Namespaces(ImportBudget(ImportLimits()))
        known = fold and all(x is None or isinstance(x, np.ndarray) for x in self._inputs)
        #: eager when every input is known at import time, else lazy
        self.ns = self.namespaces.folding if known else self.namespaces.graph
        self.folding = known
        self.budget = self.namespaces.budget
        self.budget.start_node(folding=known)

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
            raise NeedsInputValue(f"{self.describe()}: input {i} ({self.node.input[i]!r}) "
                                  "must be known while importing; it is computed from the "
                                  f"graph input {sources[0]!r}, so the model is compiled for "
                                  "each of its values", sources[0])
        raise self.unsupported(f"input {i} ({self.node.input[i]!r}) must be a constant known "
                               "while importing (graphc graphs have static shapes), but it is "
                               "computed at run time (it was too large to compute while "
                               "importing: see fold_limit_bytes of graphc.onnx.load)")

    def format(self, i: int) -> Optional[str]:
        """The narrow format of input ``i``'s ONNX type (``"bfloat16"``, ``"int4"``, ...:
        :mod:`graphc.type.formats`), held in its compute dtype; ``None`` for a type
        NumPy holds natively."""
        names = list(self.node.input)
        return self.namespaces.formats.get(names[i]) if i < len(names) else None

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

    # -- sizes ----------------------------------------------------------------------
    def reserve(self, shape, dtype, what: str) -> None:
        """Measure an array the converter is about to make with NumPy: against the
        fold budget when folding (the node is then converted again as graph
        operations if it is over), else against ``value_limit_bytes``.

        Example: ``ctx.reserve((depth,), np.int64, "one-hot targets")``
        """
        self.budget.reserve(shape, dtype, what)

    def reserve_import_only(self, shape, dtype, what: str) -> None:
        """Measure an array that only the import can compute (no graph operation
        makes it at run time): past the fold budget the model is refused.

        Example: ``ctx.reserve_import_only((count,), np.int64, "Range")``
        """
        self.budget.import_only(shape, dtype, what)

    # -- errors ---------------------------------------------------------------------
    def describe(self) -> str:
        """The node as errors name it (op type, name, index, outputs)."""
        return describe(self.node, self.index)

    def unsupported(self, what: str) -> OnnxUnsupported:
        return OnnxUnsupported(f"{self.describe()}: {what}")

    def invalid(self, what: str) -> OnnxModelError:
        return OnnxModelError(f"{self.describe()}: {what}")

    def lift(self, value):
        """``value`` as a value of ``ns`` (arrays stay arrays in eager mode)."""
        if self.folding or isinstance(value, Node):
            return value
        return self.ns.const(np.asarray(value))


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
