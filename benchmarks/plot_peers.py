"""One picture of graphc against its peers: graphc's time over each peer's, per case,
on a log scale with a line at 1 (left of it graphc is faster).

Reads what the peer benchmarks wrote in benchmarks/results/ (those present):
``numpy_programs.json`` (against NumPy and JAX jit, graphc on its generated
kernels), ``torch_peers.json`` (against PyTorch eager) and
``onnx_models.json`` (against onnxruntime). Each peer gets a panel with a bar
per case and one for the geometric mean; a dotted line marks issue 15's target
where there is one per case.

Run from the repository root after the benchmarks:
``python3 benchmarks/plot_peers.py`` writes ``benchmarks/results/peers.png``.

>>> panels = collect(RESULTS)      # doctest: +SKIP
>>> [p["peer"] for p in panels]    # doctest: +SKIP
['NumPy', 'JAX jit', 'PyTorch eager', 'onnxruntime']
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


def _load(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        print(f"{os.path.relpath(path)} is missing: its peers are left out", file=sys.stderr)
        return None
    with open(path) as f:
        return json.load(f)


def _panel(peer, source, cases, target=None):
    """``cases``: (label, graphc time / peer time, per-case target or None)."""
    cases = [c for c in cases if c[1] is not None]
    return {"peer": peer, "source": source, "cases": cases, "geomean_target": target,
            "geomean": (math.exp(sum(math.log(c[1]) for c in cases) / len(cases))
                        if cases else None)}


def collect(folder: str) -> list[dict]:
    """The panels to draw from the JSON files in ``folder``: per peer, each case's
    graphc / peer time ratio and the targets of issue 15.

    Example: ``[p["peer"] for p in collect("benchmarks/results")]``
    """
    panels = []
    programs = _load(folder, "numpy_programs.json")
    if programs:
        rows = programs["rows"]
        numpy_cases, jax_cases = [], []
        for row in rows:
            speedup = row["ratios"].get("numpy/graphc-generated")
            numpy_cases.append((row["program"], 1.0 / speedup if speedup else None, None))
            jax_cases.append((row["program"], row["ratios"].get("graphc-generated/jax"), 1.0))
        panels.append(_panel("NumPy", "numpy_programs.json", numpy_cases, target=0.5))
        if "jax" in programs.get("engines", []):
            panels.append(_panel("JAX jit", "numpy_programs.json", jax_cases))
    torch = _load(folder, "torch_peers.json")
    if torch:
        panels.append(_panel("PyTorch eager", "torch_peers.json",
                             [(row["case"], row["time_ratio"], row.get("target_time_ratio"))
                              for row in torch["rows"]]))
    onnx = _load(folder, "onnx_models.json")
    if onnx:
        panels.append(_panel("onnxruntime", "onnx_models.json",
                             [(row["model"], row["time_ratio"], 1.5) for row in onnx["rows"]],
                             target=1.0))
    return [p for p in panels if p["cases"]]


def plot(panels, path) -> None:
    """Draw ``panels`` (from :func:`collect`) to ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heights = [len(p["cases"]) + 1 for p in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 0.32 * sum(heights) + 1.2 * len(panels)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    ratios = [c[1] for p in panels for c in p["cases"]]
    low, high = min(ratios + [0.5]) / 1.6, max(ratios + [2.0]) * 1.6   # room for the labels
    for ax, panel in zip(axes[:, 0], panels):
        labels = [c[0] for c in panel["cases"]] + ["geometric mean"]
        values = [c[1] for c in panel["cases"]] + [panel["geomean"]]
        targets = [c[2] for c in panel["cases"]] + [panel["geomean_target"]]
        y = list(range(len(values)))[::-1]
        colours = ["tab:green" if v <= 1.0 else "tab:red" for v in values]
        # each bar grows from the line at 1: rightwards where graphc is slower
        bars = ax.barh(y, [v - 1.0 for v in values], left=1.0, color=colours, alpha=0.8,
                       height=0.7)
        bars[-1].set_hatch("//")
        for yi, v, t in zip(y, values, targets):
            reach = v if t is None else (max(v, t) if v > 1.0 else min(v, t))
            ax.text(reach * 1.04 if v > 1.0 else reach / 1.04, yi, f"{v:.2f}", va="center",
                    ha="left" if v > 1.0 else "right", fontsize=7)
            if t is not None:
                ax.plot([t, t], [yi - 0.4, yi + 0.4], color="black", ls=":", lw=1.2)
        ax.axvline(1.0, color="black", lw=1)
        ax.set_xscale("log")
        ax.set_xlim(low, high)
        ax.set_yticks(y)
        ax.set_yticklabels(labels, fontsize=8)
        ax.set_title(f"graphc vs {panel['peer']} ({panel['source']})", fontsize=9, loc="left")
        ax.tick_params(axis="x", labelsize=8)
    axes[-1, 0].set_xlabel("graphc time / peer time (log; left of 1: graphc faster; "
                           "dotted: issue 15's target)", fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {os.path.relpath(path)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=RESULTS, help="folder with the benchmarks' JSON files")
    ap.add_argument("--out", default=os.path.join(RESULTS, "peers.png"))
    args = ap.parse_args(argv)
    panels = collect(args.results)
    if not panels:
        raise SystemExit(f"no peer results in {args.results}: run numpy_programs.py, "
                         "torch_peers.py or onnx_models.py first")
    plot(panels, args.out)


if __name__ == "__main__":
    main()
