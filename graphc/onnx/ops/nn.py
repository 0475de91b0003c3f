"""Converters of ONNX's neural-network operators: normalisations (BatchNormalization,
InstanceNormalization, LayerNormalization, RMSNormalization, GroupNormalization, LRN,
LpNormalization, MeanVarianceNormalization), Gemm/MatMul and the Softmax family;
Conv/ConvTranspose live in :mod:`.nn_conv`, the poolings in :mod:`.nn_pool` and
the losses in :mod:`.nn_loss`.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["Softmax"]
>>> node = NodeContext.for_test("Softmax", []).node
>>> spec.fn(NodeContext(node, 13, [np.zeros((1, 2))], {}, spec))
array([[0.5, 0.5]])
"""
from __future__ import annotations

import math

import numpy as np

from ..registry import converter
from . import nn_conv, nn_loss, nn_pool  # noqa: F401  (register Conv, the losses, the pools)


def _float_input(ctx, i=0):
    if ctx.dtype(i).kind != "f":
        raise ctx.invalid(f"input {i} must be floating-point, got {ctx.dtype(i)}")
    return ctx.input(i)


def _as(ctx, value, dtype):
    """``value`` cast to ``dtype`` where it differs (ONNX keeps the input's dtype)."""
    return value if value.dtype == dtype else ctx.ns.astype(value, dtype)


# -- normalisations ---------------------------------------------------------------------------
def _channel_param(ctx, i, x_shape, dtype):
    """Input ``i``, a per-channel (C,) parameter, or a (C, D1, ...) one (BatchNormalization
    with ``spatial=0`` before opset 9), shaped to broadcast over ``x``."""
    value, shape = _as(ctx, ctx.input(i), dtype), ctx.shape(i)
    rank = len(x_shape)
    if shape == (x_shape[1],):
        return ctx.ns.reshape(value, (x_shape[1],) + (1,) * (rank - 2))
    if tuple(shape) == tuple(x_shape[1:]):
        return value
    raise ctx.invalid(f"input {i} must have shape ({x_shape[1]},) (one value per channel) "
                      f"for an input of shape {tuple(x_shape)}, got {shape}")


@converter("BatchNormalization", attrs={"epsilon": 1e-5, "momentum": 0.9, "spatial": 1,
                                        "is_test": 0, "consumed_inputs": None,
                                        "training_mode": 0})
def batch_normalization(ctx):
    x = _float_input(ctx)
    ns, shape, dtype = ctx.ns, ctx.shape(0), ctx.dtype(0)
    if len(shape) < 2:
        raise ctx.invalid(f"the input must be (N, C, ...), got shape {shape}")
    eps = float(ctx.attr("epsilon"))
    scale, bias, mean, var = (_channel_param(ctx, i, shape, dtype) for i in range(1, 5))
    training = (bool(ctx.attr("training_mode")) if ctx.opset >= 14
                else ctx.n_outputs > 1 and not (ctx.opset < 7 and ctx.attr("is_test")))
    if not training:
        return ns.add(ns.multiply(ns.subtract(x, mean),
                                  ns.divide(scale, ns.sqrt(ns.add(var, eps)))), bias)
    if ctx.opset < 9 and not ctx.attr("spatial"):
        raise ctx.unsupported("training-mode BatchNormalization with spatial=0 (statistics "
                              "per activation) is not supported")
    axes = (0,) + tuple(range(2, len(shape)))
    batch_mean = ns.mean(x, axis=axes, keepdims=True)
    batch_var = ns.mean(ns.square(ns.subtract(x, batch_mean)), axis=axes, keepdims=True)
    y = ns.add(ns.multiply(ns.subtract(x, batch_mean),
                           ns.divide(scale, ns.sqrt(ns.add(batch_var, eps)))), bias)
    momentum = float(ctx.attr("momentum"))
    flat_mean, flat_var = ns.reshape(batch_mean, (shape[1],)), ns.reshape(batch_var, (shape[1],))
    running = [ns.add(ns.multiply(_as(ctx, ctx.input(i), dtype), momentum),
                      ns.multiply(batch, 1.0 - momentum))
               for i, batch in ((3, flat_mean), (4, flat_var))]
    # before opset 14 the fifth output, "saved_var", is the inverse standard deviation in
    # onnxruntime (cuDNN's convention; the spec's text leaves it open)
    saved_inv_std = ns.divide(1.0, ns.sqrt(ns.add(flat_var, eps)))
    return (y, *running, flat_mean, saved_inv_std)[:max(ctx.n_outputs, 1)]


