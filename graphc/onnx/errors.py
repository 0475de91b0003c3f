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


def describe(node) -> str:
    """``node`` as the errors name it: ``Conv node 'conv1' (#3)``."""
    label = f"{node.op_type} node"
    if node.name:
        label += f" {node.name!r}"
    return f"{label} (outputs {list(node.output)})"
