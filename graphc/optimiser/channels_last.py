"""Depthwise convolutions channels last, with the transposes around them absorbed.

NCHW suits a GEMM's convolution but not a depthwise one: its planes (7x7 and 14x14 in
MobileNets) are too short for vector loops, while its hundreds of channels, stored
last, are one vector per cell (:mod:`graphc.engine.numba_channels_last`). So where
the generated kernels run, a depthwise ``conv2d`` with at least :data:`MIN_CHANNELS`
channels becomes ``transpose(depthwise_conv2d_nhwc(x'), NCHW)``, where ``x'`` is its
input channels last, and the transposes are moved away until they vanish:

- *Upwards*, ``x'`` is built from ``x``'s own producers where they are used only
  here: an elementwise op (a bias, an activation) is applied to its operands channels
  last (a per-channel operand ``(C, 1, 1)`` is reshaped to ``(1, 1, C)``), and the GEMM
  of a lowered convolution, ``reshape(W @ X, NCHW)``, computes its transpose
  ``X^T @ W^T`` instead, the same product with its operands' flags swapped (a 1x1
  convolution kept whole becomes that GEMM on views of its input and kernel): the
  previous 1x1 convolution writes the depthwise one's input channels last, at no cost.
  Anything else is transposed (a copy).
- *Downwards*, a transpose to NCHW passes through the elementwise ops that read it
  (their other NCHW operands transposed instead, as a residual sum's input image),
  into the reductions over the image (a global average pool) and into the reshape of
  the next lowered 1x1 convolution, whose GEMM then reads it as a transposed operand
  (a flag, :data:`~.fusion.MATMUL_TRANSPOSE`).

In an inverted-residual block (1x1, bias and ReLU6, depthwise, bias and ReLU6, 1x1) no
transpose is left. Nothing here changes a value: the depthwise kernel sums as the NCHW
one does, and a GEMM's transpose is the same dot products (in BLAS's order, which may
differ in the last bits).

>>> import numpy as np, graphc.ndarray as N
>>> from graphc.optimiser.rewriter import rewrite
>>> x = N.var("x", (1, 64, 8, 8))
>>> w = N.var("w", (64, 1, 3, 3))     # a kernel that changes: not oneDNN's (conv_nhwc)
>>> y = N.relu(N.conv2d(N.relu(x), w, padding=1, groups=64))
>>> out = rewrite([y], CHANNELS_LAST.function)[0][0]
>>> out.op.kind, out.parents[0].op.kind, out.parents[0].parents[0].op.kind
('transpose', 'relu', 'depthwise_conv2d_nhwc')
"""
from __future__ import annotations

import math

import numpy as np

from ..type.kinds import is_elementwise, is_leaf
from ..type.op import Op
from .build import make, make_const
from .conv_activations import ABSORBING, absorbed
from .lowering import NodeNamespace, native_conv, native_product
from .rewriter import Pass
from .split_concat import split_over_parts

#: the fewest channels a depthwise convolution needs to run channels last: below, the
#: vectors along the channels are too short for the per-cell loops to pay (32 channels
#: at 112x112 took 600 us channels last, 110 us in NCHW planes; 72 at 56x56 with
#: stride 2, 42 against 125 us)
MIN_CHANNELS = 64
#: the fewest channels for float32 windows whose kernel holds its taps in vector
#: registers (:mod:`graphc.engine.numba_depthwise_vectors`, whose ``WINDOWS`` these
#: are): from 24 channels those beat the NCHW kernels (mnasnet0_5's 48 channels at
#: 56x56, 3x3: 38 against 55 us; 5x5 with stride 2: 34 against 72; 16 at 112x112 did
#: not pay, 64 against 54)
MIN_CHANNELS_VECTOR = {(3, 3): 24, (5, 5): 24}
#: the fewest image cells per kernel element (per output channel and tap) for which a
#: per-channel scale of a convolution's image moves onto its kernel
#: (:func:`_channel_scaled`): the kernel is then made each run, unpacked
SCALED_MIN_CELLS = 2
#: the axes of a transpose from NCHW to channels last, and back
TO_NHWC, TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)
_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
#: the channels-last kind of each NCHW pooling (:mod:`graphc.ops.pool_nhwc` defines them)
NHWC_OF = {"max_pool2d": "max_pool2d_nhwc", "avg_pool2d": "avg_pool2d_nhwc"}
_REDUCTIONS = frozenset({"mean", "sum", "max", "min"})


