"""Argument normalisation of the detection functions (``N.roi_align``,
``N.roi_align_backward``, ``N.non_max_suppression``, methods of
:class:`~graphc.operator.neural.NeuralMixin`): every op carries plain Python values, so
equal calls make equal ops and a saved graph's node is rebuilt by calling the function
with its attributes.

>>> roi_attributes("roi_align", 0.25, -1, "avg", True)
{'spatial_scale': 0.25, 'sampling_ratio': 0, 'mode': 'avg', 'aligned': True}
"""
from __future__ import annotations

import operator

from ..shape.detection_rules import MODES, nms_size
from ..type.errors import IndexOutOfRange, ShapeError


def whole(opname: str, name: str, value) -> int:
    """``value`` as a Python int (no bools, no floats).

    >>> whole("roi_align", "sampling_ratio", 2)
    2
    """
    if isinstance(value, bool):
        raise ShapeError(f"{opname}: {name} must be an int, got {value!r}")
    try:
        return int(operator.index(value))
    except TypeError:
        raise ShapeError(f"{opname}: {name} must be an int, got {value!r}") from None


def real(opname: str, name: str, value) -> float:
    """``value`` as a Python float. Example: ``real("roi_align", "spatial_scale", 1) == 1.0``"""
    if isinstance(value, (bool, str)):
        raise ShapeError(f"{opname}: {name} must be a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ShapeError(f"{opname}: {name} must be a number, got {value!r}") from None


def roi_attributes(opname, spatial_scale, sampling_ratio, mode, aligned) -> dict:
    """The attributes shared by ``roi_align`` and its backward (``sampling_ratio`` <= 0,
    torchvision's -1 included, is adaptive and stored as 0)."""
    if mode not in MODES:
        raise ShapeError(f"{opname}: mode must be 'avg' or 'max', got {mode!r}")
    scale = real(opname, "spatial_scale", spatial_scale)
    if not scale > 0:
        raise ShapeError(f"{opname}: spatial_scale must be positive, got {spatial_scale!r}")
    return dict(spatial_scale=scale,
                sampling_ratio=max(whole(opname, "sampling_ratio", sampling_ratio), 0),
                mode=mode, aligned=bool(aligned))


def check_batch_index(ns, opname, batch_index, images) -> None:
    """Constant image indices outside ``[0, images)``, refused while building."""
    known = ns._known(batch_index)
    if known is not None and known.size and known.dtype.kind in "iu":
        bad = (known < 0) | (known >= images)
        if bad.any():
            raise IndexOutOfRange(f"{opname}: batch index {known[bad].flat[0]} is out of "
                                  f"range for features of {images} image(s)")


def nms_attributes(boxes_shape, scores_shape, max_output_per_class, iou_threshold,
                   score_threshold, center_point_box, size) -> dict:
    """``non_max_suppression``'s attributes: ``max_output_per_class`` None keeps every
    box, ``size`` None is the most that can be kept (:func:`nms_size`)."""
    opname = "non_max_suppression"
    if len(boxes_shape) != 3 or len(scores_shape) != 3:
        raise ShapeError(f"{opname}: boxes (batches, boxes, 4) and scores (batches, classes, "
                         f"boxes) must be 3-D, got shapes {boxes_shape} and {scores_shape}")
    boxes = boxes_shape[1]
    most = boxes if max_output_per_class is None else max(
        whole(opname, "max_output_per_class", max_output_per_class), 0)
    if center_point_box not in (0, 1) or isinstance(center_point_box, float):
        raise ShapeError(f"{opname}: center_point_box must be 0 (corners) or 1 (centre, "
                         f"size), got {center_point_box!r}")
    limit = nms_size(boxes_shape[0], scores_shape[1], boxes, most)
    if size is None:
        size = limit
    size = whole(opname, "size", size)
    if size < 0:
        raise ShapeError(f"{opname}: size must be >= 0, got {size}")
    return dict(max_output_per_class=most, iou_threshold=real(opname, "iou_threshold",
                                                               iou_threshold),
                score_threshold=None if score_threshold is None else real(
                    opname, "score_threshold", score_threshold),
                center_point_box=int(center_point_box), size=size)
