"""Which library computes a GEMM block on a generated kernel's thread, as source text.

:mod:`.numba_gemm` cuts a product into blocks and calls a single-threaded GEMM on
each block from the generated kernels' threads. NumPy's bundled OpenBLAS always
serves. Where oneDNN's CPU library is installed (``pip install onednn-cpu-gomp``,
a dependency of graphc on x86-64 Linux), float32 blocks go to ``dnnl_sgemm``
instead: its just-in-time AVX-512 and AVX2 kernels ran this 2-core Zen 4 machine's
GEMMs at 52-57 GMAC/s per core, against OpenBLAS's 38-51 (ResNet's 784 x 128 x 1152:
57.0 against 51.2; MobileNet's 784 x 32 x 144: 56.1 against 46.6), as fast as
onnxruntime's own GEMM (55-57). Shallow float32 blocks (``K`` up to
:data:`.numba_shallow_gemm.SHALLOW_DEPTH`) run a generated kernel instead
(:func:`shallow_wanted`), where neither library's packing pays.

Each block runs on its calling thread alone, whichever library computes it: it sets
the thread's OpenMP thread count (oneDNN's build threads with GNU OpenMP, and called
outside a parallel region it would start a team of its own) and OpenBLAS's
per-thread count to one around the call, and back. The latter matters even when
oneDNN computes: lowering it puts OpenBLAS's own pool to sleep, which otherwise
spins for a while after every threaded call NumPy makes (a classifier's 1 x 2048 x
1000 GEMV each run kept one core busy and ran ResNet50 2.8x slower).
``GRAPHC_GEMM=openblas`` turns oneDNN off.

>>> sorted(LIBRARIES)
['onednn', 'openblas']
>>> chosen() in LIBRARIES
True
"""
from __future__ import annotations

import ctypes
import os
from functools import lru_cache
from importlib import metadata

#: OpenBLAS's CBLAS flags (numba_gemm's plans carry them) and oneDNN's characters
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
LIBRARIES = ("openblas", "onednn")
ONEDNN_DISTRIBUTION = "onednn-cpu-gomp"


@lru_cache(maxsize=None)
def onednn_library() -> str:
    """The path of oneDNN's shared library exporting ``dnnl_sgemm``, or the reason
    there is none (a sentence starting "no ")."""
    try:
        files = metadata.distribution(ONEDNN_DISTRIBUTION).files or ()
    except metadata.PackageNotFoundError:
        return f"no {ONEDNN_DISTRIBUTION} installed"
    for file in files:
        if file.name.startswith("libdnnl.so"):
            path = os.path.realpath(file.locate())
            try:
                if hasattr(ctypes.CDLL(path), "dnnl_sgemm"):
                    return path
            except OSError as e:        # its OpenMP runtime (libgomp.so.1) missing
                return f"no loadable oneDNN: {e}"
    return f"no libdnnl.so with dnnl_sgemm in {ONEDNN_DISTRIBUTION}"


def chosen() -> str:
    """The library the team's float32 blocks use: ``"onednn"`` where it is installed
    and ``$GRAPHC_GEMM`` does not say ``openblas``, else ``"openblas"``.

    >>> chosen() in ("onednn", "openblas")
    True
    """
    wanted = os.environ.get("GRAPHC_GEMM", "").strip().lower()
    if wanted not in ("", "shallow") + LIBRARIES:
        raise ValueError(f"GRAPHC_GEMM={wanted!r}: expected one of shallow, "
                         f"{', '.join(LIBRARIES)}")
    if wanted == "openblas" or onednn_library().startswith("no "):
        return "openblas"
    return "onednn"


