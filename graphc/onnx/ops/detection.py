"""Converters of ONNX's object-detection operators: ``RoiAlign`` onto graphc's
``roi_align`` kind, and ``NonMaxSuppression`` (``TopK``, the third operator of a
detection head, is in :mod:`.reduce`).

``NonMaxSuppression`` returns as many rows as it keeps, a number that depends on the
boxes' and scores' values, while a graphc graph has static shapes. So the converter needs
those values while importing: when every input is known (initializers, constants, folded
subgraphs) the suppression runs at once (graphc's own kernel, through ``E``) and the node
becomes a constant of exactly the rows kept; when one is computed from a graph input,
:meth:`~graphc.onnx.context.NodeContext.constant` raises ``NeedsInputValue`` and
:class:`~graphc.onnx.loaded.OnnxGraph` specialises the model on that input's value, as for
every other value-dependent operator (a new compile per value, cached). A model that
computes its boxes inside the graph (a detector's own head) is specialised on the graph
input they come from: each image compiles once. Inside graphc itself,
``N.non_max_suppression`` keeps a static maximum instead, padded, with a count.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["NonMaxSuppression"]
>>> node = NodeContext.for_test("NonMaxSuppression", []).node
>>> boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 5, 1, 6]]], np.float32)
>>> scores = np.array([[[0.9, 0.8, 0.7]]], np.float32)
>>> inputs = [boxes, scores, np.array([3]), np.array([0.5], np.float32)]
>>> spec.fn(NodeContext(node, 11, inputs, {}, spec))
array([[0, 0, 0],
       [0, 0, 2]])
"""
from __future__ import annotations

import numpy as np

from ...eager import EagerNamespace
from ...shape.detection_rules import nms_size
from ..registry import converter


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@converter("RoiAlign", attrs={"coordinate_transformation_mode": None, "mode": "avg",
                              "output_height": 1, "output_width": 1, "sampling_ratio": 0,
                              "spatial_scale": 1.0}, min_opset=10)
def roi_align(ctx):
    x, rois, batch_indices = ctx.input(0), ctx.input(1), ctx.input(2)
    # opset 10 had no attribute and sampled as output_half_pixel; 16 added it, half_pixel
    default = "half_pixel" if ctx.opset >= 16 else "output_half_pixel"
    transform = _text(ctx.attr("coordinate_transformation_mode") or default)
    if transform not in ("half_pixel", "output_half_pixel"):
        raise ctx.invalid("coordinate_transformation_mode must be 'half_pixel' or "
                          f"'output_half_pixel', got {transform!r}")
    mode = _text(ctx.attr("mode"))
    if mode not in ("avg", "max"):
        raise ctx.invalid(f"mode must be 'avg' or 'max', got {mode!r}")
    size = (int(ctx.attr("output_height")), int(ctx.attr("output_width")))
    if min(size) < 1:
        raise ctx.invalid(f"output_height and output_width must be >= 1, got {size}")
    if ctx.dtype(1) != ctx.dtype(0):
        raise ctx.invalid(f"rois ({ctx.dtype(1)}) must have X's dtype ({ctx.dtype(0)})")
    return ctx.ns.roi_align(x, rois, batch_indices, size,
                            spatial_scale=float(ctx.attr("spatial_scale")),
                            sampling_ratio=int(ctx.attr("sampling_ratio")), mode=mode,
                            aligned=transform == "half_pixel")


def _first(ctx, i, default, cast):
    """Optional scalar input ``i`` (ONNX gives them as 1-element tensors) known while
    importing; ``default`` when omitted or empty."""
    value = ctx.constant(i, optional=True)
    if value is None or value.size == 0:
        return default
    if value.size != 1:
        raise ctx.invalid(f"input {i} must hold one value, got shape {value.shape}")
    return cast(value.reshape(-1)[0])


@converter("NonMaxSuppression", attrs={"center_point_box": 0}, min_opset=10)
def non_max_suppression(ctx):
    boxes, scores = ctx.constant(0), ctx.constant(1)
    # omitted: ONNX keeps no box (max 0), suppresses any overlap (IoU 0), filters no score
    most = max(_first(ctx, 2, 0, int), 0)
    iou = _first(ctx, 3, 0.0, float)
    threshold = _first(ctx, 4, None, float)
    center = int(ctx.attr("center_point_box"))
    if center not in (0, 1):
        raise ctx.invalid(f"center_point_box must be 0 or 1, got {center}")
    if boxes.ndim != 3 or scores.ndim != 3 or boxes.shape[2] != 4 or \
            scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise ctx.invalid(f"boxes {boxes.shape} must be (batches, boxes, 4) and scores "
                          f"{scores.shape} (batches, classes, boxes)")
    limit = nms_size(boxes.shape[0], scores.shape[1], boxes.shape[1], most)
    ctx.reserve_import_only((limit, 3), np.int64, "NonMaxSuppression's selected indices")
    selected, count = EagerNamespace().non_max_suppression(
        boxes, scores, most, iou, threshold, center_point_box=center)
    return np.ascontiguousarray(selected[:int(count)])
