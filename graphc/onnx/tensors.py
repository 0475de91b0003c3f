"""ONNX tensors, dtypes and attributes as NumPy values.

>>> import onnx
>>> onnx_dtype(onnx.TensorProto.FLOAT)
dtype('float32')
>>> numpy_to_onnx_dtype(np.dtype("int64")) == onnx.TensorProto.INT64
True
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..type.formats import NARROW_FORMATS
from .errors import OnnxModelError, OnnxUnsupported


def onnx_dtype(elem_type: int, where: str = "tensor") -> np.dtype:
    """The NumPy dtype graphc computes ONNX element type ``elem_type`` in: its own, or
    for a narrow format (bfloat16, float8, float4, 2- and 4-bit ints) the format's
    compute dtype (:mod:`graphc.type.formats`); an error for strings."""
    import onnx

    fmt = onnx_format(elem_type)
    if fmt is not None:
        return NARROW_FORMATS[fmt].compute_dtype
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):
        raise OnnxUnsupported(f"{where}: ONNX element type {elem_type} is not supported") from None
    if dtype.kind not in "biufc":
        name = onnx.TensorProto.DataType.Name(elem_type)
        raise OnnxUnsupported(f"{where}: ONNX element type {name} is not supported "
                              "(graphc computes on booleans, integers, floats, complex "
                              "numbers and the narrow formats of graphc.type.formats)")
    return dtype


def onnx_format(elem_type: int) -> Optional[str]:
    """The narrow format (its ``graphc.type.formats`` name) of ONNX element type
    ``elem_type``, or ``None`` for a type NumPy holds natively.

    >>> import onnx
    >>> onnx_format(onnx.TensorProto.BFLOAT16), onnx_format(onnx.TensorProto.FLOAT)
    ('bfloat16', None)
    """
    return _FORMAT_OF_ELEM_TYPE.get(int(elem_type))


#: ONNX element type -> the narrow format graphc holds it as (ONNX's numbering)
_FORMAT_OF_ELEM_TYPE = {16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz",
                        19: "float8_e5m2", 20: "float8_e5m2fnuz", 21: "uint4", 22: "int4",
                        23: "float4_e2m1fn", 24: "float8_e8m0fnu", 25: "uint2", 26: "int2"}


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
        array = onnx.numpy_helper.to_array(tensor)
    except Exception as exc:  # a truncated or inconsistent raw_data
        raise OnnxModelError(f"tensor {tensor.name!r} cannot be read: {exc}") from None
    fmt = onnx_format(tensor.data_type)
    # a narrow format's values are exact in its compute dtype
    return array if fmt is None else array.astype(NARROW_FORMATS[fmt].compute_dtype)


def attribute_value(attribute, where: str):
    """An ``AttributeProto`` as a Python value: numbers, strings (decoded), lists,
    tensors as NumPy arrays, and a graph (a control-flow body) as its ``GraphProto``."""
    import onnx

    kind = onnx.AttributeProto.AttributeType
    if attribute.ref_attr_name:
        raise OnnxUnsupported(f"{where}: attribute {attribute.name!r} refers to a function "
                              "attribute, which is not supported")
    if attribute.type in (kind.GRAPHS, kind.SPARSE_TENSOR, kind.SPARSE_TENSORS,
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
