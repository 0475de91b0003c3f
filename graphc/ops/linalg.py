"""The kinds of ``numpy.linalg`` and ``numpy.fft``. One definition each.

The factorisations and solvers are kinds (NumPy's LAPACK calls: composing them would be
wrong or far slower); everything else in ``N.linalg`` is composed of other kinds. Every
linalg kind is ``fallible``: a singular matrix, one that is not positive definite or a
factorisation that does not converge raises NumPy's ``LinAlgError`` when the graph runs,
before any variable is updated. ONNX has ``Det`` (and ``DFT``); the rest is refused.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["inv"].fallible, DEFINITIONS["svd"].attributes
(True, ())
"""
from __future__ import annotations

from ..algodiff import linalg as grads
from ..algodiff.fft import fft_grad
from ..engine import linalg_kernels as kernels
from ..engine.fft_kernels import fft as fft_kernel
from ..onnx import export_ops as onnx
from ..shape import linalg_rules as shapes
from ..shape.fft_rules import fft as fft_shape
from ..algodiff.rules import DIRECT, HOLOMORPHIC
from .definition import OpDef, Refused, define


def _no_onnx(what):
    return Refused(f"ONNX has no {what} operator")


def linalg_op(name, arity, *, shape, kernel, grad, onnx_export=None, reference=None,
              complex_grad=None):
    """A kind of ``numpy.linalg``: may fail at run time; ONNX refused unless given.

    Example: ``linalg_op("inv", 1, shape=shapes.inv, kernel=kernels.inv, grad=...)``
    """
    # the kernels hand their operands to NumPy when they run, whatever their strides
    return OpDef(name, "linalg", arity, reference or f"numpy.linalg.{name}", shape=shape,
                 kernel=kernel, grad=grad, complex_grad=complex_grad, fallible=True,
                 reads_strided=True,
                 onnx=onnx_export or _no_onnx(f"matrix {name}"))


define(
    linalg_op("inv", 1, shape=shapes.inv, kernel=kernels.inv, grad=grads.inv_grad,
              complex_grad=HOLOMORPHIC,
              onnx_export=Refused("ONNX has no matrix inverse operator (Inverse is a "
                                  "com.microsoft contrib op)")),
    linalg_op("solve", 2, shape=shapes.solve, kernel=kernels.solve, grad=grads.solve_grad,
              complex_grad=HOLOMORPHIC),
    linalg_op("det", 1, shape=shapes.det, kernel=kernels.det, grad=grads.det_grad,
              complex_grad=HOLOMORPHIC,
              onnx_export=onnx.unary_exporter("Det")),
    linalg_op("cholesky", 1, shape=shapes.cholesky, kernel=kernels.cholesky,
              grad=grads.cholesky_grad),
    linalg_op("pinv", 1, shape=shapes.pinv, kernel=kernels.pinv, grad=grads.pinv_grad),
    linalg_op("slogdet", 1, shape=shapes.packed, kernel=kernels.packed,
              grad=grads.slogdet_grad),
    linalg_op("qr", 1, shape=shapes.packed, kernel=kernels.packed, grad=grads.qr_grad),
    linalg_op("svd", 1, shape=shapes.packed, kernel=kernels.packed, grad=grads.svd_grad),
    linalg_op("eigh", 1, shape=shapes.packed, kernel=kernels.packed, grad=grads.eigh_grad),
    # always complex; its rule is written in the convention of complex cotangents
    linalg_op("eig", 1, shape=shapes.packed, kernel=kernels.packed, grad=grads.eig_grad,
              complex_grad=DIRECT),
)

define(
    # every transform of numpy.fft: attributes transform, axes, lengths, norm
    # (graphc/shape/fft_rules.py); its gradient is the adjoint transform
    OpDef("fft", "linalg", 1, "numpy.fft.fftn", shape=fft_shape, kernel=fft_kernel,
          grad=fft_grad, complex_grad=DIRECT, reads_strided=True,
          onnx=Refused("not exported yet: ONNX's DFT holds complex values as (real, "
                       "imaginary) pairs on a last axis, which graphc's complex values "
                       "would need converting to and from")),
)
