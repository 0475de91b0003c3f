"""Data-parallel training across processes, as SINGA does it: collective operations
are graph nodes (``all_reduce``, ``broadcast``, ``all_gather``), gradients are
packed into fused all-reduces (:func:`fused_all_reduce`), and the dependency engine
runs each as soon as its inputs exist, so communication overlaps the backward pass.

Transports: :class:`MPI` (``mpi4py``, host arrays; ``pip install -e
'.[distributed]'``), :class:`NCCL` (CuPy, GPU arrays) and :class:`Local` (one
process). The training entry points take a communicator::

    comm = graphc.distributed.MPI()
    trainer = compile_training(model, SGD(0.1), (32, 1, 28, 28), communicator=comm)
    for xb, yb in batches(x, y, 32, seed=epoch, communicator=comm):
        trainer.step(xb, yb)

launched with ``mpiexec -n 2 python train.py``. See docs/distributed.md.
"""
from ..type.errors import DistributedError
from .collectives import (DEFAULT_BUCKET_BYTES, all_gather, all_reduce, broadcast, buckets,
                          fused_all_reduce, shard)
from .communicator import DEFAULT_TIMEOUT, Communicator, Local
from .mpi import MPI
from .nccl import NCCL

__all__ = ["Communicator", "Local", "MPI", "NCCL", "DistributedError", "all_reduce",
           "broadcast", "all_gather", "fused_all_reduce", "buckets", "shard",
           "DEFAULT_BUCKET_BYTES", "DEFAULT_TIMEOUT"]
