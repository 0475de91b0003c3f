"""Generated sums, means, maxima and minima over the outer and inner dimensions of an
array seen as ``(A, B, D)``, keeping ``B``: a batch norm's per-channel statistics of
an NCHW tensor (``A=N, B=C, D=H*W``), a softmax's rows (``A=1``), a bias gradient's
columns (``D=1``). Imported only when a graph asks for generated kernels (it imports
Numba).

One thread per group of kept elements (``prange`` over ``B``), each walking its
``A * D`` cells in memory order. Sums accumulate in float64 (also for float32, so
they are at least as accurate as NumPy's pairwise sums) and may be reordered into
vector lanes (``fastmath={"reassoc"}`` on the reduction only), so they differ from
NumPy's in the last places: within a tolerance, not bit for bit. Maxima and minima
are exact and propagate NaN as NumPy's do.

>>> import numpy as np
>>> x, out = np.arange(24.0).reshape(2, 3, 4), np.empty(3)
>>> sum_abd(x, out, 1.0); out
array([ 60.,  92., 124.])
"""
from __future__ import annotations

from numba import njit, prange


@njit(parallel=True, nogil=True, cache=True, fastmath={"reassoc"})
def sum_abd(x, out, divisor):
    """``out[b] = sum(x[:, b, :]) / divisor`` (``divisor`` 1 for a sum, the count for
    a mean)."""
    A, B, D = x.shape
    for b in prange(B):
        acc = 0.0
        for a in range(A):
            for d in range(D):
                acc += x[a, b, d]
        out[b] = acc / divisor


@njit(parallel=True, nogil=True, cache=True)
def extreme_abd(x, out, largest):
    """``out[b] = max(x[:, b, :])`` (``largest``) or the minimum; NaN wins, as in NumPy."""
    A, B, D = x.shape
    for b in prange(B):
        best = x[0, b, 0]
        for a in range(A):
            for d in range(D):
                v = x[a, b, d]
                if v != v:
                    best = v
                    break
                if (v > best) if largest else (v < best):
                    best = v
        out[b] = best
