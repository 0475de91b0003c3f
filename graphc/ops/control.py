"""Control flow: ``loop`` (``N.fori_loop``, ``N.scan``, ``N.while_loop``: a body graph
run once per step) and ``loop_part`` (one of a loop's results). One definition each.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["loop"].stateful, DEFINITIONS["loop_part"].family
(True, 'control')
"""
from __future__ import annotations

from ..engine import loop_kernels as kernels
from ..type.errors import GraphError
from .definition import OpDef, Refused, define


def _declared(op, parents):
    return op["shape"], op["dtype"]


def loop_grad(ns, op, inputs, output, g, needs=None):
    """Not yet: a loop's reverse pass needs every step's carried values kept."""
    raise GraphError(f"grad: differentiating through N.{op['body'].name} is not implemented "
                     "yet; write the loop as a Python loop (it unrolls) to differentiate it")


define(
    # never merged or folded: its body may draw at random, and folding would run it
    # while compiling; its body may fail as any graph's run may
    OpDef("loop", "control", None, None, stateful=True, fallible=True, shape=_declared,
          kernel=kernels.loop, grad=loop_grad,
          onnx=Refused("a graphc loop: ONNX's Loop is not exported yet"),
          names=("fori_loop", "scan", "while_loop")),
    OpDef("loop_part", "control", 1, None, shape=_declared, kernel=kernels.loop_part,
          grad=loop_grad, onnx=Refused("a part of a graphc loop's results")),
)
