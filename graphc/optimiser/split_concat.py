"""A convolution of a concatenation, split into one convolution per part (the kernels
``"generated"`` pipeline's channels-last rewrite, :mod:`.channels_last`).

``conv2d(concatenate([a, b], axis=1), W)`` is ``conv2d(a, W[:, :Ca]) + conv2d(b,
W[:, Ca:])``: the input channels' sum taken in two parts. Channels last, a
concatenation interleaves its parts' short runs (GhostNet's 8 + 8 channels at 112x112:
120 us, against 20 us for the same bytes in one run), and oneDNN's convolution cannot
write into a channel slice (a strided destination gets only its reference loops). Split,
the concatenation is never made: the second convolution adds the first's result through
oneDNN's ``sum`` post-op, planned in place (:mod:`.conv_activations`). The sum is taken
in another order, so the bits may differ from the unsplit convolution's, as every
oneDNN convolution's may from the NumPy kernels'. Where the concatenation is read by
nothing else, its kernel is a constant and each part's convolution is one oneDNN takes:
SqueezeNet's Fire modules, GhostNet's ghost modules.

>>> import numpy as np, graphc.ndarray as N
>>> a, b = N.var("a", (1, 64, 8, 8)), N.var("b", (1, 64, 8, 8))
>>> w = N.const(np.ones((16, 128, 1, 1), np.float32))
>>> y = split_over_parts(N.conv2d(N.concatenate([a, b], axis=1), w), MatchContext())
>>> y.op.kind, [p.op.kind for p in y.parents]
('add', ['conv2d', 'conv2d'])
"""
from __future__ import annotations

from ..type.op import Op
from .build import constant_like, make
from .lowering import native_conv
from .pattern import MatchContext

#: the most parts split apart: each is a convolution (and a pass over the result) of its own
MAX_PARTS = 4


def split_over_parts(conv, ctx: MatchContext):
    """``conv`` (a ``conv2d`` of a concatenation along channels, as the module says) as
    the sum of one convolution per part, the last part's outermost; else ``None``.

    Example: ``split_over_parts(conv_node, ctx)``"""
    image, kernel = conv.parents
    inputs = _parts(image, ctx)
    if (inputs is None or conv.op["groups"] != 1 or kernel.op.kind != "const"
            or kernel.value is None or not 2 <= len(inputs) <= MAX_PARTS):
        return None
    parts, start = [], 0
    for part in inputs:
        channels = part.shape[1]
        # a view of the constant's array: the graph holds no second copy of the weights
        weights = constant_like(kernel, kernel.value[:, start:start + channels])
        parts.append(make(conv, conv.op, [part, weights]))
        start += channels
    if not all(native_conv(p) for p in parts):
        return None
    total = parts[0]
    for part in parts[1:]:
        total = make(conv, Op.make("add"), [part, total])
    return total


def _parts(image, ctx):
    """The NCHW parts ``image`` concatenates along channels, read by nothing else: a
    ``concatenate`` on axis 1, or one on axis 3 already moved channels last (the
    rewrite takes parents first) seen through its transpose back; else ``None``."""
    if image.op.kind == "concatenate" and image.op["axis"] == 1 and ctx.uses(image) == 1:
        return list(image.parents)
    if image.op.kind != "transpose" or image.op["axes"] != _TO_NCHW or ctx.uses(image) != 1:
        return None
    joined = image.parents[0]
    if joined.op.kind != "concatenate" or joined.op["axis"] != 3 or ctx.uses(joined) != 1:
        return None
    return [make(image, Op.make("transpose", axes=_TO_NCHW), [p]) for p in joined.parents]


_TO_NCHW = (0, 3, 1, 2)

__all__ = ["MAX_PARTS", "split_over_parts"]
