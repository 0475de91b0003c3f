"""Which values of an ONNX model have a narrow element type (bfloat16, float8,
float4, 2- and 4-bit ints), so the import can hold them rounded to their format.

graphc computes a narrow format in its wide compute dtype (:mod:`graphc.type.formats`):
the import rounds every value whose ONNX type is narrow (a Cast's result, an Add of
two bfloat16 values), the loaded model converts such inputs and outputs between the
format's ``ml_dtypes`` dtype and the compute dtype. The types of intermediate values
come from onnx's type inference, run only for models that mention a narrow type.

>>> import onnx, onnx.helper as h
>>> graph = h.make_graph([h.make_node("Cast", ["x"], ["y"], to=onnx.TensorProto.BFLOAT16)],
...     "g", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
...     [h.make_tensor_value_info("y", onnx.TensorProto.BFLOAT16, [2])])
>>> value_formats(h.make_model(graph))
{'y': 'bfloat16'}
"""
from __future__ import annotations

import numpy as np

from .tensors import onnx_format

#: node attributes that name an element type
_TYPE_ATTRIBUTES = ("to", "output_dtype", "dtype")


def value_formats(model) -> dict:
    """``{value name: narrow format}`` for the main graph's values of a narrow type."""
    if not any(_mentions_narrow(each) for each in _graphs(model.graph)):
        return {}
    formats = {}
    for each in _graphs(_inferred(model).graph):  # a control-flow body's values too
        formats.update({t.name: onnx_format(t.data_type) for t in each.initializer})
        for info in [*each.value_info, *each.input, *each.output]:
            if info.type.HasField("tensor_type"):
                formats[info.name] = onnx_format(info.type.tensor_type.elem_type)
    return {name: fmt for name, fmt in formats.items() if fmt is not None}


def rounded(namespaces, name: str, value):
    """``value`` rounded to the narrow format of ``name``'s ONNX type, if it has one
    and ``value`` is not a rounding to it already. Rounding a value of the format
    changes nothing (no saturation; infinities and NaN kept), so a converter that
    rounds by its own rules (a Cast's ``saturate``) keeps its result.

    Example: ``env[name] = rounded(namespaces, name, value)``
    """
    fmt = namespaces.formats.get(name)
    if fmt is None or (not isinstance(value, np.ndarray) and value.op.kind ==
                       "round_to_format" and value.op["format"] == fmt):
        return value
    ns = namespaces.folding if isinstance(value, np.ndarray) else namespaces.graph
    return ns.round_to_format(value, fmt, saturate=False, rounding="nearest")


def _graphs(graph):
    """``graph`` and every graph nested in its nodes' attributes."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from _graphs(attribute.g)


def declared_formats(infos) -> dict:
    """``{name: narrow format}`` of the declared inputs or outputs ``infos``."""
    return {v.name: onnx_format(v.type.tensor_type.elem_type) for v in infos
            if v.type.HasField("tensor_type")
            and onnx_format(v.type.tensor_type.elem_type) is not None}


def _mentions_narrow(graph) -> bool:
    if declared_formats([*graph.input, *graph.output, *graph.value_info]):
        return True
    if any(onnx_format(t.data_type) for t in graph.initializer):
        return True
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.name in _TYPE_ATTRIBUTES and onnx_format(attribute.i):
                return True
            if attribute.HasField("t") and onnx_format(attribute.t.data_type):
                return True
    return False


def _inferred(model):
    """``model`` with onnx's inferred types of its intermediate values (the model
    itself where inference fails: only declared types are known then)."""
    import onnx

    try:
        return onnx.shape_inference.infer_shapes(model)
    except Exception:  # an inconsistent model: the importer's own checks say why
        return model
