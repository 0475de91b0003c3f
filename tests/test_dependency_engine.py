"""The dependency engine (graphc.engine.dependency): conflicting ops run in push
order, non-conflicting ones really run in parallel, errors are reported once
and skip what comes after, and random draws modelled as a variable are
reproducible under any thread count.

Ordering is checked with sequence numbers taken under a lock at each op's start
and end, never with wall-clock durations. Barriers carry a timeout so a broken
engine fails a test instead of hanging it.
"""
from __future__ import annotations

import threading
import time
from contextlib import closing

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from graphc.engine.dependency import DependencyEngine, Inline, ThreadPool, Var

TIMEOUT = 5.0         # only ever reached when the engine is broken


@pytest.fixture(params=["inline", "pool"])
def policy(request):
    p = Inline() if request.param == "inline" else ThreadPool(4)
    yield p
    if isinstance(p, ThreadPool):
        p.close()


@pytest.fixture
def pool():
    p = ThreadPool(4)
    yield p
    p.close()


class Clock:
    """A global sequence number, read under a lock: ``a < b`` means a happened first."""

    def __init__(self):
        self._lock, self._n = threading.Lock(), 0

    def tick(self) -> int:
        with self._lock:
            self._n += 1
            return self._n


def run_program(eng, ops, n_vars, clock=None, sleeps=None):
    """Push ``ops`` (a list of (reads, writes) index sets) as ops over ``n_vars``
    vars; each op notes which op wrote the newest version of each var it reads
    and appends a new version (itself and what it saw) to each var it writes.
    Returns the final versions, what each op saw, and each op's (start, end) ticks."""
    tags = [eng.new_var(f"v{i}") for i in range(n_vars)]
    versions = [[] for _ in range(n_vars)]
    seen, span = [None] * len(ops), [None] * len(ops)

    def op(i, reads, writes):
        start = clock.tick() if clock else 0
        if sleeps and sleeps[i]:
            time.sleep(sleeps[i])
        saw = tuple((r, versions[r][-1][0] if versions[r] else None) for r in sorted(reads))
        for w in sorted(writes):
            versions[w].append((i, saw))
        seen[i] = saw
        span[i] = (start, clock.tick() if clock else 0)

    for i, (reads, writes) in enumerate(ops):
        eng.push(lambda i=i, r=reads, w=writes: op(i, r, w),
                 [tags[r] for r in reads], [tags[w] for w in writes], name=f"op{i}")
    eng.wait_all()
    assert eng.pending == 0
    return versions, seen, span


def serial_replay(ops, n_vars):
    versions, seen, _ = run_program(DependencyEngine(Inline()), ops, n_vars)
    return versions, seen


def check_order(ops, span):
    """Every pair of conflicting ops (sharing a var one of them mutates) ran in
    push order: the earlier one ended before the later one started. Per var, a
    write must start after every earlier op on it ended, a read after every
    earlier write, so running maxima of end ticks check all pairs in one pass."""
    last_end = {}      # var -> ((end, op) latest-ending op on it, (end, op) same for writes)
    for j, (reads, writes) in enumerate(ops):
        start = span[j][0]
        for v in reads | writes:
            any_end, write_end = last_end.get(v, ((0, None), (0, None)))
            end, i = any_end if v in writes else write_end
            assert end < start, f"op{i} and op{j} conflict on var {v} but overlapped"
        for v in reads | writes:
            any_end, write_end = last_end.get(v, ((0, None), (0, None)))
            mine = (span[j][1], j)
            last_end[v] = (max(any_end, mine), max(write_end, mine) if v in writes else write_end)


@st.composite
def programs(draw):
    n_vars = draw(st.integers(1, 6))
    var_set = st.sets(st.integers(0, n_vars - 1), max_size=n_vars)
    ops = draw(st.lists(st.tuples(var_set, var_set), min_size=1, max_size=30))
    sleeps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.0005, 0.001]),
                           min_size=len(ops), max_size=len(ops)))
    return n_vars, ops, sleeps


# --- order ----------------------------------------------------------------


def test_write_after_reads_waits_for_all_reads(policy):
    eng, clock = DependencyEngine(policy), Clock()
    v = eng.new_var("v")
    reads, write = [], []

    def read():
        start = clock.tick()
        time.sleep(0.005)
        reads.append((start, clock.tick()))

    for _ in range(4):
        eng.push(read, read_vars=[v])
    eng.push(lambda: write.append(clock.tick()), mutate_vars=[v])
    eng.wait_all()
    assert len(reads) == 4 and write[0] > max(end for _, end in reads)


def test_reads_after_write_see_the_write(policy):
    eng = DependencyEngine(policy)
    v = eng.new_var("v")
    box, seen = {"x": 0}, []

    def write():
        time.sleep(0.01)
        box["x"] = 1

    eng.push(write, mutate_vars=[v])
    for _ in range(5):
        eng.push(lambda: seen.append(box["x"]), read_vars=[v])
    eng.wait_all()
    assert seen == [1] * 5


