"""The optimiser's pipeline: named passes in a fixed order, each run to a
fixpoint, the whole pipeline repeated until nothing changes. Each pass
reports what it changed.

``optimise(roots, passes=None)`` runs the default pipeline; ``passes`` may
name a subset (order is always the pipeline's). ``fast_math=True`` adds the
value-changing rewrites; ``check=True`` runs the invariant checker after every
pass.

>>> import graphc.ndarray as N, graphc.eager as E
>>> x = N.var("x", (3,))
>>> result = optimise([N.exp(x) * 1.0 + N.exp(x)], evaluate=E.evaluate)
>>> [(r.name, r.changes) for r in result.report if r.changes]
[('cse', 1), ('simplify', 1)]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from ..symbol.traverse import edge_count, topological_order
from .fast_math import FAST_MATH
from .fold import folding_pass
from .fusion import ADAGRAD, FMA, FUSE_ELEMENTWISE, MATMUL_TRANSPOSE
from .invariants import check_invariants
from .lowering import LOWERING
from .rewriter import Pass, rewrite
from .simplify import EXPANSIONS, SIMPLIFY

CSE = Pass("cse", merge=True, doc="identical op, attributes and parents -> one node")

#: pass names in pipeline order; "fold" is made per call (it needs an evaluator)
PIPELINE = ("cse", "fold", "simplify", "drop_expansions", "fast_math", "lowering",
            "matmul_transpose", "adagrad", "fma", "fuse_elementwise")
#: the passes by name, but "fold" (made per call around an evaluator)
STATIC_PASSES = {p.name: p for p in (CSE, SIMPLIFY, EXPANSIONS, FAST_MATH, LOWERING,
                                     MATMUL_TRANSPOSE, ADAGRAD, FMA, FUSE_ELEMENTWISE)}
DEFAULT = tuple(n for n in PIPELINE if n != "fast_math")


@dataclass
class PassReport:
    """What one application of a pass did."""

    name: str
    changes: int
    nodes_before: int
    nodes_after: int
    edges_before: int
    edges_after: int
    roots: list = field(default_factory=list, repr=False)   # the graph after this pass


@dataclass
class OptimiseResult:
    roots: list
    report: list

    def changes_by_pass(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for r in self.report:
            totals[r.name] = totals.get(r.name, 0) + r.changes
        return totals


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


def _size(roots):
    order = topological_order(roots)
    return len(order), edge_count(order)


def optimise(roots: Sequence, passes=None, *, fast_math: bool = False,
             evaluate: Optional[Callable] = None, check: bool = False,
             stepwise: bool = False, max_rounds: int = 8) -> OptimiseResult:
    """Rewrite the graph of ``roots`` with the chosen passes until it stops changing.

    By default each round is one traversal that tries every pass at each node in
    pipeline order (cheap: building must stay fast). With ``stepwise=True`` (or
    ``check=True``) each round applies the passes one after another over the
    whole graph, recording the graph after each and, with ``check``, running
    the invariant checker between passes.
    """
    names = select_passes(passes, fast_math)
    table = dict(STATIC_PASSES)
    if evaluate is not None:
        table["fold"] = folding_pass(evaluate)
    chosen = [table[n] for n in names if n in table]
    if stepwise or check:
        return _stepwise(list(roots), chosen, check, max_rounds)
    return _combined(list(roots), chosen, max_rounds)


def _stepwise(roots, chosen, check, max_rounds) -> OptimiseResult:
    report = []
    nodes, edges = _size(roots)
    for _ in range(max_rounds):
        changed = False
        present = {n.op.kind for n in topological_order(roots)}
        for pass_ in chosen:
            if not pass_.applies_to(present):
                continue
            new_roots, changes = rewrite(roots, pass_.rewrite_node if (
                pass_.rules or pass_.function) else None, merge=pass_.merge)
            if not changes:
                continue
            if check:
                check_invariants(roots, new_roots, pass_.name)
            after = _size(new_roots)
            report.append(PassReport(pass_.name, changes, nodes, after[0], edges, after[1],
                                     new_roots))
            roots, (nodes, edges) = new_roots, after
            changed = True   # kinds made by this pass are seen by the next round
        if not changed:
            break
    return OptimiseResult(roots, report)


#: passes that run only once the others have finished: a fused node hides its members
#: from every pattern (the AdaGrad rule, FMA), so fusing first would pre-empt them
LAST_PASSES = frozenset({"fuse_elementwise"})


def _combined(roots, chosen, max_rounds) -> OptimiseResult:
    """Every pass tried at each node in one traversal per round (cheap), in two
    stages: the rewrites to a fixed point, then :data:`LAST_PASSES`; the same
    outcome as the stepwise order, which runs each pass over the whole graph."""
    report = []
    for stage in ([p for p in chosen if p.name not in LAST_PASSES],
                  [p for p in chosen if p.name in LAST_PASSES]):
        if stage:
            result = _combined_stage(roots, stage, max_rounds)
            roots = result.roots
            report += result.report
    return OptimiseResult(roots, report)


def _combined_stage(roots, chosen, max_rounds) -> OptimiseResult:
    rewriting = [p for p in chosen if p.rules or p.function]
    merge = any(p.merge for p in chosen)
    report = []
    nodes, edges = _size(roots)
    for _ in range(max_rounds):
        hits = dict.fromkeys((p.name for p in chosen), 0)

        def every_pass(node, ctx):
            for pass_ in rewriting:
                result = pass_.rewrite_node(node, ctx)
                if result is not None:
                    hits[pass_.name] += 1
                    return result
            return None

        new_roots, changes = rewrite(roots, every_pass, merge=merge)
        if not changes:
            break
        if merge:  # what the rules did not do, merging did
            hits["cse"] = changes - sum(v for k, v in hits.items() if k != "cse")
        after = _size(new_roots)
        report.extend(PassReport(name, n, nodes, after[0], edges, after[1], new_roots)
                      for name, n in hits.items() if n)
        roots, (nodes, edges) = new_roots, after
    return OptimiseResult(roots, report)
