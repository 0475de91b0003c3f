"""Process memory as the OS sees it (Linux ``/proc``): resident set size now, and
the peak since the last reset.

``reset_peak()`` writes ``5`` to ``/proc/self/clear_refs``, which sets the
kernel's high-water mark (``VmHWM``) back to the current RSS, so
``peak_rss() - baseline`` measures only what happened after the reset. Where
that file cannot be written, the lifetime peak is used instead and
``peak_is_lifetime()`` says so.

``engine_ready(engine)`` loads an engine's libraries before the baseline, so
that every engine's peak counts what running the model needs, not the fixed
cost of its libraries: ``import torch`` for PyTorch; for graphc, importing it
and, when its kernels are the generated ones, initialising them (importing
Numba and llvmlite, the threading layer, Numba's runtime: ~90 MiB of RSS, most
of it shared library pages, paid once per process whatever the graph). It
returns what that added, which the benchmarks report beside the peaks.
"""
from __future__ import annotations

import resource

_STATUS = "/proc/self/status"
_reset_worked = False


def _status_kib(field: str) -> int:
    with open(_STATUS) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} missing from {_STATUS}")


def rss() -> int:
    """Resident set size now, in bytes."""
    return _status_kib("VmRSS") * 1024


def reset_peak() -> bool:
    """Reset the peak RSS to the current RSS; False where the OS does not allow it."""
    global _reset_worked
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        _reset_worked = True
    except OSError:
        _reset_worked = False
    return _reset_worked


def peak_rss() -> int:
    """Peak resident set size since the last :func:`reset_peak`, in bytes."""
    try:
        return _status_kib("VmHWM") * 1024
    except (OSError, RuntimeError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def peak_is_lifetime() -> bool:
    return not _reset_worked


def engine_ready(engine: str) -> int:
    """Import (and initialise) ``engine``'s libraries: ``"graphc"`` (with the kernel
    library its compile will use), ``"torch"`` or ``"onnxruntime"``. Returns the RSS
    bytes this added. Example: ``fixed = engine_ready("graphc"); base = rss()``"""
    before = rss()
    if engine == "graphc":
        import graphc  # noqa: F401
        from graphc.engine.numba_kernels import initialise
        from graphc.engine.strategy import kernel_choice
        if kernel_choice(None) == "generated":
            initialise()
    elif engine in ("torch", "onnxruntime"):
        __import__(engine)
    else:
        raise ValueError(f"engine_ready: unknown engine {engine!r}")
    return rss() - before