@settings(max_examples=40, deadline=None)
@given(programs())
def test_random_programs_respect_conflicts_and_equal_serial_replay(program):
    n_vars, ops, sleeps = program
    note(f"ops={ops}")
    expected = serial_replay(ops, n_vars)
    with closing(ThreadPool(4)) as p:
        versions, seen, span = run_program(DependencyEngine(p), ops, n_vars, Clock(), sleeps)
    check_order(ops, span)
    assert (versions, seen) == expected


def test_stress_many_ops_many_vars():
    rng = np.random.default_rng(7)
    n_vars = 50
    ops = []
    for _ in range(2000):
        reads = set(rng.choice(n_vars, size=rng.integers(0, 4), replace=False).tolist())
        writes = set(rng.choice(n_vars, size=rng.integers(0, 3), replace=False).tolist())
        ops.append((reads, writes))
    expected = serial_replay(ops, n_vars)
    with closing(ThreadPool(8)) as p:
        for _ in range(5):
            versions, seen, span = run_program(DependencyEngine(p), ops, n_vars, Clock())
            assert (versions, seen) == expected
            check_order(ops, span)


def test_read_and_mutate_counts_as_mutate(pool):
    eng, clock = DependencyEngine(pool), Clock()
    v = eng.new_var("v")
    spans = [None] * 3

    def op(i):
        start = clock.tick()
        time.sleep(0.01)
        spans[i] = (start, clock.tick())

    for i in range(3):       # were they reads, they would overlap
        eng.push(lambda i=i: op(i), read_vars=[v, v], mutate_vars=[v, v])
    eng.wait_all()
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))


# --- parallelism ----------------------------------------------------------


@pytest.mark.parametrize("shared", [True, False], ids=["same-var-reads", "disjoint-vars"])
def test_independent_ops_run_in_parallel(shared):
    barrier, done = threading.Barrier(2, timeout=TIMEOUT), []
    with closing(ThreadPool(2)) as p:
        eng = DependencyEngine(p)
        a, b = eng.new_var("a"), eng.new_var("b")
        for var in ([a, a] if shared else [a, b]):
            kw = {"read_vars": [var]} if shared else {"mutate_vars": [var]}
            eng.push(lambda: done.append(barrier.wait()), **kw)
        eng.wait_all()           # a serialising engine breaks the barrier: raises here
    assert sorted(done) == [0, 1]


def test_write_waits_for_a_slow_read(pool):
    eng, clock = DependencyEngine(pool), Clock()
    v = eng.new_var("v")
    ticks = {}

    def slow_read():
        ticks["read_start"] = clock.tick()
        time.sleep(0.05)
        ticks["read_end"] = clock.tick()

    eng.push(slow_read, read_vars=[v])
    eng.push(lambda: ticks.setdefault("write_start", clock.tick()), mutate_vars=[v])
    eng.wait_all()
    assert ticks["read_start"] < ticks["read_end"] < ticks["write_start"]


def test_pending_counts_blocked_ops(pool):
    eng, gate = DependencyEngine(pool), threading.Event()
    v = eng.new_var("v")
    eng.push(lambda: gate.wait(TIMEOUT), mutate_vars=[v])
    eng.push(lambda: None, read_vars=[v])
    assert eng.pending == 2
    gate.set()
    eng.wait_all()
    assert eng.pending == 0


def test_push_from_inside_an_op(policy):
    eng, log = DependencyEngine(policy), []
    v = eng.new_var("v")

    def outer():
        eng.push(lambda: log.append("inner"), read_vars=[v])
        log.append("outer")

    eng.push(outer, mutate_vars=[v])
    eng.wait_all()
    assert log == ["outer", "inner"]


# --- errors ---------------------------------------------------------------


def boom():
    raise ValueError("boom")


def second():
    raise KeyError("second")


def test_error_is_reraised_and_later_ops_are_skipped(policy):
    eng, ran = DependencyEngine(policy), []
    v, w = eng.new_var("v"), eng.new_var("w")
    eng.push(boom, mutate_vars=[v])
    eng.push(lambda: ran.append("read v"), read_vars=[v])
    eng.push(lambda: ran.append("write v, w"), mutate_vars=[v, w])
    eng.push(lambda: ran.append("read w"), read_vars=[w])     # after w's skipped write
    eng.push(second, mutate_vars=[v])                       # skipped: not reported
    with pytest.raises(ValueError, match="boom") as info:
        eng.wait_all()
    assert any(entry.name == "boom" for entry in info.traceback)   # the original frames
    assert ran == [] and eng.pending == 0
    eng.wait_all()                                            # reported once
    # the engine runs ops again, and every worker is alive: all must meet at once
    barrier = threading.Barrier(policy.workers, timeout=TIMEOUT)
    for _ in range(policy.workers):
        eng.push(barrier.wait, mutate_vars=[eng.new_var()])
    eng.push(lambda: ran.append("after"), read_vars=[v, w])
    eng.wait_all()
    assert ran == ["after"]


