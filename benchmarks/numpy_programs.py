"""NumPy-style programs: plain NumPy, graphc (generated and NumPy kernels) and
JAX jit, side by side in one run.

What it measures
----------------
Each program of ``benchmarks/_programs.py`` (stencils, an image filter, deep
learning blocks, k-means, logistic regression, covariance, n-body) is written
once against a namespace and runs unchanged on four engines:

- ``numpy``: the program on NumPy arrays, every call allocating its results;
- ``graphc-generated`` / ``graphc-numpy``: the program compiled once by
  ``graphc.compile(..., kernels="generated" | "numpy")``, then ``run`` timed
  (inputs given as NumPy arrays, outputs returned as copies, the defaults);
- ``jax``: ``jax.jit`` of the program on ``jax.numpy`` with its inputs already
  on the CPU device, each call waited for with ``block_until_ready``.

Every (program, engine) measurement runs in a fresh process, which first
checks that the engine's outputs agree with NumPy's (``allclose`` with the
program's tolerance) and only then times one warm-up and REPEATS calls. The
engines alternate, their order flipping each round; the table shows the best
median of the rounds with the spread (min-max of the round medians), the time
ratios NumPy / graphc ("× faster than NumPy") and graphc / JAX (below 1:
graphc is faster), and their geometric means. Every engine uses all cores
(NumPy's BLAS, Numba's and XLA's thread pools by default).

Run from the repository root: ``python3 benchmarks/numpy_programs.py [--quick]``
(JAX from the ``peers`` extra: ``pip install -e '.[peers]'``; without it the
JAX column is left out). Prints a markdown table and writes
``benchmarks/results/numpy_programs.json`` and ``numpy_programs.md``.
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
from _programs import PROGRAMS  # noqa: E402
from _report import machine, progress, run_child, write_json, write_markdown  # noqa: E402

RESULTS = os.path.join(HERE, "results")
ENGINES = ("numpy", "graphc-generated", "graphc-numpy", "jax")
GRAPHC = ("graphc-generated", "graphc-numpy")


def measure_all(programs, engines, rounds, repeats, seed, scale) -> dict:
    """``{program: {engine: [child results, one per round]}}``; a child that fails
    (an engine that cannot run the program, or disagrees with NumPy) leaves
    ``{"error": message}`` in its place so the other measurements go on."""
    results = {p: {e: [] for e in engines} for p in programs}
    bar = progress(rounds * len(programs) * len(engines), "numpy programs")
    for r in range(rounds):
        for program in programs:
            for engine in (engines if r % 2 == 0 else engines[::-1]):
                bar.set_postfix_str(f"round {r + 1}: {program} {engine}")
                try:
                    result = run_child("_numpy_programs_child.py", program, engine, repeats,
                                       seed, scale, timeout=1800)
                except RuntimeError as failure:
                    result = {"error": str(failure).strip().splitlines()[-1]}
                    print(f"\n{program} on {engine} failed: {result['error']}", file=sys.stderr)
                results[program][engine].append(result)
                bar.update(1)
    bar.close()
    return results


def geomean(values) -> float | None:
    values = [v for v in values if v is not None]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def summarise(program, runs) -> dict:
    """One row: per engine the best median and spread (or the error), and the ratios."""
    row = {"program": program, "title": PROGRAMS[program].title, "engines": {}}
    for engine, results in runs.items():
        good = [r for r in results if "error" not in r]
        if len(good) < len(results):
            row["engines"][engine] = {"error": next(r["error"] for r in results if "error" in r)}
            continue
        medians = [r["median"] for r in good]
        row["engines"][engine] = {
            "seconds": min(medians), "spread": [min(medians), max(medians)],
            "build_seconds": min(r["build_seconds"] for r in good),
            "max_abs_error": max(r["max_abs_error"] for r in good)}
    seconds = {e: v.get("seconds") for e, v in row["engines"].items()}
    ratios = {}
    for g in GRAPHC:
        if seconds.get(g) and seconds.get("numpy"):
            ratios[f"numpy/{g}"] = seconds["numpy"] / seconds[g]
        if seconds.get(g) and seconds.get("jax"):
            ratios[f"{g}/jax"] = seconds[g] / seconds["jax"]
    row["ratios"] = ratios
    return row


def _cell(entry) -> str:
    if "error" in entry:
        return "failed"
    lo, hi = entry["spread"]
    return f"{entry['seconds'] * 1e3:.2f} ({lo * 1e3:.2f}–{hi * 1e3:.2f})"


def _ratio(value) -> str:
    return "–" if value is None else f"{value:.2f}×"


def ratio_keys(engines) -> list[str]:
    keys = [f"numpy/{g}" for g in GRAPHC if g in engines and "numpy" in engines]
    return keys + [f"{g}/jax" for g in GRAPHC if g in engines and "jax" in engines]


def table(rows, engines, geomeans) -> str:
    keys = ratio_keys(engines)
    names = {"numpy": "NumPy", "graphc-generated": "graphc gen.", "graphc-numpy": "graphc np.",
             "jax": "JAX jit"}
    short = {k: " / ".join(names[p] for p in k.split("/")) for k in keys}
    head = ("| program | " + " | ".join(f"{names[e]} ms" for e in engines) + " | "
            + " | ".join(short[k] for k in keys) + " |")
    lines = [head, "|---|" + "---:|" * (len(engines) + len(keys))]
    for row in rows:
        lines.append(f"| {row['title']} | "
                     + " | ".join(_cell(row["engines"][e]) for e in engines) + " | "
                     + " | ".join(_ratio(row["ratios"].get(k)) for k in keys) + " |")
    lines.append("| **geometric mean** | " + " | ".join("" for _ in engines) + " | "
                 + " | ".join(f"**{_ratio(geomeans.get(k))}**" for k in keys) + " |")
    lines += ["", "NumPy / graphc: how many times faster than NumPy graphc runs (above 1: "
              "faster). graphc / JAX: graphc's time over JAX jit's (below 1: graphc faster). "
              "ms: best median of the rounds (spread of the round medians)."]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one round, 5 repeats (a few minutes)")
    ap.add_argument("--programs", nargs="+", choices=list(PROGRAMS), default=list(PROGRAMS))
    ap.add_argument("--engines", nargs="+", choices=ENGINES, default=None,
                    help="default: all four (JAX only where it is installed)")
    ap.add_argument("--rounds", type=int, help="fresh-process rounds per engine (default 5; quick 1)")
    ap.add_argument("--repeats", type=int, help="timed calls per process (default 20; quick 5)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="shrink every input axis by this factor (smoke tests only)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    engines = tuple(args.engines or ENGINES)
    if "jax" in engines and importlib.util.find_spec("jax") is None:
        print("jax is not installed: no JAX column (pip install -e '.[peers]')", file=sys.stderr)
        engines = tuple(e for e in engines if e != "jax")
    rounds = args.rounds or (1 if args.quick else 5)
    repeats = args.repeats or (5 if args.quick else 20)
    started = time.time()
    results = measure_all(args.programs, engines, rounds, repeats, args.seed, args.scale)
    rows = [summarise(p, results[p]) for p in args.programs]
    geomeans = {k: geomean(r["ratios"].get(k) for r in rows) for k in ratio_keys(engines)}
    text = table(rows, engines, geomeans)
    contention, note = contention_note(r for runs in results.values()
                                       for rs in runs.values() for r in rs)
    text += note
    if args.scale != 1.0:
        text += f"\n\nEvery input axis scaled by {args.scale}: the titles give the full sizes."
    print(text)
    write_markdown(text, os.path.join(RESULTS, "numpy_programs.md"))
    write_json({"machine": machine(),
                "quick": args.quick, "rounds": rounds, "repeats": repeats, "scale": args.scale,
                "engines": list(engines), "seconds": time.time() - started,
                "other_processes_cores_max": contention,
                "geomeans": geomeans, "rows": rows, "runs": results},
               os.path.join(RESULTS, "numpy_programs.json"))


if __name__ == "__main__":
    main()
