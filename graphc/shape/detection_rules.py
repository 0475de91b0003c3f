"""Shape and dtype rules of the detection kinds (:mod:`graphc.ops.detection`):
``roi_align``, ``roi_align_backward`` and ``non_max_suppression``.

The operator layer normalises the attributes first (pairs of ints, floats, ``mode``
``"avg"``/``"max"``); the rules check them again because a graph may come from a
file.

>>> import numpy as np
>>> from graphc.type import Op
>>> class A:
...     def __init__(self, shape, dtype="float32"): self.shape, self.dtype = shape, np.dtype(dtype)
>>> op = Op.make("roi_align", output_size=(7, 7), spatial_scale=0.25, sampling_ratio=2,
...              mode="avg", aligned=True)
>>> roi_align_rule(op, [A((2, 256, 32, 32)), A((10, 4)), A((10,), "int64")])
((10, 256, 7, 7), dtype('float32'))
"""
from __future__ import annotations

import numpy as np

from ..type.errors import DTypeError, ShapeError

#: roi_align's pooling modes
MODES = ("avg", "max")
_INT64 = np.dtype(np.int64)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_roi_attributes(opname: str, op) -> None:
    """The attributes every roi_align kind carries, checked (not the output size)."""
    if op["mode"] not in MODES:
        raise ShapeError(f"{opname}: mode must be 'avg' or 'max', got {op['mode']!r}")
    if not _is_int(op["sampling_ratio"]) or op["sampling_ratio"] < 0:
        raise ShapeError(f"{opname}: sampling_ratio must be an int >= 0 (0: adaptive), got "
                         f"{op['sampling_ratio']!r}")
    if not isinstance(op["spatial_scale"], float):
        raise ShapeError(f"{opname}: spatial_scale must be a float, got "
                         f"{op['spatial_scale']!r}")
    if not isinstance(op["aligned"], bool):
        raise ShapeError(f"{opname}: aligned must be a bool, got {op['aligned']!r}")


def check_rois(opname: str, x_dtype, boxes, batch_index) -> int:
    """``boxes`` (R, 4) of a float dtype and ``batch_index`` (R,) of integers, for
    features of ``x_dtype``; returns R."""
    if x_dtype.kind != "f":
        raise DTypeError(f"{opname}: the features must be floating-point, got {x_dtype}")
    if len(boxes.shape) != 2 or boxes.shape[1] != 4:
        raise ShapeError(f"{opname}: boxes must have shape (R, 4) as (x1, y1, x2, y2), got "
                         f"{tuple(boxes.shape)}")
    if boxes.dtype.kind != "f":
        raise DTypeError(f"{opname}: boxes must be floating-point, got {boxes.dtype}")
    if tuple(batch_index.shape) != (boxes.shape[0],):
        raise ShapeError(f"{opname}: batch_index must have shape ({boxes.shape[0]},) (one "
                         f"image index per box), got {tuple(batch_index.shape)}")
    if batch_index.dtype.kind not in "iu":
        raise DTypeError(f"{opname}: batch_index must hold integers, got {batch_index.dtype}")
    return boxes.shape[0]


def _features(opname, what, shape) -> tuple:
    if len(shape) != 4:
        raise ShapeError(f"{opname}: {what} must be 4-D (N, C, H, W), got shape "
                         f"{tuple(shape)}")
    if shape[2] < 1 or shape[3] < 1:
        raise ShapeError(f"{opname}: {what} must have a spatial size of at least 1x1, got "
                         f"shape {tuple(shape)}")
    return tuple(shape)


def _pair(opname, name, value) -> tuple:
    if not isinstance(value, tuple) or len(value) != 2 or not all(
            _is_int(v) and v >= 1 for v in value):
        raise ShapeError(f"{opname}: {name} must be two ints >= 1, got {value!r}")
    return value


def roi_align_rule(op, parents):
    """``(R, C, OH, OW)`` in the features' dtype."""
    x, boxes, batch_index = parents
    _features("roi_align", "the features", x.shape)
    check_roi_attributes("roi_align", op)
    oh, ow = _pair("roi_align", "output_size", op["output_size"])
    rois = check_rois("roi_align", x.dtype, boxes, batch_index)
    return (rois, x.shape[1], oh, ow), x.dtype


