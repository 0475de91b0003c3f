"""``fused_matmul``: a GEMM and the elementwise program that reads its product, made by
the optimiser only (:mod:`graphc.optimiser.fuse_epilogue`, generated kernels). Small
enough that every fact is here.

Inputs ``[a, b, *others]``: the product's operands (flags ``trans_a``, ``trans_b``) and
the program's other inputs in order; attributes ``program`` (the ``fused`` program,
whose input ``product`` is the product, reshaped to ``shape``), ``roles`` (how each
other input lines up with the product seen as ``(rows, N)``), ``gemm`` (the product's
shape), ``shape`` and ``dtype`` (the result's). The generated kernel
(:func:`graphc.engine.numba_gemm.epilogue_kernel`) runs the program on each block of
the product right after BLAS wrote it; the NumPy kernel (the fallback) runs the two
nodes' own kernels one after the other. The gradient and ONNX export replay them.

>>> import numpy as np
>>> from graphc.type import Op
>>> relu = ((Op.make("relu"), (("in", 0),)),)
>>> op = Op.make("fused_matmul", trans_a=False, trans_b=False, program=relu, product=0,
...              roles=(), gemm=(2, 2), shape=(2, 2), dtype=np.dtype("float64"))
>>> out = np.empty((2, 2))
>>> _kernel(op, [np.eye(2), -np.ones((2, 2))], out, None)(); out
array([[0., 0.],
       [0., 0.]])
"""
from __future__ import annotations

import numpy as np

from ..engine.cpu_kernels import KERNELS, work_array
from ..onnx import export_ops as onnx
from ..onnx.export import Value
from ..shape import rules as shapes
from ..type.op import Op
from .definition import OpDef, define

NAME = "fused_matmul"


def product_op(op) -> Op:
    """The ``matmul`` of a ``fused_matmul`` op."""
    return Op.make("matmul", trans_a=op["trans_a"], trans_b=op["trans_b"])


def program_op(op) -> Op:
    """The ``fused`` op of a ``fused_matmul`` op's program."""
    return Op.make("fused", program=op["program"], shape=op["shape"], dtype=op["dtype"])


def _program_inputs(op, product, others) -> list:
    position = op["product"]
    return list(others[:position]) + [product] + list(others[position:])


def _kernel(op, ins, out, ctx):
    a, b, *others = ins
    product = work_array(ctx, tuple(op["gemm"]), out.dtype)
    gemm = KERNELS["matmul"](product_op(op), [a, b], product, ctx)
    program = KERNELS["fused"](program_op(op), _program_inputs(
        op, product.reshape(op["shape"]), others), out, ctx)

    def run():
        gemm()
        program()
    return run


def _generated(op, ins, out, ctx, parallel: bool):
    """:func:`graphc.engine.numba_gemm.epilogue_kernel` on the operands as ``matmul``'s
    kernel reads them. Where it declines, the two parts apart, each on the kernel the
    engine would give its own node: the GEMM on the generated kernels' threads, the
    program generated where it vectorises, else NumPy's calls (a GELU's ``tanh``)."""
    from ..engine.cpu_kernels import GENERATED_KERNELS, matmul_operands
    from ..engine.numba_codegen import DIALECT, vectorises
    from ..engine.numba_gemm import epilogue_kernel
    from ..engine.expressions import program_lines
    from ..engine.numba_kernels import generated_kernel
    a, b, *others = ins
    x, y, _ = matmul_operands(product_op(op), [a, b], out.reshape(op["gemm"]))
    kernel = epilogue_kernel(x, y, out, program_op(op), op["product"], op["roles"], others,
                             parallel)
    if kernel is not None:
        return kernel
    product = work_array(ctx, tuple(op["gemm"]), out.dtype)
    gemm = (GENERATED_KERNELS["matmul"](product_op(op), [a, b], product, ctx, parallel)
            or KERNELS["matmul"](product_op(op), [a, b], product, ctx))
    inputs = _program_inputs(op, product.reshape(op["shape"]), others)
    try:
        lines = program_lines(DIALECT, program_op(op), [f"a{k}" for k in range(len(inputs))],
                              [v.dtype.name for v in inputs], out.dtype.name)
        fast = vectorises(lines) and generated_kernel(program_op(op), inputs, out, parallel)
    except (NotImplementedError, KeyError):
        fast = None
    return Apart(gemm, fast or KERNELS["fused"](program_op(op), inputs, out, ctx))


class Apart:
    """A ``fused_matmul`` run as its two parts: ``gemm``, then ``program``."""

    __slots__ = ("gemm", "program")

    def __init__(self, gemm, program):
        self.gemm, self.program = gemm, program

    def __call__(self):
        self.gemm()
        self.program()


def _grad(ns, op, inputs, output, g, needs=None):
    """The program's rule, then the product's, on the product replayed."""
    from ..algodiff.elementwise import fused_rule
    from ..algodiff.rules import GRADIENTS
    a, b, *others = inputs
    product = ns._apply(product_op(op), [a, b])
    value = ns.reshape(product, op["shape"])
    grads = fused_rule(ns, program_op(op), _program_inputs(op, value, others), output, g)
    position = op["product"]
    carried = ns.reshape(grads[position], op["gemm"])
    ga, gb = GRADIENTS["matmul"](ns, product_op(op), [a, b], product, carried)
    return [ga, gb] + grads[:position] + grads[position + 1:]


def _export(ctx, op, ins, out):
    """The product's ONNX nodes, then the program's."""
    a, b, *others = ins
    value = Value(ctx.fresh("matmul"), tuple(op["gemm"]), np.dtype(op["dtype"]))
    name = onnx.matmul_export(ctx, product_op(op), [a, b], value)
    shaped = Value(ctx.fresh("reshape"), tuple(op["shape"]), value.dtype)
    shaped = shaped._replace(name=onnx.EXPORTERS["reshape"](
        ctx, Op.make("reshape", shape=tuple(op["shape"])), [value._replace(name=name)], shaped))
    return onnx.fused_export(ctx, program_op(op), _program_inputs(op, shaped, others), out)


define(OpDef(NAME, "linalg", None, None, shape=shapes.declared, kernel=_kernel,
             generated=_generated, grad=_grad, onnx=_export, reads_strided=True))

__all__ = ["NAME", "Apart", "product_op", "program_op"]
