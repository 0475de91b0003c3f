"""``conv2d_nhwc``: a convolution of images stored channels last, with its bias and an
optional activation, computed (float32) by oneDNN's convolution primitive
(:mod:`graphc.engine.onednn_conv`). Every fact is here: shape rule, NumPy kernel,
generated kernel's builder, gradient, export, and which convolutions it takes.

The optimiser makes it (:mod:`graphc.optimiser.channels_last`) from a float32
``conv2d`` with a constant kernel, where the generated kernels run and oneDNN has a
fast implementation for the geometry (:func:`takes`): the images ``(N, H, W, C)``,
the kernel ``(kh, kw, C / groups, O)`` (HWIO), the bias ``(O,)``, the result ``(N, OH,
OW, O)``; the ``conv2d``'s attributes, ``activation`` (a key of
:data:`graphc.engine.onednn_conv.ACTIVATIONS`) and ``bounds`` (its ``(alpha, beta)``: a
clip's ``(lo, hi)``). A user's graph never holds it.

>>> import numpy as np
>>> from graphc.type import Op
>>> op = Op.make("conv2d_nhwc", stride=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1),
...              groups=1, activation="", bounds=(0.0, 0.0), packed=())
>>> x, w, b = np.ones((1, 3, 3, 1), np.float32), np.ones((3, 3, 1, 2), np.float32), np.ones(2)
>>> out = np.empty((1, 3, 3, 2), np.float32)
>>> _kernel(op, [x, w, b.astype(np.float32)], out, None)(); out[0, :, 1, 0]
array([ 7., 10.,  7.], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ..algodiff.common import wants
from ..engine.cpu_kernels import KERNELS, work_array
from ..engine.onednn_conv import activate
from ..optimiser.lowering import NATIVE_CONVOLUTIONS, NATIVE_PRODUCTS
from ..shape.neural import conv_output_shape, float_input
from ..type.errors import ShapeError
from ..type.op import Op
from .definition import OpDef, Refused, define

NAME = "conv2d_nhwc"
#: the fewest input channels per group oneDNN's primitive takes, but in a depthwise
#: convolution (one per group, its "brdgmm_dw" kernel: 28x28x72 5x5 24 us against 58 for
#: the generated one, 7x7x576 12 against 27): an image's 3 (a stem), its input transposed
#: to channels last by a generated copy (1x3x224x224: 57 us), against im2col and a GEMM:
#: ResNet18's 7x7 stem 2.2 -> 1.4 ms, MnasNet's 3x3 0.23 -> 0.14 (session 14 had measured
#: the 7x7 at 3.1-4.8 ms on unpacked weights)
MIN_GROUP_CHANNELS = 3
#: the same for a grouped convolution: ResNeXt's 32 groups of 4 channels at 56x56 took
#: 370 us there, against 790 on im2col and GEMMs plus ~600 for the transposes around
MIN_GROUPED_CHANNELS = 4
#: the fewest rows of a product by a constant matrix that runs as a 1x1 convolution:
#: oneDNN's kernel reads its packed weights 1.5-2.4x faster than the GEMMs for 16 to
#: 197 rows (16 x 384 x 768: 57 against 134 us, weights from memory); one row (a
#: classifier's GEMV) ran no faster
MIN_PRODUCT_ROWS = 16
#: ... and the fewest columns of its left operand (its depth)
MIN_PRODUCT_DEPTH = 8
TO_NCHW, TO_NHWC, OIHW_TO_HWIO = (0, 3, 1, 2), (0, 2, 3, 1), (2, 3, 1, 0)


def as_conv2d(op) -> Op:
    """The NCHW ``conv2d`` op this one computes, channels last (before its bias).

    >>> as_conv2d(Op.make(NAME, stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1),
    ...                   groups=2, activation="relu", bounds=(0.0, 0.0), packed=()))["groups"]
    2
    """
    return Op.make("conv2d", stride=op["stride"], padding=op["padding"],
                   dilation=op["dilation"], groups=op["groups"])


def _rule(op, parents):
    if len(parents) not in (3, 4):
        raise ShapeError(f"{NAME}: takes an image, a kernel, a bias and optionally a "
                         f"residual; got {len(parents)} operands")
    x, w, b = parents[:3]
    dtype = float_input(NAME, parents)
    kernel = kernel_shape(op, w.shape)
    if len(x.shape) != 4 or len(kernel) != 4:
        raise ShapeError(f"{NAME}: the input must be 4-D (N, H, W, C) and the kernel 4-D "
                         f"(kh, kw, C/groups, O); got shapes {x.shape} and {w.shape}")
    if op["packed"] and len(w.shape) != 1:
        raise ShapeError(f"{NAME}: a packed kernel is 1-D (oneDNN's layout of "
                         f"{tuple(op['packed'])}); got shape {w.shape}")
    n, h, width, c = x.shape
    kh, kw, cg, o = kernel
    if b.shape != (o,):
        raise ShapeError(f"{NAME}: the bias must be ({o},), one per output channel; got "
                         f"shape {b.shape}")
    _, _, oh, ow = conv_output_shape(NAME, (n, c, h, width), (o, cg, kh, kw), as_conv2d(op))
    if len(parents) == 4 and parents[3].shape != (n, oh, ow, o):
        raise ShapeError(f"{NAME}: the residual must have the result's shape {(n, oh, ow, o)}; "
                         f"got shape {parents[3].shape}")
    return (n, oh, ow, o), dtype


def kernel_shape(op, w_shape) -> tuple:
    """The HWIO shape of a node's kernel: its input's, or the one it was packed from.

    >>> kernel_shape(Op.make(NAME, stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1),
    ...              groups=1, activation="", bounds=(0.0, 0.0), packed=(1, 1, 8, 16)), (160,))
    (1, 1, 8, 16)
    """
    return tuple(op["packed"]) or tuple(w_shape)


def _kernel(op, ins, out, ctx):
    """The NCHW ``conv2d``'s NumPy kernel on transposed copies (a packed kernel unpacked
    by oneDNN), then the bias, the residual and the activation."""
    x, w, b = ins[:3]
    residual = ins[3] if len(ins) == 4 else None
    kh, kw, cg, o = kernel_shape(op, w.shape)
    image = work_array(ctx, tuple(x.shape[i] for i in TO_NCHW), x.dtype)
    kernel = work_array(ctx, (o, cg, kh, kw), w.dtype)
    result = work_array(ctx, tuple(out.shape[i] for i in TO_NCHW), out.dtype)
    conv = KERNELS["conv2d"](as_conv2d(op), [image, kernel], result, ctx)
    if op["packed"]:
        from ..engine.onednn_conv import unpack
        shape = geometry(op, x.shape, w.shape, out.shape)

    def run():
        if op["packed"]:
            unpack(shape, w, kernel)
        else:
            np.copyto(kernel, w.transpose(3, 2, 0, 1))
        np.copyto(image, x.transpose(TO_NCHW))
        conv()
        if residual is None:
            np.add(result.transpose(TO_NHWC), b, out=out)
        else:       # out may be the residual's memory: the sum is read before written
            np.add(result.transpose(TO_NHWC), b, out=result.transpose(TO_NHWC))
            np.add(result.transpose(TO_NHWC), residual, out=out)
        if op["activation"]:
            out[...] = activate(out, op["activation"], op["bounds"])
    return run


def geometry(op, x_shape, w_shape, out_shape, residual: bool = False):
    """The :class:`~graphc.engine.onednn_conv.Geometry` of a node.

    >>> op = Op.make(NAME, stride=(2, 2), padding=((1, 1), (1, 1)), dilation=(1, 1),
    ...              groups=1, activation="relu", bounds=(0.0, 0.0), packed=())
    >>> geometry(op, (1, 8, 8, 4), (3, 3, 4, 8), (1, 4, 4, 8)).stride
    (2, 2)
    """
    from ..engine.onednn_conv import Geometry
    return Geometry(tuple(x_shape), kernel_shape(op, w_shape), tuple(out_shape),
                    tuple(op["stride"]), tuple(tuple(p) for p in op["padding"]),
                    tuple(op["dilation"]), int(op["groups"]), op["activation"],
                    tuple(float(v) for v in op.get("bounds", (0.0, 0.0))),
                    bool(op.get("packed", ())), residual)


def _generated(op, ins, out, ctx, parallel: bool):
    """oneDNN's primitive bound to the node's arrays, on every core when ``parallel``;
    ``None`` (the NumPy kernel runs) where there is none for the geometry or an array
    is not C-contiguous."""
    from ..engine import onednn_conv
    arrays = list(ins[:3]) + [out]
    if (not all(a.flags.c_contiguous and a.dtype == np.float32 for a in arrays)
            or any(a.size == 0 for a in arrays) or ins[-1].dtype != np.float32):
        return None
    shape = geometry(op, ins[0].shape, ins[1].shape, out.shape, len(ins) == 4)
    p = onednn_conv.primitive(shape)
    if isinstance(p, str) or (shape.packed and not onednn_conv.same_layout(shape)):
        return None
    from ..engine.numba_kernels import available
    threads = 1
    if parallel and available() is None:
        import numba
        threads = numba.get_num_threads()
    scratch = work_array(ctx, (max(p.scratch_bytes, 1),), np.uint8)
    return onednn_conv.BoundConv(p, *ins[:3], out, scratch, threads,
                                 ins[3] if len(ins) == 4 else None)


def takes(node) -> bool:
    """Whether a ``conv2d`` node becomes this op: float32, 4-D, a constant kernel (packed
    once, by folding), at least :data:`MIN_GROUP_CHANNELS` input channels (per group:
    :data:`MIN_GROUPED_CHANNELS`) or one (depthwise), and a fast oneDNN primitive for its
    geometry.

    >>> import graphc.ndarray as N
    >>> takes(N.conv2d(N.var("x", (1, 4, 8, 8)), N.var("w", (4, 4, 3, 3))))
    False
    """
    x, w = node.parents
    if (node.op.kind != "conv2d" or node.dtype != np.float32 or len(x.shape) != 4
            or w.op.kind != "const" or x.dtype != np.float32):
        return False
    groups = node.op["groups"]
    depthwise = w.shape[1] == 1 and groups == x.shape[1] > 1
    if w.shape[1] < (MIN_GROUPED_CHANNELS if groups > 1 else MIN_GROUP_CHANNELS) \
            and not depthwise:
        return False
    from ..engine import onednn_conv
    op = Op.make(NAME, stride=node.op["stride"], padding=node.op["padding"],
                 dilation=node.op["dilation"], groups=node.op["groups"], activation="",
                 bounds=(0.0, 0.0), packed=())
    shape = [tuple(x.shape[i] for i in TO_NHWC), tuple(w.shape[i] for i in OIHW_TO_HWIO),
             tuple(node.shape[i] for i in TO_NHWC)]
    return onednn_conv.available(geometry(op, *shape))


def takes_product(node) -> bool:
    """Whether a ``matmul`` node runs as this op, a 1x1 convolution of its rows (the
    optimiser's channels-last rewrite): float32, a constant 2-D right operand (packed once,
    by folding), at least :data:`MIN_PRODUCT_ROWS` rows and :data:`MIN_PRODUCT_DEPTH`
    columns in the left one, and a fast oneDNN primitive for it.

    >>> import graphc.ndarray as N
    >>> takes_product(N.matmul(N.var("x", (2, 8)), N.const(np.ones((8, 4), np.float32))))
    False
    """
    a, b = node.parents
    if (node.op.kind != "matmul" or node.dtype != np.float32 or a.dtype != np.float32
            or b.op.kind != "const" or len(b.shape) != 2 or len(a.shape) < 2
            or node.op.get("trans_a", False) or node.op.get("epilogue") is not None):
        return False
    rows, k = int(np.prod(a.shape[:-1])), a.shape[-1]
    if rows < MIN_PRODUCT_ROWS or k < MIN_PRODUCT_DEPTH:
        return False
    from ..engine import onednn_conv
    op = Op.make(NAME, stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1,
                 activation="", bounds=(0.0, 0.0), packed=())
    return onednn_conv.available(geometry(op, (1, 1, rows, k), (1, 1, k, node.shape[-1]),
                                          (1, 1, rows, node.shape[-1])))


def _grad(ns, op, inputs, output, g, needs=None):
    """The NCHW convolution's gradients, read channels last (the ReLU's mask first; the
    residual's is the masked gradient itself)."""
    x, w, b = inputs[:3]
    if op["packed"] and wants(needs, 1):
        raise NotImplementedError(f"{NAME}: no gradient for a kernel packed in oneDNN's "
                                  "layout (a constant, packed by the optimiser)")
    if op["activation"] == "relu":
        g = g * ns.sign(output)             # 1 where the result is positive, else 0
    elif op["activation"] == "clip":
        lo, hi = op["bounds"]
        inside = ns.logical_and(ns.greater(output, lo), ns.less(output, hi))
        g = g * ns.astype(inside, g.dtype)
    elif op["activation"]:
        raise NotImplementedError(f"{NAME}: no gradient through a fused {op['activation']} "
                                  "(the optimiser fuses it into inference graphs only)")
    kh, kw, cg, o = w.shape
    conv = dict(stride=op["stride"], padding=op["padding"], dilation=op["dilation"],
                groups=op["groups"])
    g_nchw = ns.transpose(g, TO_NCHW)
    gx = gw = gb = None
    if wants(needs, 0):
        kernel = ns.transpose(w, (3, 2, 0, 1))
        image = tuple(x.shape[i] for i in TO_NCHW)
        gx = ns.transpose(ns.conv2d_backward_input(g_nchw, kernel, image, **conv), TO_NHWC)
    if wants(needs, 1):
        gw = ns.conv2d_backward_kernel(ns.transpose(x, TO_NCHW), g_nchw, (o, cg, kh, kw),
                                       **conv)
        gw = ns.transpose(gw, OIHW_TO_HWIO)
    if wants(needs, 2):
        gb = ns.sum(g, axis=(0, 1, 2))
    return [gx, gw, gb] + ([g if wants(needs, 3) else None] if len(inputs) == 4 else [])


