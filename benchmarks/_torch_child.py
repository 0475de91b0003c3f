"""One measurement of benchmarks/torch_peers.py, in a fresh process.

``python3 benchmarks/_torch_child.py CASE ENGINE REPEATS SEED THREADS``, CASE one
of benchmarks/_cases.py's (``resnet50_infer``, ``inceptionv3_infer``,
``resnet50_train``, ``mnist_train``):

- ``graphc``: the case's weights and batch, the baseline RSS, then the compiled
  graph exactly as benchmarks/models.py's graph mode builds it
  (``_cases.Case.build``);
- ``torch``: the same architecture in plain PyTorch (``_torch_models``) holding
  the same weights, ``torch.set_num_threads(THREADS)``, the same batch, the
  baseline RSS, then an eager step: inference in ``eval()`` mode under
  ``torch.inference_mode()``; training ``zero_grad``, forward in ``train()``
  mode (batch norm's batch statistics and running-statistic updates, dropout),
  ``cross_entropy``, ``backward`` and the optimiser's ``step`` (SGD momentum 0.9
  at 0.01, or Adagrad at 0.005 with eps 1e-8, as graphc's cases);
- ``check``: builds both and compares their first results (inference logits;
  a training step's loss where the model has no dropout, else the eval-mode
  logits), printing the largest difference; exits non-zero when they disagree.

Timing: one warm-up step, then REPEATS timed steps. Peak RSS is measured from
the baseline (weights and batch in memory), so it counts what building and
running the step needs: activations, gradients, optimiser state, workspaces.
Each engine's libraries are loaded before the baseline (``_memory.engine_ready``):
``import torch`` for PyTorch; for graphc, its kernel library initialised (Numba,
llvmlite, the threading layer and Numba's runtime), a fixed cost paid once per
process whatever the model, reported apart as ``engine_rss_bytes``.
Prints one JSON line.
"""
from __future__ import annotations

import gc
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import _memory  # noqa: E402
from _cases import CASES  # noqa: E402
from _numpy_programs_child import timed_with_contention  # noqa: E402

#: what graphc's cases train with, in PyTorch's terms
TORCH_OPTIMISERS = {
    "sgd_momentum": lambda params: __import__("torch").optim.SGD(params, lr=0.01, momentum=0.9),
    "adagrad": lambda params: __import__("torch").optim.Adagrad(params, lr=0.005, eps=1e-8),
}


def torch_prepare(case_name: str, seed: int, threads: int) -> dict:
    """The PyTorch model holding graphc's initial weights for ``seed`` (batch norm
    unfolded: PyTorch eager has no folding pass), and the batch ``Case.prepare``
    draws for the same seed."""
    import torch

    import _torch_models

    torch.set_num_threads(threads)
    case = CASES[case_name]
    graphc_model = case.make_model()
    model = _torch_models.MODELS[case.model]()
    params = graphc_model.init(seed)
    _torch_models.load_graphc_params(model, params)
    del params
    rng = np.random.default_rng(seed)
    channels = graphc_model.input_shape[0]
    x = rng.random((case.batch, channels, case.size, case.size), dtype=np.float32)
    x *= 255.0 if case.model == "mnist_cnn" else 1.0
    work = {"model": model, "x": torch.from_numpy(x), "graphc_model": graphc_model}
    if case.train:
        labels = rng.integers(0, graphc_model.classes, case.batch).astype(np.int64)
        work["labels"] = torch.from_numpy(labels)
    return work


def torch_step(case_name: str, work: dict):
    """A callable doing one eager PyTorch step; it returns the logits (inference)
    or the loss before the update (training)."""
    import torch
    from torch.nn import functional as F

    case, model, x = CASES[case_name], work["model"], work["x"]
    if not case.train:
        model.eval()

        def infer():
            with torch.inference_mode():
                return model(x)
        return infer
    model.train()
    optimiser = TORCH_OPTIMISERS[case.optimiser](model.parameters())
    labels = work["labels"]

    def train():
        optimiser.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), labels)
        loss.backward()
        optimiser.step()
        return loss.detach()
    return train


def measure(case_name: str, engine: str, repeats: int, seed: int, threads: int) -> dict:
    case = CASES[case_name]
    fixed = _memory.engine_ready(engine)     # the libraries' fixed cost: not the model's
    if engine == "torch":
        work = torch_prepare(case_name, seed, threads)
    else:
        work = case.prepare(seed)
    gc.collect()
    base = _memory.rss()
    _memory.reset_peak()
    started = time.perf_counter()
    if engine == "torch":
        step, exe = torch_step(case_name, work), None
    else:
        step, exe = case.build(work, "graph")
    build = time.perf_counter() - started
    t = time.perf_counter()
    step()                               # warm-up: first touch, PyTorch's lazy state
    first = time.perf_counter() - t
    times, others = timed_with_contention(step, repeats)
    result = {"case": case_name, "engine": engine, "times": times,
              "median": float(np.median(times)), "build_seconds": build,
              "other_processes_cores": others,
              "first_step_seconds": first, "threads": threads,
              "peak_rss_bytes": _memory.peak_rss() - base, "baseline_rss_bytes": base,
              "engine_rss_bytes": fixed, "peak_is_lifetime": _memory.peak_is_lifetime()}
    if engine == "torch":
        import torch
        result["torch"] = torch.__version__
    if exe is not None:
        s = exe.stats()
        result.update({k: s[k] for k in ("nodes", "planned_bytes", "lower_bound_bytes")})
    return result


def check(case_name: str, seed: int, threads: int) -> dict:
    """graphc's and PyTorch's first results for the same weights and batch."""
    import torch

    import graphc.eager as E

    case = CASES[case_name]
    torch_work = torch_prepare(case_name, seed, threads)
    graphc_model = torch_work["graphc_model"]
    dropout = case.train and getattr(graphc_model, "dropout", 0)
    if dropout:  # a random mask: compare the architectures in eval mode instead
        what = "eval-mode logits (the training step draws a dropout mask)"
        want = np.asarray(graphc_model.forward(E, graphc_model.init(seed),
                                               torch_work["x"].numpy(), training=False))
        torch_work["model"].eval()
        with torch.inference_mode():
            got = torch_work["model"](torch_work["x"]).numpy()
    else:
        what = "training-step loss" if case.train else "inference logits"
        work = case.prepare(seed)
        step, _ = case.build(work, "graph")
        out = step()
        want = np.asarray(out[0] if isinstance(out, (list, tuple)) else out)
        got = torch_step(case_name, torch_work)().numpy()
    if got.shape != want.shape:
        raise SystemExit(f"{case_name}: graphc gives {what} of shape {want.shape}, PyTorch "
                         f"{got.shape}")
    tolerance = 1e-4 * max(1.0, float(np.abs(want).max()))
    difference = float(np.abs(got - want).max())
    result = {"case": case_name, "engine": "check", "compared": what,
              "max_abs_difference": difference, "tolerance": tolerance,
              "agree": difference <= tolerance}
    if not result["agree"]:
        print(json.dumps(result))
        raise SystemExit(f"{case_name}: graphc and PyTorch disagree on the {what}: largest "
                         f"difference {difference:.3g} > {tolerance:.3g}")
    return result


if __name__ == "__main__":
    name, engine = sys.argv[1], sys.argv[2]
    repeats, seed, threads = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    if engine == "check":
        print(json.dumps(check(name, seed, threads)))
    else:
        print(json.dumps(measure(name, engine, repeats, seed, threads)))
