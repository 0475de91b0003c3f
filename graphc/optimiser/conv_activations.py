"""What a ``conv2d_nhwc`` (oneDNN's convolution primitive) takes into itself: the bias
added to its result, and the activation applied to it, as the primitive's bias and
eltwise post-op, so the result is written once, finished.

The activations, as they reach the optimiser from ``graphc.ndarray`` or ONNX, by the
table :data:`GATES` and the kinds of :data:`PLAIN`:

- ``relu(y)``;
- ``sigmoid(y)`` (a squeeze-and-excitation gate: EfficientNet, MobileNetV3, RegNetY),
  oneDNN's ``logistic``: within 4 ulp, but 0 for inputs under about -87 (a sigmoid
  under 1.7e-38);
- ``y * sigmoid(y)`` (SiLU: EfficientNet) -> ``"swish"``;
- ``y * clip(y * (1/6) + 0.5, 0, 1)`` (hardswish: MobileNetV3, ONNX's ``HardSwish``) ->
  ``"hardswish"``.

Each applies where nothing but the activation reads the convolution (SiLU and
hardswish read it twice, both inside the pattern).

>>> sorted(ABSORBING)
['add', 'multiply', 'relu', 'sigmoid']
"""
from __future__ import annotations

import math

import numpy as np

from ..type.op import Op
from .build import make
from .lowering import NodeNamespace

NAME = "conv2d_nhwc"
#: activations one op applies to the convolution's result: kind -> the post-op's
#: ``(alpha, beta)`` from the op. Not a clip (ReLU6): oneDNN's own clip turns NaN into
#: its lower bound, and the chain of four post-ops that keeps NaN
#: (:data:`graphc.engine.onednn_conv.ACTIVATIONS`) cost MobileNetV2's convolutions
#: 40-75 us each (56x56x144), where the clip as a pass of its own costs ~14 us
PLAIN = {"relu": lambda op: (0.0, 0.0), "sigmoid": lambda op: (0.0, 0.0)}


def _conv(node, ctx, uses: int, residual_ok: bool = True):
    """``node`` if it is a float32 ``conv2d_nhwc`` with no activation yet that exactly
    ``uses`` readers read (and no residual, unless ``residual_ok``), else ``None``."""
    if (node.op.kind == NAME and not node.op["activation"] and ctx.uses(node) == uses
            and node.dtype == np.float32 and (residual_ok or len(node.parents) == 3)):
        return node
    return None


def _scalar(node):
    """The float value of a scalar constant, else ``None``."""
    if node.op.kind != "const" or node.value is None or node.value.size != 1:
        return None
    return float(node.value.reshape(()))


def _swish(node, ctx):
    """``y * sigmoid(y)`` -> ``(y, (1, 0))``."""
    for y, gate in (node.parents, node.parents[::-1]):
        if (gate.op.kind == "sigmoid" and gate.parents[0] is y and ctx.uses(gate) == 1
                and _conv(y, ctx, 2) is not None):
            return y, (1.0, 0.0)
    return None


def _scale_shift(node, ctx, y):
    """``(a, b)`` where ``node``, read once, is ``y * a + b`` (``a * y`` too), as an
    ``add`` of a ``multiply`` or as the ``fma`` the optimiser makes of one."""
    if ctx.uses(node) != 1:
        return None
    if node.op.kind == "fma":
        for x, slope in (node.parents[:2], node.parents[1::-1]):
            if x is y and None not in (_scalar(slope), _scalar(node.parents[2])):
                return _scalar(slope), _scalar(node.parents[2])
        return None
    if node.op.kind != "add":
        return None
    for scaled, offset in (node.parents, node.parents[::-1]):
        if scaled.op.kind != "multiply" or ctx.uses(scaled) != 1 or _scalar(offset) is None:
            continue
        for x, slope in (scaled.parents, scaled.parents[::-1]):
            if x is y and _scalar(slope) is not None:
                return _scalar(slope), _scalar(offset)
    return None


def _hardswish(node, ctx):
    """``y * clip(y * a + b, 0, 1)`` -> ``(y, (a, b))``."""
    for y, gate in (node.parents, node.parents[::-1]):
        if (gate.op.kind == "clip" and ctx.uses(gate) == 1 and gate.op.get("lo") == 0.0
                and gate.op.get("hi") == 1.0 and _conv(y, ctx, 2) is not None):
            found = _scale_shift(gate.parents[0], ctx, y)
            if found is not None:
                return y, found
    return None