@converter("InstanceNormalization", attrs={"epsilon": 1e-5})
def instance_normalization(ctx):
    x = _float_input(ctx)
    ns, shape = ctx.ns, ctx.shape(0)
    if len(shape) < 3:
        raise ctx.invalid(f"the input must be (N, C, D1, ...), got shape {shape}")
    scale, bias = (_channel_param(ctx, i, shape, ctx.dtype(0)) for i in (1, 2))
    axes = tuple(range(2, len(shape)))
    centred = ns.subtract(x, ns.mean(x, axis=axes, keepdims=True))
    var = ns.mean(ns.square(centred), axis=axes, keepdims=True)
    inv = ns.divide(scale, ns.sqrt(ns.add(var, float(ctx.attr("epsilon")))))
    return ns.add(ns.multiply(centred, inv), bias)


_STASH_TYPES = {1: np.float32, 10: np.float16, 11: np.float64}


@converter("LayerNormalization", attrs={"axis": -1, "epsilon": 1e-5, "stash_type": 1})
def layer_normalization(ctx):
    x = _float_input(ctx)
    ns, shape, dtype = ctx.ns, ctx.shape(0), ctx.dtype(0)
    axis = _axis(ctx, ctx.attr("axis"), len(shape))
    _check_scales(ctx, shape[axis:], (1, 2))
    # the statistics are computed in the stash type, the scaling in the input's
    axes = tuple(range(axis, len(shape)))
    wide = _as(ctx, x, _stash(ctx))
    mean = ns.mean(wide, axis=axes, keepdims=True)
    centred = ns.subtract(wide, mean)
    inv_std = ns.divide(1.0, ns.sqrt(ns.add(ns.mean(ns.square(centred), axis=axes,
                                                    keepdims=True),
                                            float(ctx.attr("epsilon")))))
    y = ns.multiply(_as(ctx, ns.multiply(centred, inv_std), dtype), ctx.input(1))
    if ctx.has_input(2):
        y = ns.add(y, ctx.input(2))
    return y, mean, inv_std


def _check_scales(ctx, normalized: tuple, inputs) -> None:
    """The scale (and bias) inputs must broadcast to the normalized shape without
    growing it (unidirectional broadcasting, as onnxruntime checks)."""
    for i in inputs:
        if not ctx.has_input(i):
            continue
        try:
            fits = np.broadcast_shapes(ctx.shape(i), normalized) == tuple(normalized)
        except ValueError:
            fits = False
        if not fits:
            raise ctx.invalid(f"input {i} of shape {ctx.shape(i)} must broadcast to the "
                              f"normalized shape {tuple(normalized)}")


def _stash(ctx):
    stash = _STASH_TYPES.get(int(ctx.attr("stash_type")))
    if stash is None:
        raise ctx.unsupported(f"stash_type {ctx.attr('stash_type')} is not supported "
                              f"(known: {sorted(_STASH_TYPES)})")
    return np.dtype(stash)


@converter("RMSNormalization", attrs={"axis": -1, "epsilon": 1e-5, "stash_type": 1})
def rms_normalization(ctx):
    x = _float_input(ctx)
    ns, shape, dtype = ctx.ns, ctx.shape(0), ctx.dtype(0)
    axes = tuple(range(_axis(ctx, ctx.attr("axis"), len(shape)), len(shape)))
    _check_scales(ctx, shape[axes[0]:] if axes else (), (1,))
    wide = _as(ctx, x, _stash(ctx))
    mean_square = ns.mean(ns.square(wide), axis=axes, keepdims=True)
    rms = ns.sqrt(ns.add(mean_square, float(ctx.attr("epsilon"))))
    return ns.multiply(_as(ctx, ns.divide(wide, rms), dtype), ctx.input(1))


@converter("GroupNormalization", attrs={"epsilon": 1e-5, "num_groups": None,
                                        "stash_type": 1})
