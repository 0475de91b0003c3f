"""The data-dependent stages of Mask R-CNN, written once against a namespace and given
static shapes: anchors (constants), the proposal layer (top-k, box decoding, NMS to a
fixed number of padded proposals), the feature pyramid's RoIAlign (each box from its
own level) and the detection layer (per-class NMS, then the best ``detections`` of all
classes, padded, with a count).

Boxes are (x1, y1, x2, y2) in input pixels, as torchvision's; a padded row is all
zeros and flagged invalid.

>>> level_anchors(1, 2, 16, 32, (0.5, 1.0, 2.0)).shape
(6, 4)
"""
from __future__ import annotations

import numpy as np

#: the pyramid levels RoIAlign pools from (P2-P5) and FPN's canonical box size
ROI_LEVELS, CANONICAL_SIZE, CANONICAL_LEVEL = (2, 3, 4, 5), 224.0, 4


def level_anchors(height: int, width: int, stride: int, scale: float, ratios) -> np.ndarray:
    """The anchors of one level (torchvision's ``AnchorGenerator``): for each cell in
    row-major order, one box per ratio (height / width) of area ``scale``², centred on
    the cell's corner, rounded to whole pixels. (height * width * len(ratios), 4).

    >>> level_anchors(1, 1, 4, 32, (1.0,)).tolist()
    [[-16.0, -16.0, 16.0, 16.0]]
    """
    r = np.asarray(ratios, np.float64)
    h, w = np.sqrt(r) * scale, scale / np.sqrt(r)
    base = np.round(np.stack([-w, -h, w, h], axis=1) / 2)
    ys, xs = np.meshgrid(np.arange(height) * stride, np.arange(width) * stride, indexing="ij")
    shifts = np.stack([xs, ys, xs, ys], axis=-1).reshape(-1, 1, 4)
    return (shifts + base).reshape(-1, 4).astype(np.float32)


def anchors(feature_shapes, strides, scales, ratios) -> np.ndarray:
    """Every level's :func:`level_anchors`, level after level: the order in which
    the RPN head's outputs are flattened. Example: ``anchors([(128, 128)], [4], [32], [1])``
    """
    return np.concatenate([level_anchors(h, w, s, c, ratios)
                           for (h, w), s, c in zip(feature_shapes, strides, scales)])


def flatten_level(ns, y, per_anchor: int):
    """A head's output (1, A * per_anchor, H, W) as (H * W * A, per_anchor): the
    anchors' order of :func:`level_anchors`."""
    _, channels, h, w = y.shape
    a = channels // per_anchor
    y = ns.reshape(y, (a, per_anchor, h, w))
    return ns.reshape(ns.transpose(y, (2, 3, 0, 1)), (h * w * a, per_anchor))


def clip_boxes(ns, boxes, size: int):
    """Boxes clipped to the (square) image."""
    return ns.clip(boxes, 0.0, float(size))


def proposals(ns, objectness, deltas, anchor_boxes, config, size: int):
    """The RPN's proposals: the ``pre_nms`` best anchors by objectness, moved by their
    deltas, clipped, NMS at ``rpn_nms``; ``proposals`` rows (padded) and which are real.

    Example: ``boxes, valid = proposals(N, scores, deltas, anchor_boxes, config, 512)``
    """
    total = anchor_boxes.shape[0]
    pre = min(config.pre_nms, total)
    scores, order = ns.top_k(objectness, pre)
    boxes = ns.box_decode(ns.take(deltas, order, axis=0), ns.take(anchor_boxes, order, axis=0),
                          weights=config.rpn_box_weights)
    boxes = clip_boxes(ns, boxes, size)
    kept = min(config.proposals, pre)
    rows, _ = ns.non_max_suppression(ns.reshape(boxes, (1, pre, 4)),
                                     ns.reshape(scores, (1, 1, pre)), kept, config.rpn_nms,
                                     size=kept)
    return _gathered(ns, boxes, rows[:, 2])


