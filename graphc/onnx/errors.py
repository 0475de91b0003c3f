"""Errors of the ONNX importer and exporter.

``OnnxUnsupported`` is raised for a valid model that uses something graphc does
not implement (an operator, an attribute value, a dtype); ``OnnxModelError`` for
a model that is malformed (a missing input, a wrong attribute type, a name used
before it is produced). Both name the ONNX node so the user can find it.
"""
from ..type.errors import GraphcError


class OnnxError(GraphcError, ValueError):
    """Base class of the ONNX errors."""


class OnnxUnsupported(OnnxError):
    """A valid ONNX construct that graphc does not implement."""


class OnnxModelError(OnnxError):
    """A malformed ONNX model."""


class NeedsInputValue(OnnxUnsupported):
    """A node needs the value of graph input ``input_name`` while importing (an
    axes or shape input fed at run time): :class:`~graphc.onnx.loaded.OnnxGraph`
    catches it and compiles the model for each value of that input."""

    def __init__(self, message: str, input_name: str):
        super().__init__(message)
        self.input_name = input_name


def describe(node, index=None) -> str:
    """``node`` as the errors name it: its op type, its name (if any), its index
    in the graph (if known) and its outputs.

    >>> import onnx.helper as h
    >>> describe(h.make_node("Conv", ["x", "w"], ["y"], name="conv1"), 3)
    "Conv node 'conv1' (#3, outputs ['y'])"
    """
    label = f"{node.op_type} node"
    if node.name:
        label += f" {node.name!r}"
    where = "" if index is None else f"#{index}, "
    return f"{label} ({where}outputs {list(node.output)})"
