"""Batch-norm folding for inference: each batch norm becomes a per-channel
scale of the preceding convolution's weight plus a bias,

    s = gamma / sqrt(running_var + eps)
    w' = w * s (per output channel),  bias' = beta + (bias - running_mean) * s

(``bias`` is 0 for a convolution without one), so the inference graph has no
batch-norm nodes. The arrays returned are read-only and own their memory: the
graph takes them as constants without copying them.

>>> import numpy as np, graphc.eager as E
>>> from graphc.neural import resnet50
>>> m = resnet50(classes=10)
>>> folded = fold_batchnorm(m, m.init(0))
>>> "bn1.weight" in folded, "conv1.bias" in folded, folded["conv1.weight"].flags.writeable
(False, True, False)
"""
from __future__ import annotations

import numpy as np


def frozen(array) -> np.ndarray:
    """A read-only array that owns its data, the form graph constants adopt
    without copying: ``array`` itself if it already is one, else a copy.
    Example: ``w = frozen(w)``"""
    if (isinstance(array, np.ndarray) and array.flags.owndata and not array.flags.writeable
            and array.flags.c_contiguous):
        return array
    out = np.array(array, copy=True, order="C")
    out.flags.writeable = False
    return out


def _scaled(w: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``(w * scale per output channel)`` computed in float64 and stored in
    ``w``'s dtype, frozen: the bits of ``(w * scale[:, None, None, None]).astype(w.dtype)``
    without its float64 temporary (twice the weight) and its cast copy, whose
    freed pages the allocator would otherwise keep in the process."""
    out = np.empty(w.shape, w.dtype)
    np.multiply(w, scale.reshape((-1,) + (1,) * (w.ndim - 1)), out=out, dtype=np.float64,
                casting="unsafe")
    out.flags.writeable = False
    return out


def fold_batchnorm(model, params: dict) -> dict[str, np.ndarray]:
    """Inference parameters for ``model``: every ``ConvBN`` pair folded into a
    convolution with bias (computed in float64, stored in the weights' dtype), the
    other arrays copied (unless already read-only and owning their data); batch norm
    entries dropped. ``model.forward(ns, folded, x)`` computes the same logits as the
    inference forward with ``params``. Folding folded parameters returns the same arrays.
    Nothing returned shares memory with ``params``, and nothing as large as a weight
    is allocated besides the results: dropping ``params`` frees the caller's arrays.

    Example: ``folded = fold_batchnorm(model, trainer.params())``
    """
    folded = {}
    dropped = set()
    for layer in model.conv_bn_layers():
        conv, bn = layer.conv.name, layer.bn.name
        if f"{bn}.weight" not in params and f"{conv}.bias" in params:
            continue  # folded already: passed on below as it is
        w = np.asarray(params[f"{conv}.weight"])
        gamma, beta, mean, var = (np.asarray(params[f"{bn}.{k}"], np.float64) for k in
                                  ("weight", "bias", "running_mean", "running_var"))
        scale = gamma / np.sqrt(var + layer.bn.eps)
        bias = np.asarray(params.get(f"{conv}.bias", 0.0), np.float64)
        folded[f"{conv}.weight"] = _scaled(w, scale)
        folded[f"{conv}.bias"] = frozen((beta + (bias - mean) * scale).astype(w.dtype))
        dropped.update(f"{bn}.{k}" for k in ("weight", "bias", "running_mean", "running_var"))
    for name, value in params.items():
        if name not in folded and name not in dropped:
            folded[name] = frozen(value)
    return folded


__all__ = ["fold_batchnorm", "frozen"]
