"""BLAS's thread pool under parallel schedules: capped for the run, put back after."""
import threading

import numpy as np
import pytest

import graphc
import graphc.ndarray as N
from graphc.engine import blas_threads
from graphc.engine.blas_threads import blas_shared, threads_per_worker

pytestmark = pytest.mark.cpu_engine   # BLAS threads of the CPU schedules

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpoolctl.threadpool_info()
            if lib["user_api"] == "blas"]


@pytest.mark.parametrize("workers, cores, expected", [(1, 8, 8), (2, 8, 4), (3, 8, 2),
                                                      (4, 2, 1), (16, 2, 1)])
def test_threads_per_worker_shares_the_cores(workers, cores, expected):
    assert threads_per_worker(workers, cores) == expected


def test_blas_is_capped_inside_and_restored_after():
    before = _blas_threads()
    if not before:
        pytest.skip("no BLAS library that threadpoolctl controls")
    with blas_shared(workers=64):
        assert _blas_threads() == [1] * len(before)
    assert _blas_threads() == before


def test_one_worker_changes_nothing():
    before = _blas_threads()
    with blas_shared(workers=1):
        assert _blas_threads() == before


class FakeController:
    """Records what blas_shared asks of threadpoolctl."""

    def __init__(self):
        self.limits, self.restored = [], 0

    def limit(self, limits, user_api):
        self.limits.append((limits, user_api))
        fake = self

        class Restorer:
            def restore_original_limits(self):
                fake.restored += 1
        return Restorer()


def test_overlapping_holders_limit_once_and_restore_once_the_last_leaves(monkeypatch):
    """Runs on two threads whose limits overlap share one limit: the first to leave
    must not put it back while the other still runs (threadpoolctl's own limits,
    nested out of order, would leave BLAS capped for good)."""
    fake = FakeController()
    monkeypatch.setattr(blas_threads, "_controller", lambda: fake)
    inside, release = threading.Event(), threading.Event()

    def other_run():
        with blas_shared(workers=2):
            inside.set()
            release.wait(10)

    t = threading.Thread(target=other_run)
    t.start()
    assert inside.wait(10)
    with blas_shared(workers=2):
        release.set()
        t.join(10)
        assert fake.restored == 0          # still held by this run
    assert fake.limits == [(threads_per_worker(2), "blas")]
    assert fake.restored == 1 and blas_threads._holders == 0


def test_an_error_inside_still_restores(monkeypatch):
    fake = FakeController()
    monkeypatch.setattr(blas_threads, "_controller", lambda: fake)
    with pytest.raises(KeyError):
        with blas_shared(workers=3):
            raise KeyError("x")
    assert fake.restored == 1 and blas_threads._holders == 0


@pytest.mark.parametrize("schedule, limited", [("serial", False), ("parallel", True),
                                               ("parallel_reuse", True)])
def test_parallel_schedules_cap_blas_for_the_run(monkeypatch, schedule, limited):
    fake = FakeController()
    monkeypatch.setattr(blas_threads, "_controller", lambda: fake)
    x = N.var("x", (32, 32), np.float64)
    out = N.matmul(x, x) + N.matmul(N.exp(x), x)
    value = np.random.default_rng(0).standard_normal((32, 32))
    reference = graphc.compile([x], [out], kernels="numpy").run(x=value)[0]
    g = graphc.compile([x], [out], schedule=schedule, workers=2, kernels="numpy")
    before = len(fake.limits)
    np.testing.assert_array_equal(g.run(x=value)[0], reference)
    assert len(fake.limits) - before == (1 if limited else 0)
    assert fake.restored == len(fake.limits) and blas_threads._holders == 0
