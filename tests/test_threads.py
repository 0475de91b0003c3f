"""One compiled graph shared by many threads (issue 13, item 3): runs of one
graph are serialised and every caller gets its own correct result; separate
graphs run concurrently."""
import threading
import warnings

import numpy as np
import pytest

from concurrency import in_threads

import graphc
import graphc.ndarray as N
from graphc.engine.schedules import SCHEDULES

pytestmark = pytest.mark.cpu_engine   # graphs shared by CPU threads

THREADS, RUNS = 4, 40


def network(**options):
    """Outputs that depend on every input, a state carried between runs, and an
    input left out by some runs (it keeps the value of the caller's own feed only
    if runs are serialised with their feeds)."""
    x, w, c = N.var("x", (6, 5)), N.var("w", (5, 3)), N.var("c", (6, 3))
    count = N.var("count", ())
    h = N.tanh(x @ w) + c
    return graphc.compile([x, w, c, count], [h, N.sum(h, axis=0), count],
                          {count: count + 1.0}, **options)


def feeds_of(thread, run):
    rng = np.random.default_rng(1000 * thread + run)
    return {"x": rng.standard_normal((6, 5)).astype(np.float32),
            "c": np.full((6, 3), thread, np.float32)}


def reference(w, feeds):
    """The outputs of one run, from a graph no other thread uses."""
    g = network()
    g.assign(w=w, count=np.float32(0))
    return g.run(**feeds)[:2]


def _hammer(g, w, schedule_copy, hold_lock):
    """THREADS threads x RUNS runs each with their own inputs; returns the results
    each thread saw (copied under the lock for views) and any exception."""
    results = {t: [] for t in range(THREADS)}

    def work(t):
        for r in range(RUNS):
            feeds = feeds_of(t, r)
            if hold_lock:
                with g.lock:
                    h, s, _ = g.run(**feeds)
                    results[t].append((r, h.copy(), s.copy()))
            else:
                h, s, _ = g.run(**feeds)
                results[t].append((r, h, s))

    return results, in_threads(work, THREADS)


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("copy_outputs", [True, False])
def test_threads_sharing_one_graph_each_get_their_own_result(schedule, copy_outputs):
    w = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    g = network(schedule=schedule, copy_outputs=copy_outputs)
    g.assign(w=w, count=np.float32(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # holding the lock: no warning about views
        results, errors = _hammer(g, w, copy_outputs, hold_lock=not copy_outputs)
    assert not errors, errors
    for t in range(THREADS):
        assert [r for r, _, _ in results[t]] == list(range(RUNS))
        for r, h, s in results[t]:
            want_h, want_s = reference(w, feeds_of(t, r))
            np.testing.assert_array_equal(h, want_h)
            np.testing.assert_array_equal(s, want_s)
    # every run's update was applied exactly once
    assert g.value("count") == THREADS * RUNS


def test_views_shared_between_threads_without_the_lock_warn_once():
    g = network(copy_outputs=False)
    g.assign(w=np.eye(5, 3, dtype=np.float32), count=np.float32(0))
    g.run(**feeds_of(0, 0))
    caught = []

    def other():
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            g.run(**feeds_of(1, 0))
            g.run(**feeds_of(1, 1))
        caught.extend(seen)

    th = threading.Thread(target=other)
    th.start()
    th.join()
    assert len(caught) == 1 and "Hold `graph.lock`" in str(caught[0].message)


def test_separate_graphs_run_at_the_same_time():
    """Two graphs in two threads are not serialised against each other: each
    thread's run waits inside a callback until the other thread's run has
    started too (with one global lock this would never happen)."""
    started = [threading.Event(), threading.Event()]
    graphs, outputs, errors = [], [None, None], []

    for k in range(2):
        def meet(a, k=k):
            started[k].set()
            if not started[1 - k].wait(timeout=30):
                raise RuntimeError("the other graph never started running")
            return a + 1

        x = N.var("x", (3,))
        graphs.append(graphc.compile([x], N.delay(meet, [x], (3,), np.float32)))

    def work(k):
        try:
            outputs[k] = graphs[k].run(x=np.full(3, k, np.float32))
        except BaseException as e:   # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for k in range(2):
        np.testing.assert_array_equal(outputs[k], np.full(3, k + 1, np.float32))


def test_assign_value_and_run_from_many_threads_stay_consistent():
    """Threads assigning a whole state while others read it never see a mix of
    two assignments."""
    a, b = N.var("a", (64,)), N.var("b", (64,))
    g = graphc.compile([a, b], a - b)
    g.assign(a=np.zeros(64, np.float32), b=np.zeros(64, np.float32))
    stop, errors = threading.Event(), []

    def writer(t):
        k = 0
        while not stop.is_set():
            k += 1
            v = np.full(64, 1000 * t + k, np.float32)
            g.assign(a=v, b=v)

    def reader():
        for _ in range(300):
            d = g.run()
            if np.any(d != 0):
                errors.append(d)

    writers = [threading.Thread(target=writer, args=(t,)) for t in range(2)]
    for th in writers:
        th.start()
    try:
        reader()
    finally:
        stop.set()
        for th in writers:
            th.join()
    assert not errors
