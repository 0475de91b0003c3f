"""The main benchmark: Owl's table for real models, eager against graph.

What it measures
----------------
For InceptionV3 inference (batch 1, 299x299), ResNet50 inference (batch 1,
224x224), a ResNet50 training step (batch 8, SGD with momentum), Owl's MNIST
CNN training step (batch 100, AdaGrad) and Mask R-CNN inference (batch 1, 512x512,
ResNet101-FPN, random weights; Owl's published figures printed beside it):

- eager time: ``graphc.eager`` (NumPy, every call allocates), median of repeats;
- graph build: building the nodes (and, for training, the gradient nodes),
  optimising, planning and binding the kernels (``graphc.compile``);
- graph run: median of repeats of ``Executable.run``;
- peak memory of each mode: peak RSS above the RSS right after the weights and
  one batch exist (Linux ``VmHWM`` after resetting it), each measured in a
  fresh process whose libraries are loaded before that baseline: graph mode
  initialises its kernel library first (Numba and llvmlite, the threading layer,
  Numba's runtime: a fixed ~90 MiB, mostly shared library pages, paid once per
  process whatever the graph), shown apart in the table's footer, as peers'
  baselines are taken after ``import torch``;
- planned bytes, the live-bytes lower bound, nodes before/after optimisation.

Every (case, mode) measurement runs in a fresh process; eager and graph
alternate, their order flipping each round, and the table shows the best
median with the spread (min-max of the round medians) because this machine is
noisy. Inference uses the weights with batch normalisation folded into the
convolutions, in both modes. The MNIST run then trains the CNN for two epochs on
Fashion-MNIST (graph mode) and reports the test accuracy.

Run from the repository root: ``python3 benchmarks/models.py [--quick]``.
Prints a markdown table, writes ``benchmarks/results/models.json`` and
``models.md``, and plots live bytes per execution step (with the planned
bytes and the lower bound) to ``benchmarks/results/models_memory.png``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _report import default_repeats, machine, progress as _progress, run_child, write_json, write_markdown  # noqa: E402

RESULTS = os.path.join(HERE, "results")
MIB = 1 << 20
ORDER = ("inceptionv3_infer", "resnet50_infer", "resnet50_train", "mnist_train",
         "maskrcnn_infer")
TITLES = {"inceptionv3_infer": "InceptionV3 inference b1 299²",
          "resnet50_infer": "ResNet50 inference b1 224²",
          "resnet50_train": "ResNet50 training step b8 224²",
          "mnist_train": "MNIST CNN training step b100",
          "maskrcnn_infer": "Mask R-CNN inference b1 512² (ResNet101-FPN)"}
#: Owl's published Mask R-CNN figures (its report's table), beside graphc's row
OWL_MASKRCNN = ("Owl's report, Mask R-CNN on its own machine: eager 11.54 s; graph build "
                "0.363 s, 8.38 s per evaluation; peak 6483 MB eager, 870 MB graph.")

def measure_all(cases, rounds, repeats, seed) -> dict:
    """``{case: {mode: [child results, one per round]}}``, eager and graph alternating."""
    results = {c: {"eager": [], "graph": []} for c in cases}
    bar = _progress(rounds * len(cases) * 2, "models")
    for r in range(rounds):
        for case in cases:
            modes = ("eager", "graph") if r % 2 == 0 else ("graph", "eager")
            for mode in modes:
                bar.set_postfix_str(f"round {r + 1}: {case} {mode}")
                results[case][mode].append(
                    run_child("_model_child.py", case, mode, repeats[case], seed))
                bar.update(1)
    bar.close()
    return results


def summarise(case, runs) -> dict:
    eager, graph = runs["eager"], runs["graph"]
    e_med = [r["median"] for r in eager]
    g_med = [r["median"] for r in graph]
    last = graph[-1]
    row = {
        "case": case,
        "eager_seconds": min(e_med), "eager_spread": [min(e_med), max(e_med)],
        "graph_build_seconds": min(r["build_seconds"] for r in graph),
        "graph_seconds": min(g_med), "graph_spread": [min(g_med), max(g_med)],
        "speedup": min(e_med) / min(g_med),
        "eager_peak_bytes": min(r["peak_rss_bytes"] for r in eager),
        "graph_peak_bytes": min(r["peak_rss_bytes"] for r in graph),
        "eager_peak_spread": [min(r["peak_rss_bytes"] for r in eager),
                              max(r["peak_rss_bytes"] for r in eager)],
        "graph_peak_spread": [min(r["peak_rss_bytes"] for r in graph),
                              max(r["peak_rss_bytes"] for r in graph)],
        "planned_bytes": last["planned_bytes"], "lower_bound_bytes": last["lower_bound_bytes"],
        "plan_ratio": last["planned_bytes"] / max(1, last["lower_bound_bytes"]),
        "naive_bytes": last["naive_bytes"],
        "nodes_unoptimised": last["nodes_unoptimised"], "nodes": last["nodes"],
        "edges_unoptimised": last["edges_unoptimised"], "edges": last["edges"],
        "plan": last["plan"], "repeats": len(last["times"]), "rounds": len(graph),
    }
    for key in ("parameters",):
        if key in last:
            row[key] = last[key]
    row["engine_bytes"] = max(r.get("engine_rss_bytes", 0) for r in graph)
    return row


def _ms(s):
    return f"{s * 1e3:.1f}"


def _mib(b):
    return f"{b / MIB:.1f}"


def table(rows, accuracy=None) -> str:
    head = ("| model | eager ms | graph build s | graph run ms | speed-up | eager peak MiB "
            "| graph peak MiB | planned MiB | lower bound MiB | plan/bound | nodes before → after |")
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(
            f"| {TITLES[r['case']]} | {_ms(r['eager_seconds'])} "
            f"({_ms(r['eager_spread'][0])}–{_ms(r['eager_spread'][1])}) "
            f"| {r['graph_build_seconds']:.2f} | {_ms(r['graph_seconds'])} "
            f"({_ms(r['graph_spread'][0])}–{_ms(r['graph_spread'][1])}) "
            f"| {r['speedup']:.2f}× | {_mib(r['eager_peak_bytes'])} | {_mib(r['graph_peak_bytes'])} "
            f"| {_mib(r['planned_bytes'])} | {_mib(r['lower_bound_bytes'])} "
            f"| {r['plan_ratio']:.3f} | {r['nodes_unoptimised']} → {r['nodes']} |")
    text = "\n".join(lines)
    if any(r["case"] == "maskrcnn_infer" for r in rows):
        text += "\n\n" + OWL_MASKRCNN
    fixed = [r["engine_bytes"] for r in rows if r.get("engine_bytes")]
    if fixed:
        text += (f"\n\nPeaks are RSS above a baseline taken after the weights and batch exist "
                 f"and, in graph mode, after graphc's kernel library is initialised (Numba, "
                 f"its threading layer and runtime: {_mib(max(fixed))} MiB, paid once per "
                 f"process, most of it shared library pages).")
    if accuracy:
        text += (f"\n\nMNIST CNN ({accuracy['data']}): test accuracy "
                 f"{accuracy['test_accuracy'] * 100:.2f}% after {accuracy['epochs']} epoch(s) of "
                 f"{accuracy['train_examples']} examples, {accuracy['seconds']:.0f} s of training "
                 f"({accuracy['seconds_per_step'] * 1e3:.1f} ms a step).")
    return text


def plot(results, rows, path) -> bool:
    """Live bytes per execution step of each graph, with its planned bytes and bound."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install -e '.[bench]')", file=sys.stderr)
        return False
    fig, axes = plt.subplots(len(rows), 1, figsize=(9, 2.6 * len(rows)), squeeze=False)
    for ax, row in zip(axes[:, 0], rows):
        live = results[row["case"]]["graph"][-1]["live_bytes"]
        ax.plot(range(len(live)), [b / MIB for b in live], lw=0.8, label="live bytes (in-place aware)")
        ax.axhline(row["planned_bytes"] / MIB, color="tab:red", ls="--",
                   label=f"planned {_mib(row['planned_bytes'])} MiB ({row['plan']})")
        ax.axhline(row["lower_bound_bytes"] / MIB, color="tab:green", ls=":",
                   label=f"lower bound {_mib(row['lower_bound_bytes'])} MiB")
        ax.set_title(TITLES[row["case"]], fontsize=9)
        ax.set_ylabel("MiB")
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("execution step")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {os.path.relpath(path)}")
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="one round, few repeats, a shorter MNIST run (a few minutes)")
    ap.add_argument("--cases", nargs="+", choices=ORDER, default=list(ORDER))
    ap.add_argument("--rounds", type=int, help="fresh-process rounds per mode (default 3; 1 quick)")
    ap.add_argument("--repeats", type=int, help="timed runs per process (default per case)")
    ap.add_argument("--epochs", type=float, help="MNIST training epochs (default 2; quick 1)")
    ap.add_argument("--data", help="directory with MNIST-format IDX files (default: "
                                   "Fashion-MNIST from the Debian package)")
    ap.add_argument("--no-accuracy", action="store_true", help="skip the MNIST training run")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    rounds = args.rounds or (1 if args.quick else 3)
    repeats = {c: args.repeats or default_repeats(args.quick)[c] for c in args.cases}
    started = time.time()
    results = measure_all(args.cases, rounds, repeats, args.seed)
    rows = [summarise(c, results[c]) for c in args.cases]

    print(table(rows))   # the timing table now, in case the long training run fails
    accuracy = None
    if "mnist_train" in args.cases and not args.no_accuracy:
        epochs = args.epochs or (1 if args.quick else 2)
        print(f"training the MNIST CNN for {epochs} epoch(s)...", file=sys.stderr)
        accuracy = run_child("_train_mnist.py", epochs, args.data or "", args.seed,
                             passthrough=True, timeout=7200)

    text = table(rows, accuracy)
    print(text)
    write_markdown(text, os.path.join(RESULTS, "models.md"))
    write_json({"machine": machine(),
                "quick": args.quick, "rounds": rounds, "repeats": repeats,
                "seconds": time.time() - started, "rows": rows, "accuracy": accuracy,
                "runs": {c: {m: [{k: v for k, v in r.items() if k != "live_bytes"} for r in runs]
                             for m, runs in modes.items()} for c, modes in results.items()}},
               os.path.join(RESULTS, "models.json"))
    plot(results, rows, os.path.join(RESULTS, "models_memory.png"))


if __name__ == "__main__":
    main()
