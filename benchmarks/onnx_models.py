"""Imported ONNX models: graphc's graph against onnxruntime, in the same run.

The light ResNet50 and Inception v1 from the onnx wheel, with random weights
(``graphc.onnx.zoo``), batch 1 at 224x224. For each (model, engine) a fresh
process builds the engine and times repeated runs; the engines alternate and
their order flips each round, and the table shows the best median of the
rounds with the spread (this machine is noisy). Memory is the peak RSS above
the RSS with the model and input loaded: "run" counts only what running needs
(measured after the build), "total" includes the copy or repacking of the
weights each engine makes while building. graphc's planned bytes and the
live-activation lower bound of its graph come from ``stats()``.

Run from the repository root: ``python3 benchmarks/onnx_models.py [--quick]``.
Prints a markdown table and writes ``benchmarks/results/onnx_models.json``.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _report import progress, run_child, write_json  # noqa: E402

RESULTS = os.path.join(HERE, "results")
MIB = 1 << 20
ENGINES = ("graphc", "onnxruntime")


def measure_all(models, rounds, repeats, seed, threads) -> dict:
    results = {m: {e: [] for e in ENGINES} for m in models}
    bar = progress(rounds * len(models) * len(ENGINES), "onnx models")
    for r in range(rounds):
        for model in models:
            for engine in (ENGINES if r % 2 == 0 else ENGINES[::-1]):
                bar.set_postfix_str(f"round {r + 1}: {model} {engine}")
                results[model][engine].append(
                    run_child("_onnx_child.py", model, engine, repeats, seed, threads))
                bar.update(1)
    bar.close()
    return results


def summarise(model, runs) -> dict:
    row = {"model": model}
    for engine, results in runs.items():
        medians = [r["median"] for r in results]
        row[engine] = {"seconds": min(medians), "spread": [min(medians), max(medians)],
                       "build_seconds": min(r["build_seconds"] for r in results),
                       "peak_run_bytes": min(r["peak_run_bytes"] for r in results),
                       "peak_total_bytes": min(r["peak_total_bytes"] for r in results)}
    last = runs["graphc"][-1]
    row.update({k: last[k] for k in ("planned_bytes", "lower_bound_bytes", "nodes",
                                     "nodes_unoptimised")})
    row["time_ratio"] = row["graphc"]["seconds"] / row["onnxruntime"]["seconds"]
    return row


def table(rows) -> str:
    lines = ["| model | engine | run ms (spread) | build s | peak run MiB | peak total MiB "
             "| planned MiB | bound MiB |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        for engine in ENGINES:
            e = row[engine]
            plan = (f"{row['planned_bytes'] / MIB:.1f} | {row['lower_bound_bytes'] / MIB:.1f}"
                    if engine == "graphc" else "– | –")
            lines.append(f"| {row['model']} | {engine} | {e['seconds'] * 1e3:.1f} "
                         f"({e['spread'][0] * 1e3:.1f}–{e['spread'][1] * 1e3:.1f}) "
                         f"| {e['build_seconds']:.2f} | {e['peak_run_bytes'] / MIB:.1f} "
                         f"| {e['peak_total_bytes'] / MIB:.1f} | {plan} |")
    lines.append("")
    lines += [f"{r['model']}: graphc / onnxruntime time = {r['time_ratio']:.2f}" for r in rows]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one round, 5 repeats")
    ap.add_argument("--models", nargs="+", default=["resnet50", "inception_v1"])
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--repeats", type=int)
    ap.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 3)
    repeats = args.repeats or (5 if args.quick else 20)
    results = measure_all(args.models, rounds, repeats, args.seed, args.threads)
    rows = [summarise(m, results[m]) for m in args.models]
    text = table(rows)
    print(text)
    write_json({"machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                            "python": platform.python_version()},
                "rounds": rounds, "repeats": repeats, "rows": rows, "raw": results},
               os.path.join(RESULTS, "onnx_models.json"))


if __name__ == "__main__":
    main()
