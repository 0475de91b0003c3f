"""Per-node cost of running a compiled graph, against the same NumPy calls made directly.

What it measures
----------------
A chain of tiny elementwise ops on a float32 array of 1, 16 or 256 elements, in
a repeating cycle of five ops: ``sin``, ``exp``, multiply by the scalar 0.5, add
the scalar -0.25, multiply by the input array ``x`` (the values stay bounded, so
no overflow, NaN or denormal slows any contender down). Chains of 1,000 and
10,000 ops (default; ``--quick``: 1,000 only). Four contenders compute the
same values:

- ``numpy``: a plain Python loop making the NumPy calls directly, each
  allocating its result (``h = np.exp(h)``), the cycle written out in the loop
  body: what a user writes without graphc.
- ``numpy_out``: the same loop writing into one preallocated array with
  ``out=`` (reference: what direct calls cost without allocation; every call
  overwrites its input, as graphc's in-place plan does).
- ``numpy_out2``: the same with ``out=`` alternating between two arrays, so no
  call writes over its own input (reference: NumPy leaves its fast path when
  the output is exactly the input and the array has one element).
- ``graph``: ``Executable.run(x=X)`` of the chain compiled once with
  ``graphc.compile`` (input check and copy-in, the kernel loop, output copy).
- ``eager``: the same calls through ``graphc.eager`` (shape/dtype inference and
  a kernel built on every call).

Where ``graphc.compile`` has an optimiser (an ``optimise=`` option), ``graph``
is compiled with it off, so that each op is one kernel call (the per-node
dispatch cost the issue asks about), and ``graph_opt`` with the default
options is timed as well; the table shows the number of kernel steps.

Per-node time is the time of one whole evaluation divided by the number of ops
in the chain (constants are not ops). The ratio ``graph/numpy`` is the issue's
target: at most 1.5.

How (the machine is noisy)
--------------------------
Each round times every contender in turn (A B C D, A B C D, ...), each
``repeats`` times, and keeps the median of those repeats; the report gives the
best of the rounds' medians and their spread (min..max). The garbage
collector is off while timing (as ``timeit`` does).

It also times building: for chains of 1k, 10k and 100k nodes (``--quick``: 1k,
10k) the wall time of constructing the nodes with ``graphc.ndarray`` and of
``graphc.compile`` itself, per node of the graph (``g.stats()["nodes"]``,
constants included) and per op; the issue's target for compile is under 20 µs
a node. Best of a few builds, with the garbage collector on (as a user runs
it), plus one compile with it off to show how much of the time is collection.

Run from the repository root: ``python3 benchmarks/overhead.py [--quick]``.
Prints markdown tables and writes ``benchmarks/results/overhead.json``.
"""
from __future__ import annotations

import argparse
import gc
import inspect
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

import graphc  # noqa: E402
from _report import write_json  # noqa: E402
import graphc.eager as E  # noqa: E402
import graphc.ndarray as N  # noqa: E402

CYCLE = 5  # ops per cycle: sin, exp, * 0.5, + -0.25, * x
#: whether graphc.compile takes ``optimise=`` (the optimiser may fuse the chain)
HAS_OPTIMISER = "optimise" in inspect.signature(graphc.compile).parameters


def compile_as_written(inputs, outputs, **options):
    """``graphc.compile`` with the optimiser off where it has one: one kernel per op."""
    if HAS_OPTIMISER:
        options["optimise"] = False
    return graphc.compile(inputs, outputs, **options)
OPS_NAMES = "sin, exp, *0.5, +(-0.25), *x"


# -- the chain, written once per contender ------------------------------------------

def build_chain(ops: int, size: int):
    """The lazy chain on a variable ``x`` of ``size`` float32 elements: ``ops`` ops."""
    x = N.var("x", (size,), np.float32)
    h = x
    for i in range(ops):
        k = i % CYCLE
        if k == 0:
            h = N.sin(h)
        elif k == 1:
            h = N.exp(h)
        elif k == 2:
            h = h * 0.5
        elif k == 3:
            h = h + (-0.25)
        else:
            h = h * x
    return x, h


