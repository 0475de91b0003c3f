"""ONNX export of ``round_to_format``: a Cast to the narrow type (with its
``saturate`` and ``round_mode``) and a Cast back to the compute dtype, both exact
on the format's values.

>>> round_to_format_export.__name__
'round_to_format_export'
"""
from __future__ import annotations

from ..type.formats import narrow_format
from .errors import OnnxUnsupported
from .tensors import numpy_to_onnx_dtype


#: the first opset whose Cast has each format's element type
_FIRST_OPSET = {"bfloat16": 13, "float8_e4m3fn": 19, "float8_e4m3fnuz": 19, "float8_e5m2": 19,
                "float8_e5m2fnuz": 19, "int4": 21, "uint4": 21, "float4_e2m1fn": 23,
                "float8_e8m0fnu": 24, "int2": 25, "uint2": 25}


def round_to_format_export(ctx, op, ins, out):
    fmt = narrow_format(op["format"])
    first = _FIRST_OPSET[fmt.name]
    if ctx.opset < first:
        raise OnnxUnsupported(f"onnx export: round_to_format to {fmt.name} is a Cast to an "
                              f"element type ONNX has from opset {first}; the export is for "
                              f"opset {ctx.opset} (pass opset={first} or newer)")
    extra = {"saturate": int(op["saturate"])} if fmt.saturable else {}
    if fmt.name == "float8_e8m0fnu":
        extra = {"saturate": int(op["saturate"]), "round_mode": op["rounding"]}
    narrow = ctx.op("Cast", [ins[0].name], to=numpy_to_onnx_dtype(fmt.storage_dtype()),
                    **extra)
    return ctx.op("Cast", [narrow], out=out.name, to=numpy_to_onnx_dtype(fmt.compute_dtype))
