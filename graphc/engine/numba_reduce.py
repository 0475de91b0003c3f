"""Generated sums and means over the outer and inner dimensions of an
array seen as ``(A, B, D)``, keeping ``B``: a batch norm's per-channel statistics of
an NCHW tensor (``A=N, B=C, D=H*W``), a softmax's rows (``A=1``), a bias gradient's
columns (``D=1``). Imported only when a graph asks for generated kernels (it imports
Numba).

One thread per group of kept elements (``prange`` over ``B``), each walking its
``A * D`` cells in memory order. Sums accumulate in float64 (also for float32, so
they are at least as accurate as NumPy's pairwise sums) and may be reordered into
vector lanes (``fastmath={"reassoc"}`` on the reduction only), so they differ from
NumPy's in the last places: within a tolerance, not bit for bit. Maxima and minima
have no generated kernel: NumPy's SIMD reduction is 1.5-3x faster than a loop whose
NaN test per element keeps it scalar (a softmax's row maxima of 8 x 512 x 512:
0.40 ms NumPy, 1.2 ms generated on two cores). A sum or mean over a middle run of
dimensions, ``(K, R, L)`` keeping ``K`` and ``L`` (:func:`sum_krl`), adds whole rows in
NumPy's own order instead, so it gives NumPy's bits.

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
def sum_krl(x, out, divisor):
    """``out[k, l] = sum(x[k, :, l]) / divisor[0]`` (``divisor`` a one-element array of
    ``out``'s dtype: 1 for a sum, the count for a mean): a sum over a middle run of
    dimensions (an n-body step's forces, ``(N, N, 3)`` summed over its second axis).
    One thread per ``k``; each row of ``out`` is the first row of ``x[k]`` plus every
    later row in order, in ``x``'s dtype: NumPy's own order and precision for a
    reduction over an axis that is not the innermost, so the bits are NumPy's."""
    K, R, L = x.shape
    scale = divisor[0]
    for k in prange(K):
        row = out[k]
        first = x[k, 0]
        for l in range(L):
            row[l] = first[l]
        for r in range(1, R):
            cells = x[k, r]
            for l in range(L):
                row[l] += cells[l]
        if scale != 1:
            for l in range(L):
                row[l] = row[l] / scale
