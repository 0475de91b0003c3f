"""The two namespaces a converter computes with (``ctx.ns``), each measuring what
it makes against the import's :class:`~graphc.onnx.limits.ImportBudget`
before making it:

- ``FoldingNamespace``: graphc's eager functions (values computed at once, the
  engine's own kernels); each result is reserved against the fold budget
  before its array is allocated, so an oversized fold raises ``FoldTooLarge``
  instead of allocating.
- ``GraphNamespace``: graphc's lazy functions (graph nodes); each new node's
  value is checked against ``value_limit_bytes``.

Both count the operations of the node being converted, and both measure the
scratch some kernels need beyond their result (``WORKSPACE``: a convolution's
im2col columns, as large as the output times the kernel's size).

>>> import numpy as np
>>> from graphc.onnx.limits import ImportBudget, ImportLimits
>>> budget = ImportBudget(ImportLimits())
>>> budget.start_node(folding=True)
>>> FoldingNamespace(budget).add(np.ones(2), 1.0)
array([2., 2.])
"""
from __future__ import annotations

from ..eager import EagerNamespace
from ..operator.lazy import LazyNamespace
from ..shape.rules import infer
from .limits import ImportBudget


def _im2col_elements(op, parents, shape) -> int:
    """Elements of the im2col columns of a 2-D convolution (or of its gradients):
    ``N x C*kh*kw x OH*OW``, as graphc's CPU kernels and lowering make them."""
    a, b = (tuple(p.shape) for p in parents[:2])
    if op.kind == "conv2d":                  # (x, w) -> y
        n, c, (kh, kw), (oh, ow) = a[0], a[1], b[2:], shape[2:]
    elif op.kind == "conv2d_backward_input":  # (g, w) -> dx
        n, c, (kh, kw), (oh, ow) = a[0], shape[1], b[2:], a[2:]
    else:                                     # (x, g) -> dw
        n, c, (kh, kw), (oh, ow) = a[0], a[1], shape[2:], b[2:]
    return n * c * kh * kw * oh * ow


#: op kind -> elements of the scratch its kernel needs besides its result
WORKSPACE = {"conv2d": _im2col_elements, "conv2d_backward_input": _im2col_elements,
             "conv2d_backward_kernel": _im2col_elements}


def _workspace(op, parents, shape):
    """``(elements,)`` of ``op``'s scratch, or ``None`` when it needs none."""
    estimate = WORKSPACE.get(op.kind)
    return None if estimate is None else (estimate(op, parents, shape),)


class FoldingNamespace(EagerNamespace):
    """Eager evaluation within the fold budget (see the module docstring)."""

    def __init__(self, budget: ImportBudget):
        super().__init__()
        self._budget = budget

    def _apply(self, op, parents):
        shape, dtype = infer(op, parents)  # the size, before anything is allocated
        self._budget.count_op(op.kind)
        self._budget.fold(shape, dtype, op.kind)
        scratch = _workspace(op, parents, shape)
        if scratch is not None:
            self._budget.fold(scratch, dtype, f"{op.kind}'s scratch")
        return super()._apply(op, parents)


class GraphNamespace(LazyNamespace):
    """Graph nodes within the value limit (see the module docstring)."""

    def __init__(self, budget: ImportBudget):
        super().__init__()
        self._budget = budget

    def _apply(self, op, parents):
        node = super()._apply(op, parents)  # shapes only: nothing is allocated
        self._budget.count_op(op.kind)
        self._budget.value(node.shape, node.dtype, op.kind)
        scratch = _workspace(op, parents, node.shape)
        if scratch is not None:
            self._budget.value(scratch, node.dtype, f"{op.kind}'s scratch")
        return node
