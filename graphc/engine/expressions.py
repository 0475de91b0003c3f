"""One elementwise kernel description, rendered by every code generator.

A generated elementwise kernel computes one node: a single elementwise op, or a
``fused`` node's program, whose every instruction yields the running value (the
accumulator, ``("acc",)``) in the node's dtype. The generators differ only in
their *dialect*: the language the op's expression templates are written in (C for
the CUDA kernels, Python for the Numba CPU kernels), how it spells a dtype, a cast
and a literal. What the expression of each op is lives in the op's definition
(:mod:`graphc.ops`), one template per dialect; which dtype each instruction
computes in, and which operands are cast, is decided here, once for both:

- an instruction computes in the output dtype, as the NumPy kernels' ``out=``
  calls do (fusion only absorbs a parent of the node's own dtype; other inputs, a
  ``where`` condition or a bool operand say, are cast);
- comparisons compute in their operands' common dtype, logical ops on truth values.

>>> import numpy as np
>>> from graphc.type import Op
>>> from graphc.engine.cuda_codegen import DIALECT
>>> program_lines(DIALECT, Op.make("add"), ["x0", "x1"], ["float32", "int32"], "float32")
['x0 + ((float)x1)']
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..type.kinds import KINDS
from ..type.program import operand, registers


@dataclass(frozen=True)
class Dialect:
    """How one generator writes expressions.

    ``templates``: kind -> {compute class ("f" float, "i" integer, "b" bool):
    template}; placeholders ``{0} {1} {2}`` (operands, already of the compute
    type), ``{T}`` (the compute type's spelling), ``{lr} {eps} {lo} {hi}``
    (literals of the op's attributes) and whatever ``extra(compute)`` adds.
    ``types``: dtype name -> (spelling, helper suffix, class). ``cast``: a format
    of ``{T}`` and ``{x}``. ``literal(value, dtype)``: an exact literal.
    """

    name: str
    templates: dict
    types: dict
    cast: str
    literal: Callable
    extra: Callable = field(default=lambda compute: {})
    #: a statement assigning expression ``{e}`` to the accumulator, and one keeping
    #: the accumulator in register ``r{k}`` (of type ``{T}``)
    assign: str = "acc = {e}"
    save: str = "r{k} = acc"

    def unsupported(self, kind, dtype, why=""):
        return NotImplementedError(f"{self.name}: {kind} on {dtype} is not supported{why}")

    def dtype_name(self, kind, dtype) -> str:
        """``dtype``'s name, refused with a clear error where the dialect has no type."""
        name = np.dtype(dtype).name
        if name not in self.types:
            raise self.unsupported(kind, name, f" (supported dtypes: {', '.join(self.types)})")
        return name


def _bounds(op, compute, cls) -> tuple:
    """``clip``'s bounds, a missing one the widest value of the compute dtype."""
    wide = (-np.inf, np.inf) if cls == "f" else (False, True) if cls == "b" else (
        np.iinfo(compute).min, np.iinfo(compute).max)
    return (wide[0] if op["lo"] is None else op["lo"], wide[1] if op["hi"] is None else op["hi"])


def expression(dialect: Dialect, op, operands, dtypes, out) -> str:
    """The expression of one op on operand expressions of ``dtypes``, giving a value
    of dtype ``out``; :class:`NotImplementedError` names what the dialect lacks."""
    kind = op.kind
    if kind not in dialect.templates or kind == "fused":
        raise dialect.unsupported(kind, out, " (not an elementwise kind the generator knows)")
    if KINDS[kind].arity is not None and KINDS[kind].arity != len(operands):
        raise ValueError(f"{dialect.name}: {kind} takes {KINDS[kind].arity} operands, "
                         f"got {len(operands)}")
    if KINDS[kind].comparison:
        compute = dialect.dtype_name(kind, np.result_type(*dtypes))
    elif KINDS[kind].logical:
        compute = "bool"
    else:
        compute = out
    spelling, _, cls = dialect.types[compute]
    template = dialect.templates[kind].get(cls)
    if template is None:
        raise dialect.unsupported(kind, compute, " (integer division and power, and float "
                                  "maths in an integer dtype, are out of scope)")
    targets = ["bool"] + [compute] * 2 if kind == "where" else [compute] * len(operands)
    args = [name if d == t else dialect.cast.format(T=dialect.types[t][0], x=name)
            for name, d, t in zip(operands, dtypes, targets)]
    attrs = {}
    if kind == "fused_adagrad":
        attrs = {"lr": dialect.literal(op["lr"], compute),
                 "eps": dialect.literal(op["eps"], compute)}
    elif kind == "clip":
        lo, hi = _bounds(op, compute, cls)
        if np.isnan(lo) or np.isnan(hi):  # np.clip: a NaN bound makes every value NaN
            return dialect.literal(np.nan, compute)
        attrs = {"lo": dialect.literal(lo, compute), "hi": dialect.literal(hi, compute)}
    return template.format(*args, T=spelling, **dialect.extra(compute), **attrs)


def program_lines(dialect: Dialect, op, names, in_dtypes, out) -> list:
    """The expressions computing node ``op`` from inputs named ``names`` (of
    ``in_dtypes``) into a value of dtype ``out``: one per instruction of a fused
    program, each assigned to the accumulator ``acc`` (the last one is the result),
    or the single op's expression."""
    if op.kind != "fused":
        return [expression(dialect, op, list(names), list(in_dtypes), out)]
    lines = []
    program = op["program"]
    for k, (inner, args) in enumerate(program):
        # the accumulator is a variable of its own (``acc``), a register ``r{k}``
        registers_so_far = [f"r{j}" for j in range(k)] + ["acc"]
        operands = [operand(a, names, registers_so_far) for a in args]
        # every instruction yields the node's dtype: the accumulator and registers too
        dtypes = [out if a[0] != "in" else in_dtypes[a[1]] for a in args]
        lines.append(expression(dialect, inner, operands, dtypes, out))
    return lines


def program_body(dialect: Dialect, op, names, in_dtypes, out) -> list:
    """The statements computing ``op`` (:func:`program_lines`) in ``dialect``: each
    expression assigned to the accumulator, and copied to register ``r{k}`` where a
    later instruction reads it (:mod:`graphc.type.program`)."""
    saved = registers(op["program"]) if op.kind == "fused" else frozenset()
    body = []
    for k, line in enumerate(program_lines(dialect, op, names, in_dtypes, out)):
        body.append(dialect.assign.format(e=line))
        if k in saved:
            body.append(dialect.save.format(k=k, T=dialect.types[out][0]))
    return body
