"""graphc's device engine against PyTorch on the same NVIDIA GPU (issue 19).

What it measures
----------------
ResNet50 and InceptionV3 inference at batch 1 and 32, a ResNet50 training step at
batch 32 (SGD with momentum) and Owl's MNIST CNN training step at batch 100
(AdaGrad), fp32, same architectures and weights (benchmarks/_torch_models.py):

- graphc ``device="cuda"``: one launch per step (``launches``), and the whole run
  replayed as CUDA graphs (``cuda_graph``: ``compile(capture=True)``);
- PyTorch eager, and PyTorch with the whole step captured in a
  ``torch.cuda.CUDAGraph`` (``cuda_graph``), both strict fp32 (cuDNN's TF32 off);
- with TF32 matrix products: graphc ``cuda_graph_tf32`` (``tf32=True``) and PyTorch
  ``eager_tf32`` (its defaults, which let cuDNN's convolutions use TF32).

Every engine runs in a fresh process per round (benchmarks/_gpu_child.py), the
order flipping each round; the table shows the best median per step with the
spread (min-max of the round medians), and the device memory each allocator holds
for the case. graphc's eager mode runs on the host (NumPy), so it has no GPU row.

Run on a machine with CuPy, PyTorch and a GPU, from the repository root:
``python3 benchmarks/gpu.py [--rounds 2] [--repeats 20] [--cases ...]``. Prints a
markdown table and writes ``benchmarks/results/gpu.json`` and ``gpu.md`` (or to
``--out``).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from _report import machine, write_json, write_markdown  # noqa: E402

MIB = 1 << 20
CASES = ("resnet50_infer_b1", "resnet50_infer_b32", "inceptionv3_infer_b1",
         "inceptionv3_infer_b32", "resnet50_train_b32", "mnist_train_b100")
ENGINES = ("graphc", "torch")
#: issue 19's targets: the graphc variant, the PyTorch variant, the time ratio at most
TARGETS = {"resnet50_train_b32": ("launches", "eager", 1.0),
           "resnet50_infer_b1": ("cuda_graph", "eager", 1.0)}


def run_engine(engine, cases, repeats, seed, timeout) -> list[dict]:
    """One fresh process measuring ``cases`` on ``engine``: its JSON lines."""
    proc = subprocess.run([sys.executable, os.path.join(HERE, "_gpu_child.py"), engine,
                           str(repeats), str(seed), *cases], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout, cwd=ROOT)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        rows.append({"engine": engine, "error": f"exit {proc.returncode}",
                     "trace": proc.stderr[-3000:]})
    return rows


def summarise(rows) -> dict:
    """(case, engine, variant) -> best median, spread, memory, over the rounds."""
    table: dict = {}
    for row in rows:
        if "error" in row:
            continue
        key = (row["case"], row["engine"], row["variant"])
        table.setdefault(key, []).append(row)
    summary = {}
    for key, runs in table.items():
        medians = [r["median"] for r in runs]
        best = min(runs, key=lambda r: r["median"])
        summary["/".join(key)] = {**{k: v for k, v in best.items() if k != "times"},
                                  "best_median": min(medians), "spread": max(medians) - min(medians),
                                  "rounds": len(runs), "device_bytes": min(r["device_bytes"]
                                                                           for r in runs)}
    return summary


def table(summary, cases) -> str:
    lines = ["| case | engine | ms / step (spread) | device MiB | vs PyTorch eager |",
             "|---|---|---|---|---|"]
    for case in cases:
        torch_eager = summary.get(f"{case}/torch/eager")
        for engine, variant in (("graphc", "launches"), ("graphc", "cuda_graph"),
                                ("graphc", "cuda_graph_tf32"), ("torch", "eager"),
                                ("torch", "cuda_graph"), ("torch", "eager_tf32")):
            row = summary.get(f"{case}/{engine}/{variant}")
            if row is None:
                continue
            ratio = (f"{row['best_median'] / torch_eager['best_median']:.2f}x"
                     if torch_eager else "-")
            lines.append(f"| {case} | {engine} {variant} | {row['best_median'] * 1e3:.2f} "
                         f"({row['spread'] * 1e3:.2f}) | {row['device_bytes'] / MIB:.0f} | "
                         f"{ratio} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args(argv)
    rows = []
    for r in range(args.rounds):
        for engine in (ENGINES if r % 2 == 0 else ENGINES[::-1]):
            got = run_engine(engine, args.cases, args.repeats, args.seed, args.timeout)
            for row in got:
                row["round"] = r
                if "error" in row:
                    print(f"{engine} {row.get('case', '')}: {row['error']}\n{row.get('trace', '')}",
                          file=sys.stderr)
            rows.extend(got)
    summary = summarise(rows)
    gpu = _gpu_name()
    text = table(summary, args.cases)
    print(text)
    write_markdown(f"GPU: {gpu}\n\n{text}", os.path.join(args.out, "gpu.md"))
    write_json({"machine": machine(gpu=gpu), "rounds": args.rounds, "repeats": args.repeats,
                "summary": summary, "runs": rows, "targets": TARGETS},
               os.path.join(args.out, "gpu.json"))


def _gpu_name() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


if __name__ == "__main__":
    main()
