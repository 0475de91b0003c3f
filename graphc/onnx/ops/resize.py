"""Converters of ONNX's ``Resize`` (opsets 10-19) and ``Upsample`` (7-9).

Resizing is separable: each resized axis in turn becomes a sum of a few gathers
(``take`` of static neighbour indices, times static weights), the weights and
indices computed here with NumPy from the scales or sizes, which must be known
while importing. Nearest-neighbour resizing is one gather per axis, exact for
any dtype. Every mode of the spec is covered: ``nearest`` (each
``nearest_mode``), ``linear`` and ``cubic`` (``cubic_coeff_a``,
``exclude_outside``, ``antialias``), every ``coordinate_transformation_mode``
(``tf_crop_and_resize`` with ``roi`` and ``extrapolation_value``), ``axes`` and
``keep_aspect_ratio_policy``. The weights follow ``onnx.reference``'s.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["Resize"]
>>> node = NodeContext.for_test("Resize", []).node
>>> x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
>>> scales = np.array([1, 1, 2, 2], np.float32)
>>> spec.fn(NodeContext(node, 19, [x, None, scales], {}, spec))[0, 0]
array([[0., 0., 1., 1.],
       [0., 0., 1., 1.],
       [2., 2., 3., 3.],
       [2., 2., 3., 3.]], dtype=float32)
"""
from __future__ import annotations

import math

import numpy as np

from ..registry import converter

_ATTRS = {"antialias": 0, "axes": None, "coordinate_transformation_mode": "half_pixel",
          "cubic_coeff_a": -0.75, "exclude_outside": 0, "extrapolation_value": 0.0,
          "keep_aspect_ratio_policy": "stretch", "mode": "nearest",
          "nearest_mode": "round_prefer_floor"}

_TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
               "asymmetric", "tf_crop_and_resize")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


# -- the 1-D weights -----------------------------------------------------------------------------
def _nearest(mode):
    def coeffs(ratio, scale):
        if ratio == 1:
            return np.array([0.0, 1.0])
        pick = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
                "floor": False, "ceil": True}[mode]
        return np.array([0.0, 1.0]) if pick else np.array([1.0, 0.0])
    return coeffs


def _linear(antialias):
    def coeffs(ratio, scale):
        if not antialias:
            return np.array([1 - ratio, ratio])
        scale = min(scale, 1.0)
        start = int(np.floor(-1 / scale) + 1)
        args = (np.arange(start, 2 - start) - ratio) * scale
        weights = np.clip(1 - np.abs(args), 0, 1)
        return weights / weights.sum()
    return coeffs


def _cubic(a, antialias):
    def kernel(x):
        x = np.abs(x)
        near = ((a + 2) * x - (a + 3)) * x * x + 1
        far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        return np.where(x <= 1, near, np.where(x < 2, far, 0.0))

    def coeffs(ratio, scale):
        if not antialias:
            return kernel(np.array([ratio + 1, ratio, 1 - ratio, 2 - ratio]))
        scale = min(scale, 1.0)
        start = int(np.floor(-2 / scale) + 1)
        weights = kernel(scale * (np.arange(start, 2 - start) - ratio))
        return weights / weights.sum()
    return coeffs


def _source(transform, out_len, in_len, scale, roi):
    """The input coordinate of each output position along one axis, and which of
    them fall outside the input (``tf_crop_and_resize`` only, else ``None``)."""
    y = np.arange(out_len, dtype=np.float64)
    exact_len = scale * in_len
    outside = None
    if transform == "align_corners":
        x = np.zeros(out_len) if exact_len == 1 else y * (in_len - 1) / (exact_len - 1)
    elif transform == "asymmetric":
        x = y / scale
    elif transform == "tf_crop_and_resize":
        lo, hi = roi
        x = (np.full(out_len, (hi - lo) * (in_len - 1) / 2) if exact_len == 1
             else y * (hi - lo) * (in_len - 1) / (exact_len - 1))
        x = x + lo * (in_len - 1)
        outside = (x < 0) | (x > in_len - 1)
    elif transform == "pytorch_half_pixel":
        x = np.full(out_len, -0.5) if exact_len == 1 else (y + 0.5) / scale - 0.5
    elif transform == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    else:  # half_pixel_symmetric: the centre of the input maps to the centre of the output
        offset = in_len / 2 * (1 - out_len / exact_len)
        x = offset + (y + 0.5) / scale - 0.5
    return x, outside