# -- the kernel packed in the primitive's layout ------------------------------------------------
PACK = "conv2d_nhwc_pack"


def _pack_geometry(op):
    conv = Op.make(NAME, stride=op["stride"], padding=op["padding"], dilation=op["dilation"],
                   groups=op["groups"], activation="", bounds=(0.0, 0.0), packed=())
    return geometry(conv, op["image"], op["kernel"], op["out"])


#: how a pack's input holds a 1x1 kernel as a matrix (``op["matrix"]``): a product's
#: ``(K, N)`` right operand, or its ``(N, K)`` transpose; ``""``: an OIHW kernel
MATRIX_LAYOUTS = {"": None, "kn": (1, 0), "nk": (0, 1)}


def _as_oihw(op, w):
    """The OIHW kernel a pack's input ``w`` holds (a view)."""
    axes = MATRIX_LAYOUTS[op.get("matrix", "")]
    return w if axes is None else w.transpose(axes)[:, :, None, None]


def _input_shape(op) -> tuple:
    kh, kw, cg, o = op["kernel"]
    axes = MATRIX_LAYOUTS[op.get("matrix", "")]
    return (o, cg, kh, kw) if axes is None else ((cg, o) if axes == (1, 0) else (o, cg))


def _pack_rule(op, parents):
    (w,) = parents
    if w.dtype != np.float32 or tuple(w.shape) != _input_shape(op):
        raise ShapeError(f"{PACK}: packs a float32 kernel of shape {_input_shape(op)}; got "
                         f"{w.dtype} of shape {w.shape}")
    from ..engine.onednn_conv import packed_elements
    return (packed_elements(_pack_geometry(op)),), np.dtype(np.float32)


