"""What a compiled graph tells about itself: its structure and memory figures
(``stats``), the optimiser's rounds planned one by one (``pass_report``), which
values share memory and a Graphviz picture. The introspection half of
:class:`graphc.compiler.Executable`, which runs; kept apart so each reads alone.

>>> import numpy as np, graphc, graphc.ndarray as N
>>> x = N.var("x", (4,))
>>> g = graphc.compile([x], [N.exp(x) * 2.0])
>>> g.stats()["planned_bytes"], g.pass_report()[0]["passes"]
(16, '(as written)')
"""
from __future__ import annotations

from typing import Optional

from .engine.concurrency import Concurrency
from .engine.liveness import analyse
from .engine.ordering import choose_order
from .engine.planners import make_plan
from .graph import Graph, to_dot
from .graph.stats import structure_stats
from .optimiser.passes import OptimiseResult


class Reports:
    """Reports of an :class:`~graphc.compiler.Executable` (it holds ``graph``,
    ``source``, ``liveness``, ``plan``, ``program``, ``report`` and the options
    these read)."""

    def stats(self) -> dict:
        """Structure and memory figures: nodes, edges, blocks, planned_bytes,
        lower_bound_bytes (in-place aware), lower_bound_no_inplace_bytes,
        naive_bytes, plan_ratio, steps, steps_last_run, pinned_bytes,
        updates_into_variables (update values computed straight into their
        variable, unplanned and not copied); what all-or-nothing runs cost:
        updates_held_back (updates not computed into their variable because a
        step that may fail comes after them), staging_bytes, rollback_bytes
        (old values of fed inputs, allocated on the first refeed) and
        commit_steps (steps run with interrupts held); bound_inputs (inputs read
        from the caller's array, not copied in: see ``compile(bind_inputs=)``);
        view_values (slices, transposes... read in place as views: no bytes, no
        step; counted in elided_steps);
        generated_steps (steps that run one generated kernel each);
        rematerialised_values (values recomputed for their late readers, see
        ``compile(remat=...)``) and remat_saved_bytes (how far that lowered the
        lower bound);
        build_seconds; with the optimiser on, nodes_unoptimised,
        edges_unoptimised and the changes made by each pass."""
        live, plan = self.liveness, self.plan
        lower = live.lower_bound_bytes()
        stats = structure_stats(self.graph)
        source = structure_stats(self.source)
        changes: dict[str, int] = {}
        for r in self.report:
            changes[r.name] = changes.get(r.name, 0) + r.changes
        stats.update({
            "plan": plan.strategy,
            "blocks": len(plan.buffers),
            "planned_bytes": plan.planned_bytes,
            "lower_bound_bytes": lower,
            "lower_bound_no_inplace_bytes": live.lower_bound_bytes(inplace=False),
            "naive_bytes": live.naive_bytes(),
            "plan_ratio": plan.planned_bytes / lower if lower else 1.0,
            "inplace_values": len(plan.aliases),
            "updates_into_variables": len(live.external),
            # what a run being all or nothing costs: updates kept out of their
            # variable because a step that may fail comes later, the buffers that
            # stage updates read from other variables and keep fed inputs' old
            # values, and the steps run with interrupts held
            "updates_held_back": live.held_back,
            "staging_bytes": sum(s.nbytes for _, _, s in self._updates if s is not None),
            "rollback_bytes": sum(b.nbytes for b in self._rollback.values()),
            "bound_inputs": len(self._bound),
            "commit_steps": sum(k is not None for k in self.program.kernels[self._commit_from:]),
            "pinned_bytes": live.kept_bytes(),
            "steps": len(self.program.steps),
            "steps_last_run": self._steps_last_run,
            "elided_steps": self.program.elided,
            "view_values": len(live.views),
            "generated_steps": self.program.generated,
            "build_seconds": self._build_seconds,
            "schedule": self.schedule,
            "workers": self._runner.workers,
            "critical_path_steps": self._critical_path(),
            "serial_planned_bytes": self._serial_bytes,
            "parallel_extra_bytes": plan.planned_bytes - self._serial_bytes,
            "scratch_bytes": self.program.ctx.scratch_bytes,
            "nodes_unoptimised": source["nodes"],
            "edges_unoptimised": source["edges"],
            "optimiser_changes": changes,
            "rematerialised_values": self._remat.values if self._remat else 0,
            "remat_saved_bytes": self._remat.saved_bytes if self._remat else 0,
        })
        stats.update(self.program.device_stats())
        return stats

    def _critical_path(self):
        """Steps that must run one after another (None for the serial schedule)."""
        if self.schedule == "serial":
            return None
        order = self.liveness.concurrency or Concurrency(self.liveness)
        return order.critical_path

    def pass_report(self, plan: Optional[str] = None) -> list[dict]:
        """Per optimiser round, in order: the passes that changed the graph in it
        (``"cse+simplify"``), their changes, and the nodes, edges and planned bytes
        after it (each intermediate graph is planned here, on demand). The passes
        of a round take turns node by node, so the round is the finest step with a
        graph of its own. The first row is the graph as written.
        Example: ``g.pass_report()``"""
        strategy = plan or self.plan.strategy
        rows = [dict(passes="(as written)", changes=0,
                     **_graph_size(self.source, strategy, self._order, self._views))]
        k = len(self.source.outputs)
        # the report of the very schedule compile ran: each round keeps its graph
        for passes in OptimiseResult(list(self.graph.outputs), self.report).rounds():
            after = passes[0].roots
            graph = Graph(self.source.inputs, after[:k],
                          {var: value for (var, _), value in zip(self.source.updates,
                                                                 after[k:])})
            rows.append(dict(passes="+".join(r.name for r in passes),
                             changes=sum(r.changes for r in passes),
                             **_graph_size(graph, strategy, self._order, self._views)))
        return rows

    def memory_groups(self) -> dict[int, object]:
        """``id(node) -> key`` where nodes with the same key share memory: the block
        (``blocks`` plan) or the offset in the arena (``offsets`` plan)."""
        return _groups(self.plan)

    def to_dot(self, optimised: bool = True) -> str:
        """Graphviz DOT text; nodes that share a buffer share a colour. With
        ``optimised=False``, the graph as written (planned alone for colouring).

        Example: ``open("g.dot", "w").write(g.to_dot(optimised=False))``
        """
        graph, plan = (self.graph, self.plan) if optimised else (
            self.source, make_plan(analyse(self.source), self.plan.strategy))
        what = "optimised" if optimised else "as written"
        return to_dot(graph, _groups(plan),
                      title=f"graphc ({what}): {len(graph.order)} nodes, {plan.strategy} plan, "
                            f"{plan.planned_bytes} bytes planned")


def _groups(plan) -> dict[int, object]:
    index = 0 if plan.strategy == "blocks" else 1
    return {key: place[index] for key, place in plan.place.items()}


def _graph_size(graph, strategy, order, views=False) -> dict:
    s = structure_stats(graph)
    _, live = choose_order(graph, order, views=views)
    return {"nodes": s["nodes"], "edges": s["edges"],
            "planned_bytes": make_plan(live, strategy).planned_bytes,
            "lower_bound_bytes": live.lower_bound_bytes()}
