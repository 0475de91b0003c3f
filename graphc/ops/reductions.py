"""The reductions and the linear-algebra products. One definition each.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["max"].names, DEFINITIONS["matmul"].overwrites
(('max', 'amax'), ())
"""
from __future__ import annotations

from ..algodiff import reductions as grads
from ..engine import cpu_kernels as kernels
from ..engine import numba_kernels as generated
from ..onnx import export_ops as onnx
from ..shape import rules as shapes
from .definition import NO_GRADIENT, OpDef, define


def reduction(name, *, grad, onnx_export, names=None, kernel=kernels.reduction,
              generated=None) -> OpDef:
    """A reduction over ``axis`` (a sorted tuple or None) with ``keepdims``, computed
    by ``numpy.<name>``; ``N.<name>`` and any other ``names`` build it.

    Example: ``reduction("sum", grad=grads.sum_grad, onnx_export=reduction_exporter("ReduceSum"))``
    """
    return OpDef(name, "reduction", 1, f"numpy.{name}", shape=shapes.reduction, kernel=kernel,
                 generated=generated, grad=grad, onnx=onnx_export,
                 names=(name,) if names is None else names)


define(
    reduction("sum", grad=grads.sum_grad, onnx_export=onnx.reduction_exporter("ReduceSum"),
              generated=generated.reduction_kernel),
    reduction("prod", grad=grads.prod_grad, onnx_export=onnx.reduction_exporter("ReduceProd")),
    reduction("max", names=("max", "amax"), grad=grads.extreme_grad,
              onnx_export=onnx.reduction_exporter("ReduceMax"), generated=generated.reduction_kernel),
    reduction("min", names=("min", "amin"), grad=grads.extreme_grad,
              onnx_export=onnx.reduction_exporter("ReduceMin"), generated=generated.reduction_kernel),
    reduction("mean", grad=grads.mean_grad, onnx_export=onnx.reduction_exporter("ReduceMean"),
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
          grad=grads.matmul_grad, onnx=onnx.matmul_export, names=("matmul",)),
    OpDef("dot", "linalg", 2, "numpy.dot", shape=shapes.dot, kernel=kernels.dot,
          grad=grads.dot_grad, onnx=onnx.dot_export, names=("dot",)),
    OpDef("einsum", "linalg", 2, "numpy.einsum", shape=shapes.einsum, kernel=kernels.einsum,
          grad=grads.einsum_grad, onnx=onnx.einsum_export, names=("einsum",)),
)