def _gathered(ns, boxes, index):
    """``boxes[index]`` with the rows NMS padded (index -1) zero, and those flags."""
    valid = ns.greater_equal(index, 0)
    picked = ns.take(boxes, ns.maximum(index, 0), axis=0)
    return ns.where(ns.reshape(valid, (-1, 1)), picked, np.float32(0.0)), valid


def pyramid_roi_align(ns, features, boxes, output_size: int, strides):
    """RoIAlign from FPN levels P2-P5 (torchvision's ``MultiScaleRoIAlign``): a box of
    area ``a`` pools from level ``floor(4 + log2(sqrt(a) / 224))`` clipped to [2, 5]
    (``roi_align_levels``: each box read from its own level only).

    Example: ``pooled = pyramid_roi_align(N, [p2, p3, p4, p5], boxes, 7, (4, 8, 16, 32))``
    """
    count = boxes.shape[0]
    width = boxes[:, 2] - boxes[:, 0]
    height = boxes[:, 3] - boxes[:, 1]
    area = ns.maximum(width * height, np.float32(0.0))
    level = ns.floor(CANONICAL_LEVEL + ns.log2(ns.sqrt(area) / CANONICAL_SIZE + 1e-6))
    level = ns.clip(level, ROI_LEVELS[0], ROI_LEVELS[-1]) - ROI_LEVELS[0]
    return ns.roi_align_levels(list(features), boxes, np.zeros(count, np.int64),
                               ns.astype(level, np.int64), output_size,
                               tuple(1.0 / s for s in strides[:len(features)]),
                               sampling_ratio=2)


def detections(ns, class_logits, box_deltas, boxes, valid, config, size: int):
    """The detection layer (Matterport's): each proposal's best class and its score,
    refined by that class's deltas; background, invalid and low-scoring proposals
    dropped; NMS per class at ``detection_nms``; then the ``detections`` best of all.
    Returns boxes (D, 4), class ids (D,) int64, scores (D,), and the count (padded
    rows: zeros).

    Example: ``boxes, ids, scores, count = detections(N, logits, deltas, rois, ok, cfg, 512)``
    """
    count, classes = class_logits.shape
    probs = ns.softmax(class_logits, axis=1)
    class_ids = ns.argmax(probs, axis=1)
    score = ns.max(probs, axis=1)
    keep = ns.logical_and(ns.logical_and(valid, ns.greater(class_ids, 0)),
                          ns.greater_equal(score, np.float32(config.min_confidence)))
    per_class = ns.reshape(box_deltas, (count, classes, 4))
    chosen = ns.take_along_axis(per_class, ns.reshape(class_ids, (count, 1, 1)), axis=1)
    refined = clip_boxes(ns, ns.box_decode(ns.reshape(chosen, (count, 4)), boxes,
                                           weights=config.box_weights), size)
    mine = ns.equal(ns.reshape(class_ids, (1, count)),
                    np.arange(classes, dtype=np.int64).reshape(classes, 1))
    class_scores = ns.where(ns.logical_and(mine, ns.reshape(keep, (1, count))),
                            ns.reshape(score, (1, count)), np.float32(0.0))
    wanted = min(config.detections, count)
    rows, _ = ns.non_max_suppression(ns.reshape(refined, (1, count, 4)),
                                     ns.reshape(class_scores, (1, classes, count)), wanted,
                                     config.detection_nms, score_threshold=0.0, size=count)
    index = rows[:, 2]
    found = ns.greater_equal(index, 0)
    at = ns.maximum(index, 0)
    ranked = ns.where(found, ns.take(score, at), np.float32(-1.0))
    best, order = ns.top_k(ranked, wanted)
    real = ns.greater_equal(best, np.float32(0.0))
    pick = ns.take(at, order)
    det_boxes = ns.where(ns.reshape(real, (wanted, 1)), ns.take(refined, pick, axis=0),
                         np.float32(0.0))
    det_ids = ns.where(real, ns.take(class_ids, pick), np.int64(0))
    det_scores = ns.where(real, best, np.float32(0.0))
    return det_boxes, det_ids, det_scores, ns.sum(ns.astype(real, np.int64))