def axis_weights(in_len, out_len, scale, transform, coeffs, roi=None, exclude_outside=False):
    """``(indices, weights, outside)`` of a resize along one axis: output ``i`` is
    ``sum_t weights[i, t] * input[indices[i, t]]``; ``outside`` marks the outputs
    that take the extrapolation value (or is ``None``).

    Example: ``axis_weights(2, 4, 2.0, "asymmetric", _nearest("floor"))[0][:, 1]``
    is ``[0, 0, 1, 1]``.
    """
    x, outside = _source(transform, out_len, in_len, scale, roi)
    floor = np.floor(x).astype(np.int64)
    ratios = np.where(x == floor, 1.0, x - floor)  # the left neighbour is preferred
    weights = np.stack([np.asarray(coeffs(float(r), scale), np.float64) for r in ratios]) \
        if out_len else np.zeros((0, 2))
    n = weights.shape[1]
    # the n indices nearest each x, ties to the smaller, in edge-padded coordinates
    pad = int(math.ceil(n / 2))
    padded = x + pad
    p = np.floor(padded).astype(np.int64)
    frac = padded - p
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        offset = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    indices = (p + offset)[:, None] + np.arange(n)[None, :] - pad
    if exclude_outside:
        weights = np.where((indices < 0) | (indices >= in_len), 0.0, weights)
        total = weights.sum(axis=-1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(indices, 0, in_len - 1), weights, outside


# -- the graph ------------------------------------------------------------------------------------
def _along(ns, x, axis, indices, weights, dtype):
    """``x`` resized along ``axis`` by the gathers and weights of ``axis_weights``."""
    rank = len(np.shape(x))
    one_hot = np.all((weights == 0) | (weights == 1)) and np.all(weights.sum(1) == 1)
    if one_hot:  # nearest: one gather, exact for any dtype
        return ns.take(x, indices[np.arange(len(indices)), weights.argmax(1)], axis=axis)
    shape = (1,) * axis + (len(indices),) + (1,) * (rank - axis - 1)
    out = None
    for t in range(weights.shape[1]):
        if not weights[:, t].any():
            continue
        term = ns.multiply(ns.take(x, indices[:, t], axis=axis),
                           weights[:, t].astype(dtype).reshape(shape))
        out = term if out is None else ns.add(out, term)
    if out is None:
        return ns.multiply(ns.take(x, indices[:, 0], axis=axis), dtype.type(0))
    return out


def _compute_dtype(dtype):
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float32)


def _floats(ctx, i):
    value = ctx.constant(i, optional=True)
    if value is None or value.size == 0:
        return None
    return value.reshape(-1)


def _sizes_and_scales(ctx, dims, axes):
    """Output shape and per-axis scale, from the ``scales`` or ``sizes`` input."""
    rank = len(dims)
    if ctx.opset < 11:
        scales, sizes = _floats(ctx, 1), None
    else:
        scales, sizes = _floats(ctx, 2), _floats(ctx, 3)
    if (scales is None) == (sizes is None):
        raise ctx.invalid("exactly one of scales and sizes must be given")
    given = scales if sizes is None else sizes
    if len(given) != len(axes):
        raise ctx.invalid(f"{'scales' if sizes is None else 'sizes'} {given.tolist()} must "
                          f"hold one value per resized axis ({len(axes)})")
    if sizes is not None:
        if sizes.dtype.kind not in "iu" or (sizes < 0).any():
            raise ctx.invalid(f"sizes must be non-negative integers, got {sizes.tolist()}")
        out = list(dims)
        for a, s in zip(axes, sizes):
            out[a] = int(s)
        factors = [out[i] / dims[i] if dims[i] else 1.0 for i in range(rank)]
        policy = _attr(ctx, "keep_aspect_ratio_policy")
        if policy not in ("stretch", "not_larger", "not_smaller"):
            raise ctx.invalid(f"keep_aspect_ratio_policy must be stretch, not_larger or "
                              f"not_smaller, got {policy!r}")
        if policy != "stretch":
            chosen = [factors[a] for a in axes]
            scale = min(chosen) if policy == "not_larger" else max(chosen)
            factors = [scale if i in axes else 1.0 for i in range(rank)]
            out = [int(scale * dims[i] + 0.5) if i in axes else dims[i] for i in range(rank)]
        return out, factors
    if scales.dtype.kind != "f" or (scales <= 0).any():
        raise ctx.invalid(f"scales must be positive numbers, got {scales.tolist()}")
    factors = [1.0] * rank
    for a, s in zip(axes, scales):
        factors[a] = float(s)
    # scale * size truncated, in float64 (as the reference and onnxruntime compute it)
    out = (np.array(factors, np.float64) * np.array(dims, np.int64)).astype(np.int64)
    return [int(d) for d in out], factors


