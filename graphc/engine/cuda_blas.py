"""Matrix products a CUDA graph can hold: cuBLAS through a handle of graphc's own.

CuPy refuses cuBLAS calls while a stream captures (its handle's stream is set on
every call, and that check refuses a capturing stream), so a graph captured through
CuPy's ``matmul`` breaks at every product. cuBLAS itself can be captured: this
module calls ``cublas{S,D}gemm_v2`` and ``cublas{S,D}gemmStridedBatched`` through
ctypes on the libcublas CuPy has loaded, with a handle bound to the capture stream
and a workspace of its own (so the library allocates nothing while it is captured).

:func:`gemm_plan` is the pure part, tested on the CPU: a row-major product
``out = a @ b`` of 2-D or 3-D arrays (a 2-D operand broadcast over a stack) as
one column-major cuBLAS call, ``out^T = b^T a^T``: a row-major operand is read as
its transpose (``N``), a transposed view (unit row stride) as itself (``T``), with
the leading dimension from its strides. Anything else is ``None``: that product
stays a CuPy call launched between the captured graphs.

>>> import numpy as np
>>> a, b = np.ones((4, 3), np.float32), np.ones((5, 3), np.float32).T
>>> p = gemm_plan(a, b, np.empty((4, 5), np.float32))
>>> (p.transa, p.transb, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.batch)
(1, 0, 5, 4, 3, 3, 3, 5, 1)
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Optional

import numpy as np

#: cuBLAS's operation codes and math modes
OP_N, OP_T = 0, 1
DEFAULT_MATH, TF32_TENSOR_OP_MATH = 0, 3
#: the workspace each handle gets (cuBLAS's recommendation for Hopper is 32 MiB)
WORKSPACE_BYTES = 32 << 20


@dataclass(frozen=True)
class GemmPlan:
    """One cuBLAS call in column-major terms: ``C = op(A) op(B)`` with ``A`` the
    right-hand row-major operand and ``B`` the left one (``out^T = b^T a^T``);
    pointers are the arrays' addresses; ``batch`` products ``stride_*`` elements
    apart (0: one matrix broadcast)."""

    transa: int
    transb: int
    m: int
    n: int
    k: int
    a: int
    lda: int
    b: int
    ldb: int
    c: int
    ldc: int
    batch: int = 1
    stride_a: int = 0
    stride_b: int = 0
    stride_c: int = 0


def address(array) -> int:
    """The device (CuPy) or host (NumPy) address of ``array``'s first element."""
    data = getattr(array, "data", None)
    pointer = getattr(data, "ptr", None)
    return pointer if pointer is not None else array.__array_interface__["data"][0]


