"""Converters of ONNX's classic machine-learning operators (domain ``ai.onnx.ml``):
Binarizer, ArrayFeatureExtractor and TreeEnsemble (:mod:`.ml_trees`).

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["ai.onnx.ml.Binarizer"]
>>> node = NodeContext.for_test("Binarizer", []).node
>>> spec.fn(NodeContext(node, 1, [np.array([0.5, 1.0, 1.5])], {"threshold": 1.0}, spec))
array([0., 0., 1.])
"""
from __future__ import annotations

import numpy as np

from ..registry import converter

DOMAIN = "ai.onnx.ml"

#: the element types the ml operators take (strings are not graphc values)
_NUMBERS = (np.float32, np.float64, np.int64, np.int32)


def _numbers(ctx, i: int):
    if ctx.dtype(i) not in _NUMBERS:
        raise ctx.invalid(f"input {i} must be float32, float64, int64 or int32, got "
                          f"{ctx.dtype(i)}")
    return ctx.input(i)


@converter("Binarizer", domain=DOMAIN, attrs={"threshold": 0.0})
def binarizer(ctx):
    """1 where the input is greater than ``threshold``, else 0, in its own dtype."""
    x = _numbers(ctx, 0)
    threshold = ctx.attr("threshold")
    if not isinstance(threshold, (int, float)) or np.isnan(threshold):
        raise ctx.invalid(f"threshold must be a number, got {threshold!r}")
    return ctx.ns.astype(ctx.ns.greater(x, float(threshold)), ctx.dtype(0))


@converter("ArrayFeatureExtractor", domain=DOMAIN)
def array_feature_extractor(ctx):
    """The input's elements along its last axis at the (flattened) indices: shape
    ``(*X.shape[:-1], len(indices))``, ``(1, len(indices))`` for a vector, as
    onnxruntime computes it."""
    x, dims = _numbers(ctx, 0), ctx.shape(0)
    if not dims:
        raise ctx.invalid("the input must have at least one axis, got a scalar")
    if ctx.dtype(1) != np.int64:
        raise ctx.invalid(f"the indices must be int64, got {ctx.dtype(1)}")
    ns, indices = ctx.ns, ctx.input(1)
    if isinstance(indices, np.ndarray) and indices.size and (
            (indices < -dims[-1]) | (indices >= dims[-1])).any():
        raise ctx.invalid(f"indices {indices.reshape(-1).tolist()} must lie within the last "
                          f"axis, of {dims[-1]}")
    count = int(np.prod(ctx.shape(1), dtype=np.int64))
    picked = ns.take(x, ns.reshape(indices, (count,)), axis=-1)
    return ns.reshape(picked, (1, count)) if len(dims) == 1 else picked