def declarations(blas_path: str, symbols: dict, blasint: str) -> list:
    """Source lines loading the libraries and declaring ``gemm_<dtype>`` (OpenBLAS's
    CBLAS GEMM per dtype), ``local`` (OpenBLAS's per-thread thread count) and, where
    oneDNN serves, ``onednn_sgemm`` and OpenMP's thread count."""
    lines = ["from llvmlite import binding",
             "from numba import types",
             f"binding.load_library_permanently({blas_path!r})",
             f"_int = types.{blasint}",
             "# this thread's BLAS calls run on this thread only while a block computes",
             "local = types.ExternalFunction('openblas_set_num_threads_local', "
             "types.intc(types.intc))"]
    for dtype, symbol in symbols.items():
        lines.append(
            f"gemm_{dtype} = types.ExternalFunction({symbol!r}, types.void(types.intc, "
            f"types.intc, types.intc, _int, _int, _int, types.{dtype}, types.intp, _int, "
            f"types.intp, _int, types.{dtype}, types.intp, _int))")
    if "float32" in symbols and shallow_wanted():
        from .numba_shallow_gemm import SYMBOL
        lines += ["from graphc.engine.numba_shallow_gemm import register",
                  "register()",
                  f"shallow_block = types.ExternalFunction({SYMBOL!r}, "
                  "types.void(*(types.int64,) * 10))"]
    if chosen() == "onednn" and "float32" in symbols:
        lines += [f"binding.load_library_permanently({onednn_library()!r})",
                  "omp_get = types.ExternalFunction('omp_get_max_threads', types.intc())",
                  "omp_set = types.ExternalFunction('omp_set_num_threads', "
                  "types.void(types.intc))",
                  "onednn_sgemm = types.ExternalFunction('dnnl_sgemm', types.intc("
                  "types.int8, types.int8, types.int64, types.int64, types.int64, "
                  "types.float32, types.intp, types.int64, types.intp, types.int64, "
                  "types.float32, types.intp, types.int64))"]
    return lines


def block_call(dtype: str, indent: str = "    ") -> list:
    """Source lines computing one block on the calling thread alone: ``tasks[t]``'s
    rows and columns, depth ``k``, flags ``ta``/``tb`` (:data:`NO_TRANS` or
    :data:`TRANS`), leading dimensions and base addresses ``pa``, ``pb``, ``pc``
    (see numba_gemm._plan)."""
    operands = ("tasks[t, 0], tasks[t, 1], k, 1.0, pa + tasks[t, 2], lda, "
                "pb + tasks[t, 3], ldb, 0.0, pc + tasks[t, 4], ldc")
    if dtype == "float32" and chosen() == "onednn":
        # oneDNN's flags are the characters 'N' (78) and 'T' (84)
        lines = ["before = local(1)", "threads = omp_get()", "omp_set(1)",
                 f"onednn_sgemm(78 + 6 * (ta - {NO_TRANS}), 78 + 6 * (tb - {NO_TRANS}), "
                 f"{operands})", "omp_set(threads)", "local(before)"]
    else:
        lines = ["before = local(1)", f"gemm_{dtype}({ROW_MAJOR}, ta, tb, {operands})",
                 "local(before)"]
    if dtype == "float32" and shallow_wanted():
        from .numba_shallow_gemm import SHALLOW_DEPTH
        lines = [f"if tb == {NO_TRANS} and k <= {SHALLOW_DEPTH}:",
                 "    shallow_block(tasks[t, 0], tasks[t, 1], ta, k, lda, ldb, ldc, "
                 "pa + tasks[t, 2], pb + tasks[t, 3], pc + tasks[t, 4])",
                 "else:"] + ["    " + line for line in lines]
    return [indent + line for line in lines]


def shallow_wanted() -> bool:
    """Whether float32 blocks of depth up to :data:`.numba_shallow_gemm.SHALLOW_DEPTH`
    run :mod:`.numba_shallow_gemm`'s generated block (``$GRAPHC_GEMM`` unset or
    ``shallow``) rather than the library's GEMM (``openblas``, ``onednn``: that
    library for every block).

    >>> isinstance(shallow_wanted(), bool)
    True
    """
    return os.environ.get("GRAPHC_GEMM", "").strip().lower() in ("", "shallow")
