"""Resampling of images by interpolation: bilinear upsampling (the feature pyramid's and
Mask R-CNN's), methods of every namespace (``N.upsample_bilinear2d``). The kinds are
defined in :mod:`graphc.ops.resampling`.

Arguments are normalised here into plain Python values (``size=(OH, OW)`` of ints,
``align_corners`` a bool), so equal calls make equal ops and a saved graph's node is
rebuilt by calling the function with its attributes.

>>> import graphc.eager as E, numpy as np
>>> E.upsample_bilinear2d(np.arange(4.0).reshape(1, 1, 2, 2), scale=2, align_corners=True)
array([[[[0.        , 0.33333333, 0.66666667, 1.        ],
         [0.66666667, 1.        , 1.33333333, 1.66666667],
         [1.33333333, 1.66666667, 2.        , 2.33333333],
         [2.        , 2.33333333, 2.66666667, 3.        ]]]])
"""
from __future__ import annotations

import numbers

import numpy as np

from ..type.errors import ShapeError
from .neural import _spatial, pair

_FORWARD, _BACKWARD = "upsample_bilinear2d", "upsample_bilinear2d_backward"


def _flag(opname, name, value) -> bool:
    """``value`` as a bool; anything else is refused (a string ``"False"`` is truthy)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ShapeError(f"{opname}: {name} must be True or False, got {value!r}")
    return bool(value)


def _factor(opname, value, given) -> int:
    """One upsampling factor: a whole number >= 1 (``2`` or ``2.0``), never a bool."""
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real)
            or not float(value).is_integer()):
        raise ShapeError(f"{opname}: scale must be a whole number or a pair of whole numbers "
                         f"(for other factors give size), got {given!r}")
    if value < 1:
        raise ShapeError(f"{opname}: scale must be at least 1, got {given!r}")
    return int(value)


def output_size(opname, in_hw, size, scale) -> tuple[int, int]:
    """``(OH, OW)`` from exactly one of ``size`` (an int or a pair, each >= 1) and
    ``scale`` (whole factors of ``in_hw``: PyTorch's ``scale_factor`` gives these sizes
    and, for whole factors, the same source coordinates).

    >>> output_size("upsample_bilinear2d", (3, 5), None, (2, 3.0))
    (6, 15)
    """
    if (size is None) == (scale is None):
        raise ShapeError(f"{opname}: give exactly one of size and scale, got size={size!r} "
                         f"and scale={scale!r}")
    if size is not None:
        return pair(opname, "size", size)
    if isinstance(scale, (tuple, list)):
        if len(scale) != 2:
            raise ShapeError(f"{opname}: scale must be a whole number or a pair of whole "
                             f"numbers, got {scale!r}")
        factors = tuple(_factor(opname, s, scale) for s in scale)
    else:
        factors = (_factor(opname, scale, scale),) * 2
    return in_hw[0] * factors[0], in_hw[1] * factors[1]


class ResampleMixin:
    """Interpolating resamplers, for every backend."""

    def upsample_bilinear2d(self, x, size=None, scale=None, align_corners=False):
        """``x`` (N, C, H, W) resampled bilinearly to ``size`` (OH, OW), or enlarged by
        whole factors ``scale`` (an int or a pair): exactly PyTorch's
        ``interpolate(x, size, mode="bilinear", align_corners=align_corners)``. With
        ``align_corners`` the corner cells of input and output meet; without, the cells'
        centres do (ONNX's ``half_pixel`` ``Resize``).

        Example: ``N.upsample_bilinear2d(mask_logits, size=(28, 28))``;
        ``N.upsample_bilinear2d(x, scale=2)`` turns (1, 256, 16, 16) into (1, 256, 32, 32)
        """
        x = self._lift(x)
        in_hw = _spatial(_FORWARD, "the input", x.shape)
        return self._op(_FORWARD, [x], size=output_size(_FORWARD, in_hw, size, scale),
                        align_corners=_flag(_FORWARD, "align_corners", align_corners))

    def upsample_bilinear2d_backward(self, g, input_size, align_corners=False):
        """The gradient of ``sum(upsample_bilinear2d(x, size=g's (OH, OW)) * g)`` with
        respect to ``x`` of spatial shape ``input_size`` (H, W): the transpose of the
        interpolation, each cell of ``g`` shared out to the input cells it read.

        Example: ``N.upsample_bilinear2d_backward(g, (16, 16))`` turns a gradient of
        shape (1, 256, 32, 32) into (1, 256, 16, 16)
        """
        g = self._lift(g)
        _spatial(_BACKWARD, "the gradient", g.shape)
        return self._op(_BACKWARD, [g], input_size=pair(_BACKWARD, "input_size", input_size),
                        align_corners=_flag(_BACKWARD, "align_corners", align_corners))
