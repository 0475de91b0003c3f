"""Fold an inference BatchNormalization into the Conv or MatMul that feeds it.

``BN(conv(x, W) + B)`` with constant statistics is ``conv(x, W * s) + (B - mean)
* s + beta`` where ``s = gamma / sqrt(var + eps)``: one conv with a bias instead
of a conv and four elementwise ops over the activation, and no intermediate
value. The importer asks :func:`fold_into_conv` at each Conv; the folded
weights are new arrays (the model's own initializers are never changed).

A Linear layer followed by a BatchNorm1d (LeViT's ``Linear_BN``) exports as
``BN(flatten(x @ W))``: :func:`fold_into_matmul` makes it ``flatten(x @ (W * s))
+ shift``, the shift a bias the product's kernel takes in (levit_128s: 48 of these).

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


def fold_weights(w, b, gamma, beta, mean, var, eps, axis: int = 0):
    """The kernel and bias of ``BN(conv(x, w) + b)`` as one conv (see the module doc);
    with ``axis=1``, the matrix and shift of ``BN(x @ w)`` (a column per channel)."""
    scale = np.asarray(gamma, np.float64) / np.sqrt(np.asarray(var, np.float64) + eps)
    shape = [1] * w.ndim
    shape[axis] = -1
    folded_w = np.asarray(w, np.float64) * scale.reshape(shape)
    bias = np.zeros(w.shape[axis]) if b is None else np.asarray(b, np.float64)
    folded_b = (bias - mean) * scale + beta
    return folded_w.astype(w.dtype), folded_b.astype(w.dtype)


def _sole_user(name: str, consumers: dict, graph_outputs: set, op_type: str,
               besides: tuple = ()):
    """The one node reading ``name`` (nodes of the ``besides`` types aside) if it is an
    ``op_type`` and ``name`` is no graph output, else ``None``."""
    users = [u for u in consumers.get(name, []) if u.op_type not in besides]
    if len(users) != 1 or users[0].op_type != op_type or name in graph_outputs:
        return None
    return users[0]


def _inference_bn(name: str, consumers: dict, env: dict, graph_outputs: set, channels: int,
                  besides: tuple = ()):
    """``(bn_node, epsilon, gamma, beta, mean, var)`` if ``name``'s only reader (but
    ``besides`` types) is a plain inference BatchNormalization of ``channels`` known
    statistics, else ``None``."""
    bn = _sole_user(name, consumers, graph_outputs, "BatchNormalization", besides)
    if bn is None or list(bn.input[:1]) != [name] or len(bn.input) != 5:
        return None
    if len([o for o in bn.output if o]) != 1:
        return None
    attrs = {a.name: a for a in bn.attribute}
    if set(attrs) - _INFERENCE_ATTRS:
        return None
    if "spatial" in attrs and attrs["spatial"].i != 1:
        return None
    if "training_mode" in attrs and attrs["training_mode"].i != 0:
        return None
    stats = [env.get(n) for n in bn.input[1:5]]
    if not all(isinstance(v, np.ndarray) and v.shape == (channels,) for v in stats):
        return None
    return (bn, attrs["epsilon"].f if "epsilon" in attrs else 1e-5, *stats)


def fold_into_conv(conv, consumers: dict, env: dict, graph_outputs: set) -> Optional[tuple]:
    """If ``conv``'s only consumer is an inference BatchNormalization whose
    statistics (and the conv's weights) are known now, ``(bn_node, w, b)`` with
    the folded weights; else ``None``."""
    w = env.get(conv.input[1])
    b = env.get(conv.input[2]) if len(conv.input) > 2 and conv.input[2] else None
    if not isinstance(w, np.ndarray) or (b is not None and not isinstance(b, np.ndarray)):
        return None
    if w.dtype.kind != "f":
        return None
    found = _inference_bn(conv.output[0], consumers, env, graph_outputs, w.shape[0])
    if found is None:
        return None
    bn, eps, *stats = found
    folded_w, folded_b = fold_weights(w, b, *stats, eps)
    return bn, folded_w, folded_b


def fold_into_matmul(matmul, consumers: dict, env: dict, graph_outputs: set):
    """If ``matmul`` is ``x @ W`` with ``W`` a known float matrix ``(K, N)`` and ``x``
    of rank ``r >= 2``, read only by an inference BatchNormalization (``r == 2``) or
    only by a Flatten to ``(-1, N)`` read only by one, ``(bn_node, W * s, shift)``:
    the BatchNormalization is ``+ shift`` on the product by the folded matrix (per
    column: the Flatten keeps the last axis as the channels); else ``None``.

    >>> import onnx.helper as h
    >>> mm = h.make_node("MatMul", ["x", "W"], ["y"])
    >>> bn = h.make_node("BatchNormalization", ["y", "g", "b", "m", "v"], ["z"])
    >>> one = np.ones(2, np.float32)
    >>> env = {"x": np.ones((3, 2), np.float32), "W": np.eye(2, dtype=np.float32),
    ...        "g": 2 * one, "b": 3 * one, "m": one, "v": 4 * one}
    >>> _, w, shift = fold_into_matmul(mm, consumers_of(h.make_graph([mm, bn], "g", [], [])),
    ...                                env, set())
    >>> np.round(w.astype(float), 3).tolist(), np.round(shift.astype(float), 3).tolist()
    ([[1.0, 0.0], [0.0, 1.0]], [2.0, 2.0])
    """
    w, x = env.get(matmul.input[1]), env.get(matmul.input[0])
    if not isinstance(w, np.ndarray) or w.ndim != 2 or w.dtype.kind != "f":
        return None
    rank = len(getattr(x, "shape", ()))
    if rank < 2:
        return None
    name = matmul.output[0]
    # the folded product keeps its name and shape: a Shape of it may read it too
    flatten = _sole_user(name, consumers, graph_outputs, "Flatten", besides=("Shape",))
    if flatten is not None:
        axis = next((a.i for a in flatten.attribute if a.name == "axis"), 1)
        if axis % rank != rank - 1 or list(flatten.input) != [name]:
            return None
        name = flatten.output[0]
    elif rank != 2:
        return None
    found = _inference_bn(name, consumers, env, graph_outputs, w.shape[1], ("Shape",))
    if found is None:
        return None
    bn, eps, *stats = found
    return (bn, *fold_weights(w, None, *stats, eps, axis=1))


def batchnorm_reader(node, consumers: dict):
    """The BatchNormalization that alone reads ``node``'s result (through a Flatten
    after a MatMul; Shape readers aside), the one :func:`fold_into_conv` or
    :func:`fold_into_matmul` would fold, else ``None``.

    >>> import onnx.helper as h
    >>> nodes = [h.make_node("MatMul", ["x", "W"], ["p"]), h.make_node("Shape", ["p"], ["s"]),
    ...          h.make_node("Flatten", ["p"], ["f"], axis=2),
    ...          h.make_node("BatchNormalization", ["f", "g", "b", "m", "v"], ["n"])]
    >>> users = consumers_of(h.make_graph(nodes, "g", [], []))
    >>> batchnorm_reader(nodes[0], users).output[0], batchnorm_reader(nodes[1], users)
    ('n', None)
    """
    name = node.output[0]
    for _ in range(2 if node.op_type == "MatMul" else 1):
        users = [u for u in consumers.get(name, []) if u.op_type != "Shape"]
        if len(users) != 1:
            return None
        if users[0].op_type == "BatchNormalization":
            return users[0]
        if users[0].op_type != "Flatten":
            return None
        name = users[0].output[0]
    return None


def consumers_of(graph) -> dict:
    """``{value name: [nodes reading it]}`` for the nodes of ``graph``."""
    users: dict = {}
    for node in graph.node:
        for name in node.input:
            if name:
                users.setdefault(name, []).append(node)
    return users

