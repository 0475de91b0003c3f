"""Converters of ONNX's elementwise operators: arithmetic with broadcasting,
activations, comparisons and logic, casts."""
from __future__ import annotations

from ..registry import converter


@converter("Relu")
def relu(ctx):
    return ctx.ns.relu(ctx.input(0))


@converter("Add")
def add(ctx):
    return ctx.ns.add(ctx.input(0), ctx.input(1))
