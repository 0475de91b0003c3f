"""A memory-aware evaluation order: the order the engine runs and plans a graph.

``Graph.order`` is a post-order depth-first search from the outputs and then
from each update value in turn. In a training step that reaches a weight's
gradient ``dW = X^T dY`` only when the search reaches that weight's update, at
the very end: every activation ``X`` stays alive through the whole backward
pass, and an update can be computed straight into its variable only once the
last reader of that variable has run.

:func:`memory_order` is a list scheduler (Kahn's algorithm) over the same
graph. Among the steps whose parents are done it runs first one that does not
grow the live bytes (it is the last reader of values at least as large as the
one it makes: a weight gradient once the activation's other readers ran, an
update computed into its variable); otherwise the one whose value the
depth-first order needs soonest, so a step that frees nothing runs as late as
that order allows. An update that could be computed into its variable runs
after every other step (``updates="last"``: a run writes no variable before its last possible error, floating-point ones
included, and every reader of the variable has run by then) or, with
``updates="early"``, as soon as every other reader of the variable and every
step that may fail have run, freeing its gradient at once. Random draws and
callbacks keep their relative order (the draws are the same in either order).
Deterministic: ties go to the depth-first order.

:func:`choose_order` analyses the depth-first order and both placements of
the updates, and keeps the one whose live-bytes lower bound is smallest (on a
tie the depth-first order, then updates last), so no graph gets worse.

Two layers, the second one's update listed first: the depth-first order
computes it (the first ``subtract``) before ``w2.T`` reads ``w2``, so it cannot
be written into ``w2``; the memory order with early updates runs it right
after that read.

>>> import graphc.ndarray as N
>>> from graphc.graph import Graph
>>> x, w1, w2 = N.var("x", (4, 4)), N.var("w1", (4, 4)), N.var("w2", (4, 4))
>>> h = N.tanh(x @ w1); y = h @ w2
>>> dw1 = N.transpose(x) @ (y @ N.transpose(w2))
>>> g = Graph([x, w1, w2], [N.sum(y)], {w2: w2 - N.transpose(h) @ y, w1: w1 - dw1})
>>> steps = lambda order: [n.op.kind for n in order if n.parents]
>>> steps(g.order)[4:]
['transpose', 'matmul', 'subtract', 'transpose', 'transpose', 'matmul', 'matmul', 'subtract']
>>> steps(memory_order(g, updates="early"))[4:]
['matmul', 'sum', 'transpose', 'subtract', 'matmul', 'transpose', 'matmul', 'subtract']
"""
from __future__ import annotations

import copy
import heapq

from ..type.kinds import KINDS, is_leaf
from .liveness import analyse, kept_values

#: the choices of ``graphc.compile(order=...)``
ORDERS = ("memory", "dfs")
#: where :func:`memory_order` may put the updates computed into their variables, in
#: the order :func:`choose_order` prefers them on a tie
UPDATE_PLACES = ("last", "early")

# a ready step's class: steps that do not grow the live bytes run first, then the
# rest, soonest needed by the depth-first order first; an update waiting for its
# variable's readers (or for a step that may fail) runs last
_FREES, _GROWS, _WAITS = 0, 1, 2


def memory_order(graph, kept=(), views=None, updates: str = "last") -> list:
    """Every node of ``graph.order``, parents first, in an order that frees
    memory early and computes updates into their variables as soon as it is
    safe (see the module docstring). Variables and constants come first.
    ``kept``: ids of values kept between runs (never freed, like outputs);
    ``views``: ``id(view) -> root`` (:func:`~graphc.engine.liveness.view_roots`),
    values read in their root's memory (no bytes of their own).
    ``updates``: ``"last"`` runs the updates computed into their variables after
    every other step (a run then writes no variable until its last step that may
    raise, floating-point errors included, is behind it); ``"early"`` runs each
    as soon as its variable's last reader has run (its gradient dies sooner: less
    memory where the gradients outweigh the activations).

    >>> import graphc.ndarray as N
    >>> from graphc.graph import Graph
    >>> x = N.var("x", (4,)); y = N.exp(x)
    >>> [n.op.kind for n in memory_order(Graph([x], [N.sin(y), N.cos(y)]))]
    ['var', 'exp', 'sin', 'cos']
    """
    if updates not in UPDATE_PLACES:
        raise ValueError(f"memory_order: updates must be one of {UPDATE_PLACES}, got "
                         f"{updates!r}")
    return _Scheduler(graph, kept, views, updates == "last").run()


