"""After large assignments the next run gives the freed heap back (glibc's
malloc_trim), once; small assignments and plain runs do not pay for it."""
import numpy as np

import graphc
import graphc.ndarray as N
from graphc import compiler
from graphc.engine import heap


def _graph(n):
    w = N.var("w", (n,), np.float32)
    x = N.var("x", (n,), np.float32)
    return graphc.compile([x, w], [N.sum(x * w)], {w: w * 0.5}, kernels="numpy")


def test_release_free_heap_answers_a_bool():
    assert heap.release_free_heap() in (True, False)


def test_the_first_run_after_large_assignments_trims_once(monkeypatch):
    calls = []
    monkeypatch.setattr(compiler, "release_free_heap", lambda: calls.append(1) or True)
    n = heap.TRIM_AFTER_BYTES // 4          # float32: exactly the threshold
    g = _graph(n)
    g.assign(w=np.ones(n, np.float32))
    x = np.ones(n, np.float32)
    assert g.run(x=x)[0] == np.float32(n)
    assert calls == [1]
    g.run(x=x)
    assert calls == [1]                     # nothing assigned since


def test_small_assignments_do_not_trim(monkeypatch):
    calls = []
    monkeypatch.setattr(compiler, "release_free_heap", lambda: calls.append(1) or True)
    g = _graph(16)
    g.assign(w=np.ones(16, np.float32))
    g.run(x=np.ones(16, np.float32))
    assert calls == []
