"""The table of ONNX operator converters: ``CONVERTERS[op_type]``.

A converter turns one ONNX node into graphc values, written against a
namespace (``ctx.ns``), so the same function builds graph nodes or, when every
input is known while importing, computes at once: that is how constant
subgraphs (``Shape -> Gather -> Concat -> Reshape``, ``ConstantOfShape``,
reshaped parameters) fold away before the graph is built.

A converter declares the attributes it understands with their defaults; any
other attribute on a node is refused with an error naming it.

Example (the converter of ``Relu``)::

    @converter("Relu")
    def relu(ctx):
        return ctx.ns.relu(ctx.input(0))
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

_REQUIRED = object()


@dataclass(frozen=True)
class Converter:
    """How to import one ONNX ``op_type``.

    ``fn(ctx)`` returns the node's outputs (one value or a tuple). ``attrs``
    maps each understood attribute to its default (``REQUIRED`` for none).
    ``min_opset`` is the first opset whose semantics ``fn`` implements.
    """

    op_type: str
    fn: Callable
    attrs: Mapping[str, object] = field(default_factory=dict)
    min_opset: int = 1


#: Marks an attribute that has no default.
REQUIRED = _REQUIRED

#: op_type -> Converter, filled by the ``ops_*`` modules.
CONVERTERS: dict[str, Converter] = {}


def converter(*op_types: str, attrs: Optional[Mapping[str, object]] = None,
              min_opset: int = 1):
    """Register ``fn`` as the converter of each of ``op_types``.

    Example::

        @converter("LeakyRelu", attrs={"alpha": 0.01})
        def leaky_relu(ctx):
            x = ctx.input(0)
            return ctx.ns.where(x >= 0, x, x * ctx.attr("alpha"))
    """
    def register(fn):
        for op_type in op_types:
            if op_type in CONVERTERS:
                raise ValueError(f"ONNX converter for {op_type} registered twice")
            CONVERTERS[op_type] = Converter(op_type, fn, dict(attrs or {}), min_opset)
        return fn
    return register
