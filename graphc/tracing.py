"""Graphs from plain functions: ``@graphc.trace`` builds, compiles and caches one
graph per signature of array shapes and dtypes; :class:`State` holds arrays
that live across calls (weights, optimiser slots) and that a traced function
may read and ``assign``: its assignments become the graph's update edges.

The first call with new shapes runs the function once on graph variables
(SINGA's buffering of the first iteration), compiles the result and runs it;
later calls with the same shapes only run the compiled graph.

>>> import numpy as np, graphc, graphc.ndarray as N
>>> w = graphc.State(np.zeros(3, np.float32), name="w")
>>> @graphc.trace
... def step(x, target):
...     loss = N.mean(N.square(x @ w - target))
...     w.assign(w - 0.1 * N.grad(loss, w))
...     return loss
>>> x, t = np.eye(3, dtype=np.float32), np.ones(3, np.float32)
>>> [round(float(step(x, t)), 4) for _ in range(3)]
[1.0, 0.8711, 0.7588]
>>> w.numpy()
array([0.18696296, 0.18696296, 0.18696296], dtype=float32)
>>> len(step.cache)          # one graph so far; a new batch size would add one
1
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import operator
import threading
import warnings
from collections import OrderedDict
from typing import Callable, Optional

import numpy as np

from .compiler import compile as compile_graph
from .operator.lazy import NS as LAZY
from .operator.lazy import LazyNamespace
from .symbol.node import Node
from .type.errors import GraphError, InputError

_active = threading.local()       # .tracer: the _Tracer of the traced call being built
_state_names = itertools.count()


def _tracer():
    return getattr(_active, "tracer", None)


class State:
    """An array that outlives the calls of traced functions (a weight, an
    optimiser slot, a running statistic). Inside a traced function it is an
    input of the graph, and ``assign`` becomes an update edge; outside, it is a
    plain array and ``assign`` copies at once (so the same code also runs
    eagerly with ``graphc.eager``). Its value moves between graphs only when it
    changed: a training step and an evaluation function share it cheaply. Once a
    CPU graph has run with it, that graph's array is its only copy (a model's
    weights are held once).

    Example::

        w = graphc.State(np.zeros((784, 10), np.float32), name="w")
        w.assign(w - 0.1 * gw)     # in a traced step: an update edge
        w.numpy()                  # a copy of the current value
    """

    __array_ufunc__ = None           # NumPy defers to our reflected operators

    def __init__(self, value, name: Optional[str] = None):
        array = np.array(value, copy=True)
        self._serial = next(_state_names)      # the order in which calls take state locks
        self.name = name if name is not None else f"state{self._serial}"
        self.shape, self.dtype = array.shape, array.dtype
        self._array = array
        self._holder = None          # (executable, input name) holding a newer value
        self.version = 0             # bumped by every assignment
        # held by every traced call that reads or assigns this state, for the whole
        # call: calls sharing a state run one after another, whatever their threads
        self._lock = threading.RLock()

    # -- values -----------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A copy of the current value. Example: ``w.numpy()``"""
        with self._lock:
            return self._latest().copy()

    def _latest(self) -> np.ndarray:
        """The current value: this state's own array, or the array of the graph that
        holds it (see :meth:`_held_by`), where it is the only copy."""
        with self._lock:
            if self._holder is not None:
                executable, name = self._holder
                if executable.program.host_views:
                    return executable._held_value(name)
                self._array, self._holder = executable.value(name), None
            return self._array

    def assign(self, value) -> None:
        """Set the value: in a traced function an update applied after the call
        (later reads in the same function see ``value``, as they would eagerly),
        elsewhere a copy made at once. Shape and dtype never change.

        Example: ``w.assign(w - lr * g)``
        """
        tracer = _tracer()
        if tracer is not None:
            tracer.assign(self, value)
            return
        array = np.asarray(value)
        if array.shape != self.shape:
            raise InputError(f"State.assign: {self.name!r} has shape {self.shape}, got "
                             f"{array.shape}")
        if not np.can_cast(array.dtype, self.dtype, "same_kind"):
            raise InputError(f"State.assign: {self.name!r} has dtype {self.dtype}, got "
                             f"{array.dtype}")
        with self._lock:
            target = self._latest()
            np.copyto(target, array, casting="same_kind")
            self.version += 1

    def _updated_by(self, executable, name) -> None:
        with self._lock:
            self._hold(executable, name)
            self.version += 1

    def _held_by(self, executable, name) -> None:
        """``executable``'s input ``name`` holds this state's current value (a call
        fed it or found it current): where no graph holds it yet, its own array
        goes, so the value is held once (a host graph's variable, or the array
        the graph binds, which is this very array)."""
        with self._lock:
            if self._holder is None and executable.program.host_views:
                self._hold(executable, name)

    def _let_go(self, executable) -> None:
        """Take this state's value back into an array of its own if ``executable``
        (a graph being dropped) holds it."""
        with self._lock:
            if self._holder is not None and self._holder[0] is executable:
                self._array, self._holder = np.array(self._latest(), copy=True), None

    def _hold(self, executable, name) -> None:
        self._holder = (executable, name)
        if executable.program.host_views:
            self._array = None            # the graph's array is the only copy

    # -- taking part in expressions ---------------------------------------------------
    def __graphc_value__(self, ns):
        """This state as a value of namespace ``ns`` (see ``Namespace._lift``)."""
        if isinstance(ns, LazyNamespace):
            tracer = _tracer()
            if tracer is None:
                raise GraphError(f"State {self.name!r} used to build a graph outside a traced "
                                 "function: call it from a @graphc.trace function, or use "
                                 "N.var for a graph input")
            return tracer.read(self)
        return self.read()

    def read(self):
        """The value in the current mode: the graph node inside a traced function
        (what it was last assigned there, else its input), a read-only view of
        the array elsewhere: of the only copy, which may be a compiled graph's
        variable, so the view follows later updates (as a framework's parameter
        tensor does; :meth:`numpy` keeps a value). Example: ``w.read()``"""
        tracer = _tracer()
        if tracer is not None:
            return tracer.read(self)
        view = self._latest().view()
        view.flags.writeable = False     # eager code must go through assign
        return view

    def __array__(self, dtype=None, copy=None):
        if _tracer() is not None:
            raise TypeError(f"State {self.name!r} has no data while its graph is traced: "
                            "use it in graphc.ndarray expressions (or its .read() node), "
                            "not as a NumPy array")
        with self._lock:
            return self._latest().astype(dtype or self.dtype, copy=True)

    @property
    def T(self):
        return self.read().T

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, key):
        return self.read()[key]

    def __repr__(self) -> str:
        return f"<graphc.State {self.name!r} {self.shape} {self.dtype}>"


