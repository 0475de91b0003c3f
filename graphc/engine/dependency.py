"""A dependency engine in the style of MXNet's: ops are pushed with the
variables they read and mutate, and run as soon as, and only when, that is safe.

The engine knows variable *tags* (:class:`Var`), never data. Each variable has
a FIFO of the ops touching it, in push order. Consecutive reads run in parallel,
since readers cannot disturb one another; a write waits for every earlier read
and write of the variable, and later ops wait for it. So ops that conflict
(share a variable one of them mutates) run in push order and the result equals
a serial replay. Each pending op counts its unmet dependencies and goes to the
running policy (:class:`Inline`, :class:`ThreadPool`) when the count is zero.

Random generators are modelled as variables: every op drawing from a generator
mutates its var, so draws happen one at a time in push order and a seeded
program gives the same numbers under any policy and thread count.

If an op raises, :meth:`DependencyEngine.wait_all` re-raises the first error.
Until then every op not yet started (ordered after the failed one, or merely
pushed later) is skipped: its function is not called, but it still completes
and releases its vars, so nothing deadlocks. Ops already running finish. An
interrupt of the waiting thread is handled the same way: ``wait_all`` skips
what has not started, waits for what runs, then raises it.

>>> import numpy as np
>>> pool = ThreadPool(2); eng = DependencyEngine(pool)
>>> rng, a, b = eng.new_var("rng"), eng.new_var("a"), eng.new_var("b")
>>> gen, out = np.random.default_rng(0), {}
>>> eng.push(lambda: out.update(a=gen.random()), mutate_vars=[rng, a])
>>> eng.push(lambda: out.update(b=gen.random()), mutate_vars=[rng, b])
>>> eng.push(lambda: out.update(s=out["a"] - out["b"]), read_vars=[a, b])
>>> eng.wait_all(); pool.close()
>>> r = np.random.default_rng(0); out["s"] == r.random() - r.random()
True
"""
from __future__ import annotations

import os
import queue
import threading
import traceback
from collections import deque
from typing import Callable, Iterable


class Var:
    """A variable tag: the engine orders ops by the vars they read and mutate.

    >>> DependencyEngine().new_var("weights")
    Var('weights')
    """
    __slots__ = ("name", "_engine", "_reads", "_writing", "_queue")

    def __init__(self, engine: DependencyEngine, name: str = "") -> None:
        self.name, self._engine = name, engine
        self._reads, self._writing = 0, False   # granted, not completed: reads, a write
        self._queue: deque = deque()      # waiting (op, is_write), in push order

    def __repr__(self) -> str:
        return f"Var({self.name!r})"


class Inline:
    """Runs each op at once in the thread that made it ready (no parallelism).

    >>> Inline().submit(lambda: print("ran"))
    ran
    """
    workers = 1

    def submit(self, task: Callable[[], object]) -> None:
        task()


class ThreadPool:
    """``workers`` daemon threads, started on the first :meth:`submit`, running
    tasks from one queue. Close it only when no engine using it has ops pending.

    >>> pool, done = ThreadPool(2), threading.Event()
    >>> pool.submit(done.set); done.wait(5)
    True
    >>> pool.close(); pool.close()       # idempotent
    """

    def __init__(self, workers: int | None = None) -> None:
        if workers is None:         # the CPUs this process may use, where the OS says
            workers = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                       else os.cpu_count() or 1)
        self.workers = int(workers)
        if self.workers < 1:
            raise ValueError(f"ThreadPool needs at least one worker, got {workers}")
        self._tasks, self._threads = queue.SimpleQueue(), []   # threads start lazily
        self._lock, self._closed = threading.Lock(), False

    def submit(self, task: Callable[[], object]) -> None:
        if self._closed or not self._threads:
            with self._lock:           # two first submits must not both start threads
                if self._closed:
                    raise RuntimeError("ThreadPool is closed")
                if not self._threads:
                    self._threads = [threading.Thread(target=self._work, daemon=True,
                                                      name=f"graphc-engine-{i}")
                                     for i in range(self.workers)]
                    for t in self._threads:
                        t.start()
        self._tasks.put(task)

    def _work(self) -> None:
        get = self._tasks.get
        while (task := get()) is not None:
            try:
                task()
            except BaseException:      # a dead worker would starve all queued after
                traceback.print_exc()

    def close(self) -> None:
        """Stop the threads after the tasks already queued; later calls do nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for _ in self._threads:
            self._tasks.put(None)
        for t in self._threads:
            if t is not threading.current_thread():   # a task closing its own pool
                t.join()


class _Op:
    __slots__ = ("engine", "fn", "name", "reads", "writes", "wait")

    def __init__(self, engine: DependencyEngine, fn: Callable[[], object], name: str,
                 reads: list[Var], writes: list[Var]) -> None:
        self.engine, self.fn, self.name, self.reads, self.writes = engine, fn, name, reads, writes
        # +1 held by push itself, so the op cannot start while still being queued
        self.wait = len(reads) + len(writes) + 1

    def __call__(self) -> None:
        self.engine._run(self)


def _grant(v: Var, ready: list[_Op]) -> None:
    """Grant the head of ``v``'s queue: a run of reads, or a write once idle."""
    q = v._queue
    while q and not v._writing:
        op, is_write = q[0]
        if is_write:
            if v._reads:
                break
            v._writing = True
        else:
            v._reads += 1
        q.popleft()
        op.wait -= 1
        if op.wait == 0:
            ready.append(op)