def test_ops_pushed_after_a_failure_are_skipped(policy):
    eng, ran = DependencyEngine(policy), []
    eng.push(boom, mutate_vars=[eng.new_var("a")])
    deadline = time.monotonic() + TIMEOUT
    while eng.pending and time.monotonic() < deadline:    # the failure has been recorded
        time.sleep(0.001)
    eng.push(lambda: ran.append(1), mutate_vars=[eng.new_var("b")])
    eng.push(lambda: ran.append(2))
    with pytest.raises(ValueError):
        eng.wait_all()
    assert ran == []
    eng.push(lambda: ran.append(3))
    eng.wait_all()
    assert ran == [3]


def test_base_exceptions_are_reported_and_do_not_kill_workers(policy):
    eng = DependencyEngine(policy)
    v = eng.new_var("v")

    def interrupt():
        raise KeyboardInterrupt

    eng.push(interrupt, mutate_vars=[v])
    for _ in range(2 * policy.workers):      # independent: some may raise at the same time
        eng.push(interrupt)
    with pytest.raises(KeyboardInterrupt):
        eng.wait_all()
    barrier = threading.Barrier(policy.workers, timeout=TIMEOUT)
    for _ in range(policy.workers):
        eng.push(barrier.wait)
    eng.wait_all()


# --- random generators as variables ----------------------------------------


def draw_program(policy, seed: int) -> np.ndarray:
    eng = DependencyEngine(policy)
    gen, rng = np.random.default_rng(seed), eng.new_var("rng")
    jitter = np.random.default_rng()         # unseeded: varies how ops interleave
    out = np.zeros((20, 3))
    for i in range(20):
        slot = eng.new_var(f"slot{i}")

        def draw(i=i, pause=float(jitter.uniform(0, 0.001))):
            time.sleep(pause)
            out[i] = gen.normal(size=3)

        eng.push(draw, mutate_vars=[rng, slot])
    eng.wait_all()
    return out


def test_random_generator_as_a_variable_is_reproducible():
    expected = draw_program(Inline(), seed=11)
    with closing(ThreadPool(4)) as p:
        for _ in range(5):
            np.testing.assert_array_equal(draw_program(p, seed=11), expected)
    ref = np.random.default_rng(11)
    np.testing.assert_array_equal(expected, [ref.normal(size=3) for _ in range(20)])


# --- small facts -------------------------------------------------------------


def test_wait_all_with_nothing_pushed_returns(policy):
    eng = DependencyEngine(policy)
    t = threading.Thread(target=eng.wait_all, daemon=True)
    t.start()
    t.join(TIMEOUT)
    assert not t.is_alive() and eng.pending == 0


def test_thread_pool_basics():
    assert ThreadPool().workers >= 1 and ThreadPool(3).workers == 3
    assert Inline.workers == 1
    ran, eng = [], DependencyEngine()            # default policy: Inline, runs in push
    eng.push(lambda: ran.append(1))
    assert ran == [1] and eng.pending == 0
    with pytest.raises(ValueError):
        ThreadPool(0)
    p = ThreadPool(2)
    p.close()                        # never started
    p.close()
    with pytest.raises(RuntimeError):
        p.submit(lambda: None)
    q = ThreadPool(2)
    done = threading.Event()
    q.submit(done.set)
    assert done.wait(TIMEOUT)
    q.close()
    q.close()


def test_vars_belong_to_their_engine():
    a, b = DependencyEngine(), DependencyEngine()
    v = a.new_var("v")
    assert isinstance(v, Var) and v.name == "v" and repr(v) == "Var('v')"
    assert not hasattr(v, "__dict__")
    with pytest.raises(ValueError, match="not a variable of this engine"):
        b.push(lambda: None, read_vars=[v])
    with pytest.raises(ValueError):
        a.push(lambda: None, mutate_vars=["v"])
    assert a.pending == 0 and b.pending == 0


@pytest.mark.parametrize("make_policy", [Inline, lambda: ThreadPool(2)], ids=["inline", "pool"])
def test_a_long_chain_runs_on_one_thread_without_recursion(make_policy):
    """Each op of a chain is made ready by the one before, which runs it next on the
    same thread: 5000 ops would overflow the stack if each ready op recursed."""
    policy = make_policy()
    engine, seen = DependencyEngine(policy), []
    v = engine.new_var("v")

    def first():     # queues the chain behind itself: all of it waits on v
        for k in range(5000):
            engine.push(lambda k=k: seen.append((k, threading.current_thread().name)),
                        mutate_vars=[v])

    engine.push(first, mutate_vars=[v])
    engine.wait_all()
    assert [k for k, _ in seen] == list(range(5000))
    if isinstance(policy, ThreadPool):
        policy.close()
