"""CPU kernels of the detection kinds (:mod:`graphc.ops.detection`): RoIAlign, its
backward, and non-maximum suppression.

**RoIAlign** (He et al. 2017; torchvision's ``roi_align`` and ONNX's ``RoiAlign``): box
``r`` (x1, y1, x2, y2), scaled by ``spatial_scale`` and shifted by half a pixel when
``aligned``, is cut into ``OH x OW`` bins; each bin samples a ``gh x gw`` grid
(``sampling_ratio``, or ``ceil(box size / bins)`` when it is 0) at the grid cells'
centres, each sample read by bilinear interpolation (a sample more than one pixel outside
the image reads 0; one within a pixel of it is clamped to the border). ``avg`` divides
the bin's sum by ``gh * gw``; ``max`` takes, as ONNX's reference and onnxruntime do, the
largest of the samples' four weighted corners ``w_k * x_k``.

The weights are separable: ``avg`` is ``Wy @ x[b, c] @ Wx^T`` per box, ``Wy`` (OH, H)
summing each bin's row weights. The forward pass interpolates the samples' rows (a gather
of two rows each, on the columns the box touches), sums them per bin row and applies ``Wx``
as one GEMM over every channel; the backward pass is the two transposed GEMMs with ``Wy``
and ``Wx`` cut to the box's pixels. Every box is one step of a Python loop (about 1 ms for
256 channels: a compiled kernel would be the next speed-up). Positions and weights are
computed in float64 (ONNX's reference computes them in the features' dtype: results agree
to that dtype's rounding); the products run in the features' dtype.

**Non-maximum suppression** (ONNX's ``NonMaxSuppression``): per image and class, the boxes
whose score is above ``score_threshold`` (all when it is None; NaN scores never), by
descending score with ties to the lower index, are kept greedily unless one already kept
overlaps them with an IoU above ``iou_threshold``, at most ``max_output_per_class`` each.
The IoU is computed in the boxes' dtype, as ONNX's reference does, so the decisions are
its decisions; boxes of zero area suppress nothing.

>>> import numpy as np
>>> from graphc.type import Op
>>> op = Op.make("non_max_suppression", max_output_per_class=2, iou_threshold=0.5,
...              score_threshold=None, center_point_box=0, size=2)
>>> boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 5, 1, 6]]], np.float32)
>>> out = np.empty((2, 3), np.int64)
>>> non_max_suppression(op, [boxes, np.array([[[0.9, 0.8, 0.7]]], np.float32)], out, None)()
>>> out
array([[0, 0, 0],
       [0, 0, 2]])
"""
from __future__ import annotations

import math

import numpy as np


# -- RoIAlign's geometry --------------------------------------------------------------------
class AxisSamples:
    """The samples of one box along one axis, bin-major: for each, the two pixels it
    reads (``low``, ``high``), their weights (``w_low``, ``w_high``) and whether it lies
    inside the image at all (``valid``; invalid samples have zero weights)."""

    __slots__ = ("low", "high", "w_low", "w_high", "valid", "grid")

    def __init__(self, start, bin_size, bins, grid, size):
        self.grid = grid
        if grid <= 0:
            empty = np.zeros(0, np.intp)
            self.low = self.high = empty
            self.w_low = self.w_high = np.zeros(0)
            self.valid = np.zeros(0, bool)
            return
        # the reference's order of operations, in float64
        k = np.arange(bins, dtype=np.float64)[:, None]
        i = np.arange(grid, dtype=np.float64)[None, :]
        pos = (start + k * bin_size + (i + 0.5) * bin_size / grid).ravel()
        valid = (pos >= -1.0) & (pos <= size)
        pos = np.where(valid, np.maximum(pos, 0.0), 0.0)
        low = pos.astype(np.intp)                    # pos >= 0: truncation is floor
        at_end = low >= size - 1
        low = np.where(at_end, size - 1, low)
        pos = np.where(at_end, low, pos)
        self.low, self.high = low, np.where(at_end, low, low + 1)
        self.w_high = np.where(valid, pos - low, 0.0)
        self.w_low = np.where(valid, 1.0 - (pos - low), 0.0)
        self.valid = valid

    def matrix(self, bins, size) -> np.ndarray:
        """``(bins, size)``: each bin's summed interpolation weight of every pixel."""
        weights = np.zeros((bins, size))
        rows = np.repeat(np.arange(bins), self.grid)
        np.add.at(weights, (rows, self.low), self.w_low)
        np.add.at(weights, (rows, self.high), self.w_high)
        return weights


