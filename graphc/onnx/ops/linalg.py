"""The converter of ONNX's Det: graphc's ``linalg.det`` (LU-based, as NumPy's).

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["Det"]
>>> node = NodeContext.for_test("Det", []).node
>>> x = np.array([[2.0, 1.0], [1.0, 3.0]])
>>> round(float(spec.fn(NodeContext(node, 22, [x], {}, spec))), 9)
5.0
"""
from __future__ import annotations

import numpy as np

from ..registry import converter


@converter("Det", min_opset=11)
def det(ctx):
    """The determinant of each square matrix in the input's last two axes."""
    x, dims, dtype = ctx.input(0), ctx.shape(0), np.dtype(ctx.dtype(0))
    if len(dims) < 2 or dims[-1] != dims[-2]:
        raise ctx.invalid(f"the input must hold square matrices in its last two axes, got "
                          f"shape {dims}")
    if dtype.kind != "f":
        raise ctx.invalid(f"the input must be floating-point, got {dtype}")
    ns = ctx.ns
    # graphc's linear algebra (LAPACK's) has no float16: compute such input in float32
    wide = ns.astype(x, np.float32) if dtype.itemsize < 4 else x
    y = ns.linalg.det(wide)
    return y if y.dtype == dtype else ns.astype(y, dtype)
