"""What the benchmark scripts share: fresh child processes, a progress bar, JSON results."""
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def machine(**extra) -> dict:
    """The machine a result was measured on (platform, cores, Python), plus ``extra``."""
    return {"platform": platform.platform(), "cpus": os.cpu_count(),
            "python": platform.python_version(), **extra}


def write_markdown(text: str, path: str) -> None:
    """Write a table (markdown ``text``) to ``path``, creating its folder."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def write_json(result: dict, path: str) -> None:
    """Write ``result`` to ``path`` (creating its folder) and say where."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {os.path.relpath(path)}")


#: children share the allocator settings: large frees go straight back to the OS in
#: both modes, so a peak is not hidden (or inflated) by glibc's adaptive thresholds
CHILD_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}


def progress(total, desc):
    try:
        from tqdm import tqdm
        return tqdm(total=total, desc=desc, unit="run", file=sys.stderr)
    except ImportError:  # the table still comes out; only the bar is missing
        class _Plain:
            def update(self, n=1): pass
            def set_postfix_str(self, s): print(f"  {desc}: {s}", file=sys.stderr)
            def close(self): pass
        return _Plain()


def run_child(script, *args, timeout=3600, passthrough=False, env=None) -> dict:
    """Run ``script`` in a fresh Python (``env`` adds variables); its last stdout
    line is a JSON object."""
    env = dict(os.environ, **CHILD_ENV, **(env or {}))
    proc = subprocess.run([sys.executable, os.path.join(HERE, script), *map(str, args)],
                          stdout=subprocess.PIPE, stderr=None if passthrough else subprocess.PIPE,
                          text=True, env=env, timeout=timeout, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{script} {' '.join(map(str, args))} failed "
                           f"(exit {proc.returncode}):\n{proc.stderr or ''}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median_time(fn, repeats: int) -> float:
    """The median wall time of ``repeats`` calls of ``fn()``, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def default_repeats(quick: bool) -> dict:
    """Timed steps per process for each model case (``_cases.CASES``): fewer for the
    slow training step, and fewer still with ``--quick``."""
    return {"inceptionv3_infer": 5 if quick else 20, "resnet50_infer": 5 if quick else 20,
            "resnet50_train": 2 if quick else 5, "mnist_train": 5 if quick else 20,
            "maskrcnn_infer": 2 if quick else 5}