def roi_geometry(op, box, out_hw, in_hw):
    """``(ys, xs, count)`` of one box: its :class:`AxisSamples` per axis and the number
    of samples per bin an average divides by."""
    (oh, ow), (h, w) = out_hw, in_hw
    offset = 0.5 if op["aligned"] else 0.0
    scale = op["spatial_scale"]
    x1, y1, x2, y2 = (float(v) * scale - offset for v in box)
    roi_w, roi_h = x2 - x1, y2 - y1
    if not math.isfinite(roi_w) or not math.isfinite(roi_h):
        raise ValueError(f"roi_align: the box {tuple(float(v) for v in box)} has a "
                         "non-finite coordinate")
    if not op["aligned"]:                  # malformed boxes become 1x1
        roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
    bin_h, bin_w = roi_h / oh, roi_w / ow
    ratio = op["sampling_ratio"]
    grid_h = ratio if ratio > 0 else math.ceil(roi_h / oh)
    grid_w = ratio if ratio > 0 else math.ceil(roi_w / ow)
    ys = AxisSamples(y1, bin_h, oh, grid_h, h)
    xs = AxisSamples(x1, bin_w, ow, grid_w, w)
    return ys, xs, max(grid_h * grid_w, 1)


def _checked_batch(batch_index, images):
    bad = (batch_index < 0) | (batch_index >= images)
    if bad.any():
        raise IndexError(f"roi_align: batch index {batch_index[bad][0]} is out of range for "
                         f"features of {images} image(s)")


def _touched(weights):
    """The range ``[lo, hi)`` of pixels with a nonzero weight (empty: ``(0, 0)``)."""
    used = np.flatnonzero(weights.any(axis=0))
    return (int(used[0]), int(used[-1]) + 1) if used.size else (0, 0)


def _boxes(op, boxes, batch_index, out_hw, in_hw, images):
    """Per box that has samples: ``(r, image, ys, xs, count)`` (an empty box's bins
    stay 0 and pass no gradient)."""
    _checked_batch(batch_index, images)
    for r in range(boxes.shape[0]):
        ys, xs, count = roi_geometry(op, boxes[r], out_hw, in_hw)
        if ys.grid > 0 and xs.grid > 0:
            yield r, int(batch_index[r]), ys, xs, count


def _avg_matrices(ys, xs, count, out_hw, in_hw, dtype):
    """``(Wy, Wx, rows, cols)`` cut to the pixels the box touches, ``1 / count`` in
    ``Wy``; ``None`` when it touches none."""
    wy = ys.matrix(out_hw[0], in_hw[0]) / count
    wx = xs.matrix(out_hw[1], in_hw[1])
    (y0, y1), (x0, x1) = _touched(wy), _touched(wx)
    if y0 == y1 or x0 == x1:
        return None
    return (wy[:, y0:y1].astype(dtype), wx[:, x0:x1].astype(dtype), slice(y0, y1),
            slice(x0, x1))


def _average(image, ys, xs, count, out_hw, target):
    """One box's bins in avg mode: the rows of its samples interpolated from the
    columns it touches (a gather), summed per bin row, then each bin's column weights
    applied as one GEMM over every channel (the column weights' matrix ``Wx``)."""
    wx = xs.matrix(out_hw[1], image.shape[2])
    x0, x1 = _touched(wx)
    if x0 == x1 or not ys.valid.any():
        return
    band = image[:, :, x0:x1]
    w_low = (ys.w_low / count).astype(image.dtype)[:, None]
    w_high = (ys.w_high / count).astype(image.dtype)[:, None]
    rows = band[:, ys.low] * w_low + band[:, ys.high] * w_high        # (C, Sy, columns)
    per_bin = rows.reshape(image.shape[0], out_hw[0], ys.grid, x1 - x0).sum(axis=2)
    np.matmul(per_bin, wx[:, x0:x1].T.astype(image.dtype), out=target)


