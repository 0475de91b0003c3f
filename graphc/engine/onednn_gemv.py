"""Matrix-vector products on oneDNN's ``dnnl_sgemm``, where convolutions run on oneDNN.

NumPy sends a float32 matrix-vector product (a classifier, a squeeze-excitation
block) to OpenBLAS's GEMV on OpenBLAS's own threads, which then spin for a while
waiting for more work. Next to the generated kernels' OpenMP team that is two pools
for two cores: measured, a 3x3 oneDNN convolution after a classifier's 1 x 2048 x
1000 GEMV took 6.9 ms instead of 1.1, and ResNet50 ran in 140 ms instead of 45.
Where :mod:`.onednn_conv`'s primitives run (:func:`.onednn_conv.wanted` and
:func:`.onednn_conv.in_use`), such products run here instead, on the calling
thread's OpenMP team (the same threads as the convolutions and the generated kernels),
so no second pool ever wakes.

>>> import numpy as np
>>> a, b, out = np.ones((1, 3), np.float32), np.ones((3, 2), np.float32), np.empty((1, 2),
...                                                                           np.float32)
>>> kernel = gemv_kernel(a, b, out, threads=1)
>>> kernel is None or (kernel(), out.tolist())[1] == [[3.0, 3.0]]
True
"""
from __future__ import annotations

import ctypes

import numpy as np

from .numba_gemm import _TRANS, _layout

_ARGUMENTS = [ctypes.c_char, ctypes.c_char, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
              ctypes.c_float, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
              ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.c_int64]


class _Gemv:
    """``dnnl_sgemm`` bound to a product's operands, on a team of ``threads``."""

    __slots__ = ("call", "arrays", "omp", "threads")

    def __init__(self, call, arrays, omp, threads):
        self.call, self.arrays, self.omp, self.threads = call, arrays, omp, threads

    def __call__(self):
        before = self.omp.omp_get_max_threads()
        self.omp.omp_set_num_threads(self.threads)
        try:
            status = self.call()
        finally:
            self.omp.omp_set_num_threads(before)
        if status != 0:
            raise RuntimeError(f"matmul: oneDNN's sgemm failed (dnnl status {status})")


def gemv_kernel(a, b, out, threads: int):
    """``out = a @ b`` for 2-D float32 operands, one of ``a``'s rows or ``b``'s columns
    being 1, on oneDNN's ``dnnl_sgemm``; ``None`` where oneDNN convolutions do not run
    (:func:`.onednn_conv.wanted`, :func:`.onednn_conv.in_use`: a graph's convolutions
    are built before its classifier) or the operands are not float32 matrices BLAS
    reads.

    Example: ``gemv_kernel(x, w, y, threads=2)()`` fills ``y``."""
    from .onednn_conv import _library, in_use, wanted
    if (wanted() or not in_use() or a.ndim != 2 or b.ndim != 2 or out.ndim != 2
            or not a.dtype == b.dtype == out.dtype == np.float32 or out.size == 0
            or a.shape[1] == 0):
        return None
    (m, k), n = a.shape, b.shape[1]
    la, lb = _layout(a.strides, m, k, 4), _layout(b.strides, k, n, 4)
    lc = _layout(out.strides, m, n, 4)
    if la is None or lb is None or lc is None or lc[0] == _TRANS:
        return None
    library = _library()
    sgemm = library.dll.dnnl_sgemm
    sgemm.argtypes = _ARGUMENTS
    flags = [b"T" if layout[0] == _TRANS else b"N" for layout in (la, lb)]
    arguments = (*flags, m, n, k, 1.0, a.ctypes.data, la[1], b.ctypes.data, lb[1], 0.0,
                 out.ctypes.data, lc[1])
    return _Gemv(lambda: sgemm(*arguments), (a, b, out), library.omp, threads)


__all__ = ["gemv_kernel"]
