"""The reductions and the linear-algebra products. One definition each.

The optimiser's ``fused_reduce`` (with generated kernels: a reduction and the
elementwise program feeding it in one node, :mod:`graphc.optimiser.fuse_reduce`) is
defined here too: its kernels are :mod:`graphc.engine.fused_reduce`'s and
:func:`graphc.engine.numba_kernels.fused_reduce_kernel`; its gradient and ONNX
export replay the program, then the reduction.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["max"].names, DEFINITIONS["matmul"].overwrites
(('max', 'amax'), ())
"""
from __future__ import annotations

from ..algodiff import reductions as grads
from ..algodiff.rules import DIRECT, HOLOMORPHIC
from ..engine import cpu_kernels as kernels
from ..engine import fused_reduce as fused
from ..engine import numba_gemm
from ..engine import numba_kernels as generated
from ..onnx import export_ops as onnx
from ..onnx.export import Value
from ..type.op import Op
from ..shape import rules as shapes
from .definition import NO_GRADIENT, OpDef, define


def reduction(name, *, grad, onnx_export, names=None, kernel=kernels.reduction,
              generated=None, complex_grad=None) -> OpDef:
    """A reduction over ``axis`` (a sorted tuple or None) with ``keepdims``, computed
    by ``numpy.<name>``; ``N.<name>`` and any other ``names`` build it.

    Example: ``reduction("sum", grad=grads.sum_grad, onnx_export=reduction_exporter("ReduceSum"))``
    """
    return OpDef(name, "reduction", 1, f"numpy.{name}", shape=shapes.reduction, kernel=kernel,
                 generated=generated, grad=grad, complex_grad=complex_grad,
                 onnx=onnx_export, reads_strided=True,
                 names=(name,) if names is None else names)


define(
    reduction("sum", grad=grads.sum_grad, complex_grad=DIRECT,
              onnx_export=onnx.reduction_exporter("ReduceSum"),
              generated=generated.reduction_kernel),
    reduction("prod", grad=grads.prod_grad, complex_grad=HOLOMORPHIC,
              onnx_export=onnx.reduction_exporter("ReduceProd")),
    reduction("max", names=("max", "amax"), grad=grads.extreme_grad,
              onnx_export=onnx.reduction_exporter("ReduceMax")),
    reduction("min", names=("min", "amin"), grad=grads.extreme_grad,
              onnx_export=onnx.reduction_exporter("ReduceMin")),
    reduction("mean", grad=grads.mean_grad, complex_grad=DIRECT,
              onnx_export=onnx.reduction_exporter("ReduceMean"),
              generated=generated.reduction_kernel),
    reduction("any", grad=NO_GRADIENT, onnx_export=onnx.any_all_export),
    reduction("all", grad=NO_GRADIENT, onnx_export=onnx.any_all_export),
    reduction("argmax", kernel=kernels.arg_reduction, grad=NO_GRADIENT,
              onnx_export=onnx.arg_reduction_export),
    reduction("argmin", kernel=kernels.arg_reduction, grad=NO_GRADIENT,
              onnx_export=onnx.arg_reduction_export),
)

define(
    # trans_a / trans_b flags: transposes folded in by the optimiser
    OpDef("matmul", "linalg", 2, "numpy.matmul", shape=shapes.matmul, kernel=kernels.matmul,
          generated=numba_gemm.generated_matmul, reads_strided=True, complex_grad=HOLOMORPHIC,
          grad=grads.matmul_grad, onnx=onnx.matmul_export, names=("matmul",)),
    OpDef("dot", "linalg", 2, "numpy.dot", shape=shapes.dot, kernel=kernels.dot,
          grad=grads.dot_grad, onnx=onnx.dot_export, names=("dot",), reads_strided=True,
          complex_grad=HOLOMORPHIC),
    OpDef("einsum", "linalg", 2, "numpy.einsum", shape=shapes.einsum, kernel=kernels.einsum,
          grad=grads.einsum_grad, onnx=onnx.einsum_export, names=("einsum",),
          reads_strided=True, complex_grad=HOLOMORPHIC),
)


def _reduction_of(op) -> Op:
    """The plain reduction a ``fused_reduce`` op ends with."""
    return Op.make(op["reduce"], axis=op["axis"], keepdims=op["keepdims"])


def _fused_reduce_grad(ns, op, inputs, output, g, needs=None):
    """The reduction's rule, then the program's (:func:`fused_rule`), on the program's
    value replayed."""
    from ..algodiff.elementwise import fused_rule
    from ..algodiff.rules import GRADIENTS
    program = fused.program_op(op)
    value = ns._apply(program, inputs)
    (carried,) = GRADIENTS[op["reduce"]](ns, _reduction_of(op), [value], output, g)
    return fused_rule(ns, program, inputs, value, carried, needs)


def _fused_reduce_export(ctx, op, ins, out):
    """The program's ONNX nodes (as a ``fused`` node's), then the reduction's."""
    value = Value(ctx.fresh("fused"), tuple(op["full"]), op["dtype"])
    name = onnx.fused_export(ctx, fused.program_op(op), ins, value)
    reduction = _reduction_of(op)
    return onnx.EXPORTERS[reduction.kind](ctx, reduction, [value._replace(name=name)], out)


define(
    # made by the optimiser only (kernels="generated"): reduce(program(inputs)) with
    # attributes program, reduce (a FUSED_REDUCTIONS kind), axis, keepdims, full (the
    # program's shape), shape and dtype (the result's; the program computes in dtype)
    OpDef("fused_reduce", "reduction", None, None, shape=shapes.declared,
          kernel=fused.fused_reduce, generated=generated.fused_reduce_kernel,
          grad=_fused_reduce_grad, onnx=_fused_reduce_export),
)