def _corner_values(image, ys, xs):
    """``(values, weights)``, both (C, Sy, Sx, 4): the weighted corners ``w_k * x_k`` of
    every sample (zeros for samples outside the image), corners ordered (low, low),
    (low, high), (high, low), (high, high) as ONNX's reference orders them."""
    values, weights = [], []
    for rows, wy in ((ys.low, ys.w_low), (ys.high, ys.w_high)):
        band = image[:, rows]                                  # (C, Sy, W)
        for cols, wx in ((xs.low, xs.w_low), (xs.high, xs.w_high)):
            w = wy[:, None] * wx[None, :]
            weights.append(w)
            values.append(w * band[:, :, cols])
    valid = (ys.valid[:, None] & xs.valid[None, :])[..., None]
    return np.where(valid, np.stack(values, -1), 0.0), np.stack(weights, -1)


def _max_bins(image, ys, xs, ph, ow):
    """Row ``ph`` of a box's bins in max mode: ``(values, weights, picked)`` where
    ``picked`` (C, OW) is the flat index (iy, ix, corner) of each bin's first maximum."""
    gh, gw = ys.grid, xs.grid
    rows = AxisSamples.__new__(AxisSamples)
    for name in ("low", "high", "w_low", "w_high", "valid"):
        setattr(rows, name, getattr(ys, name)[ph * gh:(ph + 1) * gh])
    values, weights = _corner_values(image, rows, xs)
    c = image.shape[0]
    per_bin = values.reshape(c, gh, ow, gw, 4).transpose(0, 2, 1, 3, 4).reshape(c, ow, -1)
    return per_bin, weights, per_bin.argmax(axis=-1)


def roi_align(op, ins, out, ctx):
    x, boxes, batch_index = ins
    out_hw, in_hw = tuple(out.shape[2:]), tuple(x.shape[2:])

    def roi_align():
        out.fill(0)
        for r, b, ys, xs, count in _boxes(op, boxes, batch_index, out_hw, in_hw, len(x)):
            _pooled(op["mode"], x[b], ys, xs, count, out_hw, out[r])
    return roi_align


def _pooled(mode, image, ys, xs, count, out_hw, target) -> None:
    """One box's bins into ``target`` (C, OH, OW), in ``mode``."""
    if mode == "avg":
        _average(image, ys, xs, count, out_hw, target)
        return
    for ph in range(out_hw[0]):
        target[:, ph] = _max_bins(image, ys, xs, ph, out_hw[1])[0].max(axis=-1)


def roi_align_levels(op, ins, out, ctx):
    """RoIAlign of each box from the features of its own level (``levels[r]``), with
    that level's spatial scale: one box at a time, as :func:`roi_align`."""
    boxes, batch_index, levels = ins[:3]
    features = ins[3:]
    out_hw = tuple(out.shape[2:])
    per_level = [dict(op.params(), spatial_scale=s) for s in op["spatial_scales"]]

    def roi_align_levels():
        bad = (levels < 0) | (levels >= len(features))
        if bad.any():
            raise IndexError(f"roi_align_levels: level {levels[bad][0]} is out of range for "
                             f"{len(features)} level(s) of features")
        _checked_batch(batch_index, len(features[0]))
        out.fill(0)
        for r in range(boxes.shape[0]):
            level = int(levels[r])
            x, level_op = features[level], per_level[level]
            ys, xs, count = roi_geometry(level_op, boxes[r], out_hw, tuple(x.shape[2:]))
            if ys.grid > 0 and xs.grid > 0:
                _pooled(op["mode"], x[int(batch_index[r])], ys, xs, count, out_hw, out[r])
    return roi_align_levels


def roi_align_backward(op, ins, out, ctx):
    g, boxes, batch_index = ins[:3]
    x = ins[3] if len(ins) > 3 else None
    out_hw, in_hw = tuple(g.shape[2:]), tuple(out.shape[2:])

    def roi_align_backward():
        out.fill(0)
        for r, b, ys, xs, count in _boxes(op, boxes, batch_index, out_hw, in_hw, len(out)):
            if x is None:
                cut = _avg_matrices(ys, xs, count, out_hw, in_hw, out.dtype)
                if cut is not None:
                    wy, wx, rows, cols = cut
                    out[b, :, rows, cols] += (wy.T @ g[r]) @ wx
                continue
            _max_backward(x[b], g[r], out[b], ys, xs, out_hw)
    return roi_align_backward


