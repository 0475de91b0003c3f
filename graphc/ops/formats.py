"""``round_to_format``: values rounded to a narrow number format (bfloat16, float8,
float4, 2- and 4-bit integers) and held in the format's compute dtype
(:mod:`graphc.type.formats`). One definition.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["round_to_format"].attributes
('format', 'saturate', 'rounding')
"""
from __future__ import annotations

from ..engine import format_kernels as kernels
from ..onnx import export_formats as onnx
from ..shape import rules as shapes
from .definition import OpDef, define


def _straight_through(ns, op, inputs, output, g, needs=None):
    """The rounding's derivative is 0 almost everywhere; like a cast between float
    dtypes, the gradient passes unchanged (the straight-through estimator
    quantization-aware training uses), in the input's dtype."""
    (x,) = inputs
    return [ns.astype(g, x.dtype) if x.dtype.kind == "f" else None]


define(
    # it writes each element after reading it: it may take its input's memory
    OpDef("round_to_format", "formats", 1, None, overwrites=(0,), shape=shapes.to_format,
          kernel=kernels.round_to_format, grad=_straight_through,
          onnx=onnx.round_to_format_export, attributes=("format", "saturate", "rounding"),
          names=("round_to_format",)),
)