def _transposed(node, axes) -> bool:
    return node.op.kind == "transpose" and tuple(node.op["axes"]) == axes


def depthwise(node) -> bool:
    """Whether ``node`` is a ``conv2d`` this pass runs channels last: one input and one
    output channel per group, float32/float64, at least :data:`MIN_CHANNELS` of them
    (:data:`MIN_CHANNELS_VECTOR` for float32 windows in that table).

    >>> import graphc.ndarray as N
    >>> x = N.var("x", (1, 64, 8, 8))
    >>> depthwise(N.conv2d(x, N.var("w", (64, 1, 3, 3)), groups=64))
    True
    >>> depthwise(N.conv2d(x, N.var("w", (64, 64, 3, 3))))
    False
    """
    if node.op.kind != "conv2d" or node.dtype not in _DTYPES:
        return False
    x, w = node.parents
    channels = x.shape[1]
    if len(x.shape) != 4 or node.op["groups"] != channels or w.shape[:2] != (channels, 1):
        return False
    fewest = MIN_CHANNELS
    if node.dtype == np.float32:
        fewest = MIN_CHANNELS_VECTOR.get(tuple(w.shape[2:]), MIN_CHANNELS)
    return channels >= fewest


def _wide(node) -> bool:
    """Whether the depthwise ``node`` has :data:`MIN_CHANNELS` channels, so pays for a
    transpose of its input; a narrower one runs channels last only where its input
    comes so at no cost (:func:`_free_nhwc`: ghostnet's, which the next concatenation
    also reads, took 0.7 ms more in transposes than its kernels saved)."""
    return node.parents[0].shape[1] >= MIN_CHANNELS


# -- upwards: the input channels last ----------------------------------------------------------
def _broadcast_nhwc(p, ns):
    """An operand ``p`` of an elementwise op on NCHW images, channels last: a scalar as
    it is, a per-channel one reshaped (the same order of elements), else transposed."""
    if len(p.shape) == 0:
        return p
    if len(p.shape) < 4:          # broadcast: the missing leading axes are ones
        p = ns.reshape(p, (1,) * (4 - len(p.shape)) + tuple(p.shape))
    n, c, h, w = p.shape
    if h == w == 1:
        return ns.reshape(p, (n, 1, 1, c))
    return ns.transpose(p, TO_NHWC)


def _operand_nhwc(p, shape, ctx, ns, inside, made):
    """Operand ``p`` of an elementwise op of NCHW ``shape``, channels last."""
    if p.shape == shape:
        return _nhwc(p, ctx, ns, inside, made)
    return _broadcast_nhwc(p, ns)


def _weights_transposed(w, transposed: bool, ns):
    """``(operand, flag)`` giving a GEMM ``op(w)^T``, where ``op(w)`` is ``w`` (or ``w^T``
    when ``transposed``): a constant's transpose is made a contiguous constant (folding
    makes it once), since OpenBLAS reads ``X @ Wt`` faster than ``X @ W^T`` by a flag
    (the (49 x 320) @ (320 x 1280) of a MobileNet: 228 against 299 us)."""
    if transposed:
        return w, False
    if w.op.kind == "const" and len(w.shape) == 2:
        return ns.transpose(w, (1, 0)), False
    return w, True


def _image_product(x, ctx):
    """The product ``A @ B`` where ``x`` is ``reshape(A @ B, (N, C, H, W))`` and nothing
    else reads it, else ``None``."""
    m = x.parents[0]
    n, c, h, w = x.shape
    if (m.op.kind != "matmul" or ctx.uses(m) != 1 or len(m.shape) not in (2, 3)
            or tuple(m.shape[-2:]) != (c, h * w) or math.prod(m.shape[:-2]) != n):
        return None
    return m


def _gemm_nhwc(x, ctx, ns):
    """``x`` = ``reshape(A @ B, (N, C, H, W))`` channels last, ``reshape(B^T @ A^T, (N, H,
    W, C))``, where the product is used only there; else ``None``."""
    m = _image_product(x, ctx)
    if m is None:
        return None
    n, c, h, w = x.shape
    a, b = m.parents
    attrs = m.op.params()
    weights, flag = _weights_transposed(a, attrs.get("trans_a", False), ns)
    swapped = dict(attrs, trans_a=not attrs.get("trans_b", False), trans_b=flag)
    product = make(m, Op.make("matmul", **swapped), [b, weights])
    return ns.reshape(product, (n, h, w, c))


