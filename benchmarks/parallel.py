"""Serial against parallel schedules: what running independent steps at once
buys in time, and what it costs in planned memory.

What it measures
----------------
Each case is compiled three times from the same graph: ``schedule="serial"``,
``"parallel"`` (one worker per core, memory kept apart between steps that may
overlap) and ``"parallel_reuse"`` (the serial plan's memory; steps reusing bytes
wait):

- ``wide-ufunc KxL``: K independent branches of L elementwise ops (sin, exp,
  multiply, add: no fusion, ``optimise=False``) on 2**20 float32 each, summed at
  the end: NumPy's ufuncs release the GIL, so branches overlap.
- ``wide-fused KxL``: the same with the optimiser on: each branch is one fused
  kernel streaming through a cache-sized scratch (one scratch per worker).
- ``wide-gemm K``: K independent chains of three 512x512 float32 matmuls, summed:
  BLAS releases the GIL but is itself threaded.
- ``inception_v3 b1`` and ``resnet50 b1``: inference at 299x299 / 224x224, batch
  1, batch norm folded (InceptionV3 has parallel branches, ResNet50 barely any).

Columns: the best of the rounds' medians (ms) for each schedule and their
spread, the speed-up, the planned bytes of both plans (exact; the difference
is the memory parallelism costs, ``stats()["parallel_extra_bytes"]``), and the
average width (steps / critical path: how many steps could run at once on
average). Everything runs twice, in fresh processes: once with BLAS's own
threads (``OPENBLAS_NUM_THREADS`` unset) and once with BLAS on one thread, where
the graph's parallelism is the only one.

How (the machine is noisy)
--------------------------
Each round times the three schedules in turn, ``repeats`` runs each, and
keeps each one's median; the report gives the best of the rounds' medians and
the spread of the medians (min..max).

Run from the repository root: ``python3 benchmarks/parallel.py [--quick]``.
Prints a markdown table and writes ``benchmarks/results/parallel.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

from _report import median_time, run_child, write_json  # noqa: E402

BLAS_SETTINGS = {"blas-threads": {}, "blas-1": {"OPENBLAS_NUM_THREADS": "1",
                                               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}}


# -- the child: one BLAS setting, every case ----------------------------------------------
def _wide_ufunc(branches, length, size=1 << 20, optimise=False):
    import numpy as np

    import graphc.ndarray as N
    x = N.var("x", (size,))
    total = None
    for b in range(branches):
        h = x * float(b + 1)
        for i in range(length):
            h = [N.sin, N.exp, lambda v: v * 0.5, lambda v: v + 0.25][i % 4](h)
        total = h if total is None else total + h
    feeds = {"x": np.random.default_rng(0).uniform(-1, 1, size).astype(np.float32)}
    return [x], total, feeds, {"optimise": optimise}


def _wide_gemm(branches, n=512):
    import numpy as np

    import graphc.ndarray as N
    x = N.var("x", (n, n))
    rng = np.random.default_rng(0)
    total = None
    for b in range(branches):
        h = x
        for _ in range(3):
            h = h @ N.const((rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32))
        total = h if total is None else total + h
    return [x], total, {"x": rng.standard_normal((n, n)).astype(np.float32)}, {}


def _model(name):
    import numpy as np

    import graphc.ndarray as N
    import graphc.neural as nn
    model, size = {"inception_v3": (nn.inception_v3, 299), "resnet50": (nn.resnet50, 224)}[name]
    model = model()
    weights = nn.fold_batchnorm(model, model.init(0))
    x = N.var("x", (1, 3, size, size))
    logits = model.forward(N, weights, x)
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 3, size, size)).astype(np.float32)}
    return [x], logits, feeds, {}


def _cases(quick):
    cases = [(f"wide-ufunc {k}x8", lambda k=k: _wide_ufunc(k, 8)) for k in (1, 2, 4, 8)]
    cases += [(f"wide-fused {k}x8", lambda k=k: _wide_ufunc(k, 8, optimise=True))
              for k in (2, 8)]
    cases += [(f"wide-gemm {k}", lambda k=k: _wide_gemm(k)) for k in (2, 4)]
    cases += [("inception_v3 b1", lambda: _model("inception_v3"))]
    if not quick:
        cases += [("resnet50 b1", lambda: _model("resnet50"))]
    return cases


def child(quick: bool) -> dict:
    import numpy as np

    import graphc
    rounds, repeats = (3, 3) if quick else (5, 5)
    rows = []
    for name, build in _cases(quick):
        inputs, output, feeds, options = build()
        graphs = {s: graphc.compile(inputs, output, schedule=s, **options)
                  for s in ("serial", "parallel", "parallel_reuse")}
        want = graphs["serial"].run(**feeds)
        for s in ("parallel", "parallel_reuse"):
            np.testing.assert_array_equal(graphs[s].run(**feeds), want)
        medians = {s: [] for s in graphs}
        for _ in range(rounds):
            for s, g in graphs.items():          # alternately, in the same round
                medians[s].append(median_time(lambda g=g: g.run(**feeds), repeats))
        p = graphs["parallel"].stats()
        rows.append({
            # (the critical path runs over every step, elided reshapes included)
            "case": name, "steps": p["steps"] + p["elided_steps"],
            "critical_path": p["critical_path_steps"],
            "workers": p["workers"],
            "serial_ms": 1e3 * min(medians["serial"]),
            "serial_spread_ms": [1e3 * min(medians["serial"]), 1e3 * max(medians["serial"])],
            "parallel_ms": 1e3 * min(medians["parallel"]),
            "parallel_spread_ms": [1e3 * min(medians["parallel"]),
                                   1e3 * max(medians["parallel"])],
            "speedup": min(medians["serial"]) / min(medians["parallel"]),
            "reuse_ms": 1e3 * min(medians["parallel_reuse"]),
            "reuse_spread_ms": [1e3 * min(medians["parallel_reuse"]),
                                1e3 * max(medians["parallel_reuse"])],
            "reuse_speedup": min(medians["serial"]) / min(medians["parallel_reuse"]),
            "serial_planned_bytes": p["serial_planned_bytes"],
            "parallel_planned_bytes": p["planned_bytes"],
            "parallel_extra_bytes": p["parallel_extra_bytes"]})
        print(f"  {name}: {rows[-1]['speedup']:.2f}x", file=sys.stderr)
    return {"rows": rows, "rounds": rounds, "repeats": repeats}


# -- the parent: both BLAS settings, the table ---------------------------------------------
def _mib(n):
    return f"{n / 2**20:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and cases")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.quick)))
        return
    results = {}
    for setting, env in BLAS_SETTINGS.items():
        print(f"{setting} ...", file=sys.stderr)
        results[setting] = run_child("parallel.py", "--child", *(["--quick"] if args.quick
                                                                  else []), env=env,
                                     passthrough=True)
    print("| BLAS | case | steps | width | serial ms (spread) | parallel ms (spread) | "
          "speed-up | parallel_reuse ms | speed-up | planned MiB serial (= reuse) / parallel "
          "(+extra) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for setting, result in results.items():
        for r in result["rows"]:
            print(f"| {setting} | {r['case']} | {r['steps']} | "
                  f"{r['steps'] / max(r['critical_path'], 1):.2f} | "
                  f"{r['serial_ms']:.1f} ({r['serial_spread_ms'][0]:.1f}..{r['serial_spread_ms'][1]:.1f}) | "
                  f"{r['parallel_ms']:.1f} ({r['parallel_spread_ms'][0]:.1f}..{r['parallel_spread_ms'][1]:.1f}) | "
                  f"{r['speedup']:.2f}x | {r['reuse_ms']:.1f} | {r['reuse_speedup']:.2f}x | "
                  f"{_mib(r['serial_planned_bytes'])} / "
                  f"{_mib(r['parallel_planned_bytes'])} (+{_mib(r['parallel_extra_bytes'])}) |")
    cores = results["blas-threads"]["rows"][0]["workers"]
    print(f"\n{cores} workers (one per core); best of {results['blas-1']['rounds']} rounds' "
          f"medians of {results['blas-1']['repeats']} runs")
    write_json({"settings": results}, os.path.join(HERE, "results", "parallel.json"))


if __name__ == "__main__":
    main()
