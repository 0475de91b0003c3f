"""One ONNX node through its converter, as untrusted input.

``convert_node`` reads the node's attributes and inputs, checks their element
types against the operator's schema (:mod:`graphc.onnx.typecheck`), and runs
the converter: first folding (computing at once) when every input is known,
and again as graph operations, computed at run time, when the folded value
would pass the fold budget (:mod:`graphc.onnx.limits`). Whatever goes wrong
because of the node's content comes out as ``OnnxModelError`` or
``OnnxUnsupported`` naming the node (op type, name, index), chained from the
original error.

>>> import numpy as np, onnx.helper as h
>>> from graphc.onnx.context import Namespaces
>>> from graphc.onnx.limits import ImportBudget, ImportLimits
>>> env = {"x": np.array([-1.0, 2.0])}
>>> node = h.make_node("Relu", ["x"], ["y"])
>>> outputs = convert_node(node, 0, 17, env, Namespaces(ImportBudget(ImportLimits())))
>>> outputs["y"]
array([0., 2.])
"""
from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from ..type.errors import GraphcError
from . import ops  # noqa: F401  (fills CONVERTERS)
from .context import Namespaces, NodeContext
from .errors import NeedsInputValue, OnnxError, OnnxModelError, OnnxUnsupported, describe
from .limits import FoldTooLarge
from .registry import CONVERTERS, DEFAULT_DOMAINS, qualified_name
from .tensors import attribute_value
from .typecheck import problem

#: attributes that are 0/1 switches wherever they appear; onnxruntime reads some as
#: ``!= 0`` and others as ``== 1``, so any other value is refused rather than guessed
FLAGS = frozenset({"keepdims", "noop_with_empty_axes", "select_last_index", "exclusive",
                   "reverse", "largest", "sorted", "allowzero", "upper", "transA", "transB",
                   "ceil_mode", "count_include_pad", "fmod", "detect_negative",
                   "detect_positive", "training_mode", "is_test", "spatial", "broadcast"})


def convert_node(node, index: int, opset: int, env: dict, namespaces: Namespaces,
                 domain_versions: Optional[Mapping[str, int]] = None) -> dict:
    """``{output name: value}`` of ``node`` (the ``index``-th of its graph), its
    inputs read from ``env``; any error names the node. ``opset`` is the model's
    version of the default domain, ``domain_versions`` its versions of the others
    (``{"ai.onnx.ml": 5}``: its ``opset_import``), against which a converter of
    such a domain checks its ``min_opset`` (unchecked where not given)."""
    where = describe(node, index)
    try:
        return _convert(node, index, opset, env, namespaces, where, domain_versions or {})
    except NeedsInputValue:
        raise
    except OnnxError as exc:
        if str(exc).startswith(where):
            raise
        raise type(exc)(f"{where}: {message_of(exc)}") from exc
    except Exception as exc:  # a model's content reached NumPy or graphc's own checks
        raise OnnxModelError(f"{where}: {type(exc).__name__}: {message_of(exc)}") from exc


def message_of(exc: BaseException) -> str:
    """``exc``'s message without the caller's location graphc adds to its own errors
    (in an import that is the caller's load(), which says nothing about the model).

    >>> from graphc.type.errors import ShapeError
    >>> error = ShapeError("add: shapes (2,) and (3,) could not be broadcast")
    >>> error.location = "model.py:3"
    >>> message_of(error)
    'add: shapes (2,) and (3,) could not be broadcast'
    """
    return exc.message if isinstance(exc, GraphcError) else str(exc)


def _unknown_operator(node, where) -> OnnxUnsupported:
    domains = sorted({spec.domain for spec in CONVERTERS.values()} - {""})
    if node.domain not in DEFAULT_DOMAINS and node.domain not in domains:
        return OnnxUnsupported(f"{where}: operators of domain {node.domain!r} are not "
                               f"supported (graphc imports the default ONNX domain and "
                               f"{', '.join(map(repr, domains))})")
    return OnnxUnsupported(f"{where}: operator {qualified_name(node.domain, node.op_type)} "
                           f"is not supported (graphc imports {len(CONVERTERS)} operators; "
                           "see graphc.onnx.supported_operators())")


def _convert(node, index, opset, env, namespaces, where, domain_versions) -> dict:
    spec = CONVERTERS.get(qualified_name(node.domain, node.op_type))
    if spec is None:
        raise _unknown_operator(node, where)
    version = opset if not spec.domain else domain_versions.get(spec.domain)
    if version is not None and version < spec.min_opset:
        domain = f"{spec.domain} " if spec.domain else ""
        raise OnnxUnsupported(f"{where}: {node.op_type} is supported from {domain}opset "
                              f"{spec.min_opset}; the model uses {domain}opset {version}")
    if version is None:
        version = spec.min_opset
    attrs = {}
    for attribute in node.attribute:
        if attribute.name not in spec.attrs:
            raise OnnxUnsupported(f"{where}: attribute {attribute.name!r} is not "
                                  f"supported (known: {sorted(spec.attrs)})")
        attrs[attribute.name] = attribute_value(attribute, where)
        if attribute.name in FLAGS and attrs[attribute.name] not in (0, 1):
            raise OnnxModelError(f"{where}: attribute {attribute.name!r} is a switch (0 or "
                                 f"1), got {attrs[attribute.name]!r}")
    inputs = []
    for name in node.input:
        if not name:
            inputs.append(None)
        elif name not in env:
            raise OnnxModelError(f"{where}: input {name!r} is not produced by any "
                                 "earlier node, initializer or graph input (are the nodes "
                                 "topologically sorted?)")
        else:
            inputs.append(env[name])
    # the schemas checked are the default domain's: another domain's converter checks
    # its inputs' types itself
    wrong = problem(node, opset, namespaces.typed(node.input, inputs)) if not spec.domain else None
    if wrong is not None:
        raise OnnxModelError(f"{where}: {wrong}")
    ctx = NodeContext(node, version, inputs, attrs, spec, namespaces, index=index)
    try:
        result = spec.fn(ctx)
    except FoldTooLarge:
        # too large to compute now: the same node as graph operations, run later
        ctx = NodeContext(node, version, inputs, attrs, spec, namespaces, fold=False,
                          index=index)
        result = spec.fn(ctx)
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    outputs = {}
    for i, name in enumerate(node.output):
        if not name:
            continue
        if i >= len(results) or results[i] is None:
            raise OnnxUnsupported(f"{where}: output {i} ({name!r}) is not supported")
        outputs[name] = results[i]
    return outputs


def is_folded_result(node, value, inputs) -> bool:
    """Whether ``value``, an output of ``node``, is an array the import computed
    (not an input passed through, nor a Constant's data read from the file)."""
    return (isinstance(value, np.ndarray) and node.op_type != "Constant"
            and not any(value is x for x in inputs))
