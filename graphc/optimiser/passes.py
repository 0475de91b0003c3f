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
from .fold import folding_pass
from .fusion import ADAGRAD, FMA, FUSE_ELEMENTWISE, MATMUL_TRANSPOSE
from .invariants import check_invariants
from .rewriter import Pass, rewrite
from .simplify import EXPANSIONS, FAST_MATH, SIMPLIFY

CSE = Pass("cse", merge=True, doc="identical op, attributes and parents -> one node")

#: pass names in pipeline order; "fold" is made per call (it needs an evaluator)
PIPELINE = ("cse", "fold", "simplify", "drop_expansions", "fast_math", "matmul_transpose",
            "adagrad", "fma", "fuse_elementwise")
_STATIC = {p.name: p for p in (CSE, SIMPLIFY, EXPANSIONS, FAST_MATH, MATMUL_TRANSPOSE, ADAGRAD,
                               FMA, FUSE_ELEMENTWISE)}
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
             max_rounds: int = 8) -> OptimiseResult:
    """Rewrite the graph of ``roots`` with the chosen passes until it stops changing.

    Each round applies every pass once, in pipeline order; rounds repeat until
    one changes nothing (a pass applies its rules at each node until they
    decline, so a second application within a round rarely finds anything).
    """
    names = select_passes(passes, fast_math)
    table = dict(_STATIC)
    if evaluate is not None:
        table["fold"] = folding_pass(evaluate)
    roots = list(roots)
    report = []
    nodes, edges = _size(roots)
    for _ in range(max_rounds):
        changed = False
        present = {n.op.kind for n in topological_order(roots)}
        for name in names:
            pass_ = table.get(name)
            if pass_ is None or not pass_.applies_to(present):
                continue
            new_roots, changes = rewrite(roots, pass_.rewrite_node if (
                pass_.rules or pass_.function) else None, merge=pass_.merge)
            if not changes:
                continue
            if check:
                check_invariants(roots, new_roots, name)
            after = _size(new_roots)
            report.append(PassReport(name, changes, nodes, after[0], edges, after[1],
                                     new_roots))
            roots, (nodes, edges) = new_roots, after
            changed = True   # kinds made by this pass are seen by the next round
        if not changed:
            break
    return OptimiseResult(roots, report)
