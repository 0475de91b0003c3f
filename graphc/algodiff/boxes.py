"""Gradient rules of the box-coding kinds (:mod:`graphc.ops.boxes`), built from namespace
functions, so second derivatives come from the same rules.

Both kinds are smooth in both operands (``box_encode`` where the widths and heights are
positive, as its logarithms need), except at ``box_decode``'s clip: where ``d2 / ww >=
clip`` the clipped log-width is constant, so ``d2`` gets no gradient there (``d3`` alike).
With ``G`` the gradient of the four result columns, ``Gc = G0 + G2`` reaches the centre
and ``Gs = (G2 - G0) / 2`` the size (per axis); a box's centre moves with
``(x1 + x2) / 2`` and its size with ``x2 - x1``, which gives the corners' gradients.
The rules compute in the result's dtype and sum a broadcast operand's gradient back to
its shape (:func:`~.common.fit`).

Example: ``N.grad(N.sum(N.box_decode(deltas, boxes)), [deltas, boxes])``
"""
from __future__ import annotations

from .common import fit, wants


def _columns(ns, x, dtype) -> list:
    if x.dtype != dtype:
        x = ns.astype(x, dtype)
    return [ns.getitem(x, (Ellipsis, i)) for i in range(4)]


def _centre_and_size(ns, g_low, g_high) -> tuple:
    """The gradients of a centre and a size whose corners ``c -/+ s / 2`` get these."""
    return ns.add(g_low, g_high), ns.multiply(ns.subtract(g_high, g_low), 0.5)


def _corners(ns, g_centre, g_size) -> tuple:
    """The gradients of ``x1``, ``x2`` for ``centre = (x1 + x2) / 2``, ``size = x2 - x1``."""
    half = ns.multiply(g_centre, 0.5)
    return ns.subtract(half, g_size), ns.add(half, g_size)


def _stacked(ns, columns, like):
    return fit(ns, ns.stack(list(columns), axis=-1), like)


def box_decode_grad(ns, op, inputs, output, g, needs=None):
    deltas, boxes = inputs
    want_deltas, want_boxes = wants(needs, 0), wants(needs, 1)
    if not (want_deltas or want_boxes):
        return [None, None]
    weights, clip = op["weights"], op["clip"]
    d = _columns(ns, deltas, output.dtype)
    x1, y1, x2, y2 = _columns(ns, boxes, output.dtype)
    grads = _columns(ns, g, output.dtype)
    g_deltas, g_boxes = [None] * 4, [None] * 4
    for axis, (low, high) in enumerate(((x1, x2), (y1, y2))):
        size = ns.subtract(high, low)
        g_centre, g_size = _centre_and_size(ns, grads[axis], grads[axis + 2])
        log_scale = ns.divide(d[axis + 2], weights[axis + 2])
        scale = ns.exp(ns.minimum(log_scale, clip))
        if want_deltas:
            g_deltas[axis] = ns.divide(ns.multiply(g_centre, size), weights[axis])
            g_log = ns.divide(ns.multiply(ns.multiply(g_size, scale), size), weights[axis + 2])
            g_deltas[axis + 2] = ns.where(ns.less(log_scale, clip), g_log, 0.0)
        if want_boxes:
            # the predicted centre is d / w * size + centre, the predicted size scale * size
            g_box_size = ns.add(ns.multiply(g_centre, ns.divide(d[axis], weights[axis])),
                                ns.multiply(g_size, scale))
            g_boxes[axis], g_boxes[axis + 2] = _corners(ns, g_centre, g_box_size)
    return [_stacked(ns, g_deltas, deltas) if want_deltas else None,
            _stacked(ns, g_boxes, boxes) if want_boxes else None]


def box_encode_grad(ns, op, inputs, output, g, needs=None):
    boxes, reference = inputs
    want_boxes, want_reference = wants(needs, 0), wants(needs, 1)
    if not (want_boxes or want_reference):
        return [None, None]
    weights = op["weights"]
    b = _columns(ns, boxes, output.dtype)
    r = _columns(ns, reference, output.dtype)
    t = _columns(ns, output, output.dtype)
    grads = _columns(ns, g, output.dtype)
    g_boxes, g_reference = [None] * 4, [None] * 4
    for axis in range(2):
        ref_size = ns.subtract(r[axis + 2], r[axis])
        # t_centre = w * (centre - ref_centre) / ref_size, t_size = w' * log(size / ref_size)
        g_centre = ns.divide(ns.multiply(grads[axis], weights[axis]), ref_size)
        if want_boxes:
            size = ns.subtract(b[axis + 2], b[axis])
            g_size = ns.divide(ns.multiply(grads[axis + 2], weights[axis + 2]), size)
            g_boxes[axis], g_boxes[axis + 2] = _corners(ns, g_centre, g_size)
        if want_reference:
            g_ref_size = ns.negative(ns.divide(
                ns.add(ns.multiply(grads[axis], t[axis]),
                       ns.multiply(grads[axis + 2], weights[axis + 2])), ref_size))
            g_reference[axis], g_reference[axis + 2] = _corners(ns, ns.negative(g_centre),
                                                                g_ref_size)
    return [_stacked(ns, g_boxes, boxes) if want_boxes else None,
            _stacked(ns, g_reference, reference) if want_reference else None]
