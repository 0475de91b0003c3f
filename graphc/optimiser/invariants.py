"""The checker run between passes in debug mode: the rewritten graph is
acyclic, every node's stored shape and dtype is what its rule infers, the
roots keep their shapes and dtypes, and no variable appeared from nowhere.

>>> import graphc.ndarray as N
>>> x = N.var("x", (3,))
>>> y = N.exp(x)
>>> check_invariants([y], [y], "none")
"""
from __future__ import annotations

from ..shape.rules import infer
from ..symbol.traverse import topological_order
from ..type.errors import GraphcError


class InvariantError(GraphcError, AssertionError):
    """A rewrite produced a graph that is not equivalent in structure."""


def check_invariants(before, after, pass_name: str) -> None:
    if len(before) != len(after):
        raise InvariantError(f"{pass_name}: {len(before)} roots became {len(after)}")
    for old, new in zip(before, after):
        if old.shape != new.shape or old.dtype != new.dtype:
            raise InvariantError(f"{pass_name}: root {old.label()} changed from {old.shape} "
                                 f"{old.dtype} to {new.shape} {new.dtype}")
    order = topological_order(after)
    position = {id(n): i for i, n in enumerate(order)}
    old_vars = {id(n) for n in topological_order(before) if n.op.kind == "var"}
    for i, n in enumerate(order):
        if any(position[id(p)] >= i for p in n.parents):
            raise InvariantError(f"{pass_name}: cycle through {n.label()}")
        if n.op.kind == "var" and id(n) not in old_vars:
            raise InvariantError(f"{pass_name}: new variable {n.label()}")
        if n.parents or n.op.kind not in ("var", "const"):
            shape, dtype = infer(n.op, n.parents)
            if shape != n.shape or dtype != n.dtype:
                raise InvariantError(f"{pass_name}: {n.label()} stores {n.shape} {n.dtype} but "
                                     f"its rule infers {shape} {dtype}")