def allocating_chain(ns, x, ops):
    """The chain as direct calls of namespace ``ns`` (``numpy`` or ``graphc.eager``),
    each allocating its result."""
    sin, exp, multiply, add = ns.sin, ns.exp, ns.multiply, ns.add
    h = x
    for _ in range(ops // CYCLE):
        h = sin(h)
        h = exp(h)
        h = multiply(h, 0.5)
        h = add(h, -0.25)
        h = multiply(h, x)
    for k in range(ops % CYCLE):
        h = [sin, exp, lambda v: multiply(v, 0.5), lambda v: add(v, -0.25)][k](h)
    return h


def numpy_out(x, ops, buf):
    """The same calls writing into one preallocated array with ``out=``."""
    sin, exp, multiply, add = np.sin, np.exp, np.multiply, np.add
    np.copyto(buf, x)
    h = buf
    for _ in range(ops // CYCLE):
        sin(h, out=h)
        exp(h, out=h)
        multiply(h, 0.5, out=h)
        add(h, -0.25, out=h)
        multiply(h, x, out=h)
    return _tail(h, x, ops % CYCLE, h).copy()


def numpy_pingpong(x, ops, a, b):
    """The same calls with ``out=`` alternating between two preallocated arrays, so no
    call's output is its own input (NumPy's fast path refuses exact self-overlap
    for 1-element arrays)."""
    sin, exp, multiply, add = np.sin, np.exp, np.multiply, np.add
    np.copyto(a, x)
    for _ in range(ops // CYCLE):
        sin(a, out=b)
        exp(b, out=a)
        multiply(a, 0.5, out=b)
        add(b, -0.25, out=a)
        multiply(a, x, out=b)
        a, b = b, a
    return _tail(a, x, ops % CYCLE, None).copy()


def _tail(h, x, rest, out):
    steps = [lambda v: np.sin(v, out=out), lambda v: np.exp(v, out=out),
             lambda v: np.multiply(v, 0.5, out=out), lambda v: np.add(v, -0.25, out=out)]
    for k in range(rest):
        h = steps[k](h)
    return h


# -- timing ---------------------------------------------------------------------------

def _time_once(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def alternate(contenders: dict, rounds: int, repeats: int) -> dict:
    """``name -> list of per-round medians`` (seconds), contenders interleaved."""
    medians = {name: [] for name in contenders}
    for fn in contenders.values():  # warm up: caches, page faults, lazy imports
        fn()
    enabled = gc.isenabled()
    try:
        for _ in range(rounds):
            for name, fn in contenders.items():
                gc.collect()
                gc.disable()
                try:
                    times = [_time_once(fn) for _ in range(repeats)]
                finally:
                    if enabled:
                        gc.enable()
                medians[name].append(statistics.median(times))
    finally:
        if enabled:
            gc.enable()
    return medians


def run_overhead(ops_list, sizes, rounds, repeats, eager_max_ops):
    rows = []
    for ops in ops_list:
        for size in sizes:
            rng = np.random.default_rng(0)
            X = rng.uniform(-1.0, 1.0, size).astype(np.float32)
            x, h = build_chain(ops, size)
            g = compile_as_written([x], h)
            steps = g.stats()["steps"]
            buf, buf2 = np.empty_like(X), np.empty_like(X)
            expected = allocating_chain(np, X, ops)
            got = g.run(x=X)
            np.testing.assert_allclose(got, expected, rtol=2e-5, atol=1e-6)
            np.testing.assert_allclose(numpy_out(X, ops, buf), expected, rtol=2e-5, atol=1e-6)
            np.testing.assert_allclose(numpy_pingpong(X, ops, buf, buf2), expected, rtol=2e-5,
                                       atol=1e-6)
            contenders = {
                "numpy": lambda: allocating_chain(np, X, ops),
                "numpy_out": lambda: numpy_out(X, ops, buf),
                "numpy_out2": lambda: numpy_pingpong(X, ops, buf, buf2),
                "graph": lambda: g.run(x=X),
            }
            if HAS_OPTIMISER:  # the compile default, optimiser on
                g_opt = graphc.compile([x], h)
                np.testing.assert_allclose(g_opt.run(x=X), expected, rtol=2e-5, atol=1e-6)
                contenders["graph_opt"] = lambda: g_opt.run(x=X)
            if ops <= eager_max_ops:
                np.testing.assert_allclose(allocating_chain(E, X, ops), expected, rtol=2e-5, atol=1e-6)
                contenders["eager"] = lambda: allocating_chain(E, X, ops)
            # fewer repeats for the long chains keeps the total time flat
            reps = max(3, repeats * 1000 // ops) if ops > 1000 else repeats
            medians = alternate(contenders, rounds, reps)
            row = {"ops": ops, "elements": size, "steps": steps, "rounds": rounds,
                   "repeats": reps}
            for name, ms in medians.items():
                per = [m / ops * 1e6 for m in ms]
                row[name] = {"best_us_per_node": min(per), "min_us_per_node": min(per),
                             "max_us_per_node": max(per),
                             "medians_us_per_node": per}
            row["ratio_graph_numpy"] = row["graph"]["best_us_per_node"] / row["numpy"]["best_us_per_node"]
            row["ratio_graph_numpy_out"] = (row["graph"]["best_us_per_node"]
                                            / row["numpy_out"]["best_us_per_node"])
            if "eager" in row:
                row["ratio_eager_numpy"] = (row["eager"]["best_us_per_node"]
                                            / row["numpy"]["best_us_per_node"])
            rows.append(row)
            print(f"  chain of {ops} ops on {size} elements: graph "
                  f"{row['graph']['best_us_per_node']:.3f} us/node, numpy "
                  f"{row['numpy']['best_us_per_node']:.3f} us/node", file=sys.stderr)
            del g, x, h, contenders
    return rows


def run_build(ops_list, tries):
    rows = []
    for ops in ops_list:
        best_construct = best_compile = None
        nodes = 0
        for attempt in range(tries):
            gc.collect()
            t0 = time.perf_counter()
            x, h = build_chain(ops, 16)
            t1 = time.perf_counter()
            g = compile_as_written([x], h)
            t2 = time.perf_counter()
            nodes = g.stats()["nodes"]
            construct, comp = t1 - t0, t2 - t1
            best_construct = construct if best_construct is None else min(best_construct, construct)
            best_compile = comp if best_compile is None else min(best_compile, comp)
            del g
            if attempt == tries - 1:  # the same graph compiled once more, gc off
                gc.collect()
                gc.disable()
                try:
                    t3 = time.perf_counter()
                    g = compile_as_written([x], h)
                    nogc = time.perf_counter() - t3
                finally:
                    gc.enable()
                del g
            del x, h
        rows.append({"ops": ops, "nodes": nodes, "tries": tries,
                     "compile_seconds_gc_off": nogc,
                     "compile_us_per_node_gc_off": nogc / nodes * 1e6,
                     "construct_seconds": best_construct, "compile_seconds": best_compile,
                     "construct_us_per_node": best_construct / nodes * 1e6,
                     "compile_us_per_node": best_compile / nodes * 1e6,
                     "compile_us_per_op": best_compile / ops * 1e6})
        print(f"  build chain of {ops} ops ({nodes} nodes): compile "
              f"{best_compile / nodes * 1e6:.2f} us/node", file=sys.stderr)
    return rows


# -- report ---------------------------------------------------------------------------

def _cell(r):
    return f"{r['best_us_per_node']:.3f} ({r['min_us_per_node']:.3f}..{r['max_us_per_node']:.3f})"


def markdown(result) -> str:
    opt = any("graph_opt" in r for r in result["run"])
    head = ["ops", "elements", "kernel steps", "numpy (alloc)", "numpy out=",
            "numpy out= (2 arrays)", "graph run"] + (["graph run, optimised"] if opt else []) + [
            "eager", "graph/numpy", "graph/numpy_out", "target ≤ 1.5"]
    lines = [f"### run: per-node cost (µs), best median (spread of round medians); "
             f"ops cycle: {OPS_NAMES}", "",
             "| " + " | ".join(head) + " |",
             "|" + "---:|" * (len(head) - 1) + ":---:|"]
    for r in result["run"]:
        cells = [str(r["ops"]), str(r["elements"]), str(r["steps"]), _cell(r["numpy"]),
                 _cell(r["numpy_out"]), _cell(r["numpy_out2"]), _cell(r["graph"])]
        if opt:
            cells.append(_cell(r["graph_opt"]) if "graph_opt" in r else "–")
        cells += [_cell(r["eager"]) if "eager" in r else "–", f"{r['ratio_graph_numpy']:.2f}",
                  f"{r['ratio_graph_numpy_out']:.2f}",
                  "yes" if r["ratio_graph_numpy"] <= 1.5 else "NO"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "### build: wall time per node (µs), best of tries; chain on 16 elements", "",
              "| ops | nodes | construct (N.*) µs/node | compile µs/node | compile µs/op "
              "| compile µs/node, gc off | target < 20 µs/node |",
              "|---:|---:|---:|---:|---:|---:|:---:|"]
    for r in result["build"]:
        ok = "yes" if r["compile_us_per_node"] < 20 else "NO"
        lines.append(f"| {r['ops']} | {r['nodes']} | {r['construct_us_per_node']:.2f} | "
                     f"{r['compile_us_per_node']:.2f} | {r['compile_us_per_op']:.2f} | "
                     f"{r['compile_us_per_node_gc_off']:.2f} | {ok} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few repeats (about 20 s or less)")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results",
                                                      "overhead.json"))
    args = parser.parse_args(argv)
    if args.quick:
        ops_list, sizes, rounds, repeats = [1000], [1, 16, 256], 5, 7
        build_ops, tries = [1000, 10000], 1
    else:
        ops_list, sizes, rounds, repeats = [1000, 10000], [1, 16, 256], 7, 11
        build_ops, tries = [1000, 10000, 100000], 3
    started = time.perf_counter()
    print(f"graphc {graphc.__version__}, numpy {np.__version__}, python "
          f"{platform.python_version()}, {os.cpu_count()} cpus"
          f"{' (quick)' if args.quick else ''}", file=sys.stderr)
    result = {
        "benchmark": "overhead", "quick": args.quick,
        "graphc": graphc.__version__, "numpy": np.__version__,
        "python": platform.python_version(), "machine": platform.machine(),
        "cpus": os.cpu_count(), "ops_cycle": OPS_NAMES,
        "run": run_overhead(ops_list, sizes, rounds, repeats, eager_max_ops=10000),
        "build": run_build(build_ops, tries),
    }
    result["seconds"] = time.perf_counter() - started
    text = markdown(result)
    print(text)
    print(f"\n(total {result['seconds']:.1f} s)")
    write_json(result, args.out)


if __name__ == "__main__":
    main()
