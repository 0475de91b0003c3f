"""Train Owl's MNIST CNN with the SINGA-style model API and report its test
accuracy: ``model.compile(inputs, is_train, use_graph, sequential)`` once, then
``model.train_one_batch`` per batch and ``model(x)`` to predict.

``python3 benchmarks/_train_mnist.py EPOCHS [DATA_DIR] [SEED] [MODE]``: batch
100, AdaGrad (lr 0.005) as in Owl's example, on Fashion-MNIST (installed from
Debian's package when missing and allowed) or the IDX files of ``DATA_DIR``;
synthetic data, announced loudly, when neither can be had. ``MODE`` is
``graph`` (the default: one traced, compiled step), ``parallel`` (the same on
the parallel schedule) or ``eager`` (no graph). A progress bar goes to stderr;
the last stdout line is a JSON object.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))   # graphc, when it is not installed
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import graphc.neural as nn  # noqa: E402
from _data import DEBIAN_DIR, data_directory  # noqa: E402

BATCH = 100


def _bar(total):
    try:
        from tqdm import tqdm
        return tqdm(total=total, desc="MNIST CNN training", unit="step", file=sys.stderr)
    except ImportError:
        return None


def main(epochs: float, directory: str, seed: int, mode: str = "graph") -> dict:
    where = data_directory(directory or None)
    data = nn.load_or_synthetic(where, seed=seed) if where else nn.load_or_synthetic(
        "/nonexistent-fashion-mnist", seed=seed)
    model = nn.MnistCNN()
    example = [data.x_train[:BATCH], data.y_train[:BATCH]]
    model.compile(example, is_train=True, use_graph=mode != "eager",
                  sequential=mode != "parallel", optimiser=nn.AdaGrad(0.005), seed=seed,
                  plan="offsets")
    steps_per_epoch = len(data.x_train) // BATCH
    total = int(math.ceil(epochs * steps_per_epoch))
    bar = _bar(total)
    done, losses, started = 0, [], time.perf_counter()
    epoch = 0
    while done < total:
        for xb, yb in nn.batches(data.x_train, data.y_train, BATCH, seed=seed + epoch):
            losses.append(model.train_one_batch(xb, yb))
            done += 1
            if bar is not None:
                bar.update(1)
                if done % 50 == 0:
                    bar.set_postfix_str(f"loss {np.mean(losses[-50:]):.3f}")
            if done >= total:
                break
        epoch += 1
    seconds = time.perf_counter() - started
    if bar is not None:
        bar.close()
    model.eval()
    accuracy = nn.evaluate_accuracy(model, data.x_test, data.y_test, batch=BATCH)
    return {"mode": mode, "data": ("Fashion-MNIST" if where == DEBIAN_DIR else
                     "SYNTHETIC data" if data.source == "synthetic" else data.source),
            "source": data.source, "epochs": epochs, "steps": done,
            "train_examples": len(data.x_train), "test_examples": len(data.x_test),
            "test_accuracy": accuracy, "seconds": seconds,
            "seconds_per_step": seconds / max(done, 1),
            "first_loss": float(np.mean(losses[:20])), "last_loss": float(np.mean(losses[-50:]))}


if __name__ == "__main__":
    epochs = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    directory = sys.argv[2] if len(sys.argv) > 2 else ""
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    mode = sys.argv[4] if len(sys.argv) > 4 else "graph"
    if mode not in ("graph", "parallel", "eager"):
        sys.exit(f"_train_mnist.py: MODE must be graph, parallel or eager, not {mode!r}")
    print(json.dumps(main(epochs, directory, seed, mode)))
