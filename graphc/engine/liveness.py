"""When each computed value is born and dies in a fixed evaluation order, which
parents a node may overwrite in place, and the live-bytes lower bound.

Step ``i`` computes ``steps[i]``. A value is live from its own step to the last
step that reads it; outputs and update values are *pinned*: live to the end.
Variables and constants are not planned (they own their memory).

*Views* (NumPy's free slices): a slice, transpose, broadcast or flip every reader
of which reads strided memory (``KINDS[kind].reads_strided``), or a reshape of
contiguous memory (of strided memory where NumPy's reshape is a view, for such readers:
:mod:`.view_layout`), that is no output, update value or kept value, is a view of its
parent's memory (:data:`.program.VIEW_OF`): no planned bytes, no kernel. Its
*root* (the first value up its chain of views that is not one: a computed value,
a variable or a constant) stays live until the view's last reader; nothing
overwrites a view in place, nor its root in a step that also reads a view of it;
an update computed into a variable waits for every reader of a view of it.

>>> import graphc.ndarray as N
>>> from graphc.graph import Graph
>>> x = N.var("x", (1000,))
>>> live = analyse(Graph([x], [N.exp(N.exp(x))]))
>>> live.lower_bound_bytes(), live.lower_bound_bytes(inplace=False)
(4000, 8000)
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from ..type.kinds import KINDS, MIN_INPLACE_SIZE, is_leaf
from .strategy import fused_overwritable, may_overwrite, stream_chunk, streams_over_addend
from .concurrency import Concurrency
from .program import VIEW_OF
from .view_layout import layout, nocopy_strides

@dataclass
class Liveness:
    steps: list                      # computed nodes, in evaluation order
    step_of: dict[int, int]          # id(node) -> its step
    last_use: dict[int, int]         # id(node) -> last step that needs it (end if pinned)
    pinned: set[int]                 # ids of outputs and update values
    inplace: dict[int, list] = field(default_factory=dict)  # id(n) -> parents n may overwrite
    kept: set = field(default_factory=set)  # ids pinned because their inputs rarely change
    # id(update value) -> name of the variable it is computed straight into (unplanned)
    external: dict = field(default_factory=dict)
    #: updates not computed into their variable only because a step that may fail
    #: (``fallible``) comes after them
    held_back: int = 0
    # happens-before facts when steps may run in any order their dependencies allow
    # (schedule="parallel"); None for the planned serial order
    concurrency: Optional[Concurrency] = None
    # id(view) -> its root: the value whose memory it reads (see the module docstring)
    views: dict = field(default_factory=dict)

    def kept_bytes(self) -> int:
        """Bytes held between runs for values of rarely-changing inputs."""
        return sum(n.nbytes for n in self.steps if id(n) in self.kept)

    def unplanned(self, node) -> bool:
        """Whether ``node`` (a step) takes no planned memory: computed into its
        variable, or a view."""
        return id(node) in self.external or id(node) in self.views

    @property
    def end(self) -> int:
        return len(self.steps)

    def live_bytes_per_step(self, inplace: bool = True) -> list[int]:
        """Bytes of values that must coexist at each step; with ``inplace`` a node
        that may overwrite a dying parent is counted once with it."""
        delta = [0] * (self.end + 2)
        for n in self.steps:
            if self.unplanned(n):
                continue
            delta[self.step_of[id(n)]] += n.nbytes
            delta[self.last_use[id(n)] + 1] -= n.nbytes
        live, running = [], 0
        for i, n in enumerate(self.steps):
            running += delta[i]
            saved = n.nbytes if inplace and self.inplace.get(id(n)) else 0
            live.append(running - saved)
        return live

    def lower_bound_bytes(self, inplace: bool = True) -> int:
        """No plan in this order can use less: the peak of :meth:`live_bytes_per_step`."""
        return max(self.live_bytes_per_step(inplace), default=0)

    def naive_bytes(self) -> int:
        """Bytes if every computed value had its own memory (values computed into
        their variables and views excepted)."""
        return sum(n.nbytes for n in self.planned_steps())

    def planned_steps(self) -> list:
        """The computed values that need planned memory, in evaluation order."""
        return [n for n in self.steps if not self.unplanned(n)]


def _may_alias(node, parent) -> bool:
    if parent.dtype != node.dtype:
        return False
    if node.op.kind == "reshape":
        return parent.nbytes == node.nbytes
    return parent.shape == node.shape and node.size >= MIN_INPLACE_SIZE


def view_roots(graph, steps, kept=frozenset(), kinds=None) -> dict:
    """``id(view) -> root`` for the steps that can be views (see the module
    docstring): a kind of :data:`.program.VIEW_OF`, no output, update value or
    kept value (``kept``: ids; computed once, its copy is cheap and reads fast), every
    reader reading strided memory, or a reshape of a computed value or constant
    that is no view (then contiguous, whoever reads it). ``kinds``: only views of
    these kinds (``None``: all of :data:`.program.VIEW_OF`).

    >>> import graphc.ndarray as N
    >>> from graphc.graph import Graph
    >>> x = N.var("x", (4, 4))
    >>> y = N.exp(x)
    >>> t = y.T; s = t[::2]
    >>> views = view_roots(Graph([x], [N.sum(s * 2.0)]), [y, t, s])
    >>> views[id(t)] is y, views[id(s)] is y, len(views)
    (True, True, 2)
    """
    fixed = {id(o) for o in graph.outputs} | {id(v) for _, v in graph.updates} | set(kept)
    readers: dict[int, list] = {}
    for n in steps:
        for p in n.parents:
            readers.setdefault(id(p), []).append(n)
    roots: dict = {}
    for n in steps:
        if (n.op.kind not in VIEW_OF or id(n) in fixed or n.parents[0].dtype != n.dtype
                or (kinds is not None and n.op.kind not in kinds)):
            continue
        parent = n.parents[0]
        strided_readers = all(KINDS[r.op.kind].reads_strided for r in readers.get(id(n), ()))
        if n.op.kind == "reshape":
            # of a variable it stays a copy for now (a test pins that its step is not
            # elided); of strided memory it is a view where NumPy's would be one
            # (:mod:`.view_layout`), for readers of strided memory, of no variable's
            # (whose array a run may bind to any layout)
            if parent.op.kind == "var" or (_strided(parent, roots) and not (
                    strided_readers and _strided_reshape_views(n, parent, roots))):
                continue
        elif not strided_readers:
            continue
        roots[id(n)] = roots.get(id(parent), parent)
    return roots


def _strided_reshape_views(node, parent, views) -> bool:
    """Whether the reshape ``node`` of the strided view or constant ``parent`` reads its
    bytes without a copy, the chain of views rooted at no variable."""
    root = views.get(id(parent), parent)
    if root.op.kind == "var" or (root.op.kind == "const" and root.value is None):
        return False
    shape, strides = layout(parent, views, VIEW_OF)
    return nocopy_strides(shape, strides, node.shape) is not None


def _strided(node, views) -> bool:
    """Whether ``node``'s value may be strided memory: a view (a reshape view only
    where its parent is), or a constant that is."""
    if id(node) in views:
        return node.op.kind != "reshape" or _strided(node.parents[0], views)
    return node.op.kind == "const" and not node.value.flags.c_contiguous


def _same_bytes(node, views):
    """The value whose bytes ``node`` is, element for element in the same order:
    the root of a reshape view of contiguous memory (of a value that is no view, or
    of such a view), else ``node``. Writing over one in place is writing over the
    other."""
    if id(node) in views and node.op.kind == "reshape" and not _strided(node, views):
        return views[id(node)]
    return node


def _streams_strided(node, views) -> bool:
    """A fused node whose NumPy kernel would stream and may read strided memory of
    full size: it then runs in blocks without streaming (:mod:`.cpu`), so it may
    write over only what an unstreamed program may."""
    return (node.op.kind == "fused"
            and stream_chunk(node.shape, [p.shape for p in node.parents], node.dtype.itemsize)
            and any(_strided(p, views) and p.size == node.size for p in node.parents))


def _may_write_over(node, position, views) -> bool:
    if _streams_strided(node, views):
        # shapes of one element: the program's own rule, as if it did not stream
        return position in fused_overwritable(node.op["program"], [()] * len(node.parents), ())
    return may_overwrite(node, position)


def kept_values(graph, keep) -> set[int]:
    """Ids of computed values that depend on no input outside ``keep`` (names) and
    on nothing drawn at random: values worth keeping between runs."""
    keep = set(keep)
    unknown = keep - {v.name for v in graph.inputs}
    if unknown:
        raise ValueError(f"compile: pinned inputs {sorted(unknown)} are not inputs of the graph")
    steady: dict[int, bool] = {}
    for n in graph.order:
        kind = n.op.kind
        if kind == "var":
            steady[id(n)] = n.name in keep
        elif is_leaf(kind):
            steady[id(n)] = True
        else:
            steady[id(n)] = not KINDS[kind].stateful and all(steady[id(p)] for p in n.parents)
    return {id(n) for n in graph.order if not is_leaf(n.op.kind) and steady[id(n)]}


def last_fallible_step(steps) -> int:
    """The index of the last step whose kernel may raise on its run-time values
    (``KINDS[kind].fallible``: an index out of range, a callback's error), or -1.

    >>> import graphc.ndarray as N, numpy as np
    >>> x, i = N.var("x", (4,)), N.var("i", (2,), np.int64)
    >>> last_fallible_step([N.exp(x), N.take(x, i), N.sin(x)])
    1
    """
    return max((i for i, n in enumerate(steps) if KINDS[n.op.kind].fallible), default=-1)


def first_variable_write(live) -> int:
    """The first step that writes into a variable (an update computed straight into
    it), or ``live.end``. Every step from there on comes after the last step that
    may fail, so a run computes ``steps[:k]`` freely and then commits ``steps[k:]``
    and its copied updates with interrupts held."""
    return min((live.step_of[key] for key in live.external), default=live.end)


def into_variables(graph, steps, step_of, concurrency=None,
                   after_failures: bool = True, views=None) -> dict[int, str]:
    """Update values that can be computed straight into their variable's memory:
    ``id(value) -> variable name``. Safe when nothing reads the variable after the
    step computing its update (the step itself only where it may overwrite that
    parent), the value is no output and feeds no other update, and the variable
    is no output and no other update's source. It saves the update's planned
    bytes (a training step's new weights and optimiser state) and the copy after
    the run. Only after the last step that may fail (:func:`last_fallible_step`):
    a run then writes no variable before every error it can raise is behind
    it, so a failed run leaves every variable as it was (``after_failures=False``
    drops that condition, to count what it costs). A step reading a view of the
    variable (``views``: :func:`view_roots`) reads the variable."""
    views = views or {}
    first_safe = last_fallible_step(steps) + 1 if after_failures else 0
    outputs = {id(o) for o in graph.outputs}
    sources: dict[int, int] = {}
    for _, value in graph.updates:
        sources[id(value)] = sources.get(id(value), 0) + 1
    last_read: dict[int, int] = {}
    var_readers: dict[int, list[int]] = {}
    through_view: dict[int, set] = {}   # id(step) -> ids of variables it reads strided
    for n in steps:
        if id(n) in views:
            continue         # reads nothing when the graph runs: its readers do
        for p in n.parents:
            root = views.get(id(p), p)
            if root.op.kind == "var":
                last_read[id(root)] = step_of[id(n)]
                var_readers.setdefault(id(root), []).append(step_of[id(n)])
                if _same_bytes(p, views) is not root:
                    through_view.setdefault(id(n), set()).add(id(root))
    chosen = {}
    for var, value in graph.updates:
        if (is_leaf(value.op.kind) or id(value) in outputs or id(var) in outputs
                or id(var) in sources or sources[id(value)] > 1
                or value.shape != var.shape or value.dtype != var.dtype):
            continue
        step, read = step_of[id(value)], last_read.get(id(var), -1)
        if step < first_safe:
            continue  # a later step may raise after the variable was overwritten
        if read > step or read == step and id(var) in through_view.get(id(value), ()):
            continue  # read later, or through a view by the very step that would write it
        if read == step and not all(
                (_may_write_over(value, k, views) or streams_over_addend(value, k))
                and _may_alias(value, p)
                for k, p in enumerate(value.parents) if _same_bytes(p, views) is var):
            continue
        if concurrency is not None and not all(
                r == step or concurrency.before(r, step) for r in var_readers.get(id(var), ())):
            continue  # a reader on a parallel branch could see the new value
        chosen[id(value)] = var.name
    return chosen


def analyse(graph, keep=(), concurrent: bool = False, views=False) -> Liveness:
    """The liveness of ``graph.order`` (see the module docstring). Values that
    depend only on the inputs named in ``keep`` (and constants) are pinned too,
    so they survive between runs that do not change those inputs. With
    ``concurrent=True`` steps may later run in any order their dependencies
    allow: ``live.concurrency`` holds the happens-before facts the planners
    then respect, and a node overwrites a parent in place only when every
    other reader of that parent surely ran before it. With ``views=True`` the
    values :func:`view_roots` picks are views (``live.views``; ``compile``'s
    default); a set of kinds makes only views of those kinds (the device's
    ``{"reshape"}``: its raw kernels read contiguous memory); else every slice,
    transpose, broadcast and flip is a copy."""
    steps = [n for n in graph.order if not is_leaf(n.op.kind)]
    step_of = {id(n): i for i, n in enumerate(steps)}
    pinned = {id(n) for n in graph.outputs} | {id(v) for _, v in graph.updates}
    kept = kept_values(graph, keep) if keep else set()
    pinned |= kept
    last_use = {id(n): -1 for n in steps}
    for i, n in enumerate(steps):
        for p in n.parents:
            if id(p) in last_use:
                last_use[id(p)] = i
    end = len(steps)
    for key in pinned:
        if key in last_use:
            last_use[key] = end
    roots = (view_roots(graph, steps, kept, None if views is True else views) if views
             else {})
    for key, root in roots.items():   # a root lives as long as any view of it is read
        if id(root) in last_use:
            last_use[id(root)] = max(last_use[id(root)], last_use[key])
    live = Liveness(steps, step_of, last_use, pinned)
    live.kept = kept
    live.views = roots
    if concurrent:
        live.concurrency = Concurrency(_through_views(steps, roots))
    order = live.concurrency
    live.external = into_variables(graph, steps, step_of, order, views=roots)
    if last_fallible_step(steps) >= 0:     # what atomicity costs: updates not written in
        live.held_back = len(into_variables(graph, steps, step_of, order, after_failures=False,
                                            views=roots)) - len(live.external)
    for i, n in enumerate(steps):
        if live.unplanned(n):
            continue  # it writes into its variable (not over a parent), or computes nothing
        # a parent read through a reshape view is overwritten through it too; one
        # read through any other view (a slice, a flip...) is not overwritten at all
        strided = {id(roots[id(q)]) for q in n.parents if id(q) in roots and _strided(q, roots)}
        allowed = []
        for pos, p in enumerate(n.parents):
            t = _same_bytes(p, roots)
            if (id(t) in step_of and id(t) not in roots and last_use[id(t)] == i
                    and _may_alias(n, p) and id(t) not in strided
                    and all(_may_write_over(n, k, roots)
                            for k, q in enumerate(n.parents) if _same_bytes(q, roots) is t)
                    and not any(q is t for q in allowed)
                    and (order is None or order.readers_before(step_of[id(t)], i))):
                allowed.append(t)
        if allowed:
            live.inplace[id(n)] = allowed
    return live


class _Step:
    """A step as the happens-before analysis sees it once views are seen through:
    a view reads nothing (its readers read its root), so it has no parents."""

    __slots__ = ("parents",)

    def __init__(self):
        self.parents = []


def _through_views(steps, views):
    """What :class:`~.concurrency.Concurrency` reads (``.steps``, each with
    ``.parents``), with every reader of a view reading the view's root instead:
    then the root's readers include its views' readers, and a value may take its
    bytes only after all of them."""
    proxies = {id(n): _Step() for n in steps}
    for n in steps:
        if id(n) not in views:
            proxies[id(n)].parents = [proxies.get(id(root), root) for root in
                                      (views.get(id(p), p) for p in n.parents)]
    return _Seen([proxies[id(n)] for n in steps])


@dataclass
class _Seen:
    steps: list


class _Checked:
    """A planned step as the plan checkers see it: the node, but reading the roots
    of the views it reads."""

    __slots__ = ("node", "parents")

    def __init__(self, node):
        self.node, self.parents = node, list(node.parents)

    def __getattr__(self, name):
        return getattr(self.node, name)


def viewless(live: Liveness, plan):
    """``(liveness, plan)`` as the independent plan checkers
    (:func:`~.checker.check_plan`, :func:`~.checker.check_concurrent_plan`) verify
    them: views dropped (they own no bytes), every reader of a view reading its
    root instead, steps renumbered. The root's bytes then must stay untouched until
    its views' last reader, which the checkers verify like any other read.

    >>> import graphc.ndarray as N
    >>> from graphc.graph import Graph
    >>> from graphc.engine.planners import plan_blocks
    >>> from graphc.engine.checker import check_plan
    >>> x = N.var("x", (8,))
    >>> live = analyse(Graph([x], [N.sum(N.exp(x)[::2])]), views=True)
    >>> seen, plan = viewless(live, plan_blocks(live))
    >>> len(live.steps), len(seen.steps), check_plan(seen, plan)
    (3, 2, None)
    """
    if not live.views:
        return live, plan
    views = live.views
    kept = [n for n in live.steps if id(n) not in views]
    proxies = {id(n): _Checked(n) for n in kept}
    for proxy in proxies.values():
        proxy.parents = [proxies.get(id(root), root) for root in
                         (views.get(id(p), p) for p in proxy.node.parents)]
    renumbered, k = [], 0      # old step -> the first planned step at or after it
    for n in live.steps:
        renumbered.append(k)
        k += id(n) not in views
    renumbered.append(k)       # the end
    seen = Liveness([proxies[id(n)] for n in kept],
                    {id(proxies[id(n)]): renumbered[live.step_of[id(n)]] for n in kept},
                    {id(proxies[id(n)]): renumbered[live.last_use[id(n)]] for n in kept},
                    {id(proxies[key]) for key in live.pinned if key in proxies})
    seen.inplace = {id(proxies[key]): [proxies[id(p)] for p in allowed]
                    for key, allowed in live.inplace.items()}
    seen.external = {id(proxies[key]): name for key, name in live.external.items()}
    place = {id(proxies[key]): where for key, where in plan.place.items() if key in proxies}
    aliases = {id(proxies[key]): id(proxies[parent]) for key, parent in plan.aliases.items()}
    return seen, replace(plan, place=place, aliases=aliases)