def _pointwise(conv) -> bool:
    """Whether the ``conv2d`` node ``conv`` is a GEMM: 1x1, stride 1, unpadded, one group."""
    return (conv.parents[1].shape[2:] == (1, 1) and conv.op["groups"] == 1
            and conv.op["stride"] == (1, 1) and all(p == (0, 0) for p in conv.op["padding"]))


def _pointwise_nhwc(x, ns):
    """``x`` = a 1x1 ``conv2d`` (stride 1, no padding, one group) channels last: the
    GEMM ``X^T @ W^T`` on reshapes (views) of its input and kernel; else ``None``."""
    image, kernel = x.parents
    n, c, h, w = image.shape
    o = kernel.shape[0]
    if not _pointwise(x):
        return None
    columns = ns.reshape(image, (n, c, h * w))
    weights, flag = _weights_transposed(ns.reshape(kernel, (o, c)), False, ns)
    product = make(x, Op.make("matmul", trans_a=True, trans_b=flag), [columns, weights])
    return ns.reshape(product, (n, h, w, o))


def _convertible(x) -> bool:
    return not is_leaf(x.op.kind) and is_elementwise(x.op.kind) and x.op.kind != "fused"


def _inside(x, ctx) -> set:
    """The ids of the elementwise values above ``x`` (``x`` included) that can be made
    channels last: every consumer of each is one of them or the convolution, so none
    is needed in NCHW any more (an activation ``a * sigmoid(a)`` reads ``a`` twice)."""
    reached, inside, stack = {}, set(), [x]
    while stack:
        node = stack.pop()
        reached[id(node)] = reached.get(id(node), 0) + 1
        if reached[id(node)] == ctx.uses(node) and _convertible(node):
            inside.add(id(node))
            stack.extend(p for p in node.parents if p.shape == node.shape)
    return inside


def _free_nhwc(x, ctx, inside=None) -> bool:
    """Whether :func:`_nhwc` makes ``x`` channels last with no transpose of an image:
    ``x`` is one already, or its producers (a GEMM's output, through elementwise ops
    only the convolution needs) can write it channels last."""
    inside = _inside(x, ctx) if inside is None else inside
    if _transposed(x, TO_NCHW):
        return True
    if id(x) in inside:
        return all(_free_nhwc(p, ctx, inside) for p in x.parents if p.shape == x.shape)
    if is_leaf(x.op.kind) or ctx.uses(x) != 1:
        return False
    if _poolable(x):
        return _free_nhwc(x.parents[0], ctx)
    return ((x.op.kind == "reshape" and _image_product(x, ctx) is not None)
            or (x.op.kind == "conv2d" and _pointwise(x)))


def _nhwc(x, ctx, ns, inside=None, made=None):
    """The NCHW value ``x`` channels last, made from its producers where only the
    convolution being converted needs them (``inside``: :func:`_inside`)."""
    inside = _inside(x, ctx) if inside is None else inside
    made = {} if made is None else made
    if id(x) in made:
        return made[id(x)]
    if _transposed(x, TO_NCHW):
        result = x.parents[0]
    elif id(x) in inside:
        result = make(x, x.op, [_operand_nhwc(p, x.shape, ctx, ns, inside, made)
                                for p in x.parents])
    else:
        result = None
        if not is_leaf(x.op.kind) and ctx.uses(x) == 1:
            result = (_gemm_nhwc(x, ctx, ns) if x.op.kind == "reshape" else
                      _pointwise_nhwc(x, ns) if x.op.kind == "conv2d" else None)
            if _poolable(x) and _free_nhwc(x.parents[0], ctx):
                result = _pool_nhwc(x, _nhwc(x.parents[0], ctx, ns))
        if result is None:
            result = ns.transpose(x, TO_NHWC)
    made[id(x)] = result
    return result


def _convert(node, ctx):
    x, w = node.parents
    c, (kh, kw) = x.shape[1], w.shape[2:]
    ns = NodeNamespace(node)
    taps = ns.transpose(ns.reshape(w, (c, kh, kw)), (1, 2, 0))
    op = Op.make("depthwise_conv2d_nhwc", stride=node.op["stride"],
                 padding=node.op["padding"], dilation=node.op["dilation"])
    y = make(node, op, [_nhwc(x, ctx, ns), taps])
    return make(node, Op.make("transpose", axes=TO_NCHW), [y])


