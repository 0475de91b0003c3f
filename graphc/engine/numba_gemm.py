"""Matrix products on the generated kernels' threads: one thread pool for everything.

A compiled graph alternates GEMMs with generated loops. Left to themselves, BLAS
(OpenBLAS's own threads) and the generated kernels (Numba's OpenMP team) are two
pools on the same cores, and each pool's waiting threads take the cores the other
needs: on two cores a GEMM followed by a threaded loop ran at one core's speed, or
far worse whenever one pool spun while the other worked. Here a GEMM is cut into
blocks (by rows or columns, and by matrix of a stack) that the OpenMP team computes
side by side, each thread calling single-threaded BLAS (OpenBLAS's thread-local
thread count) on its block through a pointer to the block and BLAS's leading
dimensions, so strided operands (a transposed view, a column block) are read in
place. BLAS's own pool then stays idle during a run, and the team may spin between
kernels instead of sleeping (:func:`.numba_kernels.wait_policy`).

Each element of the product is one of BLAS's dot products over the whole ``K``, as
NumPy's own call computes it; the blocks change only which thread computes which
elements (bits may still differ from NumPy's in the last place, where BLAS's kernel
for an edge block orders its sums otherwise).

It serves where NumPy's bundled OpenBLAS exports its CBLAS GEMMs and the per-thread
thread count (OpenBLAS 0.3.27 or later); elsewhere (MKL, Accelerate, another build)
:func:`gemm_kernel` returns ``None`` and NumPy's ``matmul`` runs as before.

>>> import numpy as np
>>> a, b = np.ones((64, 32), np.float32), np.ones((32, 48), np.float32)
>>> out = np.empty((64, 48), np.float32)
>>> run = gemm_kernel(a, b, out, threaded=True)
>>> (run is None) or (run() or bool(np.all(out == 32)))
True
"""
from __future__ import annotations

import ctypes
import glob
import math
import os
import threading
from functools import partial

import numpy as np

from . import gemm_libraries

_lock = threading.Lock()
_state: dict = {}        # "functions": {dtype: (serial, parallel)}, or "problem": why not

#: symbol names of NumPy's bundled OpenBLAS, newest build first: (sgemm, dgemm, int type)
_SYMBOLS = (("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_", ctypes.c_int64),
            ("cblas_sgemm64_", "cblas_dgemm64_", ctypes.c_int64),
            ("cblas_sgemm", "cblas_dgemm", ctypes.c_int))
_NO_TRANS, _TRANS = gemm_libraries.NO_TRANS, gemm_libraries.TRANS
#: floating-point operations below which a product runs on the calling thread alone
#: (waking the team costs more than it saves)
SERIAL_FLOPS = 1 << 18
#: a block's rows or columns start at a multiple of this (a cache line of float32)
ALIGN = 16
#: bytes of the product's block that an epilogue reads back: small enough to stay in
#: cache beside BLAS's packed panels (64 KiB blocks ran the 3136 x 24 x 144 GEMM and
#: its bias and ReLU6 in 144 us, against 127 + 37 us apart; 256 KiB blocks in 191 us)
EPILOGUE_BLOCK_BYTES = 1 << 16
#: the fewest rows of such a block (BLAS's own blocking wants enough of them), the
#: largest right operand the blocks may each pack again (ViT's 768 x 3072 in blocks of
#: 16 rows took 1.6x as long as in halves), and the deepest product cut so: only a
#: shallow one writes its result faster than it computes it, so that a second pass over
#: the result costs much (RegNet's 784 x 320 x 196 in blocks: 0.59 against 0.54 ms)
EPILOGUE_MIN_ROWS, EPILOGUE_PANEL_BYTES, EPILOGUE_MAX_DEPTH = 64, 1 << 18, 64
#: the fewest rows for which a product is cut by rows even when it has more columns:
#: OpenBLAS runs a block of rows faster than a block of columns from there (a ViT's
#: 197 x 192 x 768: 356 against 417 us; a MobileNet's 196 x 96 x 576: 117 against 128
#: us), below it not (49 x 960 x 320: 228 against 175 us), nor for very wide products
#: (ViT's 197 x 768 x 3072: 5.6 against 5.0 ms; 197 x 768 x 2304: 3.6 against 3.7 ms)
ROWS_SPLIT_MIN, ROWS_SPLIT_MAX_COLUMNS = 160, 2304


