"""The loops of :mod:`.numba_strided_copy` (imported only when a copy is generated: it
imports Numba). ``out`` (flat) takes ``source[i0*s0 + i1*s1 + i2*s2 + i3*s3]`` for the
four sizes ``n`` and element strides ``s``, in ``out``'s order.

>>> import numpy as np
>>> source, out = np.arange(4.0), np.empty(4)
>>> parallel(source, np.array([0, 0, 1, 2]), out, np.array([1, 1, 2, 2]))
>>> out.tolist()
[0.0, 2.0, 1.0, 3.0]
"""
from __future__ import annotations

from numba import njit, prange

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy", boundscheck=False)


@njit(**_OPTIONS)
def _rows(source, s, out, n, first, last):
    """Rows ``first`` to ``last`` of the two outer dimensions taken together."""
    n1, n2, n3 = n[1], n[2], n[3]
    s0, s1, s2, s3 = s[0], s[1], s[2], s[3]
    for t in range(first, last):
        i0 = t // n1
        base = i0 * s0 + (t - i0 * n1) * s1
        at = t * n2 * n3
        for i2 in range(n2):
            row = base + i2 * s2
            for i3 in range(n3):
                out[at + i3] = source[row + i3 * s3]
            at += n3


@njit(parallel=True, **_OPTIONS)
def parallel(source, s, out, n):
    """The copy with the outer rows split across the threads."""
    rows = n[0] * n[1]
    chunks = min(rows, 64)
    for k in prange(chunks):
        _rows(source, s, out, n, k * rows // chunks, (k + 1) * rows // chunks)
