"""``softmax``: ``exp(x - max(x)) / sum(exp(x - max(x)))`` along one axis as one node,
made by the optimiser only (:mod:`graphc.optimiser.fuse_softmax`, generated kernels)
from the written-out softmax that ``N.softmax`` and ONNX's ``Softmax`` build. Small
enough that every fact is here: its kernels are :mod:`graphc.engine.softmax_kernels`'.

One input ``x`` (floating point) and the attribute ``axis`` (an int, non-negative); the
result has ``x``'s shape and dtype and may take over ``x``'s memory. A user's graph
never holds it (no public name; saved graphs keep the graph as written); ONNX export
writes one ``Softmax``.

>>> import numpy as np
>>> from graphc.type import Op
>>> from graphc.shape.rules import RULES
>>> from graphc.symbol.node import Node
>>> x = Node(Op.make("var", name="x"), (), (2, 5), np.dtype("float32"))
>>> RULES["softmax"](Op.make("softmax", axis=1), [x])
((2, 5), dtype('float32'))
"""
from __future__ import annotations

from ..engine.softmax_kernels import generated_softmax, numpy_softmax
from ..type.errors import DTypeError, ShapeError
from ..type.kinds import ANY
from .definition import OpDef, define

NAME = "softmax"


def _rule(op, parents):
    (x,) = parents
    axis = op["axis"]
    if x.dtype.kind != "f":
        raise DTypeError(f"{NAME}: expected a floating-point array, got {x.dtype}")
    if not isinstance(axis, int) or not 0 <= axis < len(x.shape):
        raise ShapeError(f"{NAME}: axis {axis!r} is not an axis of shape {x.shape}")
    return tuple(x.shape), x.dtype


def _grad(ns, op, inputs, output, g, needs=None):
    """``y (g - sum(g y))`` along the axis, ``y`` the softmax."""
    total = ns.sum(ns.multiply(g, output), axis=op["axis"], keepdims=True)
    return [ns.multiply(output, ns.subtract(g, total))]


def _export(ctx, op, ins, out):
    return ctx.op("Softmax", [ins[0].name], out=out.name, axis=op["axis"])


define(OpDef(NAME, "neural", 1, None, overwrites=ANY, shape=_rule, kernel=numpy_softmax,
             generated=generated_softmax, grad=_grad, onnx=_export))

__all__ = ["NAME"]
