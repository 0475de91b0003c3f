"""Neural-network functions on NCHW arrays: convolutions, poolings, local
response normalisation and their backward ops, plus composites built from
existing ops (softmax, cross-entropy, batch norm, dropout, linear, flatten).

Arguments are normalised here, so the ops always carry plain Python ints:
``stride=(sh, sw)``, ``padding=((top, bottom), (left, right))``,
``dilation=(dh, dw)``. ``padding`` may be an int, a pair ``(ph, pw)``, the
normalised pair of pairs, ``"valid"`` (none) or ``"same"`` (TensorFlow's:
``ceil(H / stride)`` outputs, the odd pixel padded at the bottom/right).

>>> import graphc.eager as E, numpy as np
>>> x = np.ones((1, 1, 4, 4), np.float32); w = np.ones((2, 1, 3, 3), np.float32)
>>> E.conv2d(x, w, padding="same")[0, 0]
array([[4., 6., 6., 4.],
       [6., 9., 9., 6.],
       [6., 9., 9., 6.],
       [4., 6., 6., 4.]], dtype=float32)
"""
from __future__ import annotations

import math

from ..shape.axes import normalize_axis
from ..shape.neural import same_padding
from ..type.errors import DTypeError, ShapeError
from .detection import whole


# -- argument normalisation ----------------------------------------------------------------
_int = whole  # an int argument, never a bool (detection's checks share it)


def pair(opname: str, name: str, value, minimum: int = 1) -> tuple[int, int]:
    """``value`` (an int or two ints) as a pair of Python ints ``>= minimum``.

    >>> pair("conv2d", "stride", 2)
    (2, 2)
    """
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ShapeError(f"{opname}: {name} must be an int or a pair of ints, got {value!r}")
        result = (_int(opname, name, value[0]), _int(opname, name, value[1]))
    else:
        result = (_int(opname, name, value),) * 2
    if min(result) < minimum:
        raise ShapeError(f"{opname}: {name} must be at least {minimum}, got {value!r}")
    return result


def padding_pairs(opname: str, padding, in_hw, kernel, stride, dilation=(1, 1)):
    """``padding`` in any accepted form as ``((top, bottom), (left, right))``.

    >>> padding_pairs("conv2d", "same", (224, 224), (7, 7), (2, 2))
    ((2, 3), (2, 3))
    """
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0), (0, 0)
        if padding == "same":
            return tuple(same_padding(n, k, s, d) for n, k, s, d in
                         zip(in_hw, kernel, stride, dilation))
        raise ShapeError(f"{opname}: padding must be an int, a pair, ((top, bottom), "
                         f"(left, right)), 'same' or 'valid'; got {padding!r}")
    if isinstance(padding, (tuple, list)) and len(padding) == 2 and all(
            isinstance(p, (tuple, list)) for p in padding):
        return tuple(pair(opname, "padding", p, minimum=0) for p in padding)
    ph, pw = pair(opname, "padding", padding, minimum=0)
    return (ph, ph), (pw, pw)


def _spatial(opname, what, shape):
    if len(shape) != 4:
        raise ShapeError(f"{opname}: {what} must be 4-D (N, C, H, W), got shape {tuple(shape)}")
    return tuple(shape[2:])


def _shape4(opname, what, shape):
    try:
        result = tuple(_int(opname, what, d) for d in shape)
    except TypeError:
        raise ShapeError(f"{opname}: {what} must be a 4-tuple of ints, got {shape!r}") from None
    if len(result) != 4:
        raise ShapeError(f"{opname}: {what} must be a 4-tuple of ints, got {shape!r}")
    return result


