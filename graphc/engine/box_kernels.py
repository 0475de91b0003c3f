"""CPU kernels of the box-coding kinds (:mod:`graphc.ops.boxes`): torchvision's
``BoxCoder.decode_single`` and ``encode_single`` (``torchvision/models/detection/_utils.py``),
boxes as corners (x1, y1, x2, y2) with no "+1" in the widths.

A box's width is ``x2 - x1`` and its centre ``x1 + 0.5 * width``. **Decoding** moves a
reference box's centre by ``d0 / wx`` widths and scales its width by
``exp(min(d2 / ww, clip))`` (y and heights alike with ``d1, wy, d3, wh``); **encoding** is
its inverse, ``(wx * (cx - ref_cx) / ref_w, wy * ..., ww * log(w / ref_w), wh * ...)``.

The arithmetic runs in the result's dtype (an operand of another dtype is cast to it
first, as torchvision casts the boxes to the deltas'), in torchvision's order, so float32
in is float32 arithmetic, bit for bit torchvision's formulas evaluated by NumPy. Each
kernel reads its inputs' columns as strided views at run time and writes only ``out``
(which may be a view of a shared buffer), column by column, after every input has been
read.

>>> import numpy as np
>>> from graphc.type import Op
>>> op = Op.make("box_decode", weights=(1.0, 1.0, 1.0, 1.0), clip=4.0)
>>> boxes = np.array([[0, 0, 10, 20]], np.float32)
>>> deltas = np.array([[0.1, 0.0, 0.0, np.log(0.5)]], np.float32)
>>> out = np.empty((1, 4), np.float32)
>>> box_decode(op, [deltas, boxes], out, None)()
>>> out
array([[ 1.,  5., 11., 15.]], dtype=float32)
"""
from __future__ import annotations

import numpy as np


def _columns(x, dtype) -> tuple:
    """The four coordinates of every box of ``x`` (..., 4), as views, in ``dtype``."""
    x = x.astype(dtype, copy=False)
    return x[..., 0], x[..., 1], x[..., 2], x[..., 3]


def _sizes(x1, y1, x2, y2) -> tuple:
    """Widths, heights and centres, in torchvision's order of operations."""
    widths = x2 - x1
    heights = y2 - y1
    return widths, heights, x1 + 0.5 * widths, y1 + 0.5 * heights


def box_decode(op, ins, out, ctx):
    """``out`` = the boxes ``deltas`` (``ins[0]``) make of the reference ``boxes``."""
    deltas, boxes = ins
    wx, wy, ww, wh = op["weights"]
    clip = op["clip"]

    def box_decode():
        d0, d1, d2, d3 = _columns(deltas, out.dtype)
        widths, heights, ctr_x, ctr_y = _sizes(*_columns(boxes, out.dtype))
        # np.minimum, as torch.clamp, keeps a NaN delta NaN
        pred_ctr_x = d0 / wx * widths + ctr_x
        pred_ctr_y = d1 / wy * heights + ctr_y
        half_w = 0.5 * (np.exp(np.minimum(d2 / ww, clip)) * widths)
        half_h = 0.5 * (np.exp(np.minimum(d3 / wh, clip)) * heights)
        np.subtract(pred_ctr_x, half_w, out=out[..., 0])
        np.subtract(pred_ctr_y, half_h, out=out[..., 1])
        np.add(pred_ctr_x, half_w, out=out[..., 2])
        np.add(pred_ctr_y, half_h, out=out[..., 3])
    return box_decode


def box_encode(op, ins, out, ctx):
    """``out`` = the deltas that take the ``reference`` boxes (``ins[1]``) to ``boxes``."""
    boxes, reference = ins
    wx, wy, ww, wh = op["weights"]

    def box_encode():
        gt_w, gt_h, gt_x, gt_y = _sizes(*_columns(boxes, out.dtype))
        ex_w, ex_h, ex_x, ex_y = _sizes(*_columns(reference, out.dtype))
        dx = wx * (gt_x - ex_x) / ex_w
        dy = wy * (gt_y - ex_y) / ex_h
        dw = ww * np.log(gt_w / ex_w)
        dh = wh * np.log(gt_h / ex_h)
        for i, column in enumerate((dx, dy, dw, dh)):
            out[..., i] = column
    return box_encode
