"""A generated copy of a strided view into a C-contiguous array, for the permuted views
NumPy copies slowly: those whose innermost run is short (a few elements) or strided.

A reshape of a transposed view copies it (MobileViT's unfolding of an image into
patches, a Swin window partition): ``(1024, 16, 2, 2)`` read with strides ``(64, 2, 32,
1)``. NumPy's copy loop pays its per-run overhead every two elements (166 us for 64 Ki
float32 on this machine); here the view's dimensions are first merged where their
strides allow (at most four must remain), then four nested loops write the result in
order, the outer two split across the threads (65 us). Where the view has a contiguous
run of 16 elements or more (a plain transpose), NumPy's copy is as fast or faster and
serves (:func:`strided_copy` says ``None``).
A copy moves bits: the result is NumPy's exactly.

>>> import numpy as np
>>> x = np.arange(16.0).reshape(2, 2, 2, 2).transpose(0, 2, 1, 3)
>>> out = np.empty(x.shape)
>>> run = strided_copy(x, out, parallel=True)
>>> run is None or (run() or np.array_equal(out, x))
True
"""
from __future__ import annotations

import numpy as np

#: the dimensions a copy may keep once merged
RANK = 4
#: an innermost contiguous run at least this long: NumPy's copy serves
NUMPY_RUN = 16


def merged_dims(shape, strides) -> list:
    """``[(size, stride)]`` of a view with its size-1 dimensions dropped and each
    dimension merged into the one before it where that one steps over it exactly
    (``strides`` in elements), outermost first.

    >>> merged_dims((64, 32, 32), (1, 2048, 64))
    [(64, 1), (1024, 64)]
    """
    dims: list = []
    for size, stride in zip(shape, strides):
        if size == 1:
            continue
        if dims and dims[-1][1] == size * stride:
            dims[-1] = (dims[-1][0] * size, stride)
        else:
            dims.append((size, stride))
    return dims


def strided_copy(view: np.ndarray, out: np.ndarray, parallel: bool):
    """A callable copying ``view`` into ``out`` (C-contiguous, of ``view``'s shape and
    float dtype) by the generated loops on the threads, or ``None`` where NumPy's copy
    serves or the loops do not apply: not ``parallel`` (on one thread the loops are no
    faster than NumPy's), no element, a negative stride, more than four merged
    dimensions, a contiguous run of :data:`NUMPY_RUN` elements.

    Example: ``strided_copy(x.transpose(0, 2, 1, 3), out, parallel=True)()``
    """
    if (not parallel or view.dtype != out.dtype or view.dtype.kind != "f"
            or view.shape != out.shape or not out.flags.c_contiguous or view.size == 0
            or any(s < 0 or s % view.itemsize for s in view.strides)):
        return None
    dims = merged_dims(view.shape, [s // view.itemsize for s in view.strides])
    runs = [size for size, stride in dims if stride == 1]
    if len(dims) > RANK or (runs and runs[0] >= NUMPY_RUN):
        return None
    from .numba_kernels import available, load_compiled, threading_layer
    if available() is not None or not threading_layer():    # no Numba, or one thread
        return None
    import numba
    from .numba_strided_loops import parallel as kernel
    dims = [(1, 0)] * (RANK - len(dims)) + dims
    span = sum((size - 1) * stride for size, stride in dims) + 1
    source = np.lib.stride_tricks.as_strided(view, shape=(span,), strides=(view.itemsize,))
    sizes = np.array([size for size, _ in dims], np.int64)
    strides = np.array([stride for _, stride in dims], np.int64)
    flat = out.reshape(-1)
    load_compiled(kernel, tuple(numba.typeof(a) for a in (source, strides, flat, sizes)))

    def run():
        kernel(source, strides, flat, sizes)
    return run


__all__ = ["NUMPY_RUN", "RANK", "merged_dims", "strided_copy"]