def _convert_native(node, ctx):
    """A ``conv2d`` a native kernel takes (:func:`~.lowering.native_conv`) ->
    ``transpose(conv2d_nhwc(x', W'), NCHW)``: ``W'`` its constant kernel packed in the
    layout oneDNN's primitive reads (``conv2d_nhwc_pack``, folded once; the compiled
    graph then holds the weights once, packed: ``graphc.compile``), a zero bias that the
    bias added next joins (:func:`.conv_activations.absorbed`)."""
    x, w = node.parents
    ns = NodeNamespace(node)
    bias = make_const(node, np.zeros(w.shape[0], node.dtype))
    o, cg, kh, kw = w.shape
    n, _, oh, ow = node.shape
    image = _nhwc(x, ctx, ns)
    hwio = (kh, kw, cg, o)
    scaled = _channel_scaled(node, image, ctx)
    attrs = dict(stride=node.op["stride"], padding=node.op["padding"],
                 dilation=node.op["dilation"], groups=node.op["groups"])
    if scaled is not None:      # the image's scale moves onto the kernel, made each run
        image, scale = scaled
        kernel = make(node, Op.make("multiply"), [
            ns.transpose(w, (2, 3, 1, 0)), ns.reshape(scale, (1, 1, cg, 1))])
        hwio = ()
    else:
        pack = Op.make("conv2d_nhwc_pack", image=image.shape, out=(n, oh, ow, o),
                       kernel=hwio, **attrs)
        kernel = make(node, pack, [w])      # folded once
    op = Op.make("conv2d_nhwc", activation="", bounds=(0.0, 0.0), packed=hwio, **attrs)
    y = make(node, op, [image, kernel, bias])
    return make(node, Op.make("transpose", axes=TO_NCHW), [y])


def _poolable(node) -> bool:
    """Whether ``node`` is a float32/float64 pooling with a channels-last kind."""
    return node.op.kind in NHWC_OF and node.dtype in _DTYPES


def _pool_nhwc(node, image):
    """The pooling ``node`` of the channels-last ``image`` (its input, transposed)."""
    return make(node, Op.make(NHWC_OF[node.op.kind], **node.op.params()), [image])


def _channel_scaled(conv, image, ctx):
    """``(z, s)`` where the channels-last ``image`` of the ``conv2d`` ``conv`` is ``z * s``,
    ``s`` one factor per channel of the one image (a squeeze-and-excitation block's
    gate), read by nothing else, and the kernel is small beside the image: then the
    convolution of ``z`` by the kernel times ``s`` (per input channel, made each run)
    gives the same sums, each term rounded once more or less, and saves a pass over the
    image (EfficientNet-B0's gates took 2.0 of its 11.7 ms, at memory speed); else
    ``None``."""
    x, w = conv.parents
    o, cg, kh, kw = w.shape
    n, h, width, c = image.shape
    if (image.op.kind != "multiply" or n != 1 or conv.op["groups"] != 1
            or ctx.uses(x) != 1 or ctx.uses(image) != 1
            or h * width < SCALED_MIN_CELLS * o * kh * kw):
        return None
    for z, s in (image.parents, image.parents[::-1]):
        if z.shape == image.shape and tuple(s.shape) == (1, 1, 1, c) and z.dtype == s.dtype:
            return z, s
    return None


def _convert_product(node):
    """A ``matmul`` a native kernel takes (:func:`~.lowering.native_product`), ``A @ B``
    with ``B`` a constant ``(K, N)`` -> ``reshape(conv2d_nhwc(A', B'), ...)``: ``A``'s rows
    as a ``(1, 1, M, K)`` image, ``B`` packed as a 1x1 kernel (folded once, straight from
    the constant, so the compiled graph holds it once), a zero bias the bias added next
    joins through the reshape."""
    a, b = node.parents
    ns = NodeNamespace(node)
    rows, k, n = math.prod(a.shape[:-1]), a.shape[-1], node.shape[-1]
    image = ns.reshape(a, (1, 1, rows, k))
    attrs = dict(stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1)
    pack = Op.make("conv2d_nhwc_pack", image=image.shape, out=(1, 1, rows, n),
                   kernel=(1, 1, k, n), matrix="nk" if node.op.get("trans_b") else "kn",
                   **attrs)
    op = Op.make("conv2d_nhwc", activation="", bounds=(0.0, 0.0), packed=(1, 1, k, n),
                 **attrs)
    bias = make_const(node, np.zeros(n, node.dtype))
    y = make(node, op, [image, make(node, pack, [b]), bias])
    return ns.reshape(y, node.shape)


