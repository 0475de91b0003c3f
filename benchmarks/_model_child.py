"""One measurement of benchmarks/models.py, in a fresh process.

``python3 benchmarks/_model_child.py CASE MODE REPEATS SEED`` loads graphc's
libraries (in graph mode with its kernel library initialised,
``_memory.engine_ready``: the fixed cost a process pays once, reported as
``engine_rss_bytes``, as ``import torch`` is before PyTorch's baseline), makes
the case's weights, notes the RSS (the baseline), resets the kernel's peak-RSS mark, then
(graph mode) builds and compiles the graph or (eager mode) does nothing more,
and times ``REPEATS`` evaluations. It prints one JSON line: the times, the
build time, the peak RSS above the baseline and, in graph mode, the plan's
figures and the live bytes at every step.

A fresh process per measurement keeps one mode's garbage, allocator pools and
page cache out of the other's peak.
"""
from __future__ import annotations

import gc
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import _memory  # noqa: E402
from _cases import CASES  # noqa: E402


def measure(case_name: str, mode: str, repeats: int, seed: int) -> dict:
    case = CASES[case_name]
    engine = _memory.engine_ready("graphc") if mode == "graph" else 0
    work = case.prepare(seed)            # weights and one batch of data: the baseline
    gc.collect()
    base = _memory.rss()
    _memory.reset_peak()
    started = time.perf_counter()
    step, exe = case.build(work, mode)   # eager: a closure; graph: build + compile
    build = time.perf_counter() - started
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    result = {"case": case_name, "mode": mode, "times": times,
              "median": float(np.median(times)), "build_seconds": build,
              "peak_rss_bytes": _memory.peak_rss() - base, "baseline_rss_bytes": base,
              "engine_rss_bytes": engine, "peak_is_lifetime": _memory.peak_is_lifetime()}
    if exe is not None:
        s = exe.stats()
        result.update({k: s[k] for k in ("nodes", "edges", "nodes_unoptimised",
                                         "edges_unoptimised", "planned_bytes",
                                         "lower_bound_bytes", "naive_bytes", "steps",
                                         "blocks", "plan")})
        result["live_bytes"] = exe.liveness.live_bytes_per_step()
    result.update(case.extra(work))
    return result


if __name__ == "__main__":
    name, mode, repeats, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps(measure(name, mode, repeats, seed)))
