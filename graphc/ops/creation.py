"""The leaves, creation, random draws and ``delay``. One definition each.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["random_normal"].stateful, DEFINITIONS["delay"].fallible
(True, True)
"""
from __future__ import annotations

from ..algodiff.rules import delay_grad
from ..engine import cpu_kernels as kernels
from ..engine import random_kernels
from ..onnx import export_shape as onnx
from ..shape import rules as shapes
from ..operator.random_functions import DRAW_METHODS
from .definition import LEAF, NO_GRADIENT, OpDef, Refused, define

_RANDOM = Refused("a random draw, redrawn on every run; ONNX export covers deterministic "
                  "inference graphs")


def random_draw(name, reference, kernel, public) -> OpDef:
    """A draw from the graph's generator, made afresh on every run (never merged or
    folded): its shape and dtype are attributes.

    Example: ``random_draw("random_normal", "numpy.random.Generator.normal", ...)``
    """
    return OpDef(name, "random", 0, reference, stateful=True, shape=shapes.declared,
                 kernel=kernel, grad=NO_GRADIENT, onnx=_RANDOM, names=(public,))


define(
    # variables and constants own their memory; the exporter makes them graph inputs
    # and initializers
    OpDef("var", "leaf", 0, shape=shapes.declared, grad=NO_GRADIENT, onnx=LEAF),
    OpDef("const", "leaf", 0, shape=shapes.declared, grad=NO_GRADIENT, onnx=LEAF),
    OpDef("fill", "creation", 0, "numpy.full", shape=shapes.declared, kernel=kernels.fill,
          grad=NO_GRADIENT, onnx=onnx.fill_export, names=("full",)),
    random_draw("random_uniform", "numpy.random.Generator.uniform", kernels.random_uniform,
                "random.uniform"),
    random_draw("random_normal", "numpy.random.Generator.normal", kernels.random_normal,
                "random.normal"),
    random_draw("random_bernoulli", "numpy.random.Generator.random", kernels.random_bernoulli,
                "random.bernoulli"),
    # every other Generator method: the kernel calls the method the op names
    OpDef("random_draw", "random", None, "numpy.random.Generator", stateful=True,
          shape=shapes.declared, kernel=random_kernels.random_draw, grad=NO_GRADIENT,
          onnx=_RANDOM, names=tuple(f"random.{name}" for name in sorted(DRAW_METHODS))),
    # a Python callback: it may raise, and it has no gradient or ONNX form
    OpDef("delay", "delay", None, None, stateful=True, fallible=True, shape=shapes.delay,
          kernel=kernels.delay, grad=delay_grad,
          onnx=Refused("it calls a Python function, which ONNX cannot hold"), names=("delay",)),
)