def _blas_library():
    """The shared library of NumPy's bundled BLAS, or ``None``."""
    folder = os.path.dirname(np.__file__)
    for pattern in ("numpy.libs/libscipy_openblas*.so*", "numpy.libs/libopenblas*.so*",
                    "numpy/.dylibs/libscipy_openblas*.dylib", ".dylibs/libscipy_openblas*"):
        found = sorted(glob.glob(os.path.join(os.path.dirname(folder), pattern))
                       + glob.glob(os.path.join(folder, pattern)))
        if found:
            return found[0]
    return None


def blas_symbols():
    """``(library path, sgemm symbol, dgemm symbol, "int64" or "int32")`` of NumPy's
    bundled OpenBLAS when :func:`gemm_kernel` can call it, else the reason it cannot
    (a string). Needs no Numba: the engine asks it before Numba starts its threads.

    >>> isinstance(blas_symbols(), (tuple, str))
    True
    """
    path = _blas_library()
    if path is None:
        return "NumPy's BLAS is not a bundled OpenBLAS"
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:     # pragma: no cover - the file is NumPy's own
        return f"cannot load {path}: {e}"
    if not hasattr(lib, "openblas_set_num_threads_local"):
        return "NumPy's OpenBLAS predates openblas_set_num_threads_local (0.3.27)"
    for s_name, d_name, blasint in _SYMBOLS:
        if hasattr(lib, s_name) and hasattr(lib, d_name):
            return path, s_name, d_name, "int64" if blasint is ctypes.c_int64 else "int32"
    return "NumPy's OpenBLAS exports no CBLAS GEMM this knows"


def _make_functions():
    """The generated module's loops per dtype, or the reason there are none."""
    found = blas_symbols()
    if isinstance(found, str):
        return found
    path, s_name, d_name, blasint = found
    from .numba_kernels import _load
    module = _load(_module_source(path, {"float32": s_name, "float64": d_name}, blasint))
    return {np.dtype(t): (getattr(module, f"serial_{t}"), getattr(module, f"parallel_{t}"))
            for t in ("float32", "float64")}


def _module_source(path: str, symbols: dict, blasint: str) -> str:
    """A module of Numba loops over a product's blocks, calling the GEMM symbols by
    name (so Numba caches their machine code on disk like every generated kernel).
    A block is a row of ``tasks``: its rows, its columns and the byte offsets of its
    A, B and C from the addresses given."""
    lines = ["# graphc: GEMM blocks on the generated kernels' threads (engine/numba_gemm.py)",
             "from numba import njit, prange"]
    lines += gemm_libraries.declarations(path, symbols, blasint)
    for dtype in symbols:
        lines += _block_loops(dtype, f"_{dtype}", "", [])
    return "\n".join(lines) + "\n"


_BLOCK_ARGS = "tasks, t, ta, tb, k, lda, ldb, ldc, pa, pb, pc"
_PLAN_ARGS = "tasks, ta, tb, k, lda, ldb, ldc, pa, pb, pc"


def _block_loops(dtype: str, suffix: str, extra: str, after: list) -> list:
    """Source of ``serial<suffix>`` and ``parallel<suffix>(tasks, flags..., addresses
    <extra>)``: each computes every block of ``tasks`` (on the calling thread, or
    spread over the thread team), then runs the lines ``after`` on it."""
    lines = []
    for name, loop, options in (("serial", "range", ""),
                                ("parallel", "prange", ", parallel=True")):
        block = f"{name}_block{suffix}"
        lines += ["", "@njit(nogil=True, cache=True)", f"def {block}({_BLOCK_ARGS}):"]
        lines += gemm_libraries.block_call(dtype)
        lines += ["", f"@njit(nogil=True, cache=True{options})",
                  f"def {name}{suffix}({_PLAN_ARGS}{extra}):",
                  f"    for t in {loop}(tasks.shape[0]):",
                  f"        {block}({_BLOCK_ARGS})"] + after
    return lines


def _functions():
    with _lock:
        if not _state:
            made = _make_functions()
            _state["problem" if isinstance(made, str) else "functions"] = made
        return _state.get("functions")


def unavailable() -> str | None:
    """``None`` when :func:`gemm_kernel` can serve here, else the reason.

    >>> unavailable() is None or isinstance(unavailable(), str)
    True
    """
    _functions()
    return _state.get("problem")