def ordered(graph, order):
    """A shallow copy of ``graph`` whose ``order`` is ``order`` (``graph`` itself
    keeps its depth-first order). Example: ``analyse(ordered(g, memory_order(g)))``"""
    twin = copy.copy(graph)
    twin.order = list(order)
    return twin


def order_choice(order: str) -> str:
    """``order`` checked against :data:`ORDERS` (``compile`` checks its options
    before any work). Example: ``order_choice("dfs")``"""
    if order not in ORDERS:
        raise ValueError(f"compile: unknown order {order!r}; expected one of {list(ORDERS)}")
    return order


def choose_order(graph, order: str = "memory", keep=(), **options):
    """``(graph to plan, its liveness)`` for the ``order`` option of ``compile``
    (``keep`` and ``options``: as for :func:`~graphc.engine.liveness.analyse`,
    which both orders go through). ``"dfs"`` plans ``graph.order`` as it is;
    ``"memory"`` plans :func:`memory_order` (updates last, else early: see
    :data:`UPDATE_PLACES`) where its in-place-aware live-bytes lower bound is
    smaller than the depth-first order's, else (a tie too) the depth-first order.

    >>> import graphc.ndarray as N
    >>> from graphc.graph import Graph
    >>> x = N.var("x", (8,))
    >>> planned, live = choose_order(Graph([x], [N.exp(x)]))
    >>> live.lower_bound_bytes()
    32
    """
    dfs = analyse(graph, keep, **options)
    if order_choice(order) == "dfs":
        return graph, dfs
    kept = kept_values(graph, keep) if keep else ()
    best = (graph, dfs)
    for updates in UPDATE_PLACES:
        candidate = ordered(graph, memory_order(graph, kept, getattr(dfs, "views", None),
                                                updates))
        live = analyse(candidate, keep, **options)
        if live.lower_bound_bytes() < best[1].lower_bound_bytes():
            best = (candidate, live)
    return best