def _operand(x, rows: int, cols: int):
    """``(op, ld)`` reading the row-major (rows x cols) matrix ``x`` as its transpose
    in column-major memory (``OP_N``), or as itself from a transposed view
    (``OP_T``); ``None`` where neither stride is unit."""
    item = x.itemsize
    row, col = (s // item for s in x.strides[-2:])
    if any(s % item for s in x.strides[-2:]):
        return None
    if col == 1 or cols == 1:               # rows apart by `row`: x^T, column-major
        ld = row if rows > 1 else cols
        return (OP_N, max(ld, 1)) if ld >= cols else None
    if row == 1 or rows == 1:               # columns apart by `col`: x, column-major
        ld = col if cols > 1 else rows
        return (OP_T, max(ld, 1)) if ld >= rows else None
    return None


def _batch(x, count: int) -> Optional[int]:
    """The element stride between the matrices of ``x`` (0 for a 2-D one)."""
    if x.ndim == 2:
        return 0
    if x.shape[0] != count or x.strides[0] % x.itemsize:
        return None
    return x.strides[0] // x.itemsize if count > 1 else 0


def gemm_plan(a, b, out) -> Optional[GemmPlan]:
    """The cuBLAS call computing ``out = a @ b`` (float32 or float64; 2-D, or a
    stack of 3 dimensions with 2-D operands broadcast), or ``None`` (see the module
    docstring)."""
    if (a.dtype != out.dtype or b.dtype != out.dtype or out.dtype.name not in GEMMS
            or out.ndim not in (2, 3) or a.ndim not in (2, out.ndim)
            or b.ndim not in (2, out.ndim) or out.size == 0):
        return None
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if b.shape[-2] != k or out.shape[-2:] != (m, n) or k == 0:
        return None
    count = out.shape[0] if out.ndim == 3 else 1
    right, left = _operand(b, k, n), _operand(a, m, k)
    item = out.itemsize
    if right is None or left is None or out.strides[-1] != item and n > 1:
        return None
    ldc = out.strides[-2] // item if m > 1 else n
    if ldc < n or out.strides[-2] % item:
        return None
    ldc = max(ldc, 1)
    strides = [_batch(b, count), _batch(a, count), _batch(out, count)]
    if None in strides or (count > 1 and strides[2] == 0):
        return None
    return GemmPlan(right[0], left[0], n, m, k, address(b), right[1], address(a), left[1],
                    address(out), ldc, count, *strides)


def emulate(plan: GemmPlan, memory: np.ndarray, dtype) -> None:
    """Run ``plan`` on host memory the way cuBLAS would (the tests' reference):
    ``memory`` is one NumPy buffer holding every operand, pointers are addresses
    inside it."""
    base = memory.__array_interface__["data"][0]
    item = np.dtype(dtype).itemsize

    def matrix(pointer, ld, rows, cols, batch_stride, index):
        start = (pointer - base) // item + index * batch_stride
        flat = memory.view(dtype)
        # column-major rows x cols with leading dimension ld
        return np.lib.stride_tricks.as_strided(flat[start:], (rows, cols), (item, ld * item))

    for index in range(plan.batch):
        ra, ca = (plan.m, plan.k) if plan.transa == OP_N else (plan.k, plan.m)
        rb, cb = (plan.k, plan.n) if plan.transb == OP_N else (plan.n, plan.k)
        a = matrix(plan.a, plan.lda, ra, ca, plan.stride_a, index)
        b = matrix(plan.b, plan.ldb, rb, cb, plan.stride_b, index)
        a = a if plan.transa == OP_N else a.T
        b = b if plan.transb == OP_N else b.T
        c = matrix(plan.c, plan.ldc, plan.m, plan.n, plan.stride_c, index)
        c[...] = a @ b


#: dtype -> (the ctypes scalar of alpha and beta, cuBLAS's GEMM, its strided batched form)
GEMMS = {"float32": (ctypes.c_float, "cublasSgemm_v2", "cublasSgemmStridedBatched"),
         "float64": (ctypes.c_double, "cublasDgemm_v2", "cublasDgemmStridedBatched")}


def _libcublas():
    """The libcublas this process has loaded (CuPy's), found in the process's maps."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "libcublas.so" in path and "Lt" not in path:
                return ctypes.CDLL(path)
    raise OSError("libcublas is not loaded in this process")


class CublasHandle:
    """A cuBLAS handle of graphc's own on ``stream`` (a CuPy stream), with a workspace
    from CuPy's pool and TF32 math where asked: products made through it may be
    captured into a CUDA graph."""

    def __init__(self, cupy, stream, tf32: bool = False):
        self.lib = lib = _libcublas()
        self.handle = ctypes.c_void_p()
        self._check(lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate_v2")
        self._check(lib.cublasSetStream_v2(self.handle, ctypes.c_void_p(stream.ptr)),
                    "cublasSetStream_v2")
        self.workspace = cupy.empty(WORKSPACE_BYTES, dtype=np.uint8)
        self._check(lib.cublasSetWorkspace_v2(self.handle,
                                              ctypes.c_void_p(self.workspace.data.ptr),
                                              ctypes.c_size_t(WORKSPACE_BYTES)),
                    "cublasSetWorkspace_v2")
        self._check(lib.cublasSetMathMode(self.handle, TF32_TENSOR_OP_MATH if tf32
                                          else DEFAULT_MATH), "cublasSetMathMode")

    @staticmethod
    def _check(status, what):
        if status != 0:
            raise RuntimeError(f"{what} returned cuBLAS status {status}")

    def gemm(self, plan: GemmPlan, dtype) -> None:
        """Enqueue ``plan`` on the handle's stream."""
        scalar, single, batched = GEMMS[np.dtype(dtype).name]
        one, zero = scalar(1.0), scalar(0.0)
        common = (self.handle, plan.transa, plan.transb, plan.m, plan.n, plan.k,
                  ctypes.byref(one))
        if plan.batch == 1:
            status = getattr(self.lib, single)(
                *common, ctypes.c_void_p(plan.a), plan.lda, ctypes.c_void_p(plan.b), plan.ldb,
                ctypes.byref(zero), ctypes.c_void_p(plan.c), plan.ldc)
            self._check(status, single)
            return
        status = getattr(self.lib, batched)(
            *common, ctypes.c_void_p(plan.a), plan.lda, ctypes.c_longlong(plan.stride_a),
            ctypes.c_void_p(plan.b), plan.ldb, ctypes.c_longlong(plan.stride_b),
            ctypes.byref(zero), ctypes.c_void_p(plan.c), plan.ldc,
            ctypes.c_longlong(plan.stride_c), plan.batch)
        self._check(status, batched)