def _layout(strides, rows: int, cols: int, itemsize: int):
    """How BLAS reads a (rows, cols) matrix with these byte ``strides``: ``(trans,
    leading dimension, bytes from one row to the next, bytes from one column to the
    next)``, or ``None`` when neither dimension is contiguous."""
    sr, sc = strides
    if sr < 0 or sc < 0 or sr % itemsize or sc % itemsize:
        return None
    if cols == 1 or sc == itemsize:
        ld = sr // itemsize if rows > 1 else max(cols, 1)
        if ld >= max(cols, 1):
            return _NO_TRANS, ld, ld * itemsize, itemsize
    if rows == 1 or sr == itemsize:
        ld = sc // itemsize if cols > 1 else max(rows, 1)
        if ld >= max(rows, 1):
            return _TRANS, ld, itemsize, ld * itemsize
    return None


def _batch_offsets(array, batch) -> np.ndarray:
    """Byte offset of each matrix of ``array`` (its stack broadcast to ``batch``)."""
    if not batch:
        return np.zeros(1, np.int64)
    view = np.broadcast_to(array, tuple(batch) + array.shape[-2:])
    strides = np.array(view.strides[:-2], np.int64)
    return (np.indices(batch, dtype=np.int64).reshape(len(batch), -1).T @ strides)


