"""The registry of operation kinds: what every layer may know about an op without
running it.

Each entry says how many parents the op takes, its family, which NumPy (or
SciPy) function defines its meaning, which parents its result may overwrite
in place, and its flags. The entries are filled from the op definitions
(:mod:`graphc.ops`), which also fill the other layers' tables (shape rules,
kernels, gradients, exporters), all keyed by the same ``kind`` string.

>>> KINDS["exp"].family, KINDS["exp"].reference
('unary', 'numpy.exp')
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Optional

#: ``overwrites`` value meaning "any parent" (subject to shape/dtype equality).
ANY = "any"
#: ``overwrites`` value meaning "decided per node by the engine" (a fused program:
#: which inputs its kernel may write over depends on its program and on whether the
#: engine streams it, :mod:`graphc.engine.strategy`); statically, none.
DERIVED = "derived"


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
    half-updated. ``comparison`` and ``logical`` kinds give booleans (a
    comparison computes in its operands' common dtype, a logical op on truth
    values); ``commutative`` binaries may swap their operands. ``attributes`` names
    the attributes an op of the kind carries when the kind's public function of the
    same name takes exactly those keywords (then a saved graph's node is rebuilt by
    calling it: :mod:`graphc.graph.rebuild`); kinds rebuilt otherwise leave it empty.
    ``reads_strided`` kinds have kernels (NumPy's and generated ones) that read any
    strides of their inputs at run time, so a parent may be a view (a slice, a
    transpose, a broadcast) of another value's memory instead of a copy; a kernel
    that binds ``ins[0].reshape(...)`` at build time (a copy, for a strided input)
    must not claim it. ``relayout`` is set on kinds that only lay their one input's
    elements out anew (padding included): ``relayout(op, result) -> input``, the
    input again from a result. Folding one of a constant always pays, whatever the
    size: its result replaces the constant it reads (which a compiled graph's owner
    may then hold as that function of the result).
    """

    name: str
    family: str
    arity: Optional[int]
    reference: Optional[str] = None
    overwrites: object = ()
    stateful: bool = False
    fallible: bool = False
    comparison: bool = False
    logical: bool = False
    commutative: bool = False
    attributes: tuple = ()
    reads_strided: bool = False
    relayout: Optional[Callable] = None


#: kind name -> its facts. Filled by the op definitions (:mod:`graphc.ops`), which
#: ``graphc``'s ``__init__`` imports before anything reads this table.
KINDS: dict[str, OpKind] = {}

#: families whose kinds compute each element from the same element of their operands
ELEMENTWISE_FAMILIES = frozenset({"unary", "binary", "ternary", "fused"})
#: the smallest result worth computing over a dying parent: NumPy (2.x) leaves its fast
#: loop when a one-element output exactly overlaps its input (it treats size 1 as
#: stride 0), costing ~0.45 us a call (benchmarks/overhead.py), and one element saves
#: no memory worth that. The fusion pass and liveness both follow it.
MIN_INPLACE_SIZE = 2


def is_elementwise(kind_name: str) -> bool:
    """Whether a kind computes element ``i`` from element ``i`` of its operands.

    >>> is_elementwise("exp"), is_elementwise("fused"), is_elementwise("sum")
    (True, True, False)
    """
    return KINDS[kind_name].family in ELEMENTWISE_FAMILIES


def is_leaf(kind_name: str) -> bool:
    """Whether a kind owns its memory (a variable or a constant): never planned.

    >>> is_leaf("var"), is_leaf("fill")
    (True, False)
    """
    return KINDS[kind_name].family == "leaf"


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
    if policy == DERIVED:
        return False
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
