"""Convolution speed on the CPU: a compiled graph (lowered to im2col + GEMM, the
column buffer planned), the same graph with ``optimise=False`` (the direct
kernel, its columns in a scratch buffer bound once) and eager mode
(``graphc.eager.conv2d``: kernel built and buffers allocated on every call);
for scale, the same convolution written in plain NumPy (``np.pad``,
``sliding_window_view``, a column copy, ``np.matmul``) and the GEMM alone.

Cases (float32, batch 1): a ResNet 3x3 conv 64->64 on 56x56 (padding 1) and
the ResNet/Inception stem, a 7x7 stride-2 conv 3->64 on 224x224 (padding 3);
plus a 1x1 conv 64->256 on 56x56, where no columns are needed at all.

Each round times every contender in turn, ``--repeats`` calls each, and keeps
the median; the report is the best of ``--rounds`` medians (the machine is
shared and noisy). The graph's time is ``Executable.run`` with the input copy
and, with ``copy_outputs=False``, no output copy; eager's is the call.

Run from the repository root: ``python3 benchmarks/conv.py [--rounds 5] [--repeats 20]``.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys

import numpy as np

sys.path.insert(0, ".")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graphc  # noqa: E402
import graphc.eager as E  # noqa: E402
import graphc.ndarray as N  # noqa: E402
from _report import median_time  # noqa: E402

CASES = [
    ("3x3 64->64, 1x64x56x56", (1, 64, 56, 56), (64, 64, 3, 3), dict(padding=1)),
    ("7x7/2 3->64, 1x3x224x224", (1, 3, 224, 224), (64, 3, 7, 7), dict(stride=2, padding=3)),
    ("1x1 64->256, 1x64x56x56", (1, 64, 56, 56), (256, 64, 1, 1), dict()),
]


def numpy_conv(x, w, stride=1, padding=0):
    """What one writes in plain NumPy: pad, window view, a copy into columns, GEMM."""
    o, c, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    win = win[:, :, ::stride, ::stride]                    # (N, C, OH, OW, kh, kw)
    n, _, oh, ow = win.shape[:4]
    cols = win.transpose(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, oh * ow)
    return np.maximum(np.matmul(w.reshape(o, -1), cols).reshape(n, o, oh, ow), 0)


def contenders(x_shape, w_shape, kwargs):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    result = {}
    for name, optimise in (("graph", True), ("graph_direct", False)):
        xv, wv = N.var("x", x_shape), N.var("w", w_shape)
        g = graphc.compile([xv, wv], N.relu(N.conv2d(xv, wv, **kwargs)), optimise=optimise,
                           copy_outputs=False)
        g.assign(w=w)
        result[name] = (g, lambda g=g: g.run(x=x))
    result["eager"] = (None, lambda: E.relu(E.conv2d(x, w, **kwargs)))
    result["numpy_im2col"] = (None, lambda: numpy_conv(x, w, **kwargs))
    # the floor: the GEMM alone, into a preallocated output (no im2col, no relu)
    y_shape = result["eager"][1]().shape
    cols = np.ones((x_shape[1] * w_shape[2] * w_shape[3], y_shape[2] * y_shape[3]), np.float32)
    w2, out = w.reshape(w_shape[0], -1), np.empty((w_shape[0], cols.shape[1]), np.float32)
    result["gemm_only"] = (None, lambda: np.matmul(w2, cols, out))
    expected = result["eager"][1]()
    for name, (_, fn) in result.items():
        if name == "gemm_only":
            continue
        np.testing.assert_allclose(fn(), expected, rtol=1e-3, atol=1e-3, err_msg=name)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print("| case | contender | best median (ms) | spread of medians (ms) | planned MiB |")
    print("|---|---|---|---|---|")
    for title, x_shape, w_shape, kwargs in CASES:
        runs = contenders(x_shape, w_shape, kwargs)
        medians = {name: [] for name in runs}
        gc.disable()
        try:
            for _ in range(args.rounds):
                for name, (_, fn) in runs.items():
                    fn()  # warm
                    medians[name].append(median_time(fn, args.repeats))
        finally:
            gc.enable()
        for name, (g, _) in runs.items():
            ms = [m * 1e3 for m in medians[name]]
            planned = f"{g.stats()['planned_bytes'] / 2 ** 20:.2f}" if g else "-"
            print(f"| {title} | {name} | {min(ms):.3f} | {min(ms):.3f}..{max(ms):.3f} | "
                  f"{planned} |")


if __name__ == "__main__":
    main()
