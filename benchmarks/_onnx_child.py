"""One measurement of benchmarks/onnx_models.py, in a fresh process.

``python3 benchmarks/_onnx_child.py MODEL ENGINE REPEATS SEED THREADS [--reference F]``

MODEL is a light model of the onnx wheel (``resnet50``: random weights drawn
with SEED, see ``graphc.onnx.zoo``) or the path of an ``.onnx`` file (a zoo
model from ``benchmarks/export_zoo.py``, whose weights are already random). Its
one input gets its declared shape (a symbolic dimension is 1) and a random
float32 value drawn with SEED + 1.

ENGINE ``check`` runs the model once on onnxruntime and once on graphc, saves
onnxruntime's outputs to F and prints how far graphc's are from them (the
check, done once per model before any timing). ENGINE ``graphc`` or
``onnxruntime`` loads the model and makes the input (the baseline RSS), builds
the engine (``graphc.onnx.load``, which imports, optimises, plans and binds;
an ``InferenceSession`` with THREADS intra-op threads) and times REPEATS runs
after one warm-up run; with ``--reference F``, graphc's warm-up outputs must
match F within the check's tolerance, or the child fails. Peak RSS is measured
twice: from before the build (weights the engine copies or repacks included)
and from after the build (what running needs: activations, workspaces).
Prints one JSON line.
"""
from __future__ import annotations

import argparse
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
from _numpy_programs_child import timed_with_contention  # noqa: E402

#: graphc's outputs pass when max|graphc - ort| <= RTOL * max|ort| (+ ATOL for
#: all-zero outputs): float32 through up to ~100 layers, where the two engines
#: order their sums differently (GEMM blocking, folded batch norms, fused chains)
RTOL, ATOL = 1e-3, 1e-6


def load_model(spec: str, seed: int):
    """The ``ModelProto`` of a light model name or an ``.onnx`` path."""
    import onnx

    if spec.endswith(".onnx"):
        return onnx.load(spec)
    from graphc.onnx.zoo import light_model

    return light_model(spec, seed=seed)


def make_feeds(model, seed: int) -> dict:
    """A random float32 value for each graph input that is not an initializer."""
    weights = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(seed + 1)
    feeds = {}
    for value in model.graph.input:
        if value.name in weights:
            continue
        dims = value.type.tensor_type.shape.dim
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in dims)
        feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


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


def distance(got, want) -> dict:
    """How far graphc's outputs ``got`` are from onnxruntime's ``want``: the largest
    absolute difference over the largest magnitude, and whether it passes."""
    worst, scale, shapes_match = 0.0, 0.0, len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        if g.shape != w.shape:
            shapes_match = False
            continue
        worst = max(worst, float(np.max(np.abs(g - w), initial=0.0)))
        scale = max(scale, float(np.max(np.abs(w), initial=0.0)))
    finite = all(np.all(np.isfinite(g)) for g in got)
    return {"max_abs_error": worst, "max_abs_reference": scale,
            "relative_error": worst / scale if scale else worst,
            "ok": bool(shapes_match and finite and worst <= RTOL * scale + ATOL),
            "rtol": RTOL, "atol": ATOL}


def check(spec: str, seed: int, threads: int, reference: str) -> dict:
    """Run the model on both engines once; save onnxruntime's outputs to ``reference``."""
    model = load_model(spec, seed)
    feeds = make_feeds(model, seed)
    run, _ = _build("onnxruntime", model, threads)
    want = run(feeds)
    np.savez(reference, *want)
    del run
    gc.collect()
    started = time.perf_counter()
    run, graph = _build("graphc", model, threads)
    build = time.perf_counter() - started
    got = run(feeds)
    return {"model": spec, "engine": "check", "build_seconds": build,
            "output_shapes": [list(np.shape(w)) for w in want], **distance(got, want)}


def _reference(path: str) -> list:
    with np.load(path) as stored:
        return [stored[f"arr_{i}"] for i in range(len(stored.files))]


