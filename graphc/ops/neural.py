"""The NCHW neural kinds: convolutions, poolings, local response normalisation,
their backward kinds, and the optimiser's ``im2col``/``col2im``. One definition each.

Each reads windows of its inputs that overlap other output cells, so none may
overwrite a parent. Their semantics are in :mod:`graphc.shape.neural` (shape
rules and window geometry), their kernels in :mod:`graphc.engine.neural_kernels`
(the convolutions': :mod:`graphc.operator.conv_gemm`'s GEMM decomposition, the one
the optimiser lowers to, bound to arrays by :mod:`.conv_kernels`) and their
gradients in :mod:`graphc.algodiff.neural`.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["conv2d"].names, DEFINITIONS["conv2d_backward_input"].onnx.reason
(('conv2d',), 'a gradient (training) op; ONNX export covers inference graphs')
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..algodiff import neural as grads
from ..engine import neural_kernels as kernels
from ..engine.window_builders import generated_window
from ..onnx import export_shape as onnx
from ..shape import neural as shapes
from ..type.errors import ShapeError
from .conv_kernels import decomposed_kernel, generated_decomposed
from .definition import OpDef, Refused, define

_BACKWARD = Refused("a gradient (training) op; ONNX export covers inference graphs")
_LOWERED = Refused("made by the optimiser's lowering; export the graph as written "
                   "(Executable.source)")


def neural(name, arity, *, shape, kernel, grad, onnx_export=_BACKWARD, names=None,
           attributes=(), generated=None) -> OpDef:
    """A kind of the ``neural`` family (``N.<name>`` builds it unless ``names`` says
    otherwise; backward kinds are refused by ONNX export unless given an exporter;
    ``generated``: its generated CPU kernel's builder, if it has one).

    Example: ``neural("lrn", 1, shape=shapes.lrn_rule, kernel=kernels.lrn, grad=grads.lrn_grad,
    onnx_export=onnx.lrn_export)``
    """
    return OpDef(name, "neural", arity, None, shape=shape, kernel=kernel, grad=grad,
                 onnx=onnx_export, names=(name,) if names is None else names,
                 attributes=attributes, generated=generated)


define(
    neural("conv2d", 2, shape=shapes.conv2d_rule, kernel=decomposed_kernel,
           grad=grads.conv2d_grad, onnx_export=onnx.conv2d_export, generated=generated_decomposed),
    neural("conv2d_backward_input", 2, shape=shapes.conv2d_backward_input_rule,
           kernel=decomposed_kernel, grad=grads.conv2d_backward_input_grad,
           generated=generated_decomposed),
    neural("conv2d_backward_kernel", 2, shape=shapes.conv2d_backward_kernel_rule,
           kernel=decomposed_kernel, grad=grads.conv2d_backward_kernel_grad,
           generated=generated_decomposed),
    neural("max_pool2d", 1, shape=shapes.pool_rule, kernel=kernels.max_pool2d,
           grad=grads.max_pool2d_grad, onnx_export=onnx.max_pool2d_export,
           generated=generated_window),
    neural("max_pool2d_backward", 3, shape=shapes.max_pool2d_backward_rule,
           kernel=kernels.max_pool2d_backward, grad=grads.max_pool2d_backward_grad,
           generated=generated_window),
    neural("avg_pool2d", 1, shape=shapes.pool_rule, kernel=kernels.avg_pool2d,
           grad=grads.avg_pool2d_grad, onnx_export=onnx.avg_pool2d_export,
           generated=generated_window),
    neural("avg_pool2d_backward", 1, shape=shapes.avg_pool2d_backward_rule,
           kernel=kernels.avg_pool2d_backward, grad=grads.avg_pool2d_backward_grad,
           generated=generated_window),
    neural("lrn", 1, shape=shapes.lrn_rule, kernel=kernels.lrn, grad=grads.lrn_grad,
           onnx_export=onnx.lrn_export),
    neural("lrn_backward", 2, shape=shapes.lrn_backward_rule, kernel=kernels.lrn_backward,
           grad=grads.second_derivative_not_implemented),
    # made by the optimiser's lowering only: convolution windows as GEMM columns
    neural("im2col", 1, shape=shapes.im2col_rule, kernel=kernels.im2col,
           grad=grads.im2col_grad, onnx_export=_LOWERED, generated=generated_window),
    neural("col2im", 1, shape=shapes.col2im_rule, kernel=kernels.col2im,
           grad=grads.col2im_grad, onnx_export=_LOWERED, generated=generated_window),
)


# -- nearest-neighbour upsampling (the feature pyramid's) -------------------------------------
# Small enough that every fact is here: shape rules, kernels, gradients, export.
def _upsample_rule(op, parents):
    (x,) = parents
    shapes.float_input("upsample_nearest2d", parents)
    n, c, h, w = shapes.nchw("upsample_nearest2d", "the input", x.shape)
    sh, sw = op["scale"]
    return (n, c, h * sh, w * sw), x.dtype


def _upsample_backward_rule(op, parents):
    (g,) = parents
    shapes.float_input("upsample_nearest2d_backward", parents)
    n, c, h, w = shapes.nchw("upsample_nearest2d_backward", "the gradient", g.shape)
    sh, sw = op["scale"]
    if h % sh or w % sw:
        raise ShapeError(f"upsample_nearest2d_backward: the gradient's spatial shape {(h, w)} "
                         f"is not a multiple of the scale {(sh, sw)}")
    return (n, c, h // sh, w // sw), g.dtype


def _blocks(array, scale):
    """``array`` (N, C, H*sh, W*sw) seen as (N, C, H, sh, W, sw): each input cell's block."""
    n, c, h, w = array.shape
    sh, sw = scale
    return array.reshape(n, c, h // sh, sh, w // sw, sw)


def _upsample_kernel(op, ins, out, ctx):
    (x,) = ins
    n, c, h, w = x.shape
    return partial(np.copyto, _blocks(out, op["scale"]), x.reshape(n, c, h, 1, w, 1))


def _upsample_backward_kernel(op, ins, out, ctx):
    blocks = _blocks(np.ascontiguousarray(ins[0]), op["scale"])
    return partial(np.sum, blocks, axis=(3, 5), out=out)


def _upsample_export(ctx, op, ins, out):
    scales = ctx.const(np.array((1.0, 1.0) + tuple(map(float, op["scale"])), np.float32))
    return ctx.op("Resize", [ins[0].name, "", scales], out=out.name, mode="nearest",
                  coordinate_transformation_mode="asymmetric", nearest_mode="floor")


define(
    neural("upsample_nearest2d", 1, shape=_upsample_rule, kernel=_upsample_kernel,
           attributes=("scale",),
           grad=lambda ns, op, inputs, output, g, needs=None: [
               ns.upsample_nearest2d_backward(g, op["scale"])],
           onnx_export=_upsample_export),
    # linear: its gradient is the upsampling of the incoming gradient
    neural("upsample_nearest2d_backward", 1, shape=_upsample_backward_rule,
           attributes=("scale",),
           kernel=_upsample_backward_kernel,
           grad=lambda ns, op, inputs, output, g, needs=None: [
               ns.upsample_nearest2d(g, op["scale"])]),
)
