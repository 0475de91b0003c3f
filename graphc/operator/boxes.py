"""Box coding of detection networks: boxes as offsets from reference boxes (anchors or
proposals) and back, methods of every namespace (``N.box_encode``, ``N.box_decode``).
The kinds are defined in :mod:`graphc.ops.boxes`; their arguments are normalised here
into plain Python floats, so equal calls make equal ops and a saved graph's node is
rebuilt by calling the function with its attributes.

>>> import numpy as np, graphc.eager as E
>>> anchors = np.array([[0, 0, 10, 10], [5, 5, 25, 15]], np.float32)
>>> gt = np.array([[1, 2, 11, 14], [5, 5, 25, 15]], np.float32)
>>> deltas = E.box_encode(gt, anchors, weights=(10, 10, 5, 5))
>>> np.allclose(E.box_decode(deltas, anchors, weights=(10, 10, 5, 5)), gt)
True
"""
from __future__ import annotations

import math

from ..shape.box_rules import WEIGHTS_EXPECTED
from ..type.errors import ShapeError

#: torchvision's ``bbox_xform_clip``: no box grows more than 1000/16 times its reference
DEFAULT_CLIP = math.log(1000.0 / 16)
_UNIT = (1.0, 1.0, 1.0, 1.0)


def _number(value) -> float:
    if isinstance(value, (bool, str, bytes)):
        raise TypeError(value)
    return float(value)


def box_weights(opname: str, weights) -> tuple:
    """``weights`` (any sequence of 4 positive finite numbers) as a tuple of floats.

    >>> box_weights("box_decode", [10, 10, 5, 5])
    (10.0, 10.0, 5.0, 5.0)
    """
    try:
        values = None if isinstance(weights, (str, bytes)) else tuple(
            _number(w) for w in weights)
    except (TypeError, ValueError):
        values = None
    if values is None or len(values) != 4 or not all(
            math.isfinite(v) and v > 0 for v in values):
        raise ShapeError(f"{opname}: weights must be {WEIGHTS_EXPECTED}, got {weights!r}")
    return values


def box_clip(opname: str, clip) -> float:
    """``clip`` as a float: any number but NaN (``math.inf``: no clip).

    >>> box_clip("box_decode", 4)
    4.0
    """
    try:
        value = _number(clip)
    except (TypeError, ValueError):
        value = math.nan
    if math.isnan(value):
        raise ShapeError(f"{opname}: clip must be a number (not NaN), got {clip!r}")
    return value


class BoxMixin:
    """Box encoding and decoding, for every backend."""

    def box_decode(self, deltas, boxes, weights=_UNIT, clip=DEFAULT_CLIP):
        """The boxes ``deltas`` (..., 4) make of the reference ``boxes`` (..., 4), both as
        torchvision's ``BoxCoder.decode`` has them: boxes (x1, y1, x2, y2) of width
        ``x2 - x1`` (no "+1"), deltas (dx, dy, dw, dh) scaled by ``weights`` (wx, wy, ww,
        wh). Each centre moves by ``dx / wx`` widths and each width is scaled by
        ``exp(min(dw / ww, clip))`` (y and heights alike); the result is (x1, y1, x2, y2).

        Both operands have at least one axis and 4 entries on the last (which does not
        broadcast); the leading axes broadcast as NumPy's do (deltas (R, K, 4) of K
        classes against boxes (R, 1, 4), or one box (4,) against many). The result has
        the broadcast shape and the operands' common floating-point dtype
        (``np.result_type``; torchvision gives the deltas' dtype), and is computed in it
        in torchvision's order (float32 in, float32 arithmetic). Differentiable in both;
        where ``dw / ww >= clip`` the clipped term passes no gradient to ``dw``.

        Matterport's Mask R-CNN (``apply_box_deltas_graph``) has (y1, x1, y2, x2) boxes,
        (dy, dx, dh, dw) deltas multiplied by ``BBOX_STD_DEV`` (0.1, 0.1, 0.2, 0.2) and
        no clip: swap the columns ``[1, 0, 3, 2]`` of both operands and of the result,
        give the raw deltas with ``weights=(10, 10, 5, 5)`` (1 / std) and
        ``clip=math.inf``.

        >>> import numpy as np, graphc.eager as E
        >>> E.box_decode(np.array([0.5, 0, 0, np.log(2)]), np.array([0, 0, 10, 10.0]))
        array([ 5., -5., 15., 15.])
        """
        deltas, boxes = self._lift(deltas), self._lift(boxes)
        return self._op("box_decode", [deltas, boxes],
                        weights=box_weights("box_decode", weights),
                        clip=box_clip("box_decode", clip))

    def box_encode(self, boxes, reference, weights=_UNIT):
        """The deltas that take the ``reference`` boxes (anchors or proposals; ..., 4)
        to ``boxes`` (..., 4), the inverse of :meth:`box_decode` (torchvision's
        ``BoxCoder.encode_single``): ``(wx * (cx - ref_cx) / ref_w, wy * (cy - ref_cy) /
        ref_h, ww * log(w / ref_w), wh * log(h / ref_h))`` with boxes as (x1, y1, x2,
        y2). Broadcasting, dtypes and Matterport's layout as :meth:`box_decode`'s
        (Matterport's ``box_refinement_graph`` divided by ``BBOX_STD_DEV`` is
        ``weights=(10, 10, 5, 5)``). Differentiable in both where widths and heights are
        positive.

        >>> import numpy as np, graphc.eager as E
        >>> E.box_encode(np.array([5, -5, 15, 15.0]), np.array([0, 0, 10, 10.0]))
        array([0.5       , 0.        , 0.        , 0.69314718])
        """
        boxes, reference = self._lift(boxes), self._lift(reference)
        return self._op("box_encode", [boxes, reference],
                        weights=box_weights("box_encode", weights))