def _pack_kernel(op, ins, out, ctx):
    """oneDNN's reorder of the conv2d kernel into the primitive's layout."""
    from ..engine.onednn_conv import pack
    shape = _pack_geometry(op)
    return lambda: pack(shape, np.ascontiguousarray(_as_oihw(op, ins[0])), out)


def _unpack(op, packed):
    """The kernel a ``conv2d_nhwc_pack`` of ``op`` laid out as ``packed`` (the same bits):
    what folding it lets a graph's owner drop (``OpKind.relayout``)."""
    from ..engine.onednn_conv import unpack
    oihw = unpack(_pack_geometry(op), packed)
    axes = MATRIX_LAYOUTS[op.get("matrix", "")]
    return oihw if axes is None else np.ascontiguousarray(oihw[:, :, 0, 0].transpose(axes))


def _pack_grad(ns, op, inputs, output, g, needs=None):
    raise NotImplementedError(f"{PACK}: no gradient (the optimiser packs constant kernels "
                              "only, after differentiation)")


define(OpDef(PACK, "neural", 1, None, relayout=_unpack, shape=_pack_rule, kernel=_pack_kernel,
             grad=_pack_grad,
             names=(), onnx=Refused("made by the optimiser's channels-last rewrite; export "
                                    "the graph as written (Executable.source)")))
define(OpDef(NAME, "neural", None, None, overwrites=(3,), shape=_rule, kernel=_kernel,
             generated=_generated,
             grad=_grad, names=(),
             onnx=Refused("made by the optimiser's channels-last rewrite; export the graph "
                          "as written (Executable.source)")))
NATIVE_CONVOLUTIONS.append(takes)
NATIVE_PRODUCTS.append(takes_product)

__all__ = ["NAME", "PACK", "kernel_shape", "MIN_GROUP_CHANNELS", "MIN_GROUPED_CHANNELS",
           "MIN_PRODUCT_ROWS", "MIN_PRODUCT_DEPTH", "as_conv2d", "geometry", "takes",
           "takes_product"]
