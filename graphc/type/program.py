"""The program of a ``fused`` node: instructions and the values they read.

A program is a tuple of ``(op, operands)`` instructions, each yielding one value
of the node's shape and dtype. An operand is one of

- ``("in", i)``: the node's parent ``i``;
- ``("acc",)``: the value the instruction before it yielded (the *accumulator*;
  a chain of ops reads only this, so a kernel may compute it in its output);
- ``("reg", k)``: the value instruction ``k`` (an earlier one) yielded: a
  *register*, where two elementwise branches meet (a Sobel filter's
  ``sqrt(gx * gx + gy * gy)`` is one program).

The first instruction reads no accumulator, and the last instruction's value is
the node's. Every evaluator walks the program the same way, so each resolves
operands with :func:`operand`, given the values yielded so far.

>>> from graphc.type import Op
>>> prog = ((Op.make("exp"), (("in", 0),)), (Op.make("negative"), (("in", 1),)),
...         (Op.make("add"), (("reg", 0), ("acc",))))
>>> sorted(registers(prog))
[0]
>>> [operand(a, ["x", "y"], ["e", "n"]) for a in prog[2][1]]
['e', 'n']
"""
from __future__ import annotations


def registers(program) -> frozenset:
    """The instructions whose values a later one reads as a register."""
    return frozenset(a[1] for _, args in program for a in args if a[0] == "reg")


def last_branch(program) -> int:
    """The first instruction of the program's last branch: the one after the last
    register (0 without registers). Each earlier branch computes in its register's
    memory, so a kernel writes its output only from this instruction on.

    >>> from graphc.type import Op
    >>> last_branch(((Op.make("exp"), (("in", 0),)), (Op.make("negative"), (("in", 1),)),
    ...              (Op.make("add"), (("reg", 0), ("acc",)))))
    1
    """
    return max(registers(program), default=-1) + 1


def operand(arg, inputs, results):
    """The value ``arg`` names: ``inputs[i]`` for ``("in", i)``, the last of
    ``results`` (the values yielded so far, in order) for ``("acc",)``, and
    ``results[k]`` for ``("reg", k)``."""
    kind = arg[0]
    if kind == "in":
        return inputs[arg[1]]
    if kind == "acc":
        return results[-1]
    if kind == "reg":
        return results[arg[1]]
    raise ValueError(f"fused program: unknown operand {arg!r} (expected ('in', i), "
                     "('acc',) or ('reg', k))")


def shifted(program, offset: int, inputs: dict) -> list:
    """``program``'s instructions placed ``offset`` instructions later in a longer
    program whose inputs are renumbered by ``inputs`` (old index -> new index).

    >>> from graphc.type import Op
    >>> shifted([(Op.make("add"), (("in", 0), ("reg", 0)))], 3, {0: 5})[0][1]
    (('in', 5), ('reg', 3))
    """
    moved = {"in": lambda a: ("in", inputs[a[1]]), "acc": lambda a: a,
             "reg": lambda a: ("reg", a[1] + offset)}
    return [(op, tuple(moved[a[0]](a) for a in args)) for op, args in program]