class NeuralMixin:
    # -- convolution ---------------------------------------------------------------------
    def _conv_attrs(self, opname, in_shape, kernel_shape, stride, padding, dilation, groups):
        in_hw = _spatial(opname, "the input", in_shape)
        if len(kernel_shape) != 4:
            raise ShapeError(f"{opname}: the kernel must be 4-D (O, C/groups, kh, kw), got "
                             f"shape {tuple(kernel_shape)}")
        stride = pair(opname, "stride", stride)
        dilation = pair(opname, "dilation", dilation)
        return dict(stride=stride, dilation=dilation, groups=_int(opname, "groups", groups),
                    padding=padding_pairs(opname, padding, in_hw, kernel_shape[2:], stride,
                                          dilation))

    def conv2d(self, x, w, stride=1, padding=0, dilation=1, groups=1):
        """2-D cross-correlation (deep learning's convolution) of ``x`` (N, C, H, W) with
        ``w`` (O, C // groups, kh, kw), giving (N, O, OH, OW).

        Example: ``N.conv2d(x, w, stride=2, padding="same")``
        """
        x, w = self._lift(x), self._lift(w)
        attrs = self._conv_attrs("conv2d", x.shape, w.shape, stride, padding, dilation, groups)
        return self._op("conv2d", [x, w], **attrs)

    def conv2d_backward_input(self, g, w, input_shape, stride=1, padding=0, dilation=1,
                              groups=1):
        """The gradient of ``sum(conv2d(x, w) * g)`` with respect to ``x`` (of shape
        ``input_shape``): the transposed convolution of ``g`` with ``w``.

        Example: ``N.conv2d_backward_input(g, w, x.shape, stride=2, padding=1)``
        """
        g, w = self._lift(g), self._lift(w)
        shape = _shape4("conv2d_backward_input", "input_shape", input_shape)
        attrs = self._conv_attrs("conv2d_backward_input", shape, w.shape, stride, padding,
                                 dilation, groups)
        return self._op("conv2d_backward_input", [g, w], shape=shape, **attrs)

    def conv2d_backward_kernel(self, x, g, kernel_shape, stride=1, padding=0, dilation=1,
                               groups=1):
        """The gradient of ``sum(conv2d(x, w) * g)`` with respect to ``w`` (of shape
        ``kernel_shape``).

        Example: ``N.conv2d_backward_kernel(x, g, w.shape, padding="same")``
        """
        x, g = self._lift(x), self._lift(g)
        shape = _shape4("conv2d_backward_kernel", "kernel_shape", kernel_shape)
        attrs = self._conv_attrs("conv2d_backward_kernel", x.shape, shape, stride, padding,
                                 dilation, groups)
        return self._op("conv2d_backward_kernel", [x, g], shape=shape, **attrs)

    # -- convolution windows as GEMM columns -------------------------------------------------
    def _window_attrs(self, opname, in_shape, kernel, stride, padding, dilation):
        in_hw = _spatial(opname, "the image", in_shape)
        kernel, stride = pair(opname, "kernel", kernel), pair(opname, "stride", stride)
        dilation = pair(opname, "dilation", dilation)
        return dict(kernel=kernel, stride=stride, dilation=dilation,
                    padding=padding_pairs(opname, padding, in_hw, kernel, stride, dilation))

    def im2col(self, x, kernel, stride=1, padding=0, dilation=1, layout="batch"):
        """The windows a convolution of window ``kernel`` (kh, kw) reads in ``x``
        (N, C, H, W), as the columns of a GEMM (padding cells read as zeros). Rows are
        ordered (C, kh, kw); ``layout="batch"`` gives (N, C*kh*kw, OH*OW), ``"flat"``
        (C*kh*kw, N*OH*OW). ``conv2d(x, w)`` is ``w`` as (O, C*kh*kw) times these
        columns (see :mod:`graphc.operator.conv_gemm`).

        Example: ``N.im2col(x, (3, 3), padding=1)`` is (N, 9*C, H*W)
        """
        x = self._lift(x)
        if layout not in ("batch", "flat"):
            raise ValueError(f"im2col: layout must be 'batch' or 'flat', got {layout!r}")
        attrs = self._window_attrs("im2col", x.shape, kernel, stride, padding, dilation)
        return self._op("im2col", [x], layout=layout, **attrs)

    def col2im(self, cols, shape, kernel, stride=1, padding=0, dilation=1):
        """The transpose of :meth:`im2col` (``batch`` layout): the image of ``shape``
        (N, C, H, W) whose every cell sums the column entries of the windows that
        read it. A convolution's input gradient is ``col2im`` of ``w^T @ g``.

        Example: ``N.col2im(cols, x.shape, (3, 3), padding=1)``
        """
        cols = self._lift(cols)
        shape = _shape4("col2im", "shape", shape)
        attrs = self._window_attrs("col2im", shape, kernel, stride, padding, dilation)
        return self._op("col2im", [cols], shape=shape, **attrs)

    # -- pooling ---------------------------------------------------------------------------
    def _pool_attrs(self, opname, in_shape, kernel, stride, padding, ceil_mode):
        in_hw = _spatial(opname, "the input", in_shape)
        kernel = pair(opname, "kernel", kernel)
        stride = kernel if stride is None else pair(opname, "stride", stride)
        return dict(kernel=kernel, stride=stride, ceil_mode=bool(ceil_mode),
                    padding=padding_pairs(opname, padding, in_hw, kernel, stride))

    def max_pool2d(self, x, kernel, stride=None, padding=0, ceil_mode=False):
        """Maximum over ``kernel`` windows of ``x`` (N, C, H, W), moved by ``stride``
        (default: the kernel). Padded cells never win; ``ceil_mode`` keeps a last
        partial window (as PyTorch).

        Example: ``N.max_pool2d(x, 3, stride=2, padding=1)``
        """
        x = self._lift(x)
        return self._op("max_pool2d", [x], **self._pool_attrs(
            "max_pool2d", x.shape, kernel, stride, padding, ceil_mode))

    def max_pool2d_backward(self, x, y, g, kernel, stride=None, padding=0, ceil_mode=False):
        """The gradient of ``sum(max_pool2d(x) * g)`` with respect to ``x``, given the
        pooled ``y``: each window's gradient goes to its first maximal cell
        (row-major; a NaN is maximal), summed where windows overlap.

        Example: ``N.max_pool2d_backward(x, y, g, 2)``
        """
        x, y, g = self._lift(x), self._lift(y), self._lift(g)
        return self._op("max_pool2d_backward", [x, y, g], **self._pool_attrs(
            "max_pool2d_backward", x.shape, kernel, stride, padding, ceil_mode))

    def avg_pool2d(self, x, kernel, stride=None, padding=0, ceil_mode=False,
                   count_include_pad=True):
        """Mean over ``kernel`` windows of ``x`` (N, C, H, W). The divisor counts the
        padding cells inside the padded input when ``count_include_pad`` (PyTorch's
        rule), else only the input cells.

        Example: ``N.avg_pool2d(x, 2)``
        """
        x = self._lift(x)
        attrs = self._pool_attrs("avg_pool2d", x.shape, kernel, stride, padding, ceil_mode)
        return self._op("avg_pool2d", [x], count_include_pad=bool(count_include_pad), **attrs)

    def avg_pool2d_backward(self, g, input_shape, kernel, stride=None, padding=0,
                            ceil_mode=False, count_include_pad=True):
        """The gradient of ``sum(avg_pool2d(x) * g)`` with respect to ``x`` (of shape
        ``input_shape``). Example: ``N.avg_pool2d_backward(g, x.shape, 2)``"""
        g = self._lift(g)
        shape = _shape4("avg_pool2d_backward", "input_shape", input_shape)
        attrs = self._pool_attrs("avg_pool2d_backward", shape, kernel, stride, padding,
                                 ceil_mode)
        return self._op("avg_pool2d_backward", [g], shape=shape,
                        count_include_pad=bool(count_include_pad), **attrs)

    # -- local response normalisation ------------------------------------------------------
    @staticmethod
    def _lrn_attrs(opname, size, alpha, beta, k):
        return dict(size=_int(opname, "size", size), alpha=float(alpha), beta=float(beta),
                    k=float(k))

    def lrn(self, x, size=5, alpha=1e-4, beta=0.75, k=1.0):
        """Local response normalisation across channels (axis 1), as PyTorch's
        ``LocalResponseNorm``: ``x / (k + alpha / size * sum of x**2 over size
        neighbouring channels) ** beta``. Example: ``N.lrn(x, size=5)``"""
        x = self._lift(x)
        return self._op("lrn", [x], **self._lrn_attrs("lrn", size, alpha, beta, k))

    def lrn_backward(self, x, g, size=5, alpha=1e-4, beta=0.75, k=1.0):
        """The gradient of ``sum(lrn(x) * g)`` with respect to ``x``.

        Example: ``N.lrn_backward(x, g, size=5)``
        """
        x, g = self._lift(x), self._lift(g)
        return self._op("lrn_backward", [x, g],
                        **self._lrn_attrs("lrn_backward", size, alpha, beta, k))

    # -- upsampling ----------------------------------------------------------------------------
    def upsample_nearest2d(self, x, scale=2):
        """``x`` (N, C, H, W) enlarged by whole factors ``scale`` (an int or a pair
        ``(sh, sw)``), each cell repeated over an ``sh x sw`` block (PyTorch's
        ``Upsample(mode="nearest")``, ONNX's nearest ``Resize``).

        Example: ``N.upsample_nearest2d(x, 2)`` turns (1, 256, 16, 16) into (1, 256, 32, 32)
        """
        x = self._lift(x)
        _spatial("upsample_nearest2d", "the input", x.shape)
        return self._op("upsample_nearest2d", [x],
                        scale=pair("upsample_nearest2d", "scale", scale))

    def upsample_nearest2d_backward(self, g, scale=2):
        """The gradient of ``sum(upsample_nearest2d(x, scale) * g)`` with respect to
        ``x``: each ``sh x sw`` block of ``g`` summed.

        Example: ``N.upsample_nearest2d_backward(g, 2)``
        """
        g = self._lift(g)
        _spatial("upsample_nearest2d_backward", "the gradient", g.shape)
        return self._op("upsample_nearest2d_backward", [g],
                        scale=pair("upsample_nearest2d_backward", "scale", scale))

    # -- detection: RoIAlign and non-maximum suppression (graphc/ops/detection.py) ---------------
    def roi_align(self, x, boxes, batch_index, output_size, spatial_scale=1.0, sampling_ratio=0,
                  mode="avg", aligned=False):
        """RoIAlign (Mask R-CNN's; torchvision's ``roi_align``, ONNX's ``RoiAlign``): for box
        ``r`` of ``boxes`` (R, 4) as (x1, y1, x2, y2) in image ``batch_index[r]`` of ``x``
        (N, C, H, W), a (C, OH, OW) grid of bins, each the mean (``mode="avg"``) of
        ``sampling_ratio``² bilinear samples (0: ``ceil(box size / bins)`` per axis).
        ``spatial_scale`` maps box coordinates onto ``x``'s pixels; ``aligned`` shifts them
        by half a pixel (ONNX's ``half_pixel``; else ``output_half_pixel``, where boxes
        smaller than a pixel count as one). ``mode="max"`` takes ONNX's maximum of the
        samples' weighted corners. Gives (R, C, OH, OW); the gradient reaches ``x`` only.

        Example: ``N.roi_align(features, boxes, image_of_box, 7, spatial_scale=1 / 16,
        sampling_ratio=2, aligned=True)``
        """
        from .detection import check_batch_index, roi_attributes
        x, boxes, batch_index = self._lift(x), self._lift(boxes), self._lift(batch_index)
        _spatial("roi_align", "the features", x.shape)
        check_batch_index(self, "roi_align", batch_index, x.shape[0])
        return self._op("roi_align", [x, boxes, batch_index],
                        output_size=pair("roi_align", "output_size", output_size),
                        **roi_attributes("roi_align", spatial_scale, sampling_ratio, mode,
                                         aligned))

    def roi_align_levels(self, features, boxes, batch_index, levels, output_size,
                         spatial_scales, sampling_ratio=0, mode="avg", aligned=False):
        """RoIAlign from a feature pyramid (torchvision's ``MultiScaleRoIAlign`` once each
        box's level is chosen): box ``r`` is pooled from ``features[levels[r]]`` with
        ``spatial_scales[levels[r]]``, exactly as :meth:`roi_align` pools it from that map
        alone; ``levels`` (R,) integers in ``[0, len(features))`` (others fail the run).
        Gives (R, C, OH, OW); the gradient reaches every level's features.

        Example: ``N.roi_align_levels([p2, p3, p4, p5], boxes, image_of_box, level_of_box, 7,
        (1 / 4, 1 / 8, 1 / 16, 1 / 32), sampling_ratio=2)``
        """
        from .detection import check_batch_index, roi_attributes
        opname = "roi_align_levels"
        features = [self._lift(f) for f in features]
        if not features:
            raise ShapeError(f"{opname}: give the features of at least one level")
        try:
            scales = tuple(spatial_scales)
        except TypeError:
            raise ShapeError(f"{opname}: spatial_scales must hold one scale per level, got "
                             f"{spatial_scales!r}") from None
        if len(scales) != len(features):
            raise ShapeError(f"{opname}: {len(features)} level(s) of features but "
                             f"{len(scales)} spatial scale(s)")
        attrs = [roi_attributes(opname, s, sampling_ratio, mode, aligned) for s in scales]
        for i, f in enumerate(features):
            _spatial(opname, f"level {i}'s features", f.shape)
        boxes, batch_index = self._lift(boxes), self._lift(batch_index)
        check_batch_index(self, opname, batch_index, features[0].shape[0])
        common = {k: v for k, v in attrs[0].items() if k != "spatial_scale"}
        return self._op(opname, [boxes, batch_index, self._lift(levels)] + features,
                        output_size=pair(opname, "output_size", output_size),
                        spatial_scales=tuple(a["spatial_scale"] for a in attrs), **common)

    def roi_align_backward(self, g, boxes, batch_index, x=None, input_shape=None,
                           spatial_scale=1.0, sampling_ratio=0, mode="avg", aligned=False):
        """The gradient of ``sum(roi_align(x, boxes, batch_index, ...) * g)`` with respect
        to the features ``x`` of shape ``input_shape``: each sample's weights scatter
        ``g`` back. ``mode="max"`` needs ``x`` itself (which corner won); ``"avg"`` only
        its shape.

        Example: ``N.roi_align_backward(g, boxes, image_of_box, input_shape=x.shape)``
        """
        from .detection import check_batch_index, roi_attributes
        opname = "roi_align_backward"
        g, boxes, batch_index = self._lift(g), self._lift(boxes), self._lift(batch_index)
        attrs = roi_attributes(opname, spatial_scale, sampling_ratio, mode, aligned)
        parents = [g, boxes, batch_index]
        if mode == "max":
            if x is None:
                raise ShapeError(f"{opname}: mode 'max' needs the features x")
            x = self._lift(x)
            parents.append(x)
            input_shape = x.shape if input_shape is None else input_shape
        elif x is not None:
            raise ShapeError(f"{opname}: mode 'avg' takes the features' input_shape, not x")
        if input_shape is None:
            raise ShapeError(f"{opname}: input_shape (N, C, H, W) is required")
        shape = _shape4(opname, "input_shape", input_shape)
        check_batch_index(self, opname, batch_index, shape[0])
        return self._op(opname, parents, input_shape=shape, **attrs)

    def non_max_suppression(self, boxes, scores, max_output_per_class=None, iou_threshold=0.5,
                            score_threshold=None, center_point_box=0, size=None):
        """Greedy non-maximum suppression per image and class (ONNX's
        ``NonMaxSuppression``): of ``boxes`` (B, M, 4) scored ``scores`` (B, C, M), by
        descending score (ties: the lower index), keep a box unless one kept overlaps it
        with an IoU above ``iou_threshold``; only scores above ``score_threshold`` (None:
        all, NaN never), at most ``max_output_per_class`` (None: all) per class. Boxes are
        corners (y1, x1, y2, x2) in any order, or (x_centre, y_centre, w, h) when
        ``center_point_box=1``; IoU is symmetric in x and y, so (x1, y1, x2, y2) works too.

        The number kept depends on the values, so a graph holds a static maximum: returns
        ``(selected, count)``, ``selected`` (size, 3) int64 rows (image, class, box) in
        ONNX's order (image, then class, then as kept), padded with -1 after the first
        ``count`` (an int64 scalar). ``size`` (JAX's ``size=``) defaults to the most that
        can be kept, ``B * C * min(max_output_per_class, M)``; a smaller one keeps the
        first ``size`` rows.

        Example: ``rows, count = N.non_max_suppression(boxes, scores, 100, 0.5, size=100)``
        """
        from .detection import nms_attributes
        boxes, scores = self._lift(boxes), self._lift(scores)
        attrs = nms_attributes(tuple(boxes.shape), tuple(scores.shape), max_output_per_class,
                               iou_threshold, score_threshold, center_point_box, size)
        selected = self._op("non_max_suppression", [boxes, scores], **attrs)
        first = self.getitem(selected, (slice(None), 0))
        count = self.astype(self.sum(self.greater_equal(first, 0)), "int64")
        return selected, count

    # -- composites ---------------------------------------------------------------------------
    def _floats(self, opname, *xs):
        xs = [self._lift(x) for x in xs]
        for x in xs:
            if x.dtype.kind != "f":
                raise DTypeError(f"{opname}: expected floating-point arrays, got {x.dtype}")
        return xs

    def softmax(self, x, axis=-1):
        """``exp(x) / sum(exp(x))`` along ``axis``, shifted by the maximum so it never
        overflows. Example: ``N.softmax(logits, axis=-1)``"""
        (x,) = self._floats("softmax", x)
        axis = normalize_axis("softmax", axis, x.ndim)
        e = self.exp(self.subtract(x, self.max(x, axis=axis, keepdims=True)))
        return self.divide(e, self.sum(e, axis=axis, keepdims=True))

    def log_softmax(self, x, axis=-1):
        """``x - logsumexp(x)`` along ``axis``. Example: ``N.log_softmax(logits)``"""
        (x,) = self._floats("log_softmax", x)
        axis = normalize_axis("log_softmax", axis, x.ndim)
        return self.subtract(x, self.logsumexp(x, axis=axis, keepdims=True))

    def softmax_cross_entropy(self, logits, labels):
        """Mean over the batch of ``-sum(labels * log_softmax(logits), -1)``: a scalar.
        ``labels`` (one-hot or probabilities, the shape of ``logits``) are cast to the
        logits' dtype. Example: ``N.softmax_cross_entropy(logits, onehot)``"""
        (logits,) = self._floats("softmax_cross_entropy", logits)
        labels = self._lift(labels)
        if labels.shape != logits.shape:
            raise ShapeError(f"softmax_cross_entropy: labels of shape {labels.shape} must have "
                             f"the shape of the logits {logits.shape}")
        if logits.ndim == 0:
            raise ShapeError("softmax_cross_entropy: the logits need a class axis, got a 0-d "
                             "array")
        if labels.dtype != logits.dtype:
            labels = self.astype(labels, logits.dtype)
        per_example = self.sum(self.multiply(labels, self.log_softmax(logits, -1)), axis=-1)
        return self.negative(self.mean(per_example))

    def global_avg_pool2d(self, x):
        """The mean of each channel of ``x`` (N, C, H, W): shape (N, C).

        Example: ``N.global_avg_pool2d(features)``
        """
        (x,) = self._floats("global_avg_pool2d", x)
        _spatial("global_avg_pool2d", "the input", x.shape)
        return self.mean(x, axis=(2, 3))

    def linear(self, x, w, b=None):
        """``x @ w + b`` with ``w`` of shape (in, out). Example: ``N.linear(h, w, b)``"""
        y = self.matmul(x, w)
        return y if b is None else self.add(y, b)

    def flatten(self, x):
        """``x`` as (N, everything else). Example: ``N.flatten(features)``"""
        x = self._lift(x)
        if x.ndim == 0:
            raise ShapeError("flatten: expected an array with a batch axis, got a 0-d array")
        return self.reshape(x, (x.shape[0], math.prod(x.shape[1:])))

    def _per_channel(self, opname, x, *params):
        """Channel parameters of shape (C,) reshaped to broadcast over axis 1 of ``x``."""
        if x.ndim < 2:
            raise ShapeError(f"{opname}: the input needs a channel axis 1, got shape {x.shape}")
        c = x.shape[1]
        for p in params:
            if p.shape != (c,):
                raise ShapeError(f"{opname}: per-channel parameters must have shape ({c},) "
                                 f"for an input of shape {x.shape}, got {p.shape}")
        shape = (c,) + (1,) * (x.ndim - 2)
        return [self.reshape(p, shape) for p in params]

    def batch_norm(self, x, gamma, beta, mean, var, eps=1e-5):
        """Inference batch normalisation over channel axis 1:
        ``(x - mean) / sqrt(var + eps) * gamma + beta``, folded into one scale and
        shift per channel. Example: ``N.batch_norm(x, gamma, beta, running_mean, running_var)``
        """
        x, gamma, beta, mean, var = self._floats("batch_norm", x, gamma, beta, mean, var)
        scale = self.divide(gamma, self.sqrt(self.add(var, float(eps))))
        shift = self.subtract(beta, self.multiply(mean, scale))
        scale, shift = self._per_channel("batch_norm", x, scale, shift)
        return self.add(self.multiply(x, scale), shift)

    def batch_norm_train(self, x, gamma, beta, eps=1e-5):
        """Training batch normalisation: returns ``(y, batch_mean, batch_var)`` with the
        statistics over every axis but 1 and the biased variance.

        Example: ``y, mu, var = N.batch_norm_train(x, gamma, beta)``
        """
        x, gamma, beta = self._floats("batch_norm_train", x, gamma, beta)
        self._per_channel("batch_norm_train", x, gamma, beta)
        axes = (0,) + tuple(range(2, x.ndim))
        mean = self.mean(x, axis=axes)
        (mean_c,) = self._per_channel("batch_norm_train", x, mean)
        centred = self.subtract(x, mean_c)
        var = self.mean(self.square(centred), axis=axes)
        scale = self.divide(gamma, self.sqrt(self.add(var, float(eps))))
        scale_c, beta_c = self._per_channel("batch_norm_train", x, scale, beta)
        return self.add(self.multiply(centred, scale_c), beta_c), mean, var

    def dropout(self, x, rate, training=True):
        """``x * bernoulli(1 - rate) / (1 - rate)``, a fresh mask on every run (seeded by
        ``graphc.compile(seed=)``); ``x`` itself when not ``training`` or ``rate == 0``.

        Example: ``N.dropout(h, 0.5)``
        """
        (x,) = self._floats("dropout", x)
        rate = float(rate)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout: rate must be in [0, 1), got {rate}")
        if not training or rate == 0.0:
            return x
        mask = self.random.bernoulli(1.0 - rate, x.shape, x.dtype)
        return self.divide(self.multiply(x, mask), 1.0 - rate)
