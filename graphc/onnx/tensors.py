"""ONNX tensors, dtypes and attributes as NumPy values.

>>> import onnx
>>> onnx_dtype(onnx.TensorProto.FLOAT)
dtype('float32')
>>> numpy_to_onnx_dtype(np.dtype("int64")) == onnx.TensorProto.INT64
True
"""
from __future__ import annotations

import numpy as np

from .errors import OnnxModelError, OnnxUnsupported


def onnx_dtype(elem_type: int, where: str = "tensor") -> np.dtype:
    """The NumPy dtype of ONNX element type ``elem_type``; an error for types NumPy
    cannot hold natively (strings, bfloat16, float8, 4-bit ints)."""
    import onnx

    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):
        raise OnnxUnsupported(f"{where}: ONNX element type {elem_type} is not supported") from None
    name = onnx.TensorProto.DataType.Name(elem_type)
    if dtype.kind not in "biufc" or name in _NOT_NATIVE:
        raise OnnxUnsupported(f"{where}: ONNX element type {name} is not supported "
                              "(graphc computes on NumPy's boolean, integer, float and complex "
                              "types)")
    return dtype


# element types that onnx maps onto a NumPy stand-in with other semantics
_NOT_NATIVE = {"BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
               "UINT4", "INT4", "FLOAT4E2M1", "FLOAT8E8M0", "UINT2", "INT2", "STRING"}


def numpy_to_onnx_dtype(dtype) -> int:
    """The ONNX element type of NumPy ``dtype``."""
    import onnx

    return onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def to_array(tensor) -> np.ndarray:
    """A ``TensorProto`` (initializer or constant) as a NumPy array."""
    import onnx.numpy_helper

    onnx_dtype(tensor.data_type, f"tensor {tensor.name!r}")
    if tensor.data_location == 1:  # EXTERNAL
        raise OnnxUnsupported(f"tensor {tensor.name!r} keeps its data in an external file; "
                              "load the model with onnx.load(path) (which reads it) first")
    try:
        return onnx.numpy_helper.to_array(tensor)
    except Exception as exc:  # a truncated or inconsistent raw_data
        raise OnnxModelError(f"tensor {tensor.name!r} cannot be read: {exc}") from None


def attribute_value(attribute, where: str):
    """An ``AttributeProto`` as a Python value: numbers, strings (decoded), lists,
    and tensors as NumPy arrays."""
    import onnx

    kind = onnx.AttributeProto.AttributeType
    if attribute.ref_attr_name:
        raise OnnxUnsupported(f"{where}: attribute {attribute.name!r} refers to a function "
                              "attribute, which is not supported")
    if attribute.type in (kind.GRAPH, kind.GRAPHS, kind.SPARSE_TENSOR, kind.SPARSE_TENSORS,
                          kind.TYPE_PROTO, kind.TYPE_PROTOS):
        raise OnnxUnsupported(f"{where}: attribute {attribute.name!r} of type "
                              f"{kind.Name(attribute.type)} is not supported")
    try:
        value = onnx.helper.get_attribute_value(attribute)
    except Exception as exc:
        raise OnnxModelError(f"{where}: attribute {attribute.name!r} is malformed: {exc}") from None
    if attribute.type == kind.TENSOR:
        return to_array(value)
    if attribute.type == kind.TENSORS:
        return [to_array(t) for t in value]
    if attribute.type == kind.STRING:
        return value.decode("utf-8")
    if attribute.type == kind.STRINGS:
        return [v.decode("utf-8") for v in value]
    if attribute.type in (kind.INTS, kind.FLOATS):
        return list(value)
    return value
