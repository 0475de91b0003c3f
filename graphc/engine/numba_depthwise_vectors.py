"""Generated float32 kernels of the channels-last depthwise convolution with the taps
held in vector registers: one Numba module per window size (``kh x kw``), cached on
disk like the other generated kernels (:func:`.numba_kernels._load`).

:mod:`.numba_channels_last`'s kernel is load-bound: with no ``restrict`` in Numba, LLVM
reloads a tap's weights for every cell, and reloads and stores the cell between tap
rows. Here a block of 16 (then 8) channels holds its ``kh * kw`` weight vectors in
:mod:`.numba_vectors` values across a whole result row, and each cell sums every tap
in one register before one store. Each cell sums its taps in row-major order from +0,
each product rounded before its sum, skipping the taps on padding: the bits of
:mod:`.numba_channels_last`'s kernel. Channels past the last block of 8 run the same
code on scalars.

Measured on two cores (Zen 4), against :mod:`.numba_channels_last`: 28x28x72 5x5
82 -> 36 us; 56x56x144 3x3 177 -> 111 us; 112x112x32 3x3 202 -> 85 us.

>>> print(source(3, 3).splitlines()[0])
# graphc generated channels-last depthwise convolution, 3x3 taps, ...
"""
from __future__ import annotations

from .numba_codegen import VECTORS_DIGEST

#: window sizes with a kernel of their own: the depthwise layers of mobile networks. A
#: 7x7 window's 49 weight vectors do not fit AVX-512's 32 registers; spilled, they ran
#: no faster than :mod:`.numba_channels_last`'s kernel (14x14x384: 185 against 134 us).
WINDOWS = frozenset({(3, 3), (5, 5)})

#: (lanes, load, zero, store) of each block width; 1: scalars, for the channels left
_WIDTHS = ((16, "load16", "zero16()", "store16({t}, {at}, acc)"),
           (8, "load8", "zero8()", "store8({t}, {at}, acc)"),
           (1, None, "np.float32(0.0)", "{t}[{at}] = acc"))


def _taps(kh: int, kw: int, load: str, checked: bool, indent: str) -> list:
    """The statements adding a cell's taps to ``acc``, in row-major order: tap row ``i``
    only where ``ok{i}`` (inside the image), tap column ``j`` only where ``v{j}`` when
    ``checked`` (a cell by the left or right padding)."""
    lines = []
    for i in range(kh):
        lines.append(f"{indent}if ok{i}:")
        for j in range(kw):
            term = (f"muladd(acc, w{i}_{j}, {load}(r{i}, at + {j} * apart))" if load else
                    f"acc + w{i}_{j} * r{i}[at + {j} * apart]")
            if checked:
                lines.append(f"{indent}    if v{j}:")
                lines.append(f"{indent}        acc = {term}")
            else:
                lines.append(f"{indent}    acc = {term}")
    return lines


def _cell_functions(kh: int, kw: int, lanes: int, load, zero: str, store: str) -> list:
    """``_inside{lanes}`` and ``_edge{lanes}``: a block of ``lanes`` channels (1: a
    scalar) from channel ``c`` of a result row ``t``, over the cells whose taps all read
    inside the image (tap rows ``ok{i}`` aside) and over the others. Each holds the
    block's weights first. Two functions rather than two loops in one: with the edge
    loop's values alive across the interior loop, LLVM ran out of general registers and
    reloaded the rows' addresses for every tap (30-50% slower)."""
    rows = ", ".join(f"r{i}" for i in range(kh))
    oks = ", ".join(f"ok{i}" for i in range(kh))
    weights = [f"    w{i}_{j} = {load}(w, {i * kw + j} * C + c)" if load else
               f"    w{i}_{j} = w[{i * kw + j} * C + c]"
               for i in range(kh) for j in range(kw)]
    columns = [f"            v{j} = 0 <= base + {j} * dw < width" for j in range(kw)]
    head = "@njit(nogil=True, error_model='numpy', cache=True)"
    return ([head,
             f"def _inside{lanes}(t, w, {rows}, {oks}, q_lo, q_hi, step, start, apart, C, c):"]
            + weights +
            ["    for q in range(q_lo, q_hi):",
             "        at = q * step + start",
             f"        acc = {zero}"] +
            _taps(kh, kw, load, False, "        ") +
            ["        " + store.format(t="t", at="q * C + c"), "", head,
             f"def _edge{lanes}(t, w, {rows}, {oks}, q_lo, q_hi, out_w, width, sw, pw, dw, C,"
             " c):"] + weights +
            ["    apart = dw * C",
             "    for q in range(out_w):",
             "        if q < q_lo or q >= q_hi:",
             "            base = q * sw - pw"] + columns +
            ["            at = base * C + c",
             f"            acc = {zero}"] +
            _taps(kh, kw, load, True, "            ") +
            ["            " + store.format(t="t", at="q * C + c"), ""])