def _roi(ctx, axes, rank):
    roi = _floats(ctx, 1) if ctx.opset >= 11 else None
    if roi is None:
        return [(0.0, 1.0)] * rank
    if len(roi) != 2 * len(axes):
        raise ctx.invalid(f"roi {roi.tolist()} must hold a start and an end per resized axis")
    out = [(0.0, 1.0)] * rank
    for i, a in enumerate(axes):
        out[a] = (float(roi[i]), float(roi[i + len(axes)]))
    return out


def _attr(ctx, name):
    """Attribute ``name``, or Resize's default where the operator has no such attribute
    (Upsample)."""
    return ctx.attr(name) if name in ctx.spec.attrs else _ATTRS[name]


def _resize(ctx, mode, transform, axes, nearest_mode=None):
    x, dims = ctx.input(0), ctx.shape(0)
    rank = len(dims)
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.invalid(f"mode must be nearest, linear or cubic, got {mode!r}")
    if transform not in _TRANSFORMS:
        raise ctx.invalid(f"coordinate_transformation_mode must be one of {_TRANSFORMS}, "
                          f"got {transform!r}")
    antialias = bool(_attr(ctx, "antialias"))
    if mode == "nearest":
        nearest_mode = nearest_mode or _attr(ctx, "nearest_mode")
        if nearest_mode not in _NEAREST_MODES:
            raise ctx.invalid(f"nearest_mode must be one of {_NEAREST_MODES}, "
                              f"got {nearest_mode!r}")
        if antialias:
            raise ctx.invalid("antialias applies to the linear and cubic modes only")
        coeffs = _nearest(nearest_mode)
    elif mode == "linear":
        coeffs = _linear(antialias)
    else:
        coeffs = _cubic(float(_attr(ctx, "cubic_coeff_a")), antialias)
    out, factors = _sizes_and_scales(ctx, dims, axes)
    roi = _roi(ctx, axes, rank)
    ns, dtype = ctx.ns, np.dtype(ctx.dtype(0))
    work = _compute_dtype(dtype)
    y = x
    exact = mode == "nearest"
    for a in axes:
        trivial_roi = math.isclose(roi[a][0], 0.0) and math.isclose(roi[a][1], 1.0)
        if math.isclose(factors[a], 1.0) and out[a] == dims[a] and (
                transform != "tf_crop_and_resize" or trivial_roi):
            continue
        if dims[a] == 0 and out[a]:
            raise ctx.invalid(f"cannot resize axis {a} of size 0 to {out[a]}")
        ctx.reserve((out[a], 8), np.float64, "Resize's weights")
        indices, weights, outside = axis_weights(dims[a], out[a], factors[a], transform,
                                                 coeffs, roi[a],
                                                 bool(_attr(ctx, "exclude_outside")))
        if not exact and y.dtype != work:
            y = ns.astype(y, work)
        y = _along(ns, y, a, indices, weights, work)
        if outside is not None and outside.any():
            # set per axis, as the reference does: the next axis interpolates these values
            shape = (1,) * a + (out[a],) + (1,) * (rank - a - 1)
            fill = np.asarray(_attr(ctx, "extrapolation_value")).astype(y.dtype)
            y = ns.where(outside.reshape(shape), fill, y)
    if y.dtype != dtype:
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            y = ns.clip(ns.rint(y), info.min, info.max)
        y = ns.astype(y, dtype)
    return y


@converter("Resize", attrs=_ATTRS, min_opset=10)
def resize(ctx):
    rank = len(ctx.shape(0))
    if ctx.opset < 11:  # Resize-10: asymmetric coordinates, nearest rounds down
        return _resize(ctx, ctx.attr("mode"), "asymmetric", list(range(rank)), "floor")
    axes = ctx.attr("axes")
    if axes is None:
        axes = list(range(rank))
    else:
        axes = [int(a) + rank if int(a) < 0 else int(a) for a in axes]
        if any(not 0 <= a < rank for a in axes) or len(set(axes)) != len(axes):
            raise ctx.invalid(f"axes {ctx.attr('axes')} must be distinct axes of rank {rank}")
    return _resize(ctx, ctx.attr("mode"), ctx.attr("coordinate_transformation_mode"), axes)


@converter("Upsample", attrs={"mode": "nearest", "scales": None, "height_scale": None,
                              "width_scale": None})
def upsample(ctx):
    rank = len(ctx.shape(0))
    mode = ctx.attr("mode")
    mode = "linear" if mode == "bilinear" else mode
    if ctx.opset >= 9:
        return _resize(ctx, mode, "asymmetric", list(range(rank)), "floor")
    raise ctx.unsupported("Upsample before opset 9 (scales as an attribute) is not supported")
