"""The table of ONNX operator converters: ``CONVERTERS[name]``.

A converter is registered for a domain and an op type; the table's key is the
operator's qualified name, :func:`qualified_name`: the op type alone for the
default ONNX domain (``"Relu"``), ``"<domain>.<op type>"`` for any other
(``"ai.onnx.ml.Binarizer"``), as ONNX's own operator lists spell them. An op
type never holds a dot, so :func:`split_name` reads the pair back.

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
    ``min_opset`` is the first version of its domain's opset whose semantics
    ``fn`` implements; ``domain`` is ``""`` for the default ONNX domain.
    """

    op_type: str
    fn: Callable
    attrs: Mapping[str, object] = field(default_factory=dict)
    min_opset: int = 1
    domain: str = ""


#: Marks an attribute that has no default.
REQUIRED = _REQUIRED

#: qualified name (see :func:`qualified_name`) -> Converter, filled by the ``ops``
#: modules.
CONVERTERS: dict[str, Converter] = {}

#: the spellings of the default ONNX domain in a model
DEFAULT_DOMAINS = ("", "ai.onnx")


def qualified_name(domain: Optional[str], op_type: str) -> str:
    """The key of ``op_type`` of ``domain`` in :data:`CONVERTERS`.

    >>> qualified_name("", "Relu"), qualified_name("ai.onnx", "Relu")
    ('Relu', 'Relu')
    >>> qualified_name("ai.onnx.ml", "Binarizer")
    'ai.onnx.ml.Binarizer'
    """
    return op_type if (domain or "") in DEFAULT_DOMAINS else f"{domain}.{op_type}"


def split_name(name: str) -> tuple[str, str]:
    """``(domain, op_type)`` of a qualified name, ``""`` for the default domain.

    >>> split_name("Relu"), split_name("ai.onnx.preview.training.Adam")
    (('', 'Relu'), ('ai.onnx.preview.training', 'Adam'))
    """
    domain, _, op_type = name.rpartition(".")
    return domain, op_type


def converter(*op_types: str, attrs: Optional[Mapping[str, object]] = None,
              min_opset: int = 1, domain: str = ""):
    """Register ``fn`` as the converter of each of ``op_types`` of ``domain`` (the
    default ONNX domain unless given; ``min_opset`` counts that domain's versions).

    Example::

        @converter("LeakyRelu", attrs={"alpha": 0.01})
        def leaky_relu(ctx):
            x = ctx.input(0)
            return ctx.ns.where(x >= 0, x, x * ctx.attr("alpha"))
    """
    domain = "" if domain in DEFAULT_DOMAINS else domain

    def register(fn):
        for op_type in op_types:
            name = qualified_name(domain, op_type)
            if name in CONVERTERS:
                raise ValueError(f"ONNX converter for {name} registered twice")
            CONVERTERS[name] = Converter(op_type, fn, dict(attrs or {}), min_opset, domain)
        return fn
    return register