def _max_backward(image, grad, target, ys, xs, out_hw):
    """Each bin's gradient to the pixel of its first maximal weighted corner, times
    that corner's weight (a winning sample outside the image passes nothing on)."""
    gh, gw = ys.grid, xs.grid
    c = image.shape[0]
    channels = np.arange(c)[:, None]
    bins = np.arange(out_hw[1])[None, :]
    for ph in range(out_hw[0]):
        _, weights, picked = _max_bins(image, ys, xs, ph, out_hw[1])
        iy, rest = np.divmod(picked, gw * 4)
        ix, corner = np.divmod(rest, 4)
        row, col = ph * gh + iy, bins * gw + ix
        pixel_y = np.where(corner < 2, ys.low[row], ys.high[row])
        pixel_x = np.where(corner % 2 == 0, xs.low[col], xs.high[col])
        valid = ys.valid[row] & xs.valid[col]
        w = np.where(valid, weights[iy, bins * gw + ix, corner], 0.0)
        np.add.at(target, (np.broadcast_to(channels, w.shape), pixel_y, pixel_x),
                  (grad[:, ph] * w).astype(target.dtype))


# -- non-maximum suppression ------------------------------------------------------------------
def box_extents(boxes, center_point_box):
    """``(x_min, x_max, y_min, y_max)`` of boxes (M, 4), in their dtype: corners
    (y1, x1, y2, x2) in either order, or (x_centre, y_centre, width, height)."""
    if center_point_box:
        half_w, half_h = boxes[:, 2] / 2, boxes[:, 3] / 2
        return (boxes[:, 0] - half_w, boxes[:, 0] + half_w,
                boxes[:, 1] - half_h, boxes[:, 1] + half_h)
    return (np.minimum(boxes[:, 1], boxes[:, 3]), np.maximum(boxes[:, 1], boxes[:, 3]),
            np.minimum(boxes[:, 0], boxes[:, 2]), np.maximum(boxes[:, 0], boxes[:, 2]))


def _suppressed(extents, areas, kept, rest, iou_threshold):
    """Which of the boxes ``rest`` the box ``kept`` suppresses (ONNX's test, in order:
    a positive overlap on both axes, positive areas and union, then IoU > threshold)."""
    x_min, x_max, y_min, y_max = extents
    inter_w = np.minimum(x_max[kept], x_max[rest]) - np.maximum(x_min[kept], x_min[rest])
    inter_h = np.minimum(y_max[kept], y_max[rest]) - np.maximum(y_min[kept], y_min[rest])
    overlap = (inter_w > 0) & (inter_h > 0)
    inter = inter_w * inter_h
    union = areas[rest] + areas[kept] - inter
    fine = overlap & (inter > 0) & (areas[kept] > 0) & (areas[rest] > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / np.where(fine, union, 1)
    return fine & (iou > iou_threshold)


def nms_one_class(extents, areas, scores, op) -> list:
    """The indices one image's class keeps, in the order kept."""
    threshold, most = op["score_threshold"], op["max_output_per_class"]
    candidate = ~np.isnan(scores)
    if threshold is not None:
        candidate &= scores > threshold
    index = np.flatnonzero(candidate)
    order = index[np.argsort(-scores[index], kind="stable")]   # ties: the lower index
    alive = np.ones(order.size, bool)
    kept = []
    for i in range(order.size):
        if len(kept) >= most:
            break
        if not alive[i]:
            continue
        kept.append(int(order[i]))
        alive[i + 1:] &= ~_suppressed(extents, areas, order[i], order[i + 1:],
                                      op["iou_threshold"])
    return kept


def non_max_suppression(op, ins, out, ctx):
    boxes, scores = ins

    def non_max_suppression():
        out.fill(-1)
        row, size = 0, out.shape[0]
        for b in range(boxes.shape[0]):
            if row >= size:
                break
            extents = box_extents(boxes[b], op["center_point_box"])
            areas = (extents[1] - extents[0]) * (extents[3] - extents[2])
            for c in range(scores.shape[1]):
                kept = nms_one_class(extents, areas, scores[b, c], op)[:size - row]
                if kept:
                    out[row:row + len(kept)] = [(b, c, k) for k in kept]
                    row += len(kept)
    return non_max_suppression
