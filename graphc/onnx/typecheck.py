"""The element types of a node's inputs checked against the operator's ONNX schema
(``onnx.defs``), before the node is converted: inputs that share a type
parameter (``T`` of Conv's X and W) must have one element type, and each type
must be one the operator allows. A float16 input into float32 weights is a
malformed model (onnxruntime refuses it), not something to promote silently.

>>> import numpy as np, onnx.helper as h
>>> node = h.make_node("Add", ["a", "b"], ["c"])
>>> problem(node, 17, [np.zeros(2, np.float16), np.zeros(2, np.float32)])
"input 1 ('b') is float32 but input 0 ('a') is float16: Add takes one element type T for both"
>>> problem(node, 17, [np.zeros(2, np.float32), np.zeros(2, np.float32)]) is None
True
"""
from __future__ import annotations

import functools
from typing import Optional, Sequence

import numpy as np


@functools.lru_cache(maxsize=None)
def _schema(op_type: str, opset: int):
    """The schema of ``op_type`` in effect at ``opset`` (default domain), or ``None``."""
    import onnx.defs

    try:
        return onnx.defs.get_schema(op_type, opset, "")
    except Exception:  # onnx.defs.SchemaError: unknown operator or opset
        return None


@functools.lru_cache(maxsize=None)
def type_name(dtype: np.dtype) -> Optional[str]:
    """ONNX's spelling of ``dtype`` in a schema: ``tensor(float)`` for float32."""
    import onnx

    try:
        code = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    except Exception:
        return None
    return f"tensor({onnx.TensorProto.DataType.Name(code).lower()})"


@functools.lru_cache(maxsize=None)
def _short(type_str: str) -> str:
    """``tensor(float)`` as NumPy names it (``float32``); ONNX's name where NumPy has none."""
    import onnx

    inner = type_str[len("tensor("):-1] if type_str.startswith("tensor(") else type_str
    try:
        code = onnx.TensorProto.DataType.Value(inner.upper())
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(code))
    except Exception:
        return inner
    return inner if dtype.kind in "OSUV" else str(dtype)


def problem(node, opset: int, inputs: Sequence) -> Optional[str]:
    """What is wrong with the element types of ``inputs`` (arrays or graph values,
    ``None`` for an omitted optional input) for ``node``, or ``None``."""
    schema = _schema(node.op_type, opset)
    if schema is None or not schema.inputs:
        return None
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    variadic = schema.inputs[-1].option == schema.inputs[-1].option.Variadic
    bound: dict = {}
    for i, value in enumerate(inputs):
        if value is None:
            continue
        if i >= len(schema.inputs) and not variadic:
            return None  # the checker refuses the count; nothing to say about types
        formal = schema.inputs[min(i, len(schema.inputs) - 1)]
        actual = type_name(value.dtype)
        if actual is None:
            continue
        kinds = allowed.get(formal.type_str, {formal.type_str})
        tensor_kinds = {k for k in kinds if k.startswith("tensor(")}
        if tensor_kinds and actual not in tensor_kinds:
            names = ", ".join(sorted(_short(k) for k in tensor_kinds))
            return (f"input {i} ({node.input[i]!r}) is {_short(actual)}, which {node.op_type} "
                    f"does not take there (its {formal.name} is one of: {names})")
        if formal.type_str not in allowed:
            continue  # a fixed type (tensor(int64)), checked above
        homogeneous = formal.option != formal.option.Variadic or formal.is_homogeneous
        if not homogeneous:
            continue
        first = bound.setdefault(formal.type_str, (i, actual))
        if first[1] != actual:
            return (f"input {i} ({node.input[i]!r}) is {_short(actual)} but input {first[0]} "
                    f"({node.input[first[0]]!r}) is {_short(first[1])}: {node.op_type} takes "
                    f"one element type {formal.type_str} for both")
    return None
