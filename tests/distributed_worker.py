"""One rank of the multi-process tests of tests/test_distributed.py, launched by
``mpiexec -n P python tests/distributed_worker.py SCENARIO OUT_DIR``; every rank
writes what it saw to ``OUT_DIR/rank<r>.npz`` or ``OUT_DIR/rank<r>.txt``.

Scenarios:
- ``train <steps> <batch> <schedule>``: the small CNN trained with
  ``compile_training`` on ``batch * P`` rows a step (``batch`` a rank); the weights
  and losses after ``steps`` steps (P = 1 runs without a communicator).
- ``model``: the same through ``Model.compile`` (graph) and eagerly.
- ``collectives``: all_reduce, broadcast and all_gather nodes and a gradient.
- ``mismatch``: rank 1 builds a graph of another shape; the compile error.
- ``dead``/``hung``: rank 1 dies or hangs after joining; rank 0's error at its first
  collective, and how long it took.
- ``late``: rank 1 starts after rank 0's timeout; rank 0's error.
"""
import os
import sys
import time

import numpy as np

TIMEOUT = 4.0


def _data(rows=64):
    rng = np.random.default_rng(0)
    return (rng.uniform(0, 255, (rows, 1, 8, 8)).astype(np.float32),
            rng.integers(0, 10, rows))


def _model():
    from graphc.neural import MnistCNN
    return MnistCNN(image_size=8, filters=4, hidden=16, dropout=0.0)


def train(comm, out, steps, batch, schedule):
    from graphc.neural import SGD, batches, compile_training
    x, y = _data()
    trainer = compile_training(_model(), SGD(0.05, momentum=0.9), (batch, 1, 8, 8), seed=3,
                               communicator=comm, schedule=schedule, bucket_bytes=2048)
    losses = []
    for xb, yb in batches(x, y, batch, seed=1, communicator=comm):
        losses.append(trainer.step(xb, yb))
        if len(losses) == steps:
            break
    return dict(trainer.params(), losses=np.array(losses))


def model(comm, out):
    from graphc.neural import SGD, batches
    x, y = _data()
    results = {}
    for use_graph in (True, False):
        net = _model()
        first = next(batches(x, y, 8, communicator=comm))
        net.compile(list(first), is_train=True, use_graph=use_graph, optimiser=SGD(0.05),
                    seed=3, communicator=comm)
        for step, (xb, yb) in enumerate(batches(x, y, 8, seed=2, communicator=comm)):
            net.train_one_batch(xb, yb)
            if step == 2:
                break
        results.update({f"{use_graph}:{k}": v for k, v in net.params().items()})
    return results


def collectives(comm, out):
    import graphc
    import graphc.ndarray as N
    from graphc.distributed import all_gather, all_reduce, broadcast
    r = comm.rank
    x = N.var("x", (3,))
    g = graphc.compile([x], [all_reduce(x, comm, "sum"), all_reduce(x, comm, "max"),
                             broadcast(x, comm, root=comm.size - 1), all_gather(x, comm),
                             N.grad(N.sum(all_reduce(x, comm, "mean") ** 2) * (r + 1), x)],
                       schedule="parallel", workers=2)
    values = g.run(x=np.arange(3, dtype=np.float32) + 10 * r)
    return {name: v for name, v in zip(("sum", "max", "broadcast", "gather", "grad"), values)}


def mismatch(comm, out):
    import graphc
    import graphc.ndarray as N
    from graphc.distributed import all_reduce
    x = N.var("x", (3 + comm.rank,))
    graphc.compile([x], all_reduce(N.exp(x), comm))


def dead(comm, out):
    """Rank 1 dies (launched with mpiexec -disable-auto-cleanup, so nothing kills
    rank 0 for it) or hangs (``hung``) after joining; rank 0 trains on."""
    if comm.rank == 1:
        if sys.argv[1] == "hung":
            time.sleep(3 * TIMEOUT)
        os._exit(1)
    import graphc
    import graphc.ndarray as N
    from graphc.distributed import all_reduce
    x = N.var("x", (3,))
    graphc.compile([x], all_reduce(x, comm)).run(x=np.ones(3, np.float32))


hung = dead


def main():
    scenario, out = sys.argv[1], sys.argv[2]
    from graphc.distributed import MPI, DistributedError
    from mpi4py import MPI as mpi
    size, rank = mpi.COMM_WORLD.Get_size(), mpi.COMM_WORLD.Get_rank()
    started = time.monotonic()
    try:
        if scenario == "late" and rank == 1:
            time.sleep(3 * TIMEOUT)
        comm = MPI(timeout=TIMEOUT)
        if scenario == "train":
            steps, batch, schedule = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
            result = train(comm if size > 1 else None, out, steps, batch, schedule)
        else:
            result = globals()[scenario](comm, out)
    except DistributedError as exc:
        with open(os.path.join(out, f"rank{rank}.txt"), "w") as f:
            f.write(f"{time.monotonic() - started:.2f}\n{exc}")
        sys.exit(3)
    if result is not None:
        np.savez(os.path.join(out, f"rank{rank}.npz"), **result)


if __name__ == "__main__":
    main()
