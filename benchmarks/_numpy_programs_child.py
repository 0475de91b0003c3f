"""One measurement of benchmarks/numpy_programs.py, in a fresh process.

``python3 benchmarks/_numpy_programs_child.py PROGRAM ENGINE REPEATS SEED [SCALE]``
makes the program's inputs (NumPy arrays from SEED; SCALE < 1 shrinks them),
prepares ENGINE:

- ``numpy``: the program called on ``numpy`` itself;
- ``graphc-generated`` / ``graphc-numpy``: the program called once on
  ``graphc.ndarray`` variables, compiled with ``graphc.compile(...,
  kernels=...)``; each timed call is ``Executable.run`` on the NumPy inputs;
- ``jax``: ``jax.jit`` of the program on ``jax.numpy`` (64-bit enabled, so f64
  programs stay f64), inputs placed on the CPU device beforehand; each timed
  call ends with ``block_until_ready``;

then checks the engine's outputs against NumPy's (``numpy.allclose`` with the
program's tolerances: the process exits non-zero before timing anything if they
disagree), runs one warm-up call, and times REPEATS calls. Prints one JSON
line: the times, their median, the build (compile or jit) seconds and the
largest deviation from NumPy.
"""
from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

from _programs import PROGRAMS  # noqa: E402

ENGINES = ("numpy", "graphc-generated", "graphc-numpy", "jax")


def _numpy(program, arrays):
    return lambda: program.outputs(np, arrays), {}


def _graphc(kernels):
    def prepare(program, arrays):
        import graphc
        import graphc.ndarray as N

        variables = {name: N.variable(name, a.shape, a.dtype) for name, a in arrays.items()}
        outputs = list(program.outputs(N, variables))
        exe = graphc.compile(list(variables.values()), outputs, kernels=kernels)
        stats = exe.stats()
        info = {k: stats[k] for k in ("nodes", "nodes_unoptimised", "planned_bytes")
                if k in stats}
        return (lambda: tuple(exe.run(**arrays))), info
    return prepare


def _jax(program, arrays):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    names = list(arrays)
    on_device = [jax.device_put(arrays[n]) for n in names]
    jitted = jax.jit(lambda *values: program.outputs(jnp, dict(zip(names, values))))

    def step():
        out = jitted(*on_device)
        jax.block_until_ready(out)
        return tuple(np.asarray(o) for o in out)
    return step, {"jax": jax.__version__}


PREPARE = {"numpy": _numpy, "graphc-generated": _graphc("generated"),
           "graphc-numpy": _graphc("numpy"), "jax": _jax}


def _busy_cpu_seconds():
    """CPU seconds every process has spent so far (Linux ``/proc/stat``), or None."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + ticks[4]           # idle and iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


def timed_with_contention(step, repeats: int) -> tuple[list, float | None]:
    """The wall times of ``repeats`` calls of ``step()``, and how many cores other
    processes kept busy meanwhile on average (None where ``/proc/stat`` is
    unreadable): a figure well above 0 means the timings shared the machine.

    Example: ``times, others = timed_with_contention(lambda: sum(range(10**5)), 20)``
    """
    before_all, before_own = _busy_cpu_seconds(), time.process_time()
    started = time.perf_counter()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    wall = time.perf_counter() - started
    after_all = _busy_cpu_seconds()
    if before_all is None or after_all is None or wall <= 0:
        return times, None
    others = (after_all - before_all) - (time.process_time() - before_own)
    return times, max(0.0, others / wall)


def contention_note(child_results) -> tuple[float | None, str]:
    """The most cores other processes kept busy during any of ``child_results``'
    timings, and a sentence for a results table saying what that means.

    Example: ``worst, note = contention_note([{"other_processes_cores": 0.02}])``
    """
    figures = [r.get("other_processes_cores") for r in child_results]
    worst = max((f for f in figures if f is not None), default=None)
    if worst is None:
        return None, ""
    verdict = (" (a quiet machine: below 0.1)." if worst < 0.1
               else ": the machine was shared, so the times are noisy.")
    return worst, (f"\n\nOther processes kept up to {worst:.2f} of {os.cpu_count()} cores "
                   f"busy during a timing{verdict}")


def deviation(program, got, want) -> float:
    """The largest ``|got - want|`` over all outputs; raises when any output is
    outside ``program``'s tolerance or has the wrong shape or dtype."""
    if len(got) != len(want):
        raise AssertionError(f"{program.name}: {len(got)} outputs, NumPy gives {len(want)}")
    worst = 0.0
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.shape != w.shape or g.dtype != w.dtype:
            raise AssertionError(f"{program.name} output {i}: {g.dtype}{g.shape}, NumPy gives "
                                 f"{w.dtype}{w.shape}")
        if not np.allclose(g, w, rtol=program.rtol, atol=program.atol):
            bad = np.abs(g.astype(np.float64) - w) - program.rtol * np.abs(w)
            raise AssertionError(f"{program.name} output {i} differs from NumPy's beyond "
                                 f"rtol={program.rtol}, atol={program.atol}: worst excess "
                                 f"{float(bad.max()):.3g} at {np.unravel_index(bad.argmax(), bad.shape)}")
        worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w))) if w.size else 0.0)
    return worst


def measure(name: str, engine: str, repeats: int, seed: int, scale: float = 1.0) -> dict:
    program = PROGRAMS[name]
    arrays = program.make_inputs(seed, scale)
    reference = program.outputs(np, arrays)
    started = time.perf_counter()
    step, info = PREPARE[engine](program, arrays)
    first = step()                       # jit / kernel compilation happens here for JAX
    build = time.perf_counter() - started
    error = deviation(program, first, reference)
    step()                               # warm-up: first touch of buffers
    times, others = timed_with_contention(step, repeats)
    return {"program": name, "engine": engine, "times": times,
            "median": float(np.median(times)), "build_seconds": build,
            "other_processes_cores": others,
            "max_abs_error": error, "scale": scale, **info}


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(measure(args[0], args[1], int(args[2]), int(args[3]),
                             float(args[4]) if len(args) > 4 else 1.0)))
