"""Imported ONNX models: graphc's graph against onnxruntime, in the same run.

Two sets of models, batch 1: the light ResNet50 and Inception v1 from the onnx
wheel with random weights (``graphc.onnx.zoo``; named ``light_resnet50``...),
and the zoo of torchvision and timm architectures that
``benchmarks/export_zoo.py`` exports (``--zoo DIR``; by default
``~/.cache/graphc/onnx-zoo`` when it exists), each with its family from the
zoo's manifest. Issue 15's target 1: graphc's time <= onnxruntime's on the
geometric mean, and <= 1.5x on every model.

Correctness comes first: one fresh process per model runs it once on
onnxruntime and once on graphc and compares the outputs (max|graphc - ort| <=
1e-3 * max|ort|, see ``_onnx_child.RTOL``). A model graphc cannot import is
"failed", one whose outputs differ is "wrong"; neither is timed. Each graphc
timing process checks its own warm-up outputs again.

Timing: for each (model, engine) a fresh process builds the engine and times
repeated runs; the engines alternate and their order flips each round, and the
table shows the best median of the rounds with the spread (this machine is
noisy). Both engines use every core, or ``--threads`` (onnxruntime's intra-op
threads; graphc's through NUMBA_NUM_THREADS, OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS).
Memory is the peak RSS above the RSS with the model and input loaded: "run"
counts only what running needs (measured after the build), "total" includes
the copy or repacking of the weights each engine makes while building.

Run from the repository root: ``python3 benchmarks/onnx_models.py [--quick]``
(``--models resnet18 light_resnet50`` for a few). Prints a markdown table and
writes ``benchmarks/results/onnx_models.json`` and ``.md``.
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _numpy_programs_child import contention_note  # noqa: E402
from _report import machine, progress, run_child, write_json  # noqa: E402
from export_zoo import DEFAULT_OUT, read_manifest  # noqa: E402

RESULTS = os.path.join(HERE, "results")
MIB = 1 << 20
ENGINES = ("graphc", "onnxruntime")
LIGHT = ("resnet50", "inception_v1")
LIGHT_PREFIX = "light_"
#: issue 15, target 1
TARGET_GEOMEAN, TARGET_EACH = 1.0, 1.5


def catalogue(zoo: str | None, light=LIGHT) -> dict:
    """``{name: {"spec": what _onnx_child.py loads, "family": ...}}`` for the light
    models and each model of the zoo in ``zoo`` (one that failed to export is
    listed with its ``export_error``).

    Example: ``catalogue(None)["light_resnet50"]["spec"] == "resnet50"``
    """
    models = {LIGHT_PREFIX + n: {"spec": n, "family": "light (onnx wheel)"} for n in light}
    if zoo:
        for name, entry in read_manifest(zoo)["models"].items():
            path = os.path.join(zoo, entry["file"])
            models[name] = {"spec": path, "family": entry["family"],
                            "input_shape": entry["input_shape"]}
            if "error" in entry or not os.path.exists(path):
                models[name]["export_error"] = entry.get("error", f"{path} is missing")
    return models


def thread_env(threads: int) -> dict:
    """The environment that gives graphc ``threads`` threads: its generated kernels'
    (Numba, OpenMP) and BLAS's. onnxruntime takes them as a session option."""
    return {name: str(threads) for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS",
                                            "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def _failure(exc: Exception) -> str:
    """The last meaningful line of a failed child's stderr."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1][:400] if lines else type(exc).__name__


def check_all(models: dict, seed: int, threads: int, folder: str) -> dict:
    """Run each model once on both engines: ``{name: check result}``, where a
    result has ``status`` "ok", "wrong", "failed" or "not exported"."""
    checks = {}
    bar = progress(len(models), "onnx checks")
    for name, model in models.items():
        bar.set_postfix_str(f"check {name}")
        if "export_error" in model:
            checks[name] = {"status": "not exported", "error": model["export_error"]}
        else:
            reference = os.path.join(folder, f"{name}.npz")
            try:
                result = run_child("_onnx_child.py", model["spec"], "check", 0, seed, threads,
                                   "--reference", reference, env=thread_env(threads))
            except (RuntimeError, OSError) as exc:
                checks[name] = {"status": "failed", "error": _failure(exc)}
            else:
                result["status"] = "ok" if result["ok"] else "wrong"
                result["reference"] = reference
                checks[name] = result
        bar.update(1)
    bar.close()
    return checks


def measure_all(models: dict, names, rounds, repeats, seed, threads, checks) -> dict:
    """``{name: {engine: [child results]}}``; a child that fails leaves
    ``{"error": ...}`` in its place."""
    results = {m: {e: [] for e in ENGINES} for m in names}
    bar = progress(rounds * len(names) * len(ENGINES), "onnx models")
    for r in range(rounds):
        for name in names:
            for engine in (ENGINES if r % 2 == 0 else ENGINES[::-1]):
                bar.set_postfix_str(f"round {r + 1}: {name} {engine}")
                try:
                    results[name][engine].append(run_child(
                        "_onnx_child.py", models[name]["spec"], engine, repeats, seed, threads,
                        "--reference", checks[name]["reference"], env=thread_env(threads)))
                except (RuntimeError, OSError) as exc:
                    results[name][engine].append({"error": _failure(exc)})
                bar.update(1)
    bar.close()
    return results


def summarise(name, model, check, runs) -> dict:
    """One table row: the status, and for a model that ran, both engines' best
    median with its spread and graphc's time over onnxruntime's."""
    row = {"model": name, "family": model["family"], "status": check["status"],
           "time_ratio": None}
    for key in ("error", "relative_error", "max_abs_error", "max_abs_reference"):
        if key in check:
            row[key] = check[key]
    if runs is None:
        return row
    errors = [r["error"] for rs in runs.values() for r in rs if "error" in r]
    if errors:
        row.update(status="failed", error=errors[0])
        return row
    for engine, results in runs.items():
        medians = [r["median"] for r in results]
        row[engine] = {"seconds": min(medians), "spread": [min(medians), max(medians)],
                       "build_seconds": min(r["build_seconds"] for r in results),
                       "peak_run_bytes": min(r["peak_run_bytes"] for r in results),
                       "peak_total_bytes": min(r["peak_total_bytes"] for r in results)}
    last = runs["graphc"][-1]
    row.update({k: last[k] for k in ("planned_bytes", "lower_bound_bytes", "nodes",
                                     "nodes_unoptimised", "kernels") if k in last})
    row["time_ratio"] = row["graphc"]["seconds"] / row["onnxruntime"]["seconds"]
    return row


def profile_worst(models: dict, rows, count: int, repeats: int, seed: int,
                  threads: int) -> dict:
    """graphc's time per op kind (``_onnx_child.py ... profile``) on the ``count``
    models with the highest graphc / onnxruntime ratio: ``{name: profile}``."""
    timed = sorted((r for r in rows if r["time_ratio"] is not None),
                   key=lambda r: -r["time_ratio"])[:count]
    profiles = {}
    for row in timed:
        try:
            profiles[row["model"]] = run_child("_onnx_child.py", models[row["model"]]["spec"],
                                               "profile", repeats, seed, threads,
                                               env=thread_env(threads))
        except (RuntimeError, OSError) as exc:
            profiles[row["model"]] = {"error": _failure(exc)}
    return profiles


def profile_text(profiles: dict, rows) -> str:
    """A markdown section per profiled model: the op kinds that take most time."""
    ratios = {r["model"]: r["time_ratio"] for r in rows}
    lines = []
    for name, prof in profiles.items():
        lines += ["", f"### {name} (graphc / onnxruntime {ratios[name]:.2f})", ""]
        if "error" in prof:
            lines.append(f"profile failed: {prof['error']}")
            continue
        lines += [f"Run {prof['run_seconds'] * 1e3:.1f} ms; its {prof['steps']} kernels timed "
                  f"one by one sum to {prof['kernel_seconds'] * 1e3:.1f} ms.", "",
                  "| op kind | ms | share | kernels |", "|---|---:|---:|---:|"]
        lines += [f"| {k['kind']} | {k['seconds'] * 1e3:.2f} | {k['share'] * 100:.1f}% "
                  f"| {k['count']} |" for k in prof["kinds"]]
    return "\n".join(lines)


def geomean(values) -> float | None:
    """The geometric mean of ``values`` (None when there are none).

    >>> round(geomean([0.5, 2.0]), 6)
    1.0
    """
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _ms(engine_row) -> str:
    low, high = engine_row["spread"]
    return f"{engine_row['seconds'] * 1e3:.1f} ({low * 1e3:.1f}–{high * 1e3:.1f})"


def table(rows, rounds, repeats, threads, raw=None) -> str:
    """The markdown report: a row per model, geometric means overall and per
    family, the models over 1.5x, and those that failed or were wrong."""
    timed = [r for r in rows if r["time_ratio"] is not None]
    lines = ["| model | family | graphc ms (spread) | onnxruntime ms (spread) | graphc / ORT "
             "| graphc build s | graphc peak run MiB | ORT peak run MiB | planned MiB |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in sorted(timed, key=lambda r: (r["family"], r["model"])):
        g, o = row["graphc"], row["onnxruntime"]
        flag = " **>1.5x**" if row["time_ratio"] > TARGET_EACH else ""
        lines.append(f"| {row['model']} | {row['family']} | {_ms(g)} | {_ms(o)} "
                     f"| {row['time_ratio']:.2f}{flag} | {g['build_seconds']:.2f} "
                     f"| {g['peak_run_bytes'] / MIB:.1f} | {o['peak_run_bytes'] / MIB:.1f} "
                     f"| {row.get('planned_bytes', 0) / MIB:.1f} |")
    overall = geomean(r["time_ratio"] for r in timed)
    over = [r["model"] for r in timed if r["time_ratio"] > TARGET_EACH]
    lines += ["", f"{len(timed)} models timed, {rounds} round(s) of {repeats} runs, "
              f"{threads} threads for both engines."]
    if overall is not None:
        lines.append(f"**Geometric mean of graphc / onnxruntime: {overall:.2f}** "
                     f"(target <= {TARGET_GEOMEAN}); over {TARGET_EACH}x (target: none): "
                     f"{len(over)} ({', '.join(over) or '-'}).")
        lines += ["", "| family | models | geometric mean | worst |", "|---|---:|---:|---|"]
        for family in sorted({r["family"] for r in timed}):
            members = [r for r in timed if r["family"] == family]
            worst = max(members, key=lambda r: r["time_ratio"])
            lines.append(f"| {family} | {len(members)} "
                         f"| {geomean(r['time_ratio'] for r in members):.2f} "
                         f"| {worst['model']} {worst['time_ratio']:.2f} |")
    left_out = [r for r in rows if r["time_ratio"] is None]
    if left_out:
        lines += ["", "Not timed (left out of the target set):", ""]
        lines += [f"- {r['model']} ({r['family']}): {r['status']}: "
                  f"{r.get('error') or 'relative error %.2g' % r.get('relative_error', 0)}"
                  for r in left_out]
    children = [r for runs in (raw or {}).values() for rs in runs.values() for r in rs]
    return "\n".join(lines) + contention_note(children)[1]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one round, 5 repeats")
    ap.add_argument("--zoo", default=DEFAULT_OUT if os.path.isdir(DEFAULT_OUT) else None,
                    help="a folder written by export_zoo.py (default: %(default)s)")
    ap.add_argument("--light", nargs="*", default=list(LIGHT),
                    help="light models of the onnx wheel to add (default: %(default)s)")
    ap.add_argument("--models", nargs="+", help="only these (zoo names or light_<name>)")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--repeats", type=int)
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="threads of both engines (default: the cores)")
    ap.add_argument("--out", default=os.path.join(RESULTS, "onnx_models"),
                    help="results path without extension (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", type=int, default=3, metavar="N",
                    help="profile graphc per op kind on the N worst models (default 3)")
    args = ap.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 3)
    repeats = args.repeats or (5 if args.quick else 20)
    models = catalogue(args.zoo, args.light)
    if args.models:
        unknown = sorted(set(args.models) - set(models))
        if unknown:
            raise SystemExit(f"onnx_models: unknown models {unknown}; known: {sorted(models)}")
        models = {n: models[n] for n in args.models}
    folder = tempfile.mkdtemp(prefix="graphc-onnx-reference-")
    try:
        checks = check_all(models, args.seed, args.threads, folder)
        good = [n for n in models if checks[n]["status"] == "ok"]
        results = measure_all(models, good, rounds, repeats, args.seed, args.threads, checks)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for check in checks.values():
        check.pop("reference", None)  # a temporary file, gone now
    rows = [summarise(n, models[n], checks[n], results.get(n)) for n in models]
    text = table(rows, rounds, repeats, args.threads, results)
    profiles = profile_worst(models, rows, args.profile, repeats, args.seed, args.threads)
    if profiles:
        text += "\n\n## Where graphc's time goes on the worst models\n" + \
            profile_text(profiles, rows)
    print(text)
    timed = [r["time_ratio"] for r in rows if r["time_ratio"] is not None]
    write_json({"machine": machine(),
                "zoo": args.zoo, "zoo_manifest": read_manifest(args.zoo) if args.zoo else None,
                "rounds": rounds, "repeats": repeats, "threads": args.threads,
                "geomean_time_ratio": geomean(timed), "rows": rows, "checks": checks,
                "profiles": profiles,
                "raw": results},
               args.out + ".json")
    path = args.out + ".md"
    with open(path, "w") as f:
        f.write("# graphc against onnxruntime on imported ONNX models\n\n"
                "Written by `benchmarks/onnx_models.py`; see docs/benchmarks-peers.md.\n\n"
                + text + "\n")
    print(f"wrote {os.path.relpath(path)}")


if __name__ == "__main__":
    main()
