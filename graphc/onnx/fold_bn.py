"""Fold an inference BatchNormalization into the Conv that feeds it.

``BN(conv(x, W) + B)`` with constant statistics is ``conv(x, W * s) + (B - mean)
* s + beta`` where ``s = gamma / sqrt(var + eps)``: one conv with a bias instead
of a conv and four elementwise ops over the activation, and no intermediate
value. The importer asks :func:`fold_into_conv` at each Conv; the folded
weights are new arrays (the model's own initializers are never changed).

>>> import numpy as np
>>> w, s = fold_weights(np.ones((2, 1, 1, 1)), None, np.array([2.0, 4.0]),
...                     np.zeros(2), np.zeros(2), np.array([3.0, 15.0]), 1.0)
>>> w.ravel().tolist(), s.tolist()
([1.0, 1.0], [0.0, 0.0])
"""
from __future__ import annotations

from typing import Optional

import numpy as np

# attributes with which BatchNormalization is plain inference normalisation
_INFERENCE_ATTRS = {"epsilon", "momentum", "is_test", "consumed_inputs", "spatial",
                    "training_mode"}


def fold_weights(w, b, gamma, beta, mean, var, eps):
    """The kernel and bias of ``BN(conv(x, w) + b)`` as one conv (see the module doc)."""
    scale = np.asarray(gamma, np.float64) / np.sqrt(np.asarray(var, np.float64) + eps)
    folded_w = (np.asarray(w, np.float64) * scale.reshape((-1,) + (1,) * (w.ndim - 1)))
    bias = np.zeros(w.shape[0]) if b is None else np.asarray(b, np.float64)
    folded_b = (bias - mean) * scale + beta
    return folded_w.astype(w.dtype), folded_b.astype(w.dtype)


def fold_into_conv(conv, consumers: dict, env: dict, graph_outputs: set) -> Optional[tuple]:
    """If ``conv``'s only consumer is an inference BatchNormalization whose
    statistics (and the conv's weights) are known now, ``(bn_node, w, b)`` with
    the folded weights; else ``None``."""
    out = conv.output[0]
    users = consumers.get(out, [])
    if len(users) != 1 or users[0].op_type != "BatchNormalization" or out in graph_outputs:
        return None
    bn = users[0]
    if list(bn.input[:1]) != [out] or len([o for o in bn.output if o]) != 1 or len(bn.input) != 5:
        return None
    attrs = {a.name: a for a in bn.attribute}
    if set(attrs) - _INFERENCE_ATTRS:
        return None
    if "spatial" in attrs and attrs["spatial"].i != 1:
        return None
    if "training_mode" in attrs and attrs["training_mode"].i != 0:
        return None
    w = env.get(conv.input[1])
    b = env.get(conv.input[2]) if len(conv.input) > 2 and conv.input[2] else None
    stats = [env.get(name) for name in bn.input[1:5]]
    if not isinstance(w, np.ndarray) or (b is not None and not isinstance(b, np.ndarray)):
        return None
    if not all(isinstance(v, np.ndarray) and v.shape == (w.shape[0],) for v in stats):
        return None
    if w.dtype.kind != "f":
        return None
    eps = attrs["epsilon"].f if "epsilon" in attrs else 1e-5
    folded_w, folded_b = fold_weights(w, b, *stats, eps)
    return bn, folded_w, folded_b


def consumers_of(graph) -> dict:
    """``{value name: [nodes reading it]}`` for the nodes of ``graph``."""
    users: dict = {}
    for node in graph.node:
        for name in node.input:
            if name:
                users.setdefault(name, []).append(node)
    return users

