"""Build a graphc graph from an ONNX ``GraphProto``.

Initializers become NumPy arrays (constants); the graph inputs that have no
initializer become ``N.var`` inputs with the given or declared static shapes;
each node goes through its converter in ``CONVERTERS``. Values that depend
only on constants are computed while importing, so what reaches the graph is
the computation on the inputs alone.

>>> import onnx, onnx.helper as h, numpy as np
>>> graph = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g",
...     [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
...     [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
>>> inputs, outputs = import_graph(h.make_model(graph), {})
>>> [v.name for v in inputs], outputs[0].shape
(['x'], (2,))
"""
from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from ..operator import NS as LAZY
from . import ops  # noqa: F401  (fills CONVERTERS)
from .context import NodeContext
from .fold_bn import consumers_of, fold_into_conv
from .errors import OnnxModelError, OnnxUnsupported, describe
from .registry import CONVERTERS
from .tensors import attribute_value, onnx_dtype, to_array

DEFAULT_DOMAINS = ("", "ai.onnx")


def model_opset(model) -> int:
    """The default-domain opset version the model was written against."""
    for entry in model.opset_import:
        if entry.domain in DEFAULT_DOMAINS:
            return int(entry.version)
    if not model.opset_import:  # IR 1-2 models carry no opset_import: opset 1
        return 1
    raise OnnxUnsupported("the model imports no version of the default ONNX domain; "
                          f"its domains are {[e.domain for e in model.opset_import]}")


def graph_inputs(graph) -> list:
    """The graph's real inputs: declared inputs that have no initializer (IR < 4
    models list every initializer as an input too)."""
    initialized = {t.name for t in graph.initializer}
    return [v for v in graph.input if v.name not in initialized]


def declared_shape(value_info) -> tuple:
    """The declared shape of ``value_info``: ints, or ``None`` for a symbolic or
    unknown dimension; ``None`` for the whole shape if there is none."""
    tensor_type = value_info.type.tensor_type
    if not value_info.type.HasField("tensor_type"):
        raise OnnxUnsupported(f"input {value_info.name!r}: only tensor inputs are supported "
                              f"(got {value_info.type.WhichOneof('value')})")
    if not tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim)


def import_graph(model, input_shapes: Mapping[str, tuple],
                 fold_batchnorm: bool = True,
                 input_values: Optional[Mapping[str, np.ndarray]] = None) -> tuple[list, list]:
    """The graphc input variables and output values of ``model``'s main graph.

    ``input_shapes`` gives a concrete shape for each input whose declared shape
    is not fully static. ``fold_batchnorm`` folds each inference
    BatchNormalization into the Conv before it (:mod:`graphc.onnx.fold_bn`).
    ``input_values`` fixes the value of inputs that nodes need while importing
    (axes, shapes): they become constants, not variables.
    """
    input_values = input_values or {}
    opset = model_opset(model)
    graph = model.graph
    env: dict[str, object] = {}
    for tensor in graph.initializer:
        env[tensor.name] = _read_only(to_array(tensor))
    if len(graph.sparse_initializer):
        raise OnnxUnsupported("sparse initializers are not supported")
    variables = []
    for info in graph_inputs(graph):
        if info.name in input_values:
            dtype = onnx_dtype(info.type.tensor_type.elem_type, f"input {info.name!r}")
            # a copy: the caller's array must stay writeable and may change later
            env[info.name] = _read_only(np.array(input_values[info.name], dtype, copy=True))
            continue
        shape = input_shapes.get(info.name) or declared_shape(info)
        if shape is None or any(d is None for d in shape):
            raise OnnxModelError(f"input {info.name!r} has shape {shape} with unknown "
                                 "dimensions; pass its shape (run with an array, or "
                                 "input_shapes={name: shape})")
        dtype = onnx_dtype(info.type.tensor_type.elem_type, f"input {info.name!r}")
        var = LAZY.var(info.name, tuple(int(d) for d in shape), dtype)
        env[info.name] = var
        variables.append(var)
    consumers = consumers_of(graph) if fold_batchnorm else {}
    output_names = {v.name for v in graph.output}
    folded_away = set()
    for node in graph.node:
        if id(node) in folded_away:
            continue
        if fold_batchnorm and node.op_type == "Conv" and node.domain in DEFAULT_DOMAINS:
            folded = fold_into_conv(node, consumers, env, output_names)
            if folded is not None:
                node = _conv_with_folded_weights(node, *folded, env)
                folded_away.add(id(folded[0]))
        _convert(node, opset, env)
    outputs = []
    for info in graph.output:
        if info.name not in env:
            raise OnnxModelError(f"graph output {info.name!r} is produced by no node")
        value = env[info.name]
        outputs.append(value if not isinstance(value, np.ndarray) else LAZY.const(value))
    return variables, outputs