def _product_rows(x, ctx):
    """The ``conv2d_nhwc`` of a product's rows (:func:`_convert_product`) that ``x``
    reshapes back, read by nothing else, else ``None``."""
    if x.op.kind != "reshape" or ctx.uses(x) != 1:
        return None
    conv = x.parents[0]
    if (conv.op.kind != "conv2d_nhwc" or ctx.uses(conv) != 1 or conv.shape[:2] != (1, 1)
            or x.shape[-1] != conv.shape[-1]):
        return None
    return conv


def _into_product(node, ctx):
    """``relu(reshape(y))``, ``reshape(y) + b`` (``b`` one value or one per column), ``y``
    a product's rows as a convolution -> the same applied to ``y``, then reshaped: the
    convolution then takes the bias and the ReLU (:mod:`.conv_activations`)."""
    for k, p in enumerate(node.parents):
        conv = _product_rows(p, ctx)
        if conv is None or p.shape != node.shape:
            continue
        others = [q for i, q in enumerate(node.parents) if i != k]
        channels = conv.shape[-1]
        # one value, or one per column: (N, 1) is one per row, whatever N is
        if not all(math.prod(q.shape) == 1 or (math.prod(q.shape) == channels
                                               and q.shape[-1] == channels)
                   for q in others):
            return None
        ns = NodeNamespace(node)
        operands = [conv if i == k else (q if math.prod(q.shape) == 1 else
                                         ns.reshape(q, (channels,)))
                    for i, q in enumerate(node.parents)]
        return ns.reshape(make(node, node.op, operands), node.shape)
    return None


# -- downwards: the transposes back to NCHW pass on ------------------------------------------
def _elementwise_down(node):
    """``e(transpose(a), b...)`` -> ``transpose(e(a, b'...))``: every other operand ``b`` a
    scalar, the same kind of transpose (``b' = `` what it transposes), per-channel
    (reshaped), or an NCHW image (transposed: read strided once here, where the
    transpose left behind would be read strided anyway)."""
    shape = node.shape
    if len(shape) != 4 or not any(_transposed(p, TO_NCHW) and p.shape == shape
                                  for p in node.parents):
        return None
    ns = NodeNamespace(node)
    operands = []
    for p in node.parents:
        transposed = _transposed(p, TO_NCHW) and len(p.shape) == 4
        operands.append(p.parents[0] if transposed else _broadcast_nhwc(p, ns))
    return ns.transpose(make(node, node.op, operands), TO_NCHW)


def _concatenate_down(node):
    """``concatenate(transpose(z1), transpose(z2)..., axis=1)`` of images -> ``transpose(
    concatenate(z1, z2..., axis=3))``: an inception block's or a dense block's branches
    joined channels last, so the next convolution reads them without a transpose."""
    axis = node.op["axis"]
    if (len(node.shape) != 4 or axis is None or axis % 4 != 1
            or not all(_transposed(p, TO_NCHW) for p in node.parents)):
        return None
    joined = make(node, Op.make("concatenate", axis=3), [p.parents[0] for p in node.parents])
    return NodeNamespace(node).transpose(joined, TO_NCHW)


def _reshape_down(node):
    """``reshape(transpose(z), (N, C, H*W))`` -> ``transpose(reshape(z, (N, H*W, C)))``
    (a 1x1 convolution's GEMM operand: the transpose becomes a GEMM flag); any reshape of
    a transpose of an image of one cell is a reshape of ``z``."""
    (t,) = node.parents
    if not _transposed(t, TO_NCHW):
        return None
    z = t.parents[0]
    n, h, w, c = z.shape
    ns = NodeNamespace(node)
    if h == w == 1:
        return ns.reshape(z, node.shape)
    if tuple(node.shape) == (n, c, h * w):
        return ns.transpose(ns.reshape(z, (n, h * w, c)), (0, 2, 1))
    return None


def _rows_of(m):
    """The ``(N, HW, C)`` rows a product ``A @ B^T`` reads as its ``B``: the operand under
    a transposed ``B`` (a flag or a transpose node), or ``None``."""
    a, b = m.parents
    if m.op.get("trans_b", False):
        return b
    if b.op.kind == "transpose" and len(b.shape) >= 2 and tuple(b.op["axes"]) == \
            tuple(range(len(b.shape) - 2)) + (len(b.shape) - 1, len(b.shape) - 2):
        return b.parents[0]
    return None


