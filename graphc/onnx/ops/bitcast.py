"""Converter of ONNX's BitCast: each element's bits reinterpreted as another type of
the same size, graphc's ``bitcast`` kind (NumPy's ``x.view(dtype)``).

The narrow formats (bfloat16, float8, 2- and 4-bit integers) are held in a wider
compute dtype (:mod:`graphc.type.formats`), whose bits are not the format's, so a
BitCast from or to one is refused.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["BitCast"]
>>> node = NodeContext.for_test("BitCast", []).node
>>> spec.fn(NodeContext(node, 26, [np.array([1.0], np.float32)], {"to": 6}, spec))
array([1065353216], dtype=int32)
"""
from __future__ import annotations

from ..registry import REQUIRED, converter
from ..tensors import onnx_dtype, onnx_format


@converter("BitCast", attrs={"to": REQUIRED}, min_opset=26)
def bitcast(ctx):
    to = int(ctx.attr("to"))
    narrow = ctx.format(0) or onnx_format(to)
    if narrow is not None:
        raise ctx.unsupported(f"a BitCast from or to {narrow} is not supported: graphc holds "
                              f"{narrow} in a wider dtype, whose bits are not the format's")
    target, source = onnx_dtype(to, f"{ctx.describe()}: attribute to"), ctx.dtype(0)
    if target.itemsize != source.itemsize:
        raise ctx.invalid(f"the input's type {source} ({8 * source.itemsize} bits) and "
                          f"to={target} ({8 * target.itemsize} bits) must have one size")
    return ctx.ns.bitcast(ctx.input(0), target)