def _conv_with_folded_weights(conv, bn, w, b, env):
    """A copy of ``conv`` reading the folded weights and writing the BN's output."""
    import onnx

    replacement = onnx.NodeProto()
    replacement.CopyFrom(conv)
    names = [f"{bn.output[0]}::folded_w", f"{bn.output[0]}::folded_b"]
    env[names[0]], env[names[1]] = _read_only(w), _read_only(b)
    del replacement.input[:]
    replacement.input.extend([conv.input[0], *names])
    replacement.output[0] = bn.output[0]
    return replacement


def _read_only(array: np.ndarray) -> np.ndarray:
    """``array`` contiguous and read-only, so the graph adopts it without a copy."""
    array = np.asarray(array)
    if not array.flags.c_contiguous:
        # ascontiguousarray alone makes a 0-d array 1-d: keep the shape (Size)
        array = np.ascontiguousarray(array).reshape(np.shape(array))
    array.flags.writeable = False
    return array


def _convert(node, opset: int, env: dict) -> None:
    if node.domain not in DEFAULT_DOMAINS:
        raise OnnxUnsupported(f"{describe(node)}: operators of domain {node.domain!r} are not "
                              "supported (only the default ONNX domain)")
    spec = CONVERTERS.get(node.op_type)
    if spec is None:
        raise OnnxUnsupported(f"{describe(node)}: operator {node.op_type} is not supported "
                              f"(graphc imports {len(CONVERTERS)} operators; see "
                              "graphc.onnx.supported_operators())")
    if opset < spec.min_opset:
        raise OnnxUnsupported(f"{describe(node)}: {node.op_type} is supported from opset "
                              f"{spec.min_opset}; the model uses opset {opset}")
    attrs = {}
    for attribute in node.attribute:
        if attribute.name not in spec.attrs:
            raise OnnxUnsupported(f"{describe(node)}: attribute {attribute.name!r} is not "
                                  f"supported (known: {sorted(spec.attrs)})")
        attrs[attribute.name] = attribute_value(attribute, describe(node))
    inputs = []
    for name in node.input:
        if not name:
            inputs.append(None)
        elif name not in env:
            raise OnnxModelError(f"{describe(node)}: input {name!r} is not produced by any "
                                 "earlier node, initializer or graph input (are the nodes "
                                 "topologically sorted?)")
        else:
            inputs.append(env[name])
    ctx = NodeContext(node, opset, inputs, attrs, spec)
    result = spec.fn(ctx)
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    wanted = [(i, name) for i, name in enumerate(node.output) if name]
    for i, name in wanted:
        if i >= len(results) or results[i] is None:
            raise OnnxUnsupported(f"{describe(node)}: output {i} ({name!r}) is not supported")
        value = results[i]
        if isinstance(value, np.ndarray):
            value = _read_only(value)
        env[name] = value


def missing_shapes(model, given: Optional[Mapping] = None) -> list[str]:
    """Names of inputs whose shape is neither declared statically nor given."""
    given = given or {}
    out = []
    for info in graph_inputs(model.graph):
        shape = declared_shape(info)
        if info.name not in given and (shape is None or any(d is None for d in shape)):
            out.append(info.name)
    return out