class _Scheduler:
    """The state of one :func:`memory_order` run, over nodes numbered in
    depth-first order (the number is the tie-break)."""

    def __init__(self, graph, kept=(), views=None, updates_last: bool = True):
        self.updates_last = updates_last
        nodes = graph.order
        self.nodes = nodes
        index = {id(n): i for i, n in enumerate(nodes)}
        count = len(nodes)
        views = views or {}
        self.leaf = [is_leaf(n.op.kind) for n in nodes]
        # a view owns no bytes: its root lives until the view's readers ran
        self.size = [0 if leaf or id(n) in views else n.nbytes
                     for n, leaf in zip(nodes, self.leaf)]
        # distinct parents and readers (x * x reads x once): what a step waits for
        self.parents = [list(dict.fromkeys(index[id(p)] for p in n.parents)) for n in nodes]
        self.readers: list[list[int]] = [[] for _ in range(count)]
        for i, ps in enumerate(self.parents):
            for p in ps:
                self.readers[p].append(i)
        # the values whose memory a step reads: a view's root in place of the view
        self.uses = [[] if id(n) in views else
                     list(dict.fromkeys(index[id(views.get(id(p), p))] for p in n.parents))
                     for n in nodes]
        self.users: list[list[int]] = [[] for _ in range(count)]
        for i, ps in enumerate(self.uses):
            for p in ps:
                self.users[p].append(i)
        # values never freed: outputs, update values and kept values live to the end
        self.pinned = {index[id(o)] for o in graph.outputs}
        self.pinned.update(index[k] for k in kept if k in index)
        self.pinned.update(index[id(v)] for _, v in graph.updates)
        self.unread = [len(r) for r in self.users]             # users not yet run
        # when the depth-first order first needs a value: a step that does not free
        # memory runs as late as that allows (a backward pass's ReLU mask just before
        # its reader, not where the search happened to emit it)
        self.needed = [min(r, default=i) for i, r in enumerate(self.readers)]
        self.waiting_on = [len(ps) for ps in self.parents]     # parents not yet run
        # random draws and callbacks keep their depth-first relative order
        self.after: list[list[int]] = [[] for _ in range(count)]
        stateful = [i for i, n in enumerate(nodes) if KINDS[n.op.kind].stateful]
        for before, later in zip(stateful, stateful[1:]):
            self.after[before].append(later)
            self.waiting_on[later] += 1
        self.fallible_left = sum(KINDS[n.op.kind].fallible for n in nodes)
        self.into = self._update_targets(graph, index)   # update value -> its variable
        self.update_of = {var: value for value, var in self.into.items() if var >= 0}
        self.frees = [0] * count
        for j in range(count):
            if self.unread[j] == 1 and not self.leaf[j] and j not in self.pinned:
                self.frees[self.users[j][0]] += self.size[j]
        self.done = [False] * count
        self.heap: list = []
        self.key: list = [None] * count

    @staticmethod
    def _update_targets(graph, index) -> dict:
        """``update value -> variable`` for the updates that may be computed into
        their variable (:func:`graphc.engine.liveness.into_variables` decides;
        this is its order-free part)."""
        outputs = {id(o) for o in graph.outputs}
        sources: dict[int, int] = {}
        for _, value in graph.updates:
            sources[id(value)] = sources.get(id(value), 0) + 1
        targets = {}
        for var, value in graph.updates:
            if (is_leaf(value.op.kind) or id(value) in outputs or id(var) in outputs
                    or id(var) in sources or sources[id(value)] > 1):
                continue
            # a variable nothing reads (-1) may be written as soon as its update is ready
            targets[index[id(value)]] = index.get(id(var), -1)
        return targets

    def _key(self, i: int) -> tuple:
        var = self.into.get(i)
        if var is not None:
            # readers of the variable other than the update itself
            others = self.unread[var] - (i in self.users[var]) if var >= 0 else 0
            if others > 0 or self.fallible_left > 0 or self.updates_last:
                return (_WAITS, i, i)
            return (_FREES, i, i)       # written into its variable: costs no bytes
        if self.size[i] > self.frees[i]:
            return (_GROWS, self.needed[i], i)
        return (_FREES, i, i)

    def _push(self, i: int) -> None:
        key = self._key(i)
        if key != self.key[i]:
            self.key[i] = key
            heapq.heappush(self.heap, key)

    def _refresh(self, i: int) -> None:
        """``i``'s facts changed: re-rank it if it is ready."""
        if not self.done[i] and self.waiting_on[i] == 0 and self.key[i] is not None:
            self._push(i)

    def run(self) -> list:
        order = [n for n, leaf in zip(self.nodes, self.leaf) if leaf]
        for i, leaf in enumerate(self.leaf):
            if leaf:
                self._finish(i)
        for i in range(len(self.nodes)):
            if not self.leaf[i] and self.waiting_on[i] == 0:
                self._push(i)
        heap = self.heap
        while heap:
            key = heapq.heappop(heap)
            i = key[2]
            if self.done[i] or self.key[i] != key:
                continue                   # a stale entry: re-ranked since
            order.append(self.nodes[i])
            self._finish(i)
        assert len(order) == len(self.nodes), "memory_order: the graph has a cycle"
        return order

    def _finish(self, i: int) -> None:
        """Mark ``i`` run: update the readers' counts and what others free."""
        self.done[i] = True
        if self.fallible_left and KINDS[self.nodes[i].op.kind].fallible:
            self.fallible_left -= 1
            if self.fallible_left == 0:
                for u in self.into:
                    self._refresh(u)
        for p in self.uses[i]:
            self.unread[p] -= 1
            if self.leaf[p]:
                if self.unread[p] <= 1 and p in self.update_of:
                    self._refresh(self.update_of[p])   # its update may soon write it
                continue
            if self.unread[p] == 1 and p not in self.pinned:
                last = next(r for r in self.users[p] if not self.done[r])
                self.frees[last] += self.size[p]
                self._refresh(last)
        for r in self.readers[i] + self.after[i]:
            self.waiting_on[r] -= 1
            if self.waiting_on[r] == 0 and not self.leaf[r]:
                self._push(r)
