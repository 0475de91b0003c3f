"""The detection kinds of Mask R-CNN's heads: ``roi_align``, its backward
``roi_align_backward``, the feature pyramid's ``roi_align_levels`` and
``non_max_suppression``. One definition each.

Their semantics are in :mod:`graphc.engine.detection_kernels` (the kernels), their shape
rules in :mod:`graphc.shape.detection_rules`, their gradients in
:mod:`graphc.algodiff.detection`; ``N.roi_align``, ``N.roi_align_backward`` and
``N.non_max_suppression`` are methods of :class:`~graphc.operator.neural.NeuralMixin`.
The RoIAlign kinds are ``fallible``: a batch index fed at run time may name no image, a
box may have a non-finite coordinate.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["roi_align"].attributes
('output_size', 'spatial_scale', 'sampling_ratio', 'mode', 'aligned')
"""
from __future__ import annotations

import numpy as np

from ..algodiff import detection as grads
from ..engine import detection_kernels as kernels
from ..shape import detection_rules as shapes
from .definition import NO_GRADIENT, OpDef, Refused, define

_ROI = ("spatial_scale", "sampling_ratio", "mode", "aligned")


def _roi_align_export(ctx, op, ins, out):
    """ONNX's ``RoiAlign`` (opset 16's ``coordinate_transformation_mode``): the same
    sampling, the same ``max`` rule; boxes in the features' dtype, int64 indices."""
    x, boxes, batch_index = ins
    oh, ow = op["output_size"]
    return ctx.op("RoiAlign", [x.name, ctx.cast(boxes, x.dtype), ctx.cast(batch_index, np.int64)],
                  out=out.name, mode=op["mode"], output_height=oh, output_width=ow,
                  sampling_ratio=op["sampling_ratio"], spatial_scale=op["spatial_scale"],
                  coordinate_transformation_mode="half_pixel" if op["aligned"]
                  else "output_half_pixel")


define(
    OpDef("roi_align", "neural", 3, None, shape=shapes.roi_align_rule,
          kernel=kernels.roi_align, fallible=True, grad=grads.roi_align_grad,
          onnx=_roi_align_export, attributes=("output_size",) + _ROI, names=("roi_align",)),
    # parents (boxes, batch_index, levels, the features of each level): a feature
    # pyramid's RoIAlign, each box from its own level
    OpDef("roi_align_levels", "neural", None, None, shape=shapes.roi_align_levels_rule,
          kernel=kernels.roi_align_levels, fallible=True, grad=grads.roi_align_levels_grad,
          onnx=Refused("ONNX's RoiAlign reads one feature map: pool each level with "
                       "roi_align and pick each box's row to export"),
          attributes=("output_size", "spatial_scales", "sampling_ratio", "mode", "aligned"),
          names=("roi_align_levels",)),
    # parents (g, boxes, batch_index), and the features in max mode
    OpDef("roi_align_backward", "neural", None, None, shape=shapes.roi_align_backward_rule,
          kernel=kernels.roi_align_backward, fallible=True,
          grad=grads.roi_align_backward_grad,
          onnx=Refused("a gradient (training) op; ONNX export covers inference graphs"),
          attributes=("input_shape",) + _ROI, names=("roi_align_backward",)),
    # N.non_max_suppression takes these keywords but returns (this node, its count): a
    # saved graph rebuilds the node through its own row in graphc/graph/rebuild.py
    OpDef("non_max_suppression", "neural", 2, None, shape=shapes.nms_rule,
          kernel=kernels.non_max_suppression, grad=NO_GRADIENT,
          attributes=("max_output_per_class", "iou_threshold", "score_threshold",
                      "center_point_box", "size"),
          onnx=Refused("ONNX's NonMaxSuppression returns as many rows as it keeps; graphc's "
                       "keeps a static maximum padded with -1, which ONNX cannot express "
                       "as one operator"),
          names=("non_max_suppression",)),
)