class DependencyEngine:
    """Runs pushed ops under ``policy`` (default :class:`Inline`), ordering the
    ones that conflict on a variable by push order. Do not call :meth:`wait_all`
    from inside an op: it would wait for itself.

    >>> eng = DependencyEngine(); x, log = eng.new_var("x"), []
    >>> eng.push(lambda: log.append("write"), mutate_vars=[x])
    >>> eng.push(lambda: log.append("read"), read_vars=[x])
    >>> eng.wait_all(); log, eng.pending
    (['write', 'read'], 0)
    """

    def __init__(self, policy: Inline | ThreadPool | None = None) -> None:
        self._policy = Inline() if policy is None else policy
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending, self._error = 0, None   # _error: the first exception an op raised

    def new_var(self, name: str = "") -> Var:
        """A fresh variable tag, usable only with this engine."""
        return Var(self, name)

    def push(self, fn: Callable[[], object], read_vars: Iterable[Var] = (),
             mutate_vars: Iterable[Var] = (), name: str = "") -> None:
        """Queue ``fn()`` to run after every earlier op that conflicts with it.

        A var both read and mutated counts as mutated; duplicates are ignored.

        >>> eng, seen = DependencyEngine(), []; v = eng.new_var("v")
        >>> eng.push(lambda: seen.append(1), read_vars=[v, v], mutate_vars=[v]); seen
        [1]
        """
        writes = list(dict.fromkeys(mutate_vars))      # dict: unique, in given order
        reads = [v for v in dict.fromkeys(read_vars) if v not in writes]
        for v in reads + writes:
            if not isinstance(v, Var) or v._engine is not self:
                raise ValueError(f"{v!r} is not a variable of this engine")
        op, ready = _Op(self, fn, name, reads, writes), []
        with self._lock:
            self._pending += 1
            # every queue's head is blocked between calls, so queuing then granting
            # grants the new op exactly when nothing waits and nothing conflicts
            for v in reads:
                v._queue.append((op, False))
                _grant(v, ready)
            for v in writes:
                v._queue.append((op, True))
                _grant(v, ready)
            op.wait -= 1
            if op.wait == 0:
                ready.append(op)
        for r in ready:
            self._policy.submit(r)

    def _run(self, op: _Op) -> None:
        # an op made ready by the one just finished runs next on this same thread: a
        # chain of dependent ops pays no hand-over to another thread, and under Inline
        # it loops instead of recursing once per op
        while op is not None:
            # unlocked look: a failing op records its error before releasing its vars
            if self._error is None:
                try:
                    op.fn()
                except BaseException as e:   # noqa: BLE001 - handed to wait_all
                    with self._lock:
                        self._error = e if self._error is None else self._error
            ready: list[_Op] = []
            with self._lock:
                for v in op.reads:
                    v._reads -= 1
                    _grant(v, ready)
                for v in op.writes:
                    v._writing = False
                    _grant(v, ready)
                self._pending -= 1
                if self._pending == 0:
                    self._idle.notify_all()
            op = ready.pop() if ready else None
            for r in ready:
                self._policy.submit(r)

    def wait_all(self) -> None:
        """Block until every op pushed so far has completed; then re-raise the
        first error an op raised, if any, and clear it so the engine can go on.

        >>> eng = DependencyEngine(); eng.push(lambda: 1 / 0)
        >>> eng.wait_all()
        Traceback (most recent call last):
        ZeroDivisionError: division by zero
        >>> eng.wait_all()                   # the error was reported once
        """
        try:
            with self._idle:
                self._idle.wait_for(lambda: not self._pending)
        except BaseException as interrupt:   # KeyboardInterrupt while waiting
            self._drain(interrupt)
            raise
        with self._lock:
            error, self._error = self._error, None
        if error is not None:
            raise error

    def cancel(self, error: BaseException) -> None:
        """Skip every op not started yet; :meth:`wait_all` raises ``error`` (or the
        error of an op that failed first). Takes no lock, so a signal handler
        may call it while this thread is inside :meth:`push` or :meth:`wait_all`.

        >>> eng = DependencyEngine(ThreadPool(1)); v, ran = eng.new_var(), []
        >>> eng.cancel(TimeoutError("stopped"))
        >>> eng.push(lambda: ran.append(1), mutate_vars=[v])
        >>> eng.wait_all()
        Traceback (most recent call last):
        TimeoutError: stopped
        >>> ran
        []
        """
        if self._error is None:      # a racing op's error may win: either is raised
            self._error = error

    def forget(self, error) -> None:
        """Clear ``error`` if :meth:`cancel` set it and no ``wait_all`` raised it yet
        (it arrived after the last op completed and is handled elsewhere).

        >>> eng, late = DependencyEngine(), KeyboardInterrupt()
        >>> eng.cancel(late); eng.forget(late)
        >>> eng.push(lambda: None); eng.wait_all()      # runs, nothing raised
        >>> eng.pending
        0
        """
        if error is not None and self._error is error:
            self._error = None

    def _drain(self, interrupt: BaseException) -> None:
        """After the waiting thread was interrupted: skip every op not started yet
        and wait until the running ones are done, so that no op of this batch
        touches memory after ``wait_all`` has returned or raised."""
        with self._lock:
            if self._error is None:
                self._error = interrupt
        while True:
            try:
                with self._idle:
                    self._idle.wait_for(lambda: not self._pending)
                    self._error = None
                return
            except KeyboardInterrupt:    # a second Ctrl-C: the first is raised anyway
                continue

    @property
    def pending(self) -> int:
        """Ops pushed and not yet completed."""
        return self._pending
