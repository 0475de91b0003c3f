"""A generated float32 GEMM block for shallow products (depth ``K`` up to
:data:`SHALLOW_DEPTH`): the 1x1 convolutions of mobile networks, whose ``K`` of 8 to 64
channels leave BLAS's packing and blocking little to amortise (mnasnet0_5's 12544 x 8 x
24 ran at 15 GMAC/s a core through oneDNN).

A tile of ``ROWS`` result rows by up to four 16-lane vectors keeps its sums in vector
registers (:mod:`.numba_vectors`) over the whole depth: for each ``k``, the row of ``B``
is loaded once for the tile and each row's ``A[r, k]`` once, broadcast. Columns left
over run in 16-, then 8-lane vectors, the last few as the block's last 8 columns again
(one at a time in a block narrower than 8); rows left over one at a time.
Each result is one dot product in ``k`` order, fused multiply-adds where the machine
has them: within BLAS's own rounding of NumPy's result, not its bits.

:func:`.gemm_libraries.block_call` calls ``shallow_block`` instead of BLAS for float32
blocks whose ``B`` is row-major and whose depth is at most :data:`SHALLOW_DEPTH`.

>>> "def shallow_block(" in source()
True
"""
from __future__ import annotations

import hashlib

from .gemm_libraries import NO_TRANS
from .numba_codegen import VECTORS_DIGEST

#: the deepest product a block computes here rather than in BLAS
SHALLOW_DEPTH = 256
#: rows of a tile: 6 rows by 4 vectors hold 24 sums, 4 rows of ``B`` and a broadcast
#: value in AVX-512's 32 vector registers
ROWS = 6
#: (columns, vectors of the tile, lanes of each)
_PANELS = ((64, 4, 16), (32, 2, 16), (16, 1, 16), (8, 1, 8))


def _tile(rows: int, vectors: int, lanes: int, indent: str) -> list:
    """Source computing ``rows`` result rows from row ``r`` by ``vectors * lanes``
    columns from column ``j``."""
    pad = indent
    lines = [f"{pad}acc{i}_{v} = zero{lanes}()" for i in range(rows) for v in range(vectors)]
    lines += [f"{pad}for q in range(k):",
              f"{pad}    at = q * ldb + j"]
    lines += [f"{pad}    b{v} = load{lanes}a(b, at + {v * lanes})" for v in range(vectors)]
    for i in range(rows):
        lines.append(f"{pad}    x = splat{lanes}a(a, (r + {i}) * sr + q * sk)")
        lines += [f"{pad}    acc{i}_{v} = fmadd(x, b{v}, acc{i}_{v})" for v in range(vectors)]
    lines += [f"{pad}store{lanes}a(c, (r + {i}) * ldc + j + {v * lanes}, acc{i}_{v})"
              for i in range(rows) for v in range(vectors)]
    return lines


def _panel(columns: int, vectors: int, lanes: int) -> list:
    """``_panel<columns>``: every row of the block at columns ``[j, j + columns)``."""
    return (["@njit(nogil=True, cache=True)",
             f"def _panel{columns}(a, b, c, rows, k, sr, sk, ldb, ldc, j):",
             "    r = 0",
             f"    while r + {ROWS} <= rows:"] + _tile(ROWS, vectors, lanes, "        ") +
            [f"        r += {ROWS}",
             "    while r < rows:"] + _tile(1, vectors, lanes, "        ") +
            ["        r += 1", ""])


def source() -> str:
    """The generated module's text: the C-callable ``shallow_block(rows, cols, ta, k, lda,
    ldb, ldc, a, b, c)``, a block of ``rows x cols`` from the addresses ``a``, ``b``,
    ``c`` (``B`` row-major; ``ta`` as :func:`.gemm_libraries.block_call`'s flags)."""
    lines = ["# graphc generated shallow GEMM block (engine/numba_shallow_gemm.py), "
             f"vectors {VECTORS_DIGEST}",
             "import numpy as np",
             "from numba import cfunc, njit, types",
             "from graphc.engine.numba_vectors import *",
             f"NO_TRANS = {NO_TRANS}", ""]
    for columns, vectors, lanes in _PANELS:
        lines += _panel(columns, vectors, lanes)
    lines += ["@njit(nogil=True, cache=True)",
              "def _columns(a, b, c, rows, cols, k, sr, sk, ldb, ldc, j):",
              "    for r in range(rows):",
              "        for jj in range(j, cols):",
              "            acc = np.float32(0.0)",
              "            for q in range(k):",
              "                acc += load1a(a, r * sr + q * sk) * load1a(b, q * ldb + jj)",
              "            store1a(c, r * ldc + jj, acc)", ""]
    lines += ["@cfunc(types.void(*(types.int64,) * 10), cache=True)",
              "def shallow_block(rows, cols, ta, k, lda, ldb, ldc, a, b, c):",
              "    sr, sk = (lda, 1) if ta == NO_TRANS else (1, lda)",
              "    j = 0"]
    for columns, _, _ in _PANELS:
        lines += [f"    while j + {columns} <= cols:",
                  f"        _panel{columns}(a, b, c, rows, k, sr, sk, ldb, ldc, j)",
                  f"        j += {columns}"]
    # fewer than 8 columns left: the last 8 again, as a panel (the columns it computes
    # twice get the same sums), rather than one column at a time
    lines += ["    if j < cols and cols >= 8:",
              "        _panel8(a, b, c, rows, k, sr, sk, ldb, ldc, cols - 8)",
              "    elif j < cols:",
              "        _columns(a, b, c, rows, cols, k, sr, sk, ldb, ldc, j)", ""]
    return "\n".join(lines)


#: a digest of :func:`source`, stamped into the modules that call it (Numba keys their
#: disk caches on their own text)
DIGEST = hashlib.sha1(source().encode()).hexdigest()[:12]


#: the name the GEMM modules call the block by: a C function, so that each module links
#: to the one compiled block instead of compiling (and optimising) it into itself again,
#: which cost 1.1 s a module cold
SYMBOL = f"graphc_shallow_block_{DIGEST}"
_registered: list = []


def register() -> None:
    """Compile (or load from the disk cache) the block and make :data:`SYMBOL` its
    address for LLVM's linker; once a process.

    >>> register(); register()
    """
    if _registered:
        return
    from llvmlite import binding

    from .numba_kernels import _load
    block = _load(source()).shallow_block
    binding.add_symbol(SYMBOL, block.address)
    _registered.append(block)          # the compiled code lives as long as the process


__all__ = ["SHALLOW_DEPTH", "ROWS", "DIGEST", "SYMBOL", "source", "register"]
