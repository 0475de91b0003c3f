"""A matrix-vector product over a weight held as ``(N, K)`` rows, as generated loops on
the OpenMP team the generated kernels and oneDNN share.

ONNX's ``Gemm(transB=1)`` of an initializer (every torchvision classifier) reads its
weight as the view ``W.T`` of ``(N, K)`` rows (:mod:`graphc.onnx.ops.nn`). On one image
that is one dot product of ``K`` contiguous cells per output: a stream over the whole
weight, bound by memory. oneDNN's ``dnnl_sgemm`` (:mod:`.onednn_gemv`) takes it in 36 us
when the 5 MB of a 1280 x 1000 classifier are in cache, but 190-270 us when a run's
convolutions have pushed them out; these loops, each thread streaming its own rows,
take 36 and 130-160 (MnasNet-0.5 1.72 -> 1.60 ms, MobileNetV2 4.30 -> 4.18, fresh-process
A/B). The sums run in float32 vector lanes, as BLAS's do: the bits may differ from
NumPy's (BLAS's) in the last places.

>>> import numpy as np
>>> a, w = np.ones((1, 3), np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)
>>> out = np.empty((1, 2), np.float32)
>>> run = rows_kernel(a, w.T, out, parallel=True)   # None unless oneDNN's convolutions run
>>> run is None or (run(), out.tolist())[1] == [[3.0, 12.0]]
True
"""
from __future__ import annotations

import numpy as np

#: dtypes the loops compute in
DTYPES = frozenset({np.dtype(np.float32)})


def rows_kernel(a, b, out, parallel: bool):
    """A callable computing ``out = a @ b`` for ``a`` one contiguous row ``(1, K)`` and
    ``b`` the transpose of C-contiguous ``(N, K)`` rows, of a :data:`DTYPES` dtype, on
    the threads when ``parallel``, where oneDNN's convolutions run (as
    :func:`.onednn_gemv.gemv_kernel`: elsewhere BLAS's GEMV, as fast on cached weights,
    serves); ``None`` otherwise (or without Numba).

    Example: ``rows_kernel(x, w.T, y, parallel=True)()`` fills ``y``."""
    if (a.ndim != 2 or b.ndim != 2 or out.ndim != 2 or a.shape[0] != 1
            or a.dtype not in DTYPES or not a.dtype == b.dtype == out.dtype
            or out.shape != (1, b.shape[1]) or b.size == 0
            or not (a.flags.c_contiguous and out.flags.c_contiguous
                    and b.T.flags.c_contiguous)):
        return None
    from .numba_kernels import available, load_compiled, threading_layer
    from .onednn_conv import in_use, wanted
    if wanted() or not in_use() or available() is not None:
        return None
    import numba

    from . import numba_gemv_loops as loops
    function = loops.parallel if parallel and threading_layer() else loops.serial
    args = (a.reshape(-1), b.T, out.reshape(-1))
    load_compiled(function, tuple(numba.typeof(x) for x in args))

    def run():
        function(*args)
    return run


__all__ = ["DTYPES", "rows_kernel"]
