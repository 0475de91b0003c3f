"""``bitcast``: each element's bytes reinterpreted as another dtype of the same size
(NumPy's ``x.view(dtype)``, ONNX's BitCast). One definition, with its ONNX exporter.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["bitcast"].reference
'numpy.ndarray.view'
"""
from __future__ import annotations

from ..engine import bitcast_kernels as kernels
from ..onnx.export_ops import unsupported
from ..onnx.tensors import numpy_to_onnx_dtype
from ..shape import bitcast_rules as shapes
from .definition import NO_GRADIENT, OpDef, define

#: the first opset of the default ONNX domain with BitCast
BITCAST_OPSET = 26


def bitcast_export(ctx, op, ins, out):
    """ONNX's BitCast (opset 26 on); an older opset has no operator that keeps bits."""
    if ctx.opset < BITCAST_OPSET:
        raise unsupported(ctx, f"bitcast needs ONNX's BitCast, new in opset {BITCAST_OPSET}; "
                               f"export with opset={BITCAST_OPSET} or later (asked for "
                               f"{ctx.opset})")
    return ctx.op("BitCast", [ins[0].name], out=out.name, to=numpy_to_onnx_dtype(op["dtype"]))


define(
    # integer reinterpretation of bits has no derivative
    OpDef("bitcast", "bitcast", 1, "numpy.ndarray.view", shape=shapes.bitcast,
          kernel=kernels.bitcast, reads_strided=True, grad=NO_GRADIENT, onnx=bitcast_export,
          attributes=("dtype",), names=("bitcast",)),
)