def _unwrap(x):
    return x.read() if isinstance(x, State) else x


def _forward(name):
    method = getattr(operator, name)
    return lambda self, other: method(self.read(), _unwrap(other))


def _reflected(name):
    method = getattr(operator, name)
    return lambda self, other: method(_unwrap(other), self.read())


for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lt", "le",
            "gt", "ge"):
    setattr(State, f"__{_op}__", _forward(_op))
    setattr(State, f"__r{_op}__", _reflected(_op))
State.__neg__ = lambda self: -self.read()
State.__hash__ = object.__hash__


class _Tracer:
    """What one traced call reads and assigns while its graph is built."""

    def __init__(self, taken: set):
        self.variables: dict[State, Node] = {}
        self.current: dict[State, Node] = {}
        self.assigned: list[State] = []
        self.taken = taken                     # input names already used by arguments

    def read(self, state: State) -> Node:
        if state not in self.current:
            if state.name in self.taken:
                raise GraphError(f"trace: State {state.name!r} has the name of another input; "
                                 "give it a unique name= (graph inputs are named)")
            self.taken.add(state.name)
            var = LAZY.var(state.name, state.shape, state.dtype)
            self.variables[state] = self.current[state] = var
        return self.current[state]

    def assign(self, state: State, value) -> None:
        self.read(state)                       # an assigned state is an input too
        if state not in self.assigned:
            self.assigned.append(state)        # update edges in the order first assigned
        node = LAZY._lift(value)
        if node.shape != state.shape:
            raise GraphError(f"State.assign: {state.name!r} has shape {state.shape}, the new "
                             f"value {node.shape}")
        if node.dtype != state.dtype:
            node = node.astype(state.dtype)
        self.current[state] = node


