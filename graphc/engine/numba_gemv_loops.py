"""The loops of :mod:`.numba_gemv` (imported only when a product is generated: it
imports Numba): ``out[j] = sum_i x[i] * w[j, i]`` over the rows ``w[j]``, in float32
lanes (``reassoc``: the row's sum taken in vector lanes, as BLAS takes it).

>>> import numpy as np
>>> x, w = np.ones(3, np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)
>>> out = np.empty(2, np.float32)
>>> serial(x, w, out); out.tolist()
[3.0, 12.0]
"""
from __future__ import annotations

from numba import njit, prange

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy", boundscheck=False,
                fastmath={"reassoc", "contract"})
#: rows a thread takes at a time
BLOCK = 8


@njit(**_OPTIONS)
def _rows(x, w, out, first, last):
    k = w.shape[1]
    for j in range(first, last):
        total = x.dtype.type(0)
        for i in range(k):
            total += x[i] * w[j, i]
        out[j] = total


@njit(**_OPTIONS)
def serial(x, w, out):
    """Every row on the calling thread."""
    _rows(x, w, out, 0, w.shape[0])


@njit(parallel=True, **_OPTIONS)
def parallel(x, w, out):
    """Blocks of :data:`BLOCK` rows split across the threads."""
    n = w.shape[0]
    for block in prange((n + BLOCK - 1) // BLOCK):
        _rows(x, w, out, block * BLOCK, min(n, (block + 1) * BLOCK))
