"""The registry of operation kinds: what every layer may know about an op without
running it.

Each entry says how many parents the op takes, its family, which NumPy (or
SciPy) function defines its meaning, and which parents its result may overwrite
in place. Shape rules live in :mod:`graphc.shape`, kernels in
:mod:`graphc.engine`; all are keyed by the same ``kind`` string.

>>> KINDS["exp"].family, KINDS["exp"].reference
('unary', 'numpy.exp')
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

#: ``overwrites`` value meaning "any parent" (subject to shape/dtype equality).
ANY = "any"
#: ``overwrites`` value meaning "the positions listed in the op's ``inplace`` attribute"
#: (a fused node knows which of its inputs only its first instruction reads).
FROM_ATTR = "attr"


@dataclass(frozen=True, slots=True)
class OpKind:
    """Static facts about one kind of operation.

    ``arity`` is the number of parents (``None``: variadic).
    ``overwrites`` names the parent positions whose memory the result may take
    over when that parent dies at this op: ``ANY`` or a tuple of positions.
    The planner still requires equal shape and dtype. Why per op: an
    elementwise kernel reads element ``i`` before writing element ``i``, so it
    can share memory with its input; a matmul or a transpose cannot.
    ``reference`` is the dotted name of the NumPy/SciPy function whose
    semantics the op follows (``None`` where graphc defines them).
    ``stateful`` ops (random draws, user callbacks) are never merged or folded.
    ``fallible`` ops may raise at run time on the values they are given (indices
    out of range, a user callback's error): a run keeps every write into a
    variable until after the last of them, so a failure leaves no variable
    half-updated.
    """

    name: str
    family: str
    arity: Optional[int]
    reference: Optional[str] = None
    overwrites: object = ()
    stateful: bool = False
    fallible: bool = False


def _table() -> dict[str, OpKind]:
    kinds: list[OpKind] = []
    add = kinds.append

    # leaves and creation
    add(OpKind("var", "leaf", 0))
    add(OpKind("const", "leaf", 0))
    add(OpKind("fill", "creation", 0, "numpy.full"))
    add(OpKind("random_uniform", "random", 0, "numpy.random.Generator.uniform", stateful=True))
    add(OpKind("random_normal", "random", 0, "numpy.random.Generator.normal", stateful=True))
    add(OpKind("random_bernoulli", "random", 0, "numpy.random.Generator.random", stateful=True))
    add(OpKind("delay", "delay", None, None, stateful=True, fallible=True))

    numpy_unary = ["negative", "absolute", "sign", "exp", "log", "log1p", "expm1", "sqrt",
                   "square", "reciprocal", "sin", "cos", "tan", "tanh", "floor", "ceil",
                   "logical_not"]
    for name in numpy_unary:
        add(OpKind(name, "unary", 1, f"numpy.{name}", ANY))
    add(OpKind("round", "unary", 1, "numpy.round", ANY))
    add(OpKind("erf", "unary", 1, "scipy.special.erf", ANY))
    add(OpKind("sigmoid", "unary", 1, "scipy.special.expit", ANY))
    add(OpKind("relu", "unary", 1, None, ANY))
    add(OpKind("astype", "unary", 1, "numpy.ndarray.astype", ANY))
    add(OpKind("copy", "unary", 1, "numpy.copy", ANY))
    add(OpKind("clip", "unary", 1, "numpy.clip", ANY))

    numpy_binary = ["add", "subtract", "multiply", "divide", "floor_divide", "power",
                    "remainder", "maximum", "minimum", "arctan2", "hypot", "equal",
                    "not_equal", "less", "less_equal", "greater", "greater_equal",
                    "logical_and", "logical_or", "logical_xor"]
    for name in numpy_binary:
        add(OpKind(name, "binary", 2, f"numpy.{name}", ANY))
    # where(cond, a, b) copies b then a under the mask: only b may be overwritten.
    add(OpKind("where", "ternary", 3, "numpy.where", (2,)))

    for name in ["sum", "prod", "max", "min", "mean", "any", "all"]:
        add(OpKind(name, "reduction", 1, f"numpy.{name}"))
    for name in ["argmax", "argmin"]:
        add(OpKind(name, "reduction", 1, f"numpy.{name}"))

    # made by the optimiser only: a*b + c in one node (c is read after a*b is
    # written, so only a and b may share the result's memory); Owl's AdaGrad
    # step lr / sqrt(v + eps); and a fused chain of elementwise ops.
    add(OpKind("fma", "ternary", 3, None, (0, 1)))
    add(OpKind("fused_adagrad", "unary", 1, None, ANY))
    add(OpKind("fused", "fused", None, None, FROM_ATTR))

    # matmul takes trans_a / trans_b flags (transposes folded in by the optimiser)
    add(OpKind("matmul", "linalg", 2, "numpy.matmul"))
    add(OpKind("dot", "linalg", 2, "numpy.dot"))
    add(OpKind("einsum", "linalg", 2, "numpy.einsum"))

    # reshape only reinterprets memory, so its result may simply be its parent's.
    add(OpKind("reshape", "shape", 1, "numpy.reshape", ANY))
    add(OpKind("transpose", "shape", 1, "numpy.transpose"))
    add(OpKind("broadcast_to", "shape", 1, "numpy.broadcast_to"))
    add(OpKind("concatenate", "shape", None, "numpy.concatenate"))
    add(OpKind("slice", "shape", 1, "numpy.ndarray.__getitem__"))
    # index arrays fed at run time may be out of range
    add(OpKind("gather", "shape", None, "numpy.ndarray.__getitem__", fallible=True))
    add(OpKind("take", "shape", 2, "numpy.take", fallible=True))
    add(OpKind("pad", "shape", 1, "numpy.pad"))
    add(OpKind("tile", "shape", 1, "numpy.tile"))
    add(OpKind("repeat", "shape", 1, "numpy.repeat"))
    add(OpKind("flip", "shape", 1, "numpy.flip"))
    add(OpKind("one_hot", "shape", 1, None, fallible=True))   # labels out of range

    # NCHW neural ops (semantics in graphc/shape/neural.py). Each reads windows of
    # its inputs that overlap other output cells, so none may overwrite a parent.
    for name, arity in [("conv2d", 2), ("conv2d_backward_input", 2),
                        ("conv2d_backward_kernel", 2), ("max_pool2d", 1),
                        ("max_pool2d_backward", 3), ("avg_pool2d", 1),
                        ("avg_pool2d_backward", 1), ("lrn", 1), ("lrn_backward", 2)]:
        add(OpKind(name, "neural", arity, None))
    # made by the optimiser's lowering only: convolution windows as GEMM columns
    add(OpKind("im2col", "neural", 1, None))
    add(OpKind("col2im", "neural", 1, None))
    return {k.name: k for k in kinds}


KINDS: dict[str, OpKind] = _table()


def kind(name: str) -> OpKind:
    """The registered kind ``name``; a clear error for an unknown one."""
    try:
        return KINDS[name]
    except KeyError:
        raise KeyError(f"graphc: unknown operation kind {name!r}") from None


def may_overwrite(op, position: int) -> bool:
    """Whether ``op`` (an :class:`~graphc.type.op.Op` or a kind name) may write its
    result over its parent at ``position``."""
    kind_name = op if isinstance(op, str) else op.kind
    policy = KINDS[kind_name].overwrites
    if policy == FROM_ATTR:
        return not isinstance(op, str) and position in op["inplace"]
    return policy == ANY or position in policy


@functools.lru_cache(maxsize=None)
def reference_function(kind_name: str):
    """The NumPy/SciPy callable named by a kind's ``reference`` (its semantics).

    >>> reference_function("exp") is __import__("numpy").exp
    True
    """
    return _resolve(KINDS[kind_name].reference)


def _resolve(dotted: str):
    import importlib

    module_name, _, attr = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except ImportError:  # e.g. numpy.ndarray.astype: a method of a class
        owner_module, _, owner = module_name.rpartition(".")
        return getattr(getattr(importlib.import_module(owner_module), owner), attr)