def _product_down(node, ctx):
    """``reshape(W @ Z^T, (N, O, H, W))``, a 1x1 convolution's GEMM reading channels-last
    rows ``Z``, -> ``transpose(reshape(Z @ W^T, (N, H, W, O)))``: the product written
    channels last too, and the transpose passed on to its consumers (an inverted
    residual's sum, the next block's GEMM), so a MobileNet's blocks stay channels last."""
    (m,) = node.parents
    if m.op.kind != "matmul" or ctx.uses(m) != 1 or len(node.shape) != 4:
        return None
    rows = _rows_of(m)
    n, o, h, w = node.shape
    if rows is None or len(m.shape) not in (2, 3) or tuple(m.shape[-2:]) != (o, h * w) \
            or math.prod(m.shape[:-2]) != n or tuple(rows.shape[-2:])[0] != h * w:
        return None
    ns = NodeNamespace(node)
    weights, flag = _weights_transposed(m.parents[0], m.op.get("trans_a", False), ns)
    attrs = dict(m.op.params(), trans_a=False, trans_b=flag)
    product = make(m, Op.make("matmul", **attrs), [rows, weights])
    return ns.transpose(ns.reshape(product, (n, h, w, o)), TO_NCHW)


def _pointwise_down(node):
    """A 1x1 ``conv2d`` (kept whole) of ``transpose(z)`` -> the same GEMM channels last."""
    image, kernel = node.parents
    if not _transposed(image, TO_NCHW) or not _pointwise(node):
        return None
    ns = NodeNamespace(node)
    z = image.parents[0]
    n, h, w = z.shape[:3]
    o = kernel.shape[0]
    # the GEMM read z through the transpose's reshape: read it directly instead
    columns = ns.reshape(z, (n, h * w, z.shape[3]))
    weights, flag = _weights_transposed(ns.reshape(kernel, (o, z.shape[3])), False, ns)
    product = make(node, Op.make("matmul", trans_b=flag), [columns, weights])
    return ns.transpose(ns.reshape(product, (n, h, w, o)), TO_NCHW)


def _pool_down(node):
    """A pooling of ``transpose(z)`` -> ``transpose(`` the same pooling channels last ``)``:
    between channels-last convolutions (GoogLeNet's, SqueezeNet's max pools) no transpose
    is left around it."""
    (t,) = node.parents
    if not (_transposed(t, TO_NCHW) and _poolable(node)):
        return None
    return NodeNamespace(node).transpose(_pool_nhwc(node, t.parents[0]), TO_NCHW)


def _reduction_down(node):
    """A reduction over the image of ``transpose(z)`` -> the same over ``z``'s axes 1, 2."""
    (t,) = node.parents
    axis = node.op.get("axis")
    if not _transposed(t, TO_NCHW) or axis is None:
        axes = None
    else:
        axes = tuple(sorted(a % 4 for a in (axis if isinstance(axis, tuple) else (axis,))))
    if axes != (2, 3):
        return None
    attrs = dict(node.op.params(), axis=(1, 2))
    reduced = make(node, Op.make(node.op.kind, **attrs), [t.parents[0]])
    return reduced if reduced.shape == node.shape else \
        NodeNamespace(node).reshape(reduced, node.shape)


def _rewrite(node, ctx):
    kind = node.op.kind
    if kind == "conv2d":
        if native_conv(node):
            split = split_over_parts(node, ctx)
            return split if split is not None else _convert_native(node, ctx)
        if depthwise(node) and (_wide(node) or _free_nhwc(node.parents[0], ctx)):
            return _convert(node, ctx)
        return _pointwise_down(node)
    if kind == "matmul" and native_product(node):
        return _convert_product(node)
    if kind in ABSORBING:
        made = absorbed(node, ctx)
        if made is not None:
            return made
        if kind in ("add", "relu"):
            made = _into_product(node, ctx)
            if made is not None:
                return made
    if kind == "concatenate":
        return _concatenate_down(node)
    if kind in NHWC_OF:
        return _pool_down(node)
    if kind == "reshape":
        made = _reshape_down(node)
        return made if made is not None else _product_down(node, ctx)
    if kind in _REDUCTIONS:
        return _reduction_down(node)
    if is_elementwise(kind) and kind != "fused":
        return _elementwise_down(node)
    return None


CHANNELS_LAST = Pass(
    "channels_last", function=_rewrite,     # remakes elementwise ops and reductions: any kind
    doc="depthwise conv2d -> channels last, the transposes around it absorbed by the "
        "GEMMs and elementwise ops next to it")

__all__ = ["CHANNELS_LAST", "MIN_CHANNELS", "MIN_CHANNELS_VECTOR", "NHWC_OF", "depthwise"]