def roi_align_levels_rule(op, parents):
    """``(R, C, OH, OW)`` in the features' dtype: parents (boxes, batch_index, levels,
    the features of each level), every level's features of the same images, channels
    and dtype, one spatial scale each."""
    opname = "roi_align_levels"
    if len(parents) < 4:
        raise ShapeError(f"{opname}: takes (boxes, batch_index, levels) and the features "
                         f"of at least one level; got {len(parents)} arrays")
    boxes, batch_index, levels = parents[:3]
    features = parents[3:]
    scales = op["spatial_scales"]
    if (not isinstance(scales, tuple) or len(scales) != len(features)
            or not all(isinstance(v, float) and v > 0 for v in scales)):
        raise ShapeError(f"{opname}: spatial_scales must be one positive float per level "
                         f"({len(features)}), got {scales!r}")
    check_roi_attributes(opname, dict(op.params(), spatial_scale=scales[0]))
    oh, ow = _pair(opname, "output_size", op["output_size"])
    first = _features(opname, "level 0's features", features[0].shape)
    for i, f in enumerate(features[1:], 1):
        shape = _features(opname, f"level {i}'s features", f.shape)
        if shape[:2] != first[:2] or f.dtype != features[0].dtype:
            raise ShapeError(f"{opname}: every level must hold the same images and channels "
                             f"in one dtype: level 0 is {first} {features[0].dtype}, level "
                             f"{i} is {shape} {f.dtype}")
    rois = check_rois(opname, features[0].dtype, boxes, batch_index)
    if tuple(levels.shape) != (rois,) or levels.dtype.kind not in "iu":
        raise ShapeError(f"{opname}: levels must be ({rois},) integers (each box's level), "
                         f"got {tuple(levels.shape)} {levels.dtype}")
    return (rois, first[1], oh, ow), features[0].dtype


def roi_align_backward_rule(op, parents):
    """The features' shape ``input_shape`` in the gradient's dtype; in ``max`` mode the
    features themselves are the fourth parent (the winning samples depend on them)."""
    opname = "roi_align_backward"
    if len(parents) not in (3, 4):
        raise ShapeError(f"{opname}: takes (g, boxes, batch_index) or, in max mode, "
                         f"(g, boxes, batch_index, x); got {len(parents)} arrays")
    g, boxes, batch_index = parents[:3]
    check_roi_attributes(opname, op)
    shape = op["input_shape"]
    if not isinstance(shape, tuple) or not all(_is_int(d) and d >= 0 for d in shape):
        raise ShapeError(f"{opname}: input_shape must be a tuple of ints, got {shape!r}")
    _features(opname, "input_shape", shape)
    if (len(parents) == 4) != (op["mode"] == "max"):
        raise ShapeError(f"{opname}: the features are a parent in max mode only")
    if len(parents) == 4:
        x = parents[3]
        if tuple(x.shape) != shape or x.dtype != g.dtype:
            raise ShapeError(f"{opname}: the features {tuple(x.shape)} {x.dtype} must have "
                             f"input_shape {shape} and the gradient's dtype {g.dtype}")
    rois = check_rois(opname, g.dtype, boxes, batch_index)
    if len(g.shape) != 4 or tuple(g.shape[:2]) != (rois, shape[1]):
        raise ShapeError(f"{opname}: the gradient must have shape ({rois}, {shape[1]}, OH, "
                         f"OW), got {tuple(g.shape)}")
    return shape, g.dtype


def nms_size(batches: int, classes: int, boxes: int, max_per_class: int) -> int:
    """The most rows non-maximum suppression can keep: every class of every image
    keeps at most ``min(max_per_class, boxes)``. Example: ``nms_size(2, 3, 10, 4) == 24``"""
    return batches * classes * min(max_per_class, boxes)


def nms_rule(op, parents):
    """``(size, 3)`` int64: rows of (batch, class, box), padded with -1."""
    opname = "non_max_suppression"
    boxes, scores = parents
    if len(boxes.shape) != 3 or boxes.shape[2] != 4:
        raise ShapeError(f"{opname}: boxes must have shape (batches, boxes, 4), got "
                         f"{tuple(boxes.shape)}")
    b, m = boxes.shape[:2]
    if len(scores.shape) != 3 or scores.shape[0] != b or scores.shape[2] != m:
        raise ShapeError(f"{opname}: scores must have shape ({b}, classes, {m}) for boxes of "
                         f"shape {tuple(boxes.shape)}, got {tuple(scores.shape)}")
    for what, value in (("boxes", boxes), ("scores", scores)):
        if value.dtype.kind != "f":
            raise DTypeError(f"{opname}: {what} must be floating-point, got {value.dtype}")
    for name in ("max_output_per_class", "size"):
        if not _is_int(op[name]) or op[name] < 0:
            raise ShapeError(f"{opname}: {name} must be an int >= 0, got {op[name]!r}")
    if op["center_point_box"] not in (0, 1) or not _is_int(op["center_point_box"]):
        raise ShapeError(f"{opname}: center_point_box must be 0 (corners) or 1 (centre, "
                         f"size), got {op['center_point_box']!r}")
    if not isinstance(op["iou_threshold"], float):
        raise ShapeError(f"{opname}: iou_threshold must be a float, got "
                         f"{op['iou_threshold']!r}")
    threshold = op["score_threshold"]
    if threshold is not None and not isinstance(threshold, float):
        raise ShapeError(f"{opname}: score_threshold must be a float or None, got "
                         f"{threshold!r}")
    return (op["size"], 3), _INT64
