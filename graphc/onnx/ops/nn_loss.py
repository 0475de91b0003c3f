"""Converters of ONNX's losses: NegativeLogLikelihoodLoss and
SoftmaxCrossEntropyLoss (NLL of ``log_softmax`` over axis 1).

The class picked by each target is a one-hot mask compared against
``arange(C)`` on axis 1, so gathering, class weights and ``ignore_index`` are
elementwise products and sums over the class axis.

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["NegativeLogLikelihoodLoss"]
>>> node = NodeContext.for_test("NegativeLogLikelihoodLoss", []).node
>>> x, t = np.array([[-1.0, -2.0], [-3.0, -4.0]]), np.array([1, 0])
>>> spec.fn(NodeContext(node, 13, [x, t], {}, spec))
array(2.5)
"""
from __future__ import annotations

import numpy as np

from ..registry import converter

_REDUCTIONS = ("none", "sum", "mean")
_LOSS_ATTRS = {"reduction": "mean", "ignore_index": None}


def _nll(ctx, log_prob, shape, dtype):
    """The reduced negative log-likelihood of ``log_prob`` (N, C, d...) at ctx's targets
    (input 1) with the optional class weights (input 2)."""
    ns = ctx.ns
    reduction = ctx.attr("reduction")
    if isinstance(reduction, bytes):
        reduction = reduction.decode()
    if reduction not in _REDUCTIONS:
        raise ctx.invalid(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    target, target_shape = ctx.input(1), ctx.shape(1)
    if len(shape) < 2 or tuple(target_shape) != (shape[0],) + tuple(shape[2:]):
        raise ctx.invalid(f"the target's shape {target_shape} must be the input's {shape} "
                          "without its class axis 1")
    if ctx.dtype(1).kind not in "iu":
        raise ctx.invalid(f"the target must be integer class indices, got {ctx.dtype(1)}")
    classes = shape[1]
    rest = (1,) * (len(shape) - 2)
    picked = ns.expand_dims(target, 1)
    onehot = ns.astype(ns.equal(picked, np.arange(classes).reshape((1, classes) + rest)),
                       dtype)
    gathered = ns.sum(ns.multiply(log_prob, onehot), axis=1)
    if ctx.has_input(2):
        if ctx.shape(2) != (classes,):
            raise ctx.invalid(f"the weight must have shape ({classes},), got {ctx.shape(2)}")
        weight = ns.sum(ns.multiply(ns.reshape(ctx.input(2), (1, classes) + rest), onehot),
                        axis=1)
    else:
        weight = None
    ignore = ctx.attr("ignore_index")
    if ignore is not None:
        keep = ns.astype(ns.not_equal(target, int(ignore)), dtype)
        weight = keep if weight is None else ns.multiply(weight, keep)
    loss = ns.negative(gathered if weight is None else ns.multiply(gathered, weight))
    if reduction == "none":
        return loss
    if reduction == "sum":
        return ns.sum(loss)
    if weight is None:
        return ns.mean(loss)
    return ns.divide(ns.sum(loss), ns.sum(weight))


@converter("NegativeLogLikelihoodLoss", attrs=_LOSS_ATTRS)
def negative_log_likelihood_loss(ctx):
    if ctx.dtype(0).kind != "f":
        raise ctx.invalid(f"the input must be floating-point, got {ctx.dtype(0)}")
    return _nll(ctx, ctx.input(0), ctx.shape(0), ctx.dtype(0))


@converter("SoftmaxCrossEntropyLoss", attrs=_LOSS_ATTRS)
def softmax_cross_entropy_loss(ctx):
    if ctx.dtype(0).kind != "f":
        raise ctx.invalid(f"the scores must be floating-point, got {ctx.dtype(0)}")
    if len(ctx.shape(0)) < 2:
        raise ctx.invalid(f"the scores must be (N, C, ...), got shape {ctx.shape(0)}")
    log_prob = ctx.ns.log_softmax(ctx.input(0), axis=1)
    return _nll(ctx, log_prob, ctx.shape(0), ctx.dtype(0)), log_prob
