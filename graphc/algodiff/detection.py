"""Gradient rules of the detection kinds (:mod:`graphc.ops.detection`).

``roi_align`` passes its gradient to the features through ``roi_align_backward``; the
boxes get none (as in torchvision: the sample positions move with the boxes, but
detection heads train the boxes through their own regression losses) and the batch
indices are integers. ``avg`` mode is linear in the features, so the backward kind's own
gradient is ``roi_align`` again (second derivatives work); in ``max`` mode it depends on
which sample wins, and is not implemented (as max pooling's).

Example: the rule of ``roi_align`` emits
``ns.roi_align_backward(g, boxes, batch_index, input_shape=x.shape, ...)``.
"""
from __future__ import annotations

from ..type.errors import GraphError
from .common import wants


def _roi_params(op):
    return dict(spatial_scale=op["spatial_scale"], sampling_ratio=op["sampling_ratio"],
                mode=op["mode"], aligned=op["aligned"])


def roi_align_grad(ns, op, inputs, output, g, needs=None):
    x, boxes, batch_index = inputs
    if not wants(needs, 0):
        return [None, None, None]
    features = x if op["mode"] == "max" else None
    return [ns.roi_align_backward(g, boxes, batch_index, features, input_shape=x.shape,
                                  **_roi_params(op)), None, None]


def roi_align_levels_grad(ns, op, inputs, output, g, needs=None):
    """Each level's features get the gradient of the boxes pooled from that level (the
    others' rows of ``g`` zeroed): one ``roi_align_backward`` per level."""
    boxes, batch_index, levels = inputs[:3]
    grads = [None, None, None]
    params = dict(sampling_ratio=op["sampling_ratio"], mode=op["mode"],
                  aligned=op["aligned"])
    for i, (x, scale) in enumerate(zip(inputs[3:], op["spatial_scales"])):
        if not wants(needs, 3 + i):
            grads.append(None)
            continue
        mine = ns.reshape(ns.equal(levels, i), (-1, 1, 1, 1))
        grads.append(ns.roi_align_backward(ns.where(mine, g, ns.zeros((), g.dtype)), boxes,
                                           batch_index, x if op["mode"] == "max" else None,
                                           input_shape=x.shape, spatial_scale=scale,
                                           **params))
    return grads


def roi_align_backward_grad(ns, op, inputs, output, g, needs=None):
    if op["mode"] == "max":
        raise GraphError("roi_align_backward: the second derivative of roi_align in max "
                         "mode is not implemented")
    d, boxes, batch_index = inputs
    if not wants(needs, 0):
        return [None, None, None]
    return [ns.roi_align(g, boxes, batch_index, tuple(d.shape[2:]), **_roi_params(op)),
            None, None]