#: ``multiply`` patterns that are one activation of a convolution: name -> matcher
#: ``(node, ctx) -> (the convolution, (alpha, beta)) or None``
GATES = {"swish": _swish, "hardswish": _hardswish}
#: the kinds :func:`absorbed` may rewrite
ABSORBING = frozenset({"add", "multiply"}) | frozenset(PLAIN)


def _with_activation(node, conv, activation, parameters):
    attrs = dict(conv.op.params(), activation=activation,
                 bounds=tuple(float(v) for v in parameters))
    return make(node, Op.make(NAME, **attrs), conv.parents)


def absorbed(node, ctx):
    """``node`` as a ``conv2d_nhwc`` that computes it whole (see the module), or
    ``None``.

    Example: ``absorbed(relu_node, ctx)`` -> the convolution with its ReLU"""
    if node.dtype != np.float32:
        return None
    kind = node.op.kind
    if kind in PLAIN:
        conv = _conv(node.parents[0], ctx, 1)
        parameters = PLAIN[kind](node.op)
        if conv is None or None in parameters:
            return None
        return _with_activation(node, conv, kind, parameters)
    if kind == "multiply":
        for activation, match in GATES.items():
            found = match(node, ctx)
            if found is not None:
                return _with_activation(node, found[0], activation, found[1])
        return None
    if kind != "add":
        return None
    for rule in (_bias, _residual, _bias_into_residual):
        made = rule(node, ctx)
        if made is not None:
            return made
    return None


def _residual(node, ctx):
    """``conv2d_nhwc(...) + r``, ``r`` of the result's shape (a residual block's sum) ->
    the convolution adding ``r`` itself (oneDNN's ``sum`` post-op, its result planned
    over ``r``'s memory where ``r`` dies there), before any activation taken next."""
    for conv, other in (node.parents, node.parents[::-1]):
        if (_conv(conv, ctx, 1, residual_ok=False) is not None and other.shape == node.shape
                and conv.shape == node.shape and other.dtype == np.float32):
            return make(node, conv.op, list(conv.parents) + [other])
    return None


def _bias(node, ctx):
    """``conv2d_nhwc(...) + b``, ``b`` per channel -> the same with ``b`` added to its bias
    (not once it adds a residual: the graph adds ``b`` after the residual)."""
    convs = [p for p in node.parents if _conv(p, ctx, 1, residual_ok=False) is not None
             and p.shape == node.shape]
    if not convs:
        return None
    conv = convs[0]
    (other,) = [p for p in node.parents if p is not conv] or [None]
    channels = node.shape[-1]
    if (other is None or other.dtype != np.float32 or math.prod(other.shape) != channels
            or (other.shape and other.shape[-1] != channels)):
        return None
    ns = NodeNamespace(node)
    x, w, bias = conv.parents
    return make(node, conv.op, [x, w, ns.add(bias, ns.reshape(other, (channels,)))])


def _bias_into_residual(node, ctx):
    """``conv2d_nhwc(x, w, c, r) + b`` where ``r`` is another convolution's bare result
    read only there, or a chain of such sums (a convolution split over its input's
    parts, :mod:`.split_concat`) -> ``b`` joins the bias of the chain's first
    convolution: the same sum, taken in another order, written once."""
    for conv, other in (node.parents, node.parents[::-1]):
        if _summing(conv, ctx):
            made = _bias_down(conv.parents[3], other, node, ctx)
            if made is not None:
                return make(node, conv.op, list(conv.parents[:3]) + [made])
    return None


def _summing(conv, ctx) -> bool:
    """Whether ``conv`` is a ``conv2d_nhwc`` adding a residual, with no activation, read
    once."""
    return (conv.op.kind == NAME and len(conv.parents) == 4 and not conv.op["activation"]
            and ctx.uses(conv) == 1)


def _bias_down(residual, b, like, ctx):
    """``residual`` (a chain of summing convolutions ending in a plain one) with ``b``
    in that last one's bias, or ``None``."""
    if _summing(residual, ctx):
        inner = _bias_down(residual.parents[3], b, like, ctx)
        return None if inner is None else make(like, residual.op,
                                               list(residual.parents[:3]) + [inner])
    if _conv(residual, ctx, 1, residual_ok=False) is None:
        return None
    return _bias(make(like, Op.make("add"), [residual, b]), ctx)


__all__ = ["ABSORBING", "GATES", "PLAIN", "absorbed"]