def source(kh: int, kw: int) -> str:
    """The module text of the kernel for ``kh x kw`` windows: ``depthwise(x, w, out,
    geometry, chunks)`` with :func:`.numba_channels_last.depthwise_nhwc`'s arguments
    but ``zero`` (always +0 here) and float32 arrays only."""
    rows = ", ".join(f"r{i}" for i in range(kh))
    oks = ", ".join(f"ok{i}" for i in range(kh))
    lines = [f"# graphc generated channels-last depthwise convolution, {kh}x{kw} taps, "
             f"vectors {VECTORS_DIGEST}",
             "import numpy as np",
             "from numba import njit, prange",
             "from graphc.engine.numba_vectors import *", ""]
    for lanes, load, zero, store in _WIDTHS:
        lines += _cell_functions(kh, kw, lanes, load, zero, store)
    lines += ["@njit(nogil=True, error_model='numpy', cache=True)",
              f"def _row(t, w, {rows}, {oks}, out_w, q_lo, q_hi, width, sw, pw, dw, C):",
              "    c = 0"]
    for lanes in (16, 8, 1):
        lines += [f"    while c + {lanes} <= C:",
                  f"        _inside{lanes}(t, w, {rows}, {oks}, q_lo, q_hi, sw * C, c - pw * C, "
                  "dw * C, C, c)",
                  f"        _edge{lanes}(t, w, {rows}, {oks}, q_lo, q_hi, out_w, width, sw, pw, "
                  "dw, C, c)",
                  f"        c += {lanes}"]
    lines += [""]
    picks = "\n".join(
        f"    r = top + {i} * dh\n"
        f"    ok{i} = 0 <= r < height\n"
        f"    r{i} = x[n, r if ok{i} else 0].reshape(width * C)" for i in range(kh))
    lines += ["@njit(nogil=True, error_model='numpy', cache=True)",
              "def _result_row(x, w, out, n, oh, geometry, q_lo, q_hi):",
              "    height, width, out_h, out_w, sh, sw, ph, pw, dh, dw = geometry",
              "    C = x.shape[3]",
              "    top = oh * sh - ph",
              picks,
              f"    _row(out[n, oh].reshape(out_w * C), w, {rows}, {oks}, out_w, q_lo, q_hi,",
              "         width, sw, pw, dw, C)", "",
              "@njit(parallel=True, nogil=True, error_model='numpy', cache=True)",
              "def depthwise(x, w, out, geometry, chunks):",
              "    height, width, out_h, out_w, sh, sw, ph, pw, dh, dw = geometry",
              f"    flat = w.reshape({kh * kw} * x.shape[3])",
              "    q_lo = min(out_w, (pw + sw - 1) // sw)      # every tap column inside",
              f"    q_hi = max(q_lo, min(out_w, (width - 1 - {kw - 1} * dw + pw) // sw + 1))",
              "    rows = out.shape[0] * out_h",
              "    if chunks > 1:",
              "        for k in prange(chunks):",
              "            for r in range(k * rows // chunks, (k + 1) * rows // chunks):",
              "                _result_row(x, flat, out, r // out_h, r % out_h, geometry, "
              "q_lo, q_hi)",
              "    else:",
              "        for r in range(rows):",
              "            _result_row(x, flat, out, r // out_h, r % out_h, geometry, q_lo, "
              "q_hi)", ""]
    return "\n".join(lines)


def kernel(kh: int, kw: int):
    """The compiled (or cached) ``depthwise`` function for ``kh x kw`` windows, or
    ``None`` for a window without one (:data:`WINDOWS`)."""
    if (kh, kw) not in WINDOWS:
        return None
    from .numba_kernels import _load
    return _load(source(kh, kw)).depthwise


__all__ = ["WINDOWS", "source", "kernel"]
