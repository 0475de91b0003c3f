"""Data-parallel training on MPI, runnable as an example and timed by
benchmarks/distributed.py:

    mpiexec -n 2 python3 benchmarks/train_distributed.py --model mnist --epochs 1

Each rank trains Owl's MNIST CNN (``--model mnist``, on Fashion-MNIST, installed
from Debian's package when missing and allowed, else synthetic data, announced) or
ResNet50 (``--model resnet50``, random 224x224 images: a timing run) on its share of
every global batch of ``--batch`` rows; ``compile_training(...,
communicator=graphc.distributed.MPI())`` averages the gradients in fused
all-reduces of ``--bucket-mib``. Rank 0 prints one JSON line: images a second,
seconds a step, seconds of communication a step, and (MNIST) the test accuracy.
With one process it runs without a communicator: the baseline.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))   # graphc, when it is not installed
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import graphc.neural as nn  # noqa: E402
from graphc.distributed import MPI  # noqa: E402


def _mnist(args, comm):
    from _data import data_directory
    where = data_directory(None)
    data = nn.load_or_synthetic(where or "/nonexistent-fashion-mnist", seed=args.seed)
    return nn.MnistCNN(), data.x_train, data.y_train, data


def _resnet50(args, comm):
    rng = np.random.default_rng(args.seed)
    rows = args.batch * (args.steps + args.warmup)
    return (nn.resnet50(classes=1000), rng.standard_normal((rows, 3, 224, 224), np.float32),
            rng.integers(0, 1000, rows), None)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("mnist", "resnet50"), default="mnist")
    parser.add_argument("--batch", type=int, default=100, help="global batch (all ranks)")
    parser.add_argument("--epochs", type=float, default=0.0, help="MNIST epochs (0: --steps)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--schedule", choices=("serial", "parallel"), default="parallel")
    parser.add_argument("--bucket-mib", type=float, default=4.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    comm = MPI(timeout=600)
    single = comm.size == 1
    if args.batch % comm.size:
        raise SystemExit(f"--batch {args.batch} does not split over {comm.size} ranks")
    local = args.batch // comm.size
    model, x, y, data = (_mnist if args.model == "mnist" else _resnet50)(args, comm)
    optimiser = nn.AdaGrad(0.005) if args.model == "mnist" else nn.SGD(0.01, momentum=0.9)
    started = time.perf_counter()
    trainer = nn.compile_training(model, optimiser, (local,) + x.shape[1:], seed=args.seed,
                                  communicator=None if single else comm,
                                  bucket_bytes=int(args.bucket_mib * 2 ** 20),
                                  schedule=args.schedule, plan="offsets")
    compile_seconds = time.perf_counter() - started
    steps = args.steps
    if args.model == "mnist" and args.epochs:
        steps = int(args.epochs * (len(x) // args.batch))
    times, losses, epoch = [], [], 0
    while len(times) < steps + args.warmup:
        for xb, yb in nn.batches(x, y, local, seed=args.seed + epoch,
                                 communicator=None if single else comm):
            if len(times) == args.warmup:
                comm_before = dict(comm.stats)
            begin = time.perf_counter()
            losses.append(trainer.step(xb, yb))
            times.append(time.perf_counter() - begin)
            if len(times) == steps + args.warmup:
                break
        epoch += 1
    timed = np.array(times[args.warmup:])
    comm_seconds = (comm.stats["seconds"] - comm_before["seconds"]) / len(timed)
    result = {"model": args.model, "ranks": comm.size, "global_batch": args.batch,
              "schedule": args.schedule, "bucket_mib": args.bucket_mib, "steps": len(timed),
              "compile_s": round(compile_seconds, 2),
              "step_s_median": float(np.median(timed)), "step_s_min": float(timed.min()),
              "step_s_max": float(timed.max()),
              "images_per_s": args.batch / float(np.median(timed)),
              "comm_s_per_step": comm_seconds,
              "comm_calls_per_step": (comm.stats["calls"] - comm_before["calls"]) / len(timed),
              "loss_first": losses[0], "loss_last": losses[-1]}
    if data is not None:
        predict = nn.compile_inference(model, trainer.params(), (100,) + x.shape[1:])
        result["test_accuracy"] = nn.evaluate_accuracy(predict, data.x_test, data.y_test)
        result["data"] = data.source
    if comm.rank == 0:
        print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