def group_normalization(ctx):
    x = _float_input(ctx)
    ns, shape, dtype = ctx.ns, ctx.shape(0), ctx.dtype(0)
    groups = ctx.attr("num_groups")
    if groups is None:
        raise ctx.invalid("attribute 'num_groups' is required")
    groups = int(groups)
    if len(shape) < 2 or groups < 1 or shape[1] % groups:
        raise ctx.invalid(f"num_groups={groups} must divide the channels of the input "
                          f"(N, C, ...), shape {shape}")
    n, c = shape[:2]
    # opset 18 takes one scale and bias per group, opset 21 one per channel
    per = groups if ctx.opset < 21 else c
    for i in (1, 2):
        if ctx.shape(i) != (per,):
            raise ctx.invalid(f"input {i} must have shape ({per},) at opset {ctx.opset}, got "
                              f"{ctx.shape(i)}")
    grouped = ns.reshape(_as(ctx, x, _stash(ctx)),
                         (n, groups, math.prod(shape[1:]) // groups))
    centred = ns.subtract(grouped, ns.mean(grouped, axis=2, keepdims=True))
    var = ns.mean(ns.square(centred), axis=2, keepdims=True)
    normal = ns.multiply(centred, ns.divide(1.0, ns.sqrt(ns.add(var, float(
        ctx.attr("epsilon"))))))
    normal = _as(ctx, ns.reshape(normal, shape), dtype)
    scale, bias = ctx.input(1), ctx.input(2)
    if per != c:
        scale, bias = (ns.repeat(v, c // groups) for v in (scale, bias))
    rest = (1,) * (len(shape) - 2)
    return ns.add(ns.multiply(normal, ns.reshape(scale, (c,) + rest)),
                  ns.reshape(bias, (c,) + rest))


@converter("LRN", attrs={"size": None, "alpha": 1e-4, "beta": 0.75, "bias": 1.0})
def lrn(ctx):
    x = _float_input(ctx)
    ns, shape = ctx.ns, ctx.shape(0)
    size = ctx.attr("size")
    if size is None:
        raise ctx.invalid("attribute 'size' is required")
    size = int(size)
    if size < 1 or len(shape) < 2:
        raise ctx.invalid(f"size must be positive and the input (N, C, ...); got size {size}, "
                          f"input shape {shape}")
    alpha, beta, bias = (float(ctx.attr(a)) for a in ("alpha", "beta", "bias"))
    if size % 2:
        # an odd window is centred both in ONNX and in PyTorch's LocalResponseNorm
        return ns.lrn(x, size, alpha, beta, bias)
    # an even window reaches one channel further up in ONNX, one further down in PyTorch
    below, above = (size - 1) // 2, size - 1 - (size - 1) // 2
    square = ns.pad(ns.square(x), [(0, 0), (below, above)] + [(0, 0)] * (len(shape) - 2))
    total = None
    for i in range(size):
        part = ns.getitem(square, (slice(None), slice(i, i + shape[1])))
        total = part if total is None else ns.add(total, part)
    return ns.divide(x, ns.power(ns.add(ns.multiply(total, alpha / size), bias), beta))


@converter("LpNormalization", attrs={"axis": -1, "p": 2})
def lp_normalization(ctx):
    x = _float_input(ctx)
    ns, p = ctx.ns, int(ctx.attr("p"))
    axis = _axis(ctx, ctx.attr("axis"), len(ctx.shape(0)))
    if p == 1:
        norm = ns.sum(ns.abs(x), axis=axis, keepdims=True)
    elif p == 2:
        norm = ns.sqrt(ns.sum(ns.square(x), axis=axis, keepdims=True))
    else:
        raise ctx.invalid(f"p must be 1 or 2, got {p}")
    # a zero norm means a zero vector, which stays zero
    return ns.divide(x, ns.where(ns.equal(norm, 0), ns.ones_like(norm), norm))


@converter("MeanVarianceNormalization", attrs={"axes": [0, 2, 3]})
def mean_variance_normalization(ctx):
    x = _float_input(ctx)
    ns, rank = ctx.ns, len(ctx.shape(0))
    axes = tuple(sorted({_axis(ctx, a, rank) for a in ctx.attr("axes")}))
    centred = ns.subtract(x, ns.mean(x, axis=axes, keepdims=True))
    std = ns.sqrt(ns.mean(ns.square(centred), axis=axes, keepdims=True))
    return ns.divide(centred, ns.add(std, 1e-9))


def _axis(ctx, axis, rank) -> int:
    axis = int(axis)
    if not -rank <= axis < rank:
        raise ctx.invalid(f"axis {axis} is out of range for an input of rank {rank}")
    return axis % rank


# -- Gemm, MatMul -------------------------------------------------------------------------------
@converter("Gemm", attrs={"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0,
                          "broadcast": 0})
def gemm(ctx):
    ns = ctx.ns
    a, b = ctx.input(0), ctx.input(1)
    if len(ctx.shape(0)) != 2 or len(ctx.shape(1)) != 2:
        raise ctx.invalid(f"A and B must be 2-D, got shapes {ctx.shape(0)} and {ctx.shape(1)}")
    dtype = ctx.dtype(0)
    if ctx.attr("transA"):
        a = ns.transpose(a)
    if ctx.attr("transB"):
        b = _transposed(ns, b)
    if a.shape[1] != b.shape[0]:
        raise ctx.invalid(f"A{' transposed' if ctx.attr('transA') else ''} of shape {a.shape} "
                          f"and B{' transposed' if ctx.attr('transB') else ''} of shape "
                          f"{b.shape} do not chain")
    y = ns.matmul(a, b)
    alpha, beta = float(ctx.attr("alpha")), float(ctx.attr("beta"))
    if alpha != 1.0:
        y = _as(ctx, ns.multiply(y, alpha), dtype)
    c = ctx.input(2, optional=True)
    if c is not None and beta != 0.0:
        out = (a.shape[0], b.shape[1])
        try:  # unidirectional: C takes the result's shape, never grows it
            fits = np.broadcast_shapes(ctx.shape(2), out) == out
        except ValueError:
            fits = False
        if not fits:
            raise ctx.invalid(f"C of shape {ctx.shape(2)} does not broadcast to the result "
                              f"{out}")
        if beta != 1.0:
            c = _as(ctx, ns.multiply(c, beta), dtype)
        y = ns.add(y, c)
    return y


def _transposed(ns, b):
    """``b`` transposed; an initializer (or a constant node's array) as a NumPy view of it
    transposed, which the product adopts as its constant: no transpose node that folding
    would copy. A matrix-vector product (a classifier at batch 1) reads the rows of the
    (N, K) matrix ONNX stores faster than the columns of a (K, N) copy (oneDNN's sgemm,
    AlexNet's 9216 x 4096: 5.3 -> 4.5 ms), and the graph reads the initializer's bytes."""
    if isinstance(b, np.ndarray):
        return b.T
    if b.op.kind == "const" and b.value is not None:
        return b.value.T
    return ns.transpose(b)


@converter("MatMul")
def matmul(ctx):
    return ctx.ns.matmul(ctx.input(0), ctx.input(1))


# -- the Softmax family ---------------------------------------------------------------------
def _over_axis(ctx, fn):
    """``fn(x, axis)`` with ONNX's axis semantics: from opset 13 over one axis (default
    -1); before, over the flattened trailing axes from ``axis`` (default 1)."""
    x = _float_input(ctx)
    shape = ctx.shape(0)
    rank = len(shape)
    given = ctx.attr("axis")
    if ctx.opset >= 13:
        return fn(x, _axis(ctx, -1 if given is None else given, max(rank, 1)))
    axis = 1 if given is None else int(given)
    if not -rank <= axis <= rank:
        raise ctx.invalid(f"axis {axis} is out of range for an input of rank {rank}")
    axis %= rank + 1 if axis == rank else rank
    flat = (math.prod(shape[:axis]), math.prod(shape[axis:]))
    return ctx.ns.reshape(fn(ctx.ns.reshape(x, flat), 1), shape)


@converter("Softmax", attrs={"axis": None})
def softmax(ctx):
    return _over_axis(ctx, ctx.ns.softmax)


@converter("LogSoftmax", attrs={"axis": None})
def log_softmax(ctx):
    return _over_axis(ctx, ctx.ns.log_softmax)


@converter("Hardmax", attrs={"axis": None})
def hardmax(ctx):
    ns, dtype = ctx.ns, ctx.dtype(0)

    def one_hot_of_max(x, axis):
        # argmax picks the first maximal element, as ONNX requires
        where = ns.argmax(x, axis=axis, keepdims=True)
        shape = [1] * len(x.shape)
        shape[axis] = x.shape[axis]
        positions = np.arange(x.shape[axis], dtype=np.int64).reshape(shape)
        return ns.astype(ns.equal(where, positions), dtype)

    return _over_axis(ctx, one_hot_of_max)