def _cuts(n: int, parts: int) -> list:
    """``parts`` + 1 boundaries cutting ``n`` into near-equal blocks at multiples of
    :data:`ALIGN` (fewer blocks when ``n`` is short)."""
    parts = max(1, min(parts, -(-n // ALIGN)))
    return sorted({min(n, ALIGN * round(n * p / parts / ALIGN)) for p in range(parts)} | {n})


def _plan(a, b, out, threaded: bool, block_bytes: int = 0):
    """How :func:`gemm_kernel` cuts ``out[...] = a @ b`` into blocks: ``(tasks, args)``
    where each task row is ``(rows, cols, A offset, B offset, C offset, first row of
    the block among the stacked product's rows, first column)`` and ``args`` the
    flags, ``K``, leading dimensions and addresses; or ``None`` (see there)."""
    if (not threaded or a.ndim < 2 or b.ndim < 2 or not a.dtype == b.dtype == out.dtype
            or out.dtype not in (np.float32, np.float64) or out.size == 0
            or a.shape[-1] == 0):
        return None
    from .numba_kernels import available, threading_layer
    functions = _functions() if available() is None else None
    if functions is None:
        return None
    size = out.dtype.itemsize
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if m == 1 or n == 1:
        # a matrix-vector product: NumPy's call takes BLAS's GEMV, 2.5-5x faster here
        # than GEMM blocks of one row (a classifier's 1 x 9216 x 4096: 7.0 vs 18.9 ms)
        return None
    batch = out.shape[:-2]
    la = _layout(a.strides[-2:], m, k, size)
    lb = _layout(b.strides[-2:], k, n, size)
    lc = _layout(out.strides[-2:], m, n, size)
    if la is None or lb is None or lc is None or lc[0] != _NO_TRANS:
        return None
    offsets = [_batch_offsets(x, batch) for x in (a, b, out)]
    count = len(offsets[2])
    flops = 2 * m * n * k * count
    import numba
    threads = numba.get_num_threads() if flops >= SERIAL_FLOPS and threading_layer() else 1
    # whole matrices when they share the threads evenly, else each cut in blocks
    parts = 1 if count % threads == 0 else threads
    by_rows = m >= n or ROWS_SPLIT_MIN <= m and n <= ROWS_SPLIT_MAX_COLUMNS
    if (block_bytes and by_rows and n >= 4 * ALIGN and k <= EPILOGUE_MAX_DEPTH
            and k * n * size <= EPILOGUE_PANEL_BYTES):   # rows that stay in cache
        # (a narrow product's epilogue is cheap, and more blocks slow BLAS: 3136 x 144 x
        # 24 in 64 KiB blocks took 185 us, against 152 us in halves; and each block
        # packs the whole right operand again: for a large one that costs more than
        # an epilogue in cache saves)
        rows = max(EPILOGUE_MIN_ROWS, block_bytes // (n * size) // ALIGN * ALIGN)
        parts = max(parts, -(-m // rows))
    cuts = _cuts(m if by_rows else n, parts)
    tasks = []
    for i in range(count):
        for lo, hi in zip(cuts, cuts[1:]):
            if by_rows:
                tasks.append((hi - lo, n, offsets[0][i] + lo * la[2], offsets[1][i],
                              offsets[2][i] + lo * lc[2], i * m + lo, 0))
            else:
                tasks.append((m, hi - lo, offsets[0][i], offsets[1][i] + lo * lb[3],
                              offsets[2][i] + lo * lc[3], i * m, lo))
    args = (np.array(tasks, np.int64), la[0], lb[0], k, la[1], lb[1], lc[1],
            _address(a), _address(b), _address(out))
    return threads > 1 and len(tasks) > 1, args


def gemm_kernel(a, b, out, threaded: bool):
    """A kernel computing ``out[...] = a @ b`` (stacks broadcast as ``numpy.matmul``'s)
    on the generated kernels' threads (a small product on the calling thread alone), or
    ``None`` where NumPy's call must serve: not ``threaded`` (a parallel schedule's
    steps share BLAS's threads, :mod:`.blas_threads`), vectors or matrix-vector
    products (one row or one column: BLAS's GEMV), other dtypes, no usable BLAS,
    operands without a contiguous dimension.

    Example: ``gemm_kernel(a, b, out, threaded=True)()`` fills ``out``.
    """
    plan = _plan(a, b, out, threaded)
    if plan is None:
        return _matrix_vector(a, b, out, threaded)
    split, args = plan
    serial, parallel = _functions()[out.dtype]
    function = parallel if split else serial
    import numba

    from .numba_kernels import load_compiled
    load_compiled(function, tuple(numba.typeof(x) for x in args))   # now, not in a run
    return _Gemm(partial(function, *args), (a, b, out))


# -- a GEMM and the elementwise program reading its product -----------------------------------
def epilogue_source(program, in_dtypes, dtype: str, product: int, roles) -> str | None:
    """A module computing each block of a product with BLAS, then the elementwise
    ``program`` (a ``fused`` op) on that block while it is in cache: ``serial`` and
    ``parallel(tasks, flags..., addresses, out, x...)`` (:func:`_plan`'s arguments, the
    product as ``(rows, N)`` and the program's other inputs by ``roles``). ``None``
    where no BLAS serves, or the generator does not cover the program or would call
    the C library element by element in it.

    >>> from graphc.type import Op
    >>> relu = Op.make("fused", program=((Op.make("relu"), (("in", 0),)),), shape=(4, 4),
    ...                dtype=np.dtype("float32"))
    >>> "graphc_max" in (epilogue_source(relu, ["float32"], "float32", 0, ()) or "graphc_max")
    True
    """
    from . import numba_codegen as codegen
    found = blas_symbols()
    if isinstance(found, str):
        return None
    path, s_name, d_name, blasint = found
    symbol = {"float32": s_name, "float64": d_name}[dtype]
    names = [f"a{k}" for k in range(len(in_dtypes))]
    try:
        body = codegen.program_body(codegen.DIALECT, program, names, list(in_dtypes), dtype)
    except (NotImplementedError, KeyError):
        return None
    if not codegen.vectorises(body):
        # a call to the C library per element (tanh, float64 exp): NumPy's vectorised
        # call on the whole product is faster (a GELU-tanh epilogue ran 2x slower)
        return None
    others = [k for k in range(len(in_dtypes)) if k != product]
    args = ", ".join(f"x{k}" for k in others)
    epilogue = ["@njit(nogil=True, cache=True, error_model='numpy')",
                f"def epilogue(tasks, t, out{', ' if args else ''}{args}):",
                "    rows, cols, row0, col0 = tasks[t, 0], tasks[t, 1], tasks[t, 5], tasks[t, 6]"]
    epilogue += [f"    a{k} = x{k}[0]" for k, r in zip(others, roles) if r == "scalar"]
    epilogue += ["    for i in range(row0, row0 + rows):",
                 "        o = out[i, col0:col0 + cols]"]
    for k, r in zip(others, roles):
        if r == "row":
            epilogue.append(f"        a{k} = x{k}[i]")
        elif r == "col":
            epilogue.append(f"        s{k} = x{k}[col0:col0 + cols]")
        elif r == "full":
            epilogue.append(f"        s{k} = x{k}[i, col0:col0 + cols]")
    epilogue += ["        for j in range(cols):", f"            a{product} = o[j]"]
    epilogue += [f"            a{k} = s{k}[j]" for k, r in zip(others, roles)
                 if r in ("col", "full")]
    epilogue += ["            " + line for line in body] + ["            o[j] = acc"]
    call = "out" + "".join(f", x{k}" for k in others)
    lines = [
        "# graphc: GEMM blocks with an elementwise epilogue (engine/numba_gemm.py), "
        f"prelude {codegen.PRELUDE_DIGEST}",
        "import math", "import numpy as np",
        "from numba import njit, prange",
        "from graphc.engine.numba_prelude import *"]
    lines += gemm_libraries.declarations(path, {dtype: symbol}, blasint)
    lines += [""] + epilogue
    lines += _block_loops(dtype, "", f", {call}", [f"        epilogue(tasks, t, {call})"])
    return "\n".join(lines)


def epilogue_kernel(a, b, out, program, product: int, roles, others, threaded: bool):
    """A kernel computing ``program`` (a ``fused`` op whose input ``product`` is ``a @
    b``) into ``out`` (C-contiguous, the product's size) block by block: each block of
    the product is computed into ``out`` by BLAS, then the program runs on it in
    place, reading the ``others`` (the program's other inputs, in order) by ``roles``
    (:mod:`graphc.optimiser.fuse_epilogue`). ``None`` where :func:`gemm_kernel` would
    decline the product, or the generator the program.

    Example: ``epilogue_kernel(x, w, out, program, 0, ("col",), [bias], True)()``
    """
    if not out.flags.c_contiguous:
        return None
    gemm = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    if math.prod(gemm) != out.size:
        return None
    product_view = out.reshape(gemm)
    plan = _plan(a, b, product_view, threaded, EPILOGUE_BLOCK_BYTES)
    if plan is None:
        return None
    split, args = plan
    rows, n = out.size // gemm[-1], gemm[-1]
    views = []
    for role, x in zip(roles, others):
        if x.dtype != out.dtype and role != "scalar":
            return None
        if not x.flags.c_contiguous:     # a copy here would go stale between runs
            return None
        flat = x.reshape(rows, n) if role == "full" else x.reshape(-1)
        if role == "col" and flat.size != n or role == "row" and flat.size != rows:
            return None
        flat = flat.view()
        flat.flags.writeable = False      # one Numba type for constants and values
        views.append(flat)
    source = epilogue_source(program, [x.dtype.name for x in others[:product]]
                             + [out.dtype.name] + [x.dtype.name for x in others[product:]],
                             out.dtype.name, product, roles)
    if source is None:
        return None
    import numba

    from .numba_kernels import _load, load_compiled
    module = _load(source)
    function = module.parallel if split else module.serial
    call = args + (out.reshape(rows, n),) + tuple(views)
    load_compiled(function, tuple(numba.typeof(x) for x in call))
    return _Gemm(partial(function, *call), (a, b, out) + tuple(others))


def _address(array) -> int:
    return array.__array_interface__["data"][0]


def _matrix_vector(a, b, out, threaded: bool):
    """A matrix-vector product over ``(N, K)`` rows as generated loops
    (:mod:`.numba_gemv`), else on oneDNN where its convolutions run
    (:mod:`.onednn_gemv`: then no BLAS pool of its own wakes during a run), else
    ``None`` (NumPy's call, BLAS's GEMV)."""
    if a.ndim < 2 or b.ndim < 2 or (a.shape[-2] != 1 and b.shape[-1] != 1):
        return None
    from .numba_gemv import rows_kernel
    rows = rows_kernel(a, b, out, threaded)
    if rows is not None:
        return rows
    from .onednn_gemv import gemv_kernel
    threads = 1
    if threaded:
        import numba
        threads = numba.get_num_threads()
    return gemv_kernel(a, b, out, threads)


class _Gemm:
    """The bound call, holding the arrays whose memory it reads and writes."""

    __slots__ = ("call", "arrays")

    def __init__(self, call, arrays):
        self.call, self.arrays = call, arrays

    def __call__(self):
        self.call()


def generated_matmul(op, ins, out, ctx, parallel: bool):
    """``OpDef.generated`` of ``matmul``: :func:`gemm_kernel` on the operands as
    :func:`.cpu_kernels.matmul_operands` reads them (``None``: NumPy's kernel runs).

    Example: ``generated_matmul(Op.make("matmul"), [a, b], out, None, True)()``
    """
    from .cpu_kernels import matmul_operands
    return gemm_kernel(*matmul_operands(op, ins, out), threaded=parallel)
