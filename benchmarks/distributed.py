"""Data-parallel training at 1 and 2 processes on this machine, one compute thread
each (BLAS and Numba capped at 1), side by side in one run, alternating, every
configuration in fresh processes (benchmarks/train_distributed.py under mpiexec):

- ``1 rank, B``: one process at the global batch (the throughput to beat);
- ``1 rank, B/2``: one process at a rank's share, its compute alone;
- ``2 ranks serial`` / ``2 ranks parallel``: the schedules, the parallel one on two
  worker threads so a bucket's all-reduce overlaps the rest of the backward pass.

Reported: images a second (best of the repeats' medians, with the spread), seconds
of communication a step (time inside the collectives), and how much of it was hidden:
``1 - (step(2 ranks) - step(1 rank, B/2)) / communication``.

    python3 benchmarks/distributed.py [--repeats 3] [--models mnist resnet50]

Results: benchmarks/results/distributed.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "train_distributed.py")
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "NUMBA_NUM_THREADS": "1"}
#: model -> (global batch, timed steps, warm-up steps)
SIZES = {"mnist": (100, 30, 3), "resnet50": (8, 3, 1)}


def configurations(model):
    batch, steps, warmup = SIZES[model]
    common = ["--model", model, "--steps", str(steps), "--warmup", str(warmup)]
    return {"1 rank, B": (1, common + ["--batch", str(batch), "--schedule", "serial"]),
            "1 rank, B/2": (1, common + ["--batch", str(batch // 2), "--schedule", "serial"]),
            "2 ranks serial": (2, common + ["--batch", str(batch), "--schedule", "serial"]),
            "2 ranks parallel": (2, common + ["--batch", str(batch), "--schedule",
                                              "parallel"])}


def run(ranks, args):
    mpiexec = shutil.which("mpiexec") or os.path.join(os.path.dirname(sys.executable),
                                                      "mpiexec")
    done = subprocess.run([mpiexec, "-n", str(ranks), sys.executable, SCRIPT, *args],
                          capture_output=True, text=True, env={**os.environ, **ONE_THREAD})
    if done.returncode:
        raise RuntimeError(f"{' '.join(args)} on {ranks} ranks failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=["mnist", "resnet50"],
                        choices=sorted(SIZES))
    args = parser.parse_args()
    report = {}
    for model in args.models:
        configs = configurations(model)
        runs = {name: [] for name in configs}
        for repeat in range(args.repeats):            # alternating, fresh processes
            for name, (ranks, cli) in configs.items():
                runs[name].append(run(ranks, cli))
                print(f"{model} {name} #{repeat}: "
                      f"{runs[name][-1]['images_per_s']:.1f} images/s", file=sys.stderr)
        rows = {}
        for name, results in runs.items():
            best = min(results, key=lambda r: r["step_s_median"])
            medians = [r["step_s_median"] for r in results]
            rows[name] = {"images_per_s": best["images_per_s"],
                          "step_s": best["step_s_median"],
                          "step_s_spread": [min(medians), max(medians)],
                          "comm_s_per_step": best["comm_s_per_step"],
                          "comm_calls_per_step": best["comm_calls_per_step"]}
        compute = rows["1 rank, B/2"]["step_s"]
        for name in ("2 ranks serial", "2 ranks parallel"):
            row = rows[name]
            exposed = max(row["step_s"] - compute, 0.0)
            row["hidden_fraction"] = (max(0.0, 1 - exposed / row["comm_s_per_step"])
                                      if row["comm_s_per_step"] else None)
        report[model] = rows
        print(f"\n{model}:", file=sys.stderr)
        for name, row in rows.items():
            hidden = row.get("hidden_fraction")
            print(f"  {name:18s} {row['images_per_s']:8.1f} images/s  step "
                  f"{row['step_s'] * 1e3:8.1f} ms [{row['step_s_spread'][0] * 1e3:.1f}-"
                  f"{row['step_s_spread'][1] * 1e3:.1f}]  comm {row['comm_s_per_step'] * 1e3:7.1f}"
                  f" ms" + (f"  hidden {hidden:.0%}" if hidden is not None else ""),
                  file=sys.stderr)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "distributed.json"), "w") as f:
        json.dump({"machine": f"{os.cpu_count()} cores", "results": report}, f, indent=1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
