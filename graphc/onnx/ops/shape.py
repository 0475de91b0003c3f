"""Converters of ONNX's shape and data-movement operators (Reshape, Concat,
Slice, Gather, Pad, ...) and of the constant producers."""
from __future__ import annotations

import numpy as np

from ..registry import converter


@converter("Identity")
def identity(ctx):
    return ctx.input(0)


@converter("Constant", attrs={"value": None})
def constant(ctx):
    return np.asarray(ctx.attr("value"))