# -- argument structures: dicts, lists and tuples of arrays and static values ------------
def _flatten(value, path, leaves):
    """The structure of ``value`` with arrays replaced by their leaf index."""
    if isinstance(value, dict):
        return ("dict", tuple((k, _flatten(v, f"{path}.{k}", leaves)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,
                tuple(_flatten(v, f"{path}[{i}]", leaves) for i, v in enumerate(value)))
    if isinstance(value, (np.ndarray, np.generic)):
        leaves.append((path, np.asarray(value)))
        return ("array", len(leaves) - 1, value.shape, np.asarray(value).dtype.str)
    if isinstance(value, (Node, State)):
        raise InputError(f"trace: argument {path} is a {type(value).__name__}; pass NumPy arrays "
                         "(a State is used directly by the function, not passed)")
    try:
        hash(value)
    except TypeError:
        raise InputError(f"trace: argument {path} ({type(value).__name__}) is neither an array "
                         "nor hashable; other arguments are static and key the cache") from None
    # the type is part of the key: 2 == 2.0 == True, but they build different graphs
    return ("static", value, type(value))


def _rebuild(tree, leaves):
    kind = tree[0]
    if kind == "dict":
        return {k: _rebuild(v, leaves) for k, v in tree[1]}
    if kind in ("list", "tuple"):
        items = [_rebuild(v, leaves) for v in tree[1]]
        return items if kind == "list" else tuple(items)
    if kind == "array":
        return leaves[tree[1]]
    return tree[1]


class _Entry:
    """One compiled graph of a traced function and how to feed it."""

    def __init__(self, executable, arg_names, states, updated, output_tree):
        self.executable, self.arg_names = executable, arg_names
        self.states, self.updated, self.output_tree = states, updated, output_tree
        self.seen = {state: None for state in states}   # state -> version it holds


#: compiled graphs a traced function keeps unless ``trace(cache_size=...)`` says otherwise
DEFAULT_CACHE_SIZE = 8


class TracedFunction:
    """A function compiled per signature of its array arguments (see :func:`trace`).

    It keeps the ``cache_size`` graphs used most recently (``cache``, least
    recently used first) and warns once, with a ``RuntimeWarning`` saying which
    arguments change, when it has to drop one. Calls from several threads are
    serialised, and so are calls of different traced functions that share a
    :class:`State`; every caller gets its own result.
    """

    def __init__(self, fn: Callable, options: dict, cache_size: int = DEFAULT_CACHE_SIZE):
        self.fn, self.options = fn, options
        self.signature = inspect.signature(fn)
        self.cache_size = cache_size
        self.cache: OrderedDict = OrderedDict()   # signature -> _Entry, least recent first
        self.compiles = 0                         # graphs compiled so far, rebuilds included
        self._warned = False
        # one call at a time: the cache, what each graph last saw of the states,
        # and its run (whose memory the outputs are copied from) go together
        self._lock = threading.RLock()
        functools.update_wrapper(self, fn)

    def _key(self, args, kwargs):
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        leaves: list = []
        tree = _flatten(dict(bound.arguments), "", leaves)
        return tree, leaves

    def executable(self, *args, **kwargs):
        """The compiled graph for these arguments (built if needed, not run):
        ``stats()``, ``to_dot()``, ``plan``. Example: ``step.executable(x, y).stats()``"""
        tree, leaves = self._key(args, kwargs)
        with self._lock:
            return self._entry(tree, leaves).executable

    def _entry(self, tree, leaves) -> _Entry:
        entry = self.cache.get(tree)
        if entry is not None:
            self.cache.move_to_end(tree)
            return entry
        entry = self._build(tree, leaves)
        self.compiles += 1
        self.cache[tree] = entry
        if len(self.cache) > self.cache_size:
            if not self._warned:      # the cache still shows what changed between calls
                self._warned = True
                warnings.warn(self._recompiling_message(), RuntimeWarning, stacklevel=4)
            _, dropped = self.cache.popitem(last=False)
            for state in dropped.states:    # no state keeps a dropped graph alive
                state._let_go(dropped.executable)
        return entry

    def _recompiling_message(self) -> str:
        changes = _differences(list(self.cache))
        return (f"graphc.trace: {self.__name__} has compiled {self.compiles} graphs, more than "
                f"its cache keeps (cache_size={self.cache_size}): the least recently used "
                "are dropped and traced and compiled again when needed. Between calls, "
                + "; ".join(changes) + ". If these signatures are expected, raise "
                f"@graphc.trace(cache_size=...).")

    def _build(self, tree, leaves) -> _Entry:
        names = [path.lstrip(".") for path, _ in leaves]
        variables = [LAZY.var(name, a.shape, a.dtype) for name, (_, a) in zip(names, leaves)]
        tracer = _Tracer(set(names))
        if _tracer() is not None:
            raise GraphError(f"trace: {self.__name__} called while another traced function is "
                             "being built; call the inner function's Python code directly")
        _active.tracer = tracer
        try:
            arguments = _rebuild(tree, variables)
            result = self.fn(**arguments)
        finally:
            _active.tracer = None
        outputs: list = []
        output_tree = _flatten_outputs(result, outputs, tracer)
        updated = [s for s in tracer.assigned if tracer.current[s] is not tracer.variables[s]]
        updates = {tracer.variables[s]: tracer.current[s] for s in updated}
        states = list(tracer.variables)
        executable = compile_graph(variables + [tracer.variables[s] for s in states], outputs,
                                   updates, **self.options)
        return _Entry(executable, names, states, updated, output_tree)

    def __call__(self, *args, **kwargs):
        tree, leaves = self._key(args, kwargs)
        with self._lock:
            entry = self._entry(tree, leaves)
            with _holding(entry.states):
                feeds = {name: array for name, (_, array) in zip(entry.arg_names, leaves)}
                for state in entry.states:
                    if entry.seen[state] != state.version:
                        feeds[state.name] = state._latest()
                results = entry.executable.run(feeds)
                for state in entry.states:
                    if state in entry.updated:
                        state._updated_by(entry.executable, state.name)
                    else:
                        state._held_by(entry.executable, state.name)
                    entry.seen[state] = state.version
            return _rebuild(entry.output_tree, results)

    def __repr__(self) -> str:
        return f"<graphc.trace of {self.__name__}: {len(self.cache)} compiled graph(s)>"


@contextlib.contextmanager
def _holding(states):
    """The locks of ``states``, taken in one global order (so two calls sharing
    states cannot each wait for the other's)."""
    with contextlib.ExitStack() as stack:
        for state in sorted(states, key=lambda s: s._serial):
            stack.enter_context(state._lock)
        yield


# -- what changes between the signatures of one function (the recompilation warning) -----
def _leaves(tree, path):
    """``(path, description)`` of every array or static value in an argument tree."""
    kind = tree[0]
    if kind == "dict":
        for key, sub in tree[1]:
            yield from _leaves(sub, f"{path}.{key}" if path else str(key))
    elif kind in ("list", "tuple"):
        for i, sub in enumerate(tree[1]):
            yield from _leaves(sub, f"{path}[{i}]")
    elif kind == "array":
        yield path, ("array", tree[2], tree[3])
    else:
        yield path, ("static", tree[2], tree[1])


def _shown(values, limit: int = 4) -> str:
    shown = ", ".join(repr(v) for v in values[:limit])
    return shown + (", ..." if len(values) > limit else "")


def _differences(trees) -> list[str]:
    """Sentences naming each argument that differs between ``trees`` and how to
    keep it from compiling new graphs."""
    seen: dict[str, list] = {}
    for tree in trees:
        for path, leaf in _leaves(tree, ""):
            seen.setdefault(path, []).append(leaf)
    changes = []
    for path, leaves in seen.items():
        distinct = list(dict.fromkeys(leaves))
        if len(distinct) == 1 and len(leaves) == len(trees):
            continue
        kinds = {leaf[0] for leaf in distinct}
        if kinds == {"static"}:
            types = sorted({leaf[1].__name__ for leaf in distinct})
            changes.append(
                f"argument {path!r} takes the Python {'/'.join(types)} values "
                f"{_shown([leaf[2] for leaf in distinct])}: a value that is not a NumPy array "
                "is static, baked into its graph, so each new value compiles a new graph; pass "
                f"it as an array (np.float32({path.split('.')[-1]}) or np.asarray(...)) to "
                "make it an input of one graph")
        elif kinds == {"array"}:
            shapes = list(dict.fromkeys(leaf[1] for leaf in distinct))
            dtypes = list(dict.fromkeys(np.dtype(leaf[2]).name for leaf in distinct))
            if len(shapes) > 1:
                changes.append(f"argument {path!r} changes shape ({_shown(shapes)}): each "
                               "shape compiles its own graph; use a few fixed shapes (pad the "
                               "last batch)")
            if len(dtypes) > 1:
                changes.append(f"argument {path!r} changes dtype ({_shown(dtypes)}): convert "
                               "it to one dtype before the call")
            if len(shapes) == len(dtypes) == 1:
                changes.append(f"argument {path!r} is missing from some calls")
        else:
            changes.append(f"argument {path!r} is sometimes an array and sometimes a Python "
                           "value; pass it as an array every time")
    return changes or ["the arguments' structure changes"]


def _flatten_outputs(result, outputs, tracer):
    if isinstance(result, dict):
        return ("dict", tuple((k, _flatten_outputs(v, outputs, tracer)) for k, v in result.items()))
    if isinstance(result, (list, tuple)):
        return (type(result).__name__, tuple(_flatten_outputs(v, outputs, tracer) for v in result))
    if result is None:
        return ("static", None, type(None))
    if isinstance(result, State):
        result = tracer.read(result)
    outputs.append(LAZY._lift(result))
    return ("array", len(outputs) - 1)


def trace(fn: Optional[Callable] = None, *, cache_size: int = DEFAULT_CACHE_SIZE, **options):
    """Compile ``fn`` (written against ``graphc.ndarray``) on first call per
    signature: array arguments (NumPy arrays and NumPy scalars, also inside
    dicts, lists and tuples) become graph inputs named after their parameter,
    every other argument is static (part of the cache key, baked into the
    graph). The :class:`State` objects it reads become inputs that keep their
    values, and its ``State.assign`` calls become update edges. ``options`` go
    to :func:`graphc.compile` (``schedule="parallel"``, ``plan="offsets"``,
    ``seed=0``...). Returns arrays in the structure ``fn`` returned.

    The ``cache_size`` graphs used last are kept (default 8); when a function
    needs more, it warns once (``RuntimeWarning``) naming the arguments that
    change, such as a Python float passed where an array would be one input.
    One traced function may be called from many threads: calls are serialised
    and each caller gets its own result.

    Example::

        @graphc.trace(schedule="parallel", cache_size=4)
        def predict(x):
            return N.maximum(x @ w, 0.0)
        y = predict(np.ones((64, 784), np.float32))
    """
    if isinstance(cache_size, bool) or not isinstance(cache_size, (int, np.integer)) \
            or cache_size < 1:
        raise ValueError(f"trace: cache_size must be a positive integer (graphs kept per "
                         f"function), got {cache_size!r}")
    if fn is None:
        return lambda f: trace(f, cache_size=cache_size, **options)
    if not callable(fn):
        raise TypeError(f"trace: expected a function, got {type(fn).__name__}")
    return TracedFunction(fn, options, int(cache_size))