def _kind_label(op) -> str:
    """The profile's name for ``op``: its kind, a fused program's kinds, and
    whether a convolution is grouped (depthwise convolutions run other kernels)."""
    if op.kind in ("fused", "fused_reduce") and op.get("program") is not None:
        return f"{op.kind}[{','.join(inner.kind for inner, _ in op['program'])}]"
    groups = op.get("groups") if op.kind.startswith("conv") else None
    return f"{op.kind}(groups={groups})" if groups and groups > 1 else op.kind


def profile(spec: str, repeats: int, seed: int, top: int = 15) -> dict:
    """graphc's time per op kind: each kernel of the compiled graph timed alone,
    ``repeats`` times after a warm-up run, summed per :func:`_kind_label`."""
    import collections

    import graphc.onnx

    model = load_model(spec, seed)
    feeds = make_feeds(model, seed)
    graph = graphc.onnx.load(model)
    graph.run(feeds)
    exe = graph.executable
    steps = [(step, kernel) for step, kernel in zip(exe.liveness.steps, exe.program.kernels)
             if kernel is not None]
    seconds, counts = collections.Counter(), collections.Counter()
    for _ in range(repeats):
        for step, kernel in steps:
            t = time.perf_counter()
            kernel()
            seconds[_kind_label(step.op)] += (time.perf_counter() - t) / repeats
    for step, _ in steps:
        counts[_kind_label(step.op)] += 1
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        graph.run(feeds)
        runs.append(time.perf_counter() - t)
    total = sum(seconds.values())
    return {"model": spec, "engine": "profile", "run_seconds": float(np.median(runs)),
            "kernel_seconds": total, "steps": len(steps),
            "kinds": [{"kind": k, "seconds": v, "share": v / total, "count": counts[k]}
                      for k, v in seconds.most_common(top)]}


def measure(spec: str, engine: str, repeats: int, seed: int, threads: int,
            reference: str | None = None) -> dict:
    model = load_model(spec, seed)
    feeds = make_feeds(model, seed)
    gc.collect()
    base = _memory.rss()
    _memory.reset_peak()
    started = time.perf_counter()
    run, graph = _build(engine, model, threads)
    build = time.perf_counter() - started
    built_peak = _memory.peak_rss() - base
    after_build = _memory.rss()
    _memory.reset_peak()
    outputs = run(feeds)  # warm-up: first-touch of buffers, onnxruntime's arena growth
    if graph is not None and reference:
        seen = distance(outputs, _reference(reference))
        if not seen["ok"]:
            raise SystemExit(f"{spec}: graphc's outputs differ from onnxruntime's: {seen}")
    del outputs
    times, others = timed_with_contention(lambda: run(feeds), repeats)
    result = {"model": spec, "engine": engine, "times": times, "other_processes_cores": others,
              "median": float(np.median(times)), "build_seconds": build, "threads": threads,
              "peak_total_bytes": max(built_peak, _memory.peak_rss() - base),
              "peak_run_bytes": _memory.peak_rss() - after_build,
              "peak_is_lifetime": _memory.peak_is_lifetime()}
    if graph is not None:
        s = graph.stats()
        result.update({k: s[k] for k in ("nodes", "nodes_unoptimised", "planned_bytes",
                                         "lower_bound_bytes", "plan")})
        result["kernels"] = os.environ.get("GRAPHC_KERNELS", "generated")
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("engine", choices=("graphc", "onnxruntime", "check", "profile"))
    ap.add_argument("repeats", type=int)
    ap.add_argument("seed", type=int)
    ap.add_argument("threads", type=int)
    ap.add_argument("--reference", help="onnxruntime's outputs (.npz), written by 'check'")
    a = ap.parse_args()
    if a.engine == "check":
        print(json.dumps(check(a.model, a.seed, a.threads, a.reference)))
    elif a.engine == "profile":
        print(json.dumps(profile(a.model, a.repeats, a.seed)))
    else:
        print(json.dumps(measure(a.model, a.engine, a.repeats, a.seed, a.threads,
                                 a.reference)))
