"""One measurement of benchmarks/onnx_models.py, in a fresh process.

``python3 benchmarks/_onnx_child.py MODEL ENGINE REPEATS SEED THREADS``: loads the
light model with random weights and makes one input (the baseline RSS), then
builds the engine (``graphc``: ``graphc.onnx.load``, which imports, optimises,
plans and binds; ``onnxruntime``: an ``InferenceSession`` with THREADS intra-op
threads) and times REPEATS runs after one warm-up run. Peak RSS is measured
twice: from before the build (weights the engine copies or repacks included)
and from after the build (what running needs: activations, workspaces).
Prints one JSON line.
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
from graphc.onnx.zoo import light_model  # noqa: E402


def _build(engine: str, model, threads: int):
    if engine == "graphc":
        import graphc.onnx

        graph = graphc.onnx.load(model)
        return lambda feeds: graph.run(feeds), graph
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return lambda feeds: session.run(None, feeds), None


def measure(name: str, engine: str, repeats: int, seed: int, threads: int) -> dict:
    model = light_model(name, seed=seed)
    input_name = [i.name for i in model.graph.input
                  if i.name not in {t.name for t in model.graph.initializer}][0]
    feeds = {input_name: np.random.default_rng(seed + 1).standard_normal(
        (1, 3, 224, 224)).astype(np.float32)}
    gc.collect()
    base = _memory.rss()
    _memory.reset_peak()
    started = time.perf_counter()
    run, graph = _build(engine, model, threads)
    build = time.perf_counter() - started
    built_peak = _memory.peak_rss() - base
    after_build = _memory.rss()
    _memory.reset_peak()
    run(feeds)  # warm-up: first-touch of buffers, onnxruntime's arena growth
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run(feeds)
        times.append(time.perf_counter() - t)
    result = {"model": name, "engine": engine, "times": times, "median": float(np.median(times)),
              "build_seconds": build, "threads": threads,
              "peak_total_bytes": max(built_peak, _memory.peak_rss() - base),
              "peak_run_bytes": _memory.peak_rss() - after_build,
              "peak_is_lifetime": _memory.peak_is_lifetime()}
    if graph is not None:
        s = graph.stats()
        result.update({k: s[k] for k in ("nodes", "nodes_unoptimised", "planned_bytes",
                                         "lower_bound_bytes", "plan")})
    return result


if __name__ == "__main__":
    name, engine = sys.argv[1], sys.argv[2]
    repeats, seed, threads = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    print(json.dumps(measure(name, engine, repeats, seed, threads)))
