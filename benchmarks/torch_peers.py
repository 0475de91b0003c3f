"""graphc against PyTorch eager on the CPU, same models, same weights, same threads.

What it measures
----------------
The four cases of benchmarks/models.py: ResNet50 inference (batch 1, 224²),
InceptionV3 inference (batch 1, 299²), a ResNet50 training step (batch 8, SGD
with momentum) and Owl's MNIST CNN training step (batch 100, AdaGrad):

- ``graphc``: the compiled graph, built exactly as models.py's graph mode
  (inference with batch norm folded into the convolutions, the offsets plan),
  on graphc's default kernels;
- ``torch``: the same architectures in plain PyTorch (benchmarks/_torch_models.py,
  layer for layer as graphc/neural builds them, holding the same weights), eager:
  inference in ``eval()`` mode under ``inference_mode``; a training step is
  ``zero_grad``, forward in ``train()`` mode, ``cross_entropy``, ``backward``,
  ``optimizer.step()``. ``torch.set_num_threads`` is the number of cores
  (``--threads``), which graphc uses by default.

Before timing, one fresh process per case checks that both compute the same
thing from the same weights and batch (inference logits; the training step's
loss, or eval-mode logits where dropout draws a random mask). Then every (case,
engine) measurement runs in a fresh process: one warm-up step, REPEATS timed
steps; peak RSS above the RSS with the weights and batch loaded (Linux
``VmHWM`` after resetting it, as benchmarks/_memory.py does). The engines
alternate, their order flipping each round; the table shows the best median
with the spread (min-max of the round medians), the time ratio graphc / PyTorch
(below 1: graphc faster) and the peak-memory ratio.

Run from the repository root: ``python3 benchmarks/torch_peers.py [--quick]``
(PyTorch from the ``peers`` extra: ``pip install -e '.[peers]'``). Prints a
markdown table and writes ``benchmarks/results/torch_peers.json`` and
``torch_peers.md``.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _numpy_programs_child import contention_note  # noqa: E402
from _report import default_repeats, machine, progress, run_child, write_json, write_markdown  # noqa: E402

RESULTS = os.path.join(HERE, "results")
MIB = 1 << 20
ENGINES = ("graphc", "torch")
ORDER = ("resnet50_infer", "inceptionv3_infer", "resnet50_train", "mnist_train")
TITLES = {"inceptionv3_infer": "InceptionV3 inference b1 299²",
          "resnet50_infer": "ResNet50 inference b1 224²",
          "resnet50_train": "ResNet50 training step b8 224² (SGD momentum)",
          "mnist_train": "MNIST CNN training step b100 (AdaGrad)"}
#: what issue 15 asks of graphc's time (and, for ResNet50 training, its peak memory)
TARGETS = {"resnet50_infer": 0.8, "inceptionv3_infer": 0.8, "resnet50_train": 1.0,
           "mnist_train": 1.0}
MEMORY_TARGETS = {"resnet50_train": 0.8}


def child_env(threads: int, kernels: str | None) -> dict:
    """Environment for the children: every thread pool capped at ``threads`` unless
    that is every core (graphc's default), and graphc's kernels where chosen."""
    env = {} if not kernels else {"GRAPHC_KERNELS": kernels}
    if threads != os.cpu_count():
        env.update({name: str(threads) for name in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS",
                                                    "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    return env


def check_all(cases, seed, threads, env) -> dict:
    """One fresh process per case comparing graphc's and PyTorch's first results;
    raises (naming the case) when they disagree."""
    checks = {}
    bar = progress(len(cases), "torch peers: checks")
    for case in cases:
        bar.set_postfix_str(f"check {case}")
        checks[case] = run_child("_torch_child.py", case, "check", 0, seed, threads, env=env)
        bar.update(1)
    bar.close()
    return checks


def measure_all(cases, rounds, repeats, seed, threads, env) -> dict:
    """``{case: {engine: [child results, one per round]}}``, engines alternating."""
    results = {c: {e: [] for e in ENGINES} for c in cases}
    bar = progress(rounds * len(cases) * len(ENGINES), "torch peers")
    for r in range(rounds):
        for case in cases:
            for engine in (ENGINES if r % 2 == 0 else ENGINES[::-1]):
                bar.set_postfix_str(f"round {r + 1}: {case} {engine}")
                results[case][engine].append(
                    run_child("_torch_child.py", case, engine, repeats[case], seed, threads,
                              env=env))
                bar.update(1)
    bar.close()
    return results


def summarise(case, runs) -> dict:
    row = {"case": case, "title": TITLES[case]}
    for engine, results in runs.items():
        medians = [r["median"] for r in results]
        peaks = [r["peak_rss_bytes"] for r in results]
        row[engine] = {"seconds": min(medians), "spread": [min(medians), max(medians)],
                       "peak_bytes": min(peaks), "peak_spread": [min(peaks), max(peaks)],
                       "build_seconds": min(r["build_seconds"] for r in results),
                       "first_step_seconds": min(r["first_step_seconds"] for r in results)}
    row["time_ratio"] = row["graphc"]["seconds"] / row["torch"]["seconds"]
    row["memory_ratio"] = row["graphc"]["peak_bytes"] / max(1, row["torch"]["peak_bytes"])
    row["target_time_ratio"] = TARGETS[case]
    row["target_memory_ratio"] = MEMORY_TARGETS.get(case)
    last = runs["graphc"][-1]
    row.update({k: last[k] for k in ("planned_bytes", "lower_bound_bytes") if k in last})
    return row


def _ms(entry) -> str:
    lo, hi = entry["spread"]
    return f"{entry['seconds'] * 1e3:.1f} ({lo * 1e3:.1f}–{hi * 1e3:.1f})"


def _mib(entry) -> str:
    lo, hi = entry["peak_spread"]
    return f"{entry['peak_bytes'] / MIB:.0f} ({lo / MIB:.0f}–{hi / MIB:.0f})"


def table(rows, threads) -> str:
    lines = ["| case | graphc ms | PyTorch ms | graphc / PyTorch time (target) | graphc peak MiB "
             "| PyTorch peak MiB | graphc / PyTorch peak (target) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        memory_target = (f" (≤ {r['target_memory_ratio']})" if r["target_memory_ratio"]
                         else "")
        lines.append(f"| {r['title']} | {_ms(r['graphc'])} | {_ms(r['torch'])} "
                     f"| {r['time_ratio']:.2f} (≤ {r['target_time_ratio']}) "
                     f"| {_mib(r['graphc'])} | {_mib(r['torch'])} "
                     f"| {r['memory_ratio']:.2f}{memory_target} |")
    ratios = [r["time_ratio"] for r in rows]
    lines.append(f"| **geometric mean** | | | **{math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}** | | | |")
    lines += ["", f"PyTorch eager on {threads} thread(s) (``torch.set_num_threads``); graphc on its "
              "default (every core). ms: best median of the rounds (spread of the round medians); "
              "peak: RSS above the weights and batch, best of the rounds (spread). Below 1: "
              "graphc faster / smaller."]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one round, few repeats (a few minutes)")
    ap.add_argument("--cases", nargs="+", choices=ORDER, default=list(ORDER))
    ap.add_argument("--rounds", type=int, help="fresh-process rounds per engine (default 3; quick 1)")
    ap.add_argument("--repeats", type=int, help="timed steps per process (default per case)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="PyTorch's threads (default: every core, as graphc)")
    ap.add_argument("--kernels", choices=("generated", "numpy"),
                    help="graphc's kernels (default: graphc's own default, $GRAPHC_KERNELS)")
    ap.add_argument("--no-check", action="store_true",
                    help="skip comparing graphc's and PyTorch's results before timing")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    if importlib.util.find_spec("torch") is None:
        raise SystemExit("torch_peers: PyTorch is not installed (pip install -e '.[peers]', "
                         "see docs/benchmarks-peers.md)")
    env = child_env(args.threads, args.kernels)
    rounds = args.rounds or (1 if args.quick else 3)
    repeats = {c: args.repeats or default_repeats(args.quick)[c] for c in args.cases}
    started = time.time()
    checks = {} if args.no_check else check_all(args.cases, args.seed, args.threads, env)
    results = measure_all(args.cases, rounds, repeats, args.seed, args.threads, env)
    rows = [summarise(c, results[c]) for c in args.cases]
    text = table(rows, args.threads)
    contention, note = contention_note(r for runs in results.values()
                                       for rs in runs.values() for r in rs)
    text += note
    print(text)
    write_markdown(text, os.path.join(RESULTS, "torch_peers.md"))
    torch_version = results[args.cases[0]]["torch"][-1].get("torch")
    write_json({"machine": machine(torch=torch_version),
                "quick": args.quick, "rounds": rounds, "repeats": repeats,
                "threads": args.threads, "kernels": args.kernels or "default",
                "seconds": time.time() - started,
                "other_processes_cores_max": contention,
                "checks": checks, "rows": rows, "runs": results},
               os.path.join(RESULTS, "torch_peers.json"))


if __name__ == "__main__":
    main()
