"""The box-coding kinds of detection networks (Faster/Mask R-CNN's box regression):
``box_decode`` and ``box_encode``, torchvision's ``BoxCoder`` on (x1, y1, x2, y2) boxes.
One definition each.

Their semantics are in :mod:`graphc.engine.box_kernels`, their shape rules in
:mod:`graphc.shape.box_rules`, their gradients in :mod:`graphc.algodiff.boxes`;
``N.box_decode`` and ``N.box_encode`` are methods of
:class:`~graphc.operator.boxes.BoxMixin`. The kernels read strided inputs (a slice of a
head's output is read in place).

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["box_decode"].attributes, DEFINITIONS["box_encode"].attributes
(('weights', 'clip'), ('weights',))
"""
from __future__ import annotations

from ..algodiff import boxes as grads
from ..engine import box_kernels as kernels
from ..shape import box_rules as shapes
from .definition import OpDef, Refused, define

_NO_ONNX = Refused("ONNX has no box-coder operator; compose the formulas of elementwise "
                   "functions (slices, subtract, multiply, exp, minimum, stack) to export one")

define(
    OpDef("box_decode", "neural", 2, None, shape=shapes.box_decode_rule,
          kernel=kernels.box_decode, reads_strided=True, grad=grads.box_decode_grad,
          onnx=_NO_ONNX, attributes=("weights", "clip"), names=("box_decode",)),
    OpDef("box_encode", "neural", 2, None, shape=shapes.box_encode_rule,
          kernel=kernels.box_encode, reads_strided=True, grad=grads.box_encode_grad,
          onnx=_NO_ONNX, attributes=("weights",), names=("box_encode",)),
)
