"""A GEMM and the elementwise program that reads its product, as one node
(``kernels="generated"``): a convolution's bias, activation and residual sum run on
each block of the product right after BLAS computed it, while it is in cache, instead
of in a pass of their own over the whole result.

Where an elementwise value (a ``fused`` program or one op) reads a ``matmul`` (or a
reshape of one) that nothing else reads, :data:`FUSE_EPILOGUE` makes one
``fused_matmul`` node: the product's flags, the program, the program's input that is
the product (``product``), how each other input lines up with the product seen as
``(rows, N)`` (``roles``: ``"scalar"``, ``"col"`` a vector along ``N`` (a bias of a
channels-last image), ``"row"`` one value per row (an NCHW bias), ``"full"`` an array
of the product's size (a residual)), the product's shape (``gemm``), and the result's
``shape`` and ``dtype``. Anything else that the program reads keeps the two nodes.
Its kernels: :mod:`graphc.ops.fused_matmul`.

>>> import graphc.ndarray as N
>>> from graphc.optimiser.fusion import FUSE_ELEMENTWISE
>>> from graphc.optimiser.passes import run_stages
>>> x, w, b = N.var("x", (49, 32)), N.var("w", (32, 64)), N.var("b", (64,))
>>> y = N.maximum(N.matmul(x, w) + b, 0.0)
>>> out = run_stages([y], [FUSE_ELEMENTWISE, FUSE_EPILOGUE]).roots[0]
>>> out.op.kind, out.op["roles"], [p.op.kind for p in out.parents]
('fused_matmul', ('col', 'scalar'), ['var', 'var', 'var', 'const'])
"""
from __future__ import annotations

import math

import numpy as np

from ..type.kinds import is_elementwise
from ..type.op import Op
from .build import make
from .fusion import _program_of
from .rewriter import Pass

_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def _suffix(shape, size: int):
    """How many trailing axes of ``shape`` hold exactly ``size`` elements, or None."""
    count, product = 0, 1
    for n in reversed(shape):
        if product == size:
            break
        product *= n
        count += 1
    return count if product == size else None


def role(shape, columns: int, operand) -> str | None:
    """How ``operand`` (broadcast to ``shape``) lines up with a product seen as ``(rows,
    columns)``: ``"scalar"``, ``"col"``, ``"row"``, ``"full"``, or None.

    >>> role((1, 7, 7, 64), 64, (1, 1, 1, 64)), role((1, 64, 7, 7), 49, (64, 1, 1))
    ('col', 'row')
    >>> role((1, 64, 7, 7), 49, (1, 64, 7, 7)), role((1, 64, 7, 7), 49, (64, 7, 1))
    ('full', None)
    """
    size = math.prod(operand)
    if size == 1:
        return "scalar"
    if tuple(operand) == tuple(shape):
        return "full"
    tail = _suffix(shape, columns)
    if tail is None or len(operand) > len(shape):
        return None
    padded = (1,) * (len(shape) - len(operand)) + tuple(operand)
    head = len(shape) - tail
    if padded[head:] == tuple(shape[head:]) and math.prod(padded[:head]) == 1:
        return "col"
    if padded[:head] == tuple(shape[:head]) and math.prod(padded[head:]) == 1:
        return "row"
    return None


def _product_of(p, ctx):
    """``(matmul, gemm shape)`` when ``p`` is a matmul, or a reshape of one, that only
    ``p``'s consumer reads; else None."""
    m = p.parents[0] if p.op.kind == "reshape" and ctx.uses(p) == 1 else p
    if m.op.kind != "matmul" or ctx.uses(m) != 1 or len(m.shape) < 2:
        return None
    return m


def _fuse_epilogue(node, ctx):
    if not is_elementwise(node.op.kind) or node.dtype not in _FLOATS:
        return None
    program, inputs = _program_of(node)
    for position, p in enumerate(inputs):
        m = _product_of(p, ctx)
        if m is None or m.dtype != node.dtype or p.shape != node.shape \
                or sum(q is p for q in inputs) != 1:
            continue
        others = inputs[:position] + inputs[position + 1:]
        roles = tuple(role(node.shape, m.shape[-1], q.shape) for q in others)
        if None in roles or any(r == "full" and q.dtype != node.dtype
                                for r, q in zip(roles, others)):
            continue
        attrs = m.op.params()
        op = Op.make("fused_matmul", trans_a=bool(attrs.get("trans_a", False)),
                     trans_b=bool(attrs.get("trans_b", False)), program=tuple(program),
                     product=position, roles=roles, gemm=tuple(m.shape),
                     shape=node.shape, dtype=node.dtype)
        return make(node, op, list(m.parents) + others)
    return None


FUSE_EPILOGUE = Pass("fuse_epilogue", function=_fuse_epilogue, stage="epilogue",
                     produces=frozenset({"fused_matmul"}),
                     doc="a GEMM and the elementwise program reading its product -> one "
                         "node: the program runs on each block in cache (generated kernels "
                         "only)")

__all__ = ["FUSE_EPILOGUE", "role"]
