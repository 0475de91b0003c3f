"""BLAS's threads while a parallel schedule runs steps side by side.

OpenBLAS (or MKL) starts one thread per core for every GEMM. Under a parallel
schedule several GEMMs may run at once, one per worker, so ``workers`` x
``cores`` threads would fight for ``cores`` cores: every GEMM then waits on
threads that are descheduled. For the length of such a run BLAS gets
``cores // workers`` threads each (at least one), through threadpoolctl, the
library scikit-learn uses for exactly this; the previous limits come back
after the run. A serial run needs nothing: its BLAS calls and its generated
kernels never overlap, and the generated kernels' OpenMP threads wait
passively (:func:`.numba_kernels.available`).

>>> import numpy as np
>>> with blas_shared(workers=2):
...     _ = np.ones((4, 4)) @ np.ones((4, 4))     # BLAS on cores // 2 threads here
"""
from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager


_known: tuple = (-1, None)     # (modules imported when made, the controller)


def _controller():
    """The thread-pool controller of the BLAS libraries loaded now, or None without
    threadpoolctl. Made again when modules were imported since (1.5 ms): a new
    module may have loaded another BLAS (SciPy's, PyTorch's), which the old
    controller would leave uncapped."""
    global _known
    loaded = len(sys.modules)
    if _known[0] != loaded:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:      # a dependency, but an install without it still runs
            return None
        _known = (len(sys.modules), ThreadpoolController())
    return _known[1]


def threads_per_worker(workers: int, cores: int | None = None) -> int:
    """BLAS threads each of ``workers`` concurrent steps gets on ``cores`` cores.

    >>> threads_per_worker(2, cores=8), threads_per_worker(4, cores=2)
    (4, 1)
    """
    cores = cores or os.cpu_count() or 1
    return max(1, cores // max(1, workers))


# the limit is process-wide: runs on several threads share one, set by the first
# to enter and put back by the last to leave (nested limits restored out of order
# would leave BLAS on one thread for good)
_lock = threading.Lock()
_holders = 0
_restore = None


@contextmanager
def blas_shared(workers: int):
    """Within the block, BLAS uses :func:`threads_per_worker` threads per call,
    so ``workers`` concurrent GEMMs together use the cores once (see the module
    docstring); nothing changes with one worker or without threadpoolctl."""
    global _holders, _restore
    controller = _controller() if workers > 1 else None
    if controller is None:
        yield
        return
    with _lock:
        if _holders == 0:
            _restore = controller.limit(limits=threads_per_worker(workers), user_api="blas")
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                _restore.restore_original_limits()
                _restore = None
