"""The optimiser's pipeline and its one executor: named passes, each declaring
its stage, the kinds it matches and the kinds it makes (:class:`~.rewriter.Pass`).
The stages run in order; within one, each round is a single traversal trying
every pass of the stage at each node, and rounds repeat to a fixed point. Each
pass reports what it changed in each round.

``optimise(roots, passes=None)`` runs the default pipeline; ``passes`` may
name a subset (order is always the pipeline's). ``fast_math=True`` adds the
value-changing rewrites; ``check=True`` runs the same schedule with the
invariant checker after every round.

>>> import graphc.ndarray as N, graphc.eager as E
>>> x = N.var("x", (3,))
>>> result = optimise([N.exp(x) * 1.0 + N.exp(x)], evaluate=E.evaluate)
>>> [(r.name, r.changes) for r in result.report if r.changes]
[('cse', 1), ('simplify', 1), ('fuse_elementwise', 1)]
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from ..symbol.traverse import edge_count, topological_order
from .channels_last import CHANNELS_LAST
from .fast_math import FAST_MATH
from .fold import folding_pass
from .fuse_epilogue import FUSE_EPILOGUE
from .fuse_reduce import FUSE_REDUCE
from .fuse_softmax import FUSE_SOFTMAX
from .fusion import ADAGRAD, FMA, FUSE_ELEMENTWISE, MATMUL_TRANSPOSE
from .grow_concat import GROW_CONCAT
from .invariants import InvariantError, check_invariants
from .lowering import LOWERING, LOWERING_FOR_KERNELS
from .rewriter import STAGES, Pass, rewrite
from .simplify import EXPANSIONS, SIMPLIFY

CSE = Pass("cse", merge=True, produces=frozenset(),
           doc="identical op, attributes and parents -> one node")

#: pass names in pipeline order; "fold" is made per call (it needs an evaluator)
PIPELINE = ("cse", "fold", "simplify", "drop_expansions", "fast_math", "lowering",
            "channels_last", "matmul_transpose", "adagrad", "fma", "grow_concat",
            "fuse_elementwise", "fuse_softmax", "fuse_reduce", "fuse_epilogue")
#: the passes by name, but "fold" (made per call around an evaluator)
STATIC_PASSES = {p.name: p for p in (CSE, SIMPLIFY, EXPANSIONS, FAST_MATH, LOWERING,
                                     MATMUL_TRANSPOSE, ADAGRAD, FMA, FUSE_ELEMENTWISE)}
DEFAULT = tuple(n for n in PIPELINE if n != "fast_math")
#: passes that only the named ``kernels=`` choice runs (a graph for the NumPy kernels
#: keeps its reductions separate, so its bits stay NumPy's)
#: (``"device"``: a graph for the GPU, whose reductions are one ReductionKernel each)
#: (``"generated"``: depthwise convolutions channels last, for its kernel of that layout)
KERNEL_PASSES = {"numpy": {}, "generated": {"fuse_reduce": FUSE_REDUCE,
                                            "fuse_softmax": FUSE_SOFTMAX,
                                            "channels_last": CHANNELS_LAST,
                                            "grow_concat": GROW_CONCAT,
                                            "fuse_epilogue": FUSE_EPILOGUE},
                 "device": {"fuse_reduce": FUSE_REDUCE}}


@dataclass
class PassReport:
    """What one pass did in one round of a stage; the sizes and ``roots`` are those
    of the graph before and after the whole round (the passes of a round take
    turns node by node, so no graph exists between them)."""

    name: str
    changes: int
    nodes_before: int
    nodes_after: int
    edges_before: int
    edges_after: int
    roots: list = field(default_factory=list, repr=False)   # the graph after the round
    stage: str = STAGES[0]
    round: int = 1


@dataclass
class OptimiseResult:
    roots: list
    report: list

    def changes_by_pass(self) -> dict[str, int]:
        """Changes per pass name, over every round."""
        totals: dict[str, int] = {}
        for r in self.report:
            totals[r.name] = totals.get(r.name, 0) + r.changes
        return totals

    def rounds(self) -> list[list[PassReport]]:
        """The report grouped by round (stage, then round number), in order."""
        grouped: dict[tuple, list] = {}
        for r in self.report:
            grouped.setdefault((r.stage, r.round), []).append(r)
        return list(grouped.values())


def select_passes(passes, fast_math: bool = False) -> tuple[str, ...]:
    """Normalise the ``optimise=`` choice: ``True``/``None`` the default pipeline,
    ``False`` none, or an iterable of pass names (validated)."""
    if passes is False:
        return ()
    if passes is None or passes is True:
        chosen = set(DEFAULT)
    else:
        chosen = set(passes)
        unknown = chosen - set(PIPELINE)
        if unknown:
            raise ValueError(f"optimise: unknown pass(es) {sorted(unknown)}; the passes are "
                             f"{list(PIPELINE)}")
    if fast_math:
        chosen.add("fast_math")
    return tuple(n for n in PIPELINE if n in chosen)


def optimise(roots: Sequence, passes=None, *, fast_math: bool = False,
             evaluate: Optional[Callable] = None, check: bool = False,
             stepwise: Optional[bool] = None, max_rounds: int = 8,
             kernels: str = "numpy") -> OptimiseResult:
    """Rewrite the graph of ``roots`` with the chosen passes until it stops changing.

    The stages (:data:`~.rewriter.STAGES`) run in order; within a stage each round
    is one traversal that tries every pass of the stage at each node, in pipeline
    order (cheap: building must stay fast), and rounds repeat until nothing
    changes. ``check=True`` runs exactly this schedule and validates the graph
    after every round (:func:`~.invariants.check_invariants`), naming the passes
    that changed it. ``stepwise`` is deprecated: it once chose another schedule
    and now changes nothing. ``kernels`` is the engine's kernel choice (see
    ``graphc.compile``): with ``"generated"`` lowering keeps the grouped convolutions
    that the engine's direct kernel takes.

    >>> import graphc.ndarray as N, graphc.eager as E
    >>> x = N.var("x", (3,))
    >>> y = N.exp(x) * 1.0 + N.exp(x)
    >>> optimise([y], evaluate=E.evaluate, check=True).changes_by_pass()
    {'cse': 1, 'simplify': 1, 'fuse_elementwise': 1}
    """
    if stepwise is not None:
        warnings.warn("optimise(stepwise=...) is deprecated: check=True validates the one "
                      "schedule that always runs", DeprecationWarning, stacklevel=2)
    names = select_passes(passes, fast_math)
    if kernels not in LOWERING_FOR_KERNELS:
        raise ValueError(f"optimise: unknown kernels={kernels!r}; expected one of "
                         f"{', '.join(map(repr, LOWERING_FOR_KERNELS))}")
    table = dict(STATIC_PASSES, lowering=LOWERING_FOR_KERNELS[kernels],
                 **KERNEL_PASSES[kernels])
    if evaluate is not None:
        table["fold"] = folding_pass(evaluate)
    return run_stages(list(roots), [table[n] for n in names if n in table], check=check,
                      max_rounds=max_rounds)


def run_stages(roots: Sequence, chosen: Sequence[Pass], *, check: bool = False,
               max_rounds: int = 8) -> OptimiseResult:
    """The one pass executor: the stages of ``chosen`` in :data:`~.rewriter.STAGES`
    order, each to a fixed point (at most ``max_rounds`` rounds); within a stage
    the passes keep their order in ``chosen``.

    >>> import graphc.ndarray as N
    >>> x = N.var("x", (3,))
    >>> result = run_stages([N.tanh(N.exp(x) + N.exp(x))], [CSE, FUSE_ELEMENTWISE])
    >>> [(r.stage, r.round, r.name, r.changes) for r in result.report]
    [('rewrite', 1, 'cse', 1), ('fuse', 1, 'fuse_elementwise', 2)]
    """
    report = []
    roots = list(roots)
    for stage in STAGES:
        members = [p for p in chosen if p.stage == stage]
        if members:
            roots, rounds = _run_stage(roots, stage, members, check, max_rounds)
            report += rounds
    return OptimiseResult(roots, report)


def _measure(roots):
    """(nodes, edges, kinds present) of the graph of ``roots``."""
    order = topological_order(roots)
    return len(order), edge_count(order), {n.op.kind for n in order}


def _active(passes, present):
    """The passes that may change a graph holding ``present`` kinds in one round: a
    pass also sees the kinds that the others may make at the node it is tried at."""
    available, active = set(present), []
    while True:
        now = [p for p in passes if p.applies_to(available)]
        if len(now) == len(active):
            return now
        active = now
        for p in active:
            if p.produces is None:   # undeclared: it may make any kind
                return list(passes)
            available |= p.produces


def _run_stage(roots, stage, passes, check, max_rounds):
    report = []
    nodes, edges, present = _measure(roots)
    for round_ in range(1, max_rounds + 1):
        active = _active(passes, present)
        if not active:
            break
        rewriting = [p for p in active if p.rules or p.function]
        merger = next((p.name for p in active if p.merge), None)
        hits = dict.fromkeys((p.name for p in active), 0)

        def every_pass(node, ctx):
            for pass_ in rewriting:
                result = pass_.rewrite_node(node, ctx)
                if result is not None:
                    if check and (result.shape != node.shape or result.dtype != node.dtype):
                        raise InvariantError(f"{pass_.name}: replaced {node.label()} "
                                             f"({node.shape} {node.dtype}) by {result.label()} "
                                             f"({result.shape} {result.dtype})")
                    hits[pass_.name] += 1
                    return result
            return None

        whole = roots
        for pass_ in active:
            if pass_.graph_function is not None:
                whole, made = pass_.graph_function(whole)
                hits[pass_.name] += made
        new_roots, changes = rewrite(whole, every_pass, merge=merger is not None)
        changes += sum(hits[p.name] for p in active if p.graph_function is not None)
        if not changes:
            break
        if merger is not None:  # what the rules did not do, merging did
            hits[merger] = changes - sum(v for k, v in hits.items() if k != merger)
        after = _measure(new_roots)
        if check:
            _check_round(roots, new_roots, present, after[2], active, hits,
                         f"{stage} round {round_} ("
                         + ", ".join(f"{k} {v}" for k, v in hits.items() if v) + ")")
        report.extend(PassReport(name, n, nodes, after[0], edges, after[1], new_roots,
                                 stage, round_)
                      for name, n in hits.items() if n)
        roots, (nodes, edges, present) = new_roots, after
    return roots, report


def _check_round(old_roots, new_roots, old_kinds, new_kinds, active, hits, label):
    """The invariants, and that every kind the round made is declared by a pass
    that changed the graph (the executor relies on ``Pass.produces`` to skip passes)."""
    check_invariants(old_roots, new_roots, label)
    made = new_kinds - old_kinds
    for p in active:
        if hits[p.name]:
            if p.produces is None:
                return
            made -= p.produces
    if made:
        raise InvariantError(f"{label}: made {sorted(made)}, which no pass that changed the "
                             "graph declares in its Pass.produces")
