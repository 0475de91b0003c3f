"""Data-parallel training (graphc.distributed): the collective kinds in one process
(shapes, dtypes, gradients, buckets, sharding, the graph agreement), and on 2 MPI
processes launched by mpiexec (tests/distributed_worker.py): 2 ranks at batch B/2
give the weights of 1 process at batch B, every collective's values, a mismatched
graph reported, a dead, hung or late rank reported within the timeout."""
import hashlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.distributed import (Communicator, DistributedError, Local, all_gather, all_reduce,
                                broadcast, buckets, fused_all_reduce, shard)
from graphc.neural import batches
from gradcheck import check_gradient

WORKER = Path(__file__).with_name("distributed_worker.py")


# -- one process ------------------------------------------------------------------------
def test_collectives_of_one_process_are_copies_in_graph_and_eager_mode():
    comm = Local()
    x = N.var("x", (2, 3))
    outs = [all_reduce(x, comm, "mean"), broadcast(x, comm), all_gather(x, comm)]
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    for got in graphc.compile([x], outs).run(x=value):
        assert_array_equal(got, value)
    assert_array_equal(all_reduce(value, comm, "max"), value)     # arrays: eager
    assert all_gather(x, comm).shape == (2, 3)


def test_collectives_check_their_operands():
    comm = Local()
    with pytest.raises(graphc.DTypeError, match="a mean of int64"):
        all_reduce(N.var("i", (3,), np.int64), comm, "mean")
    with pytest.raises(graphc.ShapeError, match="reduction must be one of"):
        all_reduce(N.var("x", (3,)), comm, "prod")
    with pytest.raises(graphc.ShapeError, match=r"root must be a rank in \[0, 1\)"):
        broadcast(N.var("x", (3,)), comm, root=1)
    with pytest.raises(graphc.ShapeError, match="a scalar has no axis 0"):
        all_gather(N.var("s", ()), comm)
    with pytest.raises(TypeError, match="communicator must be a graphc.distributed"):
        all_reduce(N.var("x", (3,)), object())
    with pytest.raises(DistributedError, match=r"result buffer has shape \(2,\)"):
        comm.all_reduce(np.zeros(3), np.zeros(2))


def test_gradients_of_collectives_match_finite_differences():
    comm = Local()
    check_gradient(lambda M, x: M.sin(all_reduce(x, comm, "mean")) * all_gather(x, comm)
                   + broadcast(x, comm), np.linspace(-1, 1, 6).reshape(2, 3))
    x = N.var("x", (3,))
    with pytest.raises(graphc.GraphError, match="all_reduce by 'max' has no gradient"):
        N.grad(N.sum(all_reduce(x, comm, "max")), x)


def test_collectives_are_never_folded_merged_or_skipped():
    """Every rank must take part in every collective of every run."""
    comm = Local()
    calls = []
    original = comm._all_reduce
    comm._all_reduce = lambda send, recv, reduction: (calls.append(1),
                                                     original(send, recv, reduction))
    w = N.var("w", (3,))
    const = all_reduce(N.ones(3, np.float32), comm)         # a constant operand
    g = graphc.compile([w], [all_reduce(w, comm) + const, all_reduce(w, comm)],
                       pinned=["w"])
    g.run(w=np.ones(3, np.float32))
    g.run()                                                  # w unchanged: still exchanged
    assert len(calls) == 2 * 3


def test_fused_buckets_keep_order_dtype_and_size():
    values = [N.var(f"v{i}", shape, dtype) for i, (shape, dtype) in enumerate(
        [((4,), np.float32), ((2, 2), np.float32), ((5,), np.float32), ((3,), np.float64),
         ((100,), np.float32)])]
    groups = buckets(values, 40)
    assert [[v.op["name"] for v in g] for g in groups] == [["v0", "v1"], ["v2"], ["v3"],
                                                           ["v4"]]
    comm = Local()
    reduced = fused_all_reduce(values, comm, bucket_bytes=40)
    feeds = {v.op["name"]: np.arange(np.prod(v.shape), dtype=v.dtype).reshape(v.shape)
             for v in values}
    for got, v in zip(graphc.compile(values, reduced).run(**feeds), values):
        assert_array_equal(got, feeds[v.op["name"]])
        assert got.dtype == v.dtype
    kinds = [n.op.kind for n in graphc.compile(values, reduced).graph.order]
    assert kinds.count("all_reduce") == 4                   # one per bucket
    with pytest.raises(ValueError, match="bucket_bytes must be a positive int"):
        fused_all_reduce(values, comm, bucket_bytes=0)


class _Ranks:
    def __init__(self, rank, size):
        self.rank, self.size = rank, size


def test_batches_shard_each_global_batch_by_rank():
    x, y = np.arange(20).reshape(10, 2), np.arange(10)
    whole = list(batches(x, y, 4, seed=5))
    parts = [list(batches(x, y, 2, seed=5, communicator=_Ranks(r, 2))) for r in range(2)]
    assert len(whole) == len(parts[0]) == len(parts[1]) == 2
    for (wx, wy), (ax, ay), (bx, by) in zip(whole, *parts):
        assert_array_equal(np.concatenate([ax, bx]), wx)
        assert_array_equal(np.concatenate([ay, by]), wy)
    assert_array_equal(shard(np.arange(7), _Ranks(1, 3)), [2, 3])
    with pytest.raises(ValueError, match="x has 10 rows but y has 9"):
        next(batches(x, y[:9], 2))


class _TwoRanks(Communicator):
    """Rank 0 of a group whose other rank built ``theirs``."""

    name, rank, size = "fake", 0, 2

    def __init__(self, theirs):
        self.theirs, self.calls = theirs, 0

    def _all_gather_bytes(self, data, what):
        """The digests first, then the whole texts."""
        self.calls += 1
        other = self.theirs.encode()
        return [data, hashlib.sha256(other).digest() if self.calls == 1 else other]


def test_agreement_names_the_first_difference():
    _TwoRanks("a\nb\nc").agree(["a", "b", "c"], "compile")          # the same: quiet
    with pytest.raises(DistributedError, match="line 1: rank 0 has 'b', rank 1 has 'x'"):
        _TwoRanks("a\nx\nc").agree(["a", "b", "c"], "compile")
    with pytest.raises(DistributedError, match="the graph ends after 2 lines"):
        _TwoRanks("a\nb").agree(["a", "b", "c"], "compile")


def test_stats_count_calls_and_bytes_and_arrays_broadcast_by_name():
    comm = Local()
    out = np.zeros(4, np.float32)
    comm.all_reduce(np.ones(4, np.float32), out)
    comm.all_gather(np.ones((2, 3)), np.zeros((2, 3)))
    assert (comm.stats["calls"], comm.stats["bytes"]) == (2, 16 + 48)
    assert comm.stats["seconds"] >= 0.0
    arrays = {"b": np.arange(3.0), "a": np.ones((2, 2), np.float32)}
    sent = comm.broadcast_arrays(arrays)
    assert list(sent) == ["b", "a"]
    for name in arrays:
        assert_array_equal(sent[name], arrays[name])
        assert sent[name] is not arrays[name]             # new arrays: the caller's untouched


def test_mpi_without_mpi4py_says_what_to_install(monkeypatch):
    from graphc.distributed import mpi
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    with pytest.raises(DistributedError, match=r"pip install -e '.\[distributed\]'"):
        mpi.MPI()


def test_eager_training_step_through_a_communicator():
    from graphc.neural import SGD, MnistCNN
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0, 255, (4, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, 4)
    results = []
    for communicator in (None, Local()):
        net = MnistCNN(image_size=8, filters=2, hidden=8, dropout=0.0)
        net.compile([x, y], is_train=True, use_graph=False, optimiser=SGD(0.1),
                    communicator=communicator)
        net.train_one_batch(x, y)
        results.append(net.params())
    for name in results[0]:
        assert_array_equal(results[0][name], results[1][name])
    assert E.grad(lambda a: E.sum(all_reduce(a, Local()) ** 2))(np.ones(2)).tolist() == [2, 2]


# -- two processes ---------------------------------------------------------------------
def _mpiexec():
    pytest.importorskip("mpi4py")
    found = shutil.which("mpiexec") or shutil.which("mpiexec", path=str(Path(sys.executable)
                                                                        .parent))
    if found is None:
        pytest.skip("no mpiexec (pip install -e '.[distributed]')")
    return found


def _launch(tmp_path, ranks, *args, cleanup=True, timeout=240):
    command = [_mpiexec()] + ([] if cleanup else ["-disable-auto-cleanup"]) + [
        "-n", str(ranks), sys.executable, str(WORKER), args[0], str(tmp_path), *args[1:]]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          cwd=WORKER.parent)
    return done, time.monotonic() - started


def _results(tmp_path, ranks):
    return [dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(ranks)]


@pytest.mark.parametrize("schedule", ["serial", "parallel"])
def test_two_ranks_at_half_the_batch_train_as_one_process(tmp_path, schedule):
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    for folder, ranks, batch in (("one", 1, 16), ("two", 2, 8)):
        done, _ = _launch(tmp_path / folder, ranks, "train", "4", str(batch), schedule)
        assert done.returncode == 0, done.stderr[-3000:]
    (one,), (first, second) = _results(tmp_path / "one", 1), _results(tmp_path / "two", 2)
    for name in one:
        assert_array_equal(first[name], second[name], err_msg=f"ranks differ on {name}")
        # the same sums in another order: float32 rounding only
        assert_allclose(first[name], one[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert len(one["losses"]) == 4


def test_two_ranks_through_the_model_api_in_graph_and_eager_mode(tmp_path):
    done, _ = _launch(tmp_path, 2, "model")
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = _results(tmp_path, 2)
    for name in first:
        assert_array_equal(first[name], second[name], err_msg=name)
        graph_name = name.replace("False:", "True:")
        assert_allclose(first[name], first[graph_name], rtol=1e-5, atol=1e-6)


def test_collectives_on_two_ranks(tmp_path):
    done, _ = _launch(tmp_path, 2, "collectives")
    assert done.returncode == 0, done.stderr[-3000:]
    values = [np.arange(3, dtype=np.float32) + 10 * r for r in range(2)]
    for result in _results(tmp_path, 2):
        assert_array_equal(result["sum"], values[0] + values[1])
        assert_array_equal(result["max"], values[1])
        assert_array_equal(result["broadcast"], values[1])
        assert_array_equal(result["gather"], np.concatenate(values))
        # loss = sum_r (r + 1) sum(mean^2): d/dx = sum_r (r + 1) 2 mean / 2
        assert_allclose(result["grad"], 3 * (values[0] + values[1]) / 2)


def test_ranks_that_built_different_graphs_are_told_at_compile(tmp_path):
    done, _ = _launch(tmp_path, 2, "mismatch")
    assert done.returncode != 0
    for rank in range(2):
        text = (tmp_path / f"rank{rank}.txt").read_text()
        assert "the ranks built different graphs" in text
        assert "var (3,) float32" in text and "var (4,) float32" in text


@pytest.mark.parametrize("scenario, cleanup", [("dead", False), ("hung", True),
                                               ("late", True)])
def test_a_rank_that_dies_hangs_or_never_joins_is_an_error_within_the_timeout(
        tmp_path, scenario, cleanup):
    done, elapsed = _launch(tmp_path, 2, scenario, cleanup=cleanup)
    assert done.returncode != 0
    # the subprocess's own timeout is the guard against a hang; no wall-clock assertion
    message = (tmp_path / "rank0.txt").read_text().split("\n", 1)[1]
    assert "waited 4 s for the other ranks" in message
    assert "died, hangs, or never joined" in message


def test_nccl_all_reduce_on_one_gpu():
    """NCCL needs a GPU (CuPy with NCCL): one rank, CuPy arrays in a graph compiled for
    the device. Skipped elsewhere."""
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no GPU")
    except cupy.cuda.runtime.CUDARuntimeError:
        pytest.skip("no GPU")
    pytest.importorskip("mpi4py")
    from graphc.distributed import NCCL
    comm = NCCL(timeout=30)
    x = N.var("x", (5,))
    g = graphc.compile([x], all_reduce(x * 2, comm, "mean"), device="cuda")
    assert_array_equal(g.run(x=np.arange(5, dtype=np.float32)), np.arange(5) * 2.0)
    with pytest.raises(DistributedError, match="NCCL moves GPU"):
        comm.all_reduce(np.zeros(3, np.float32), np.zeros(3, np.float32))


def test_a_graph_with_collectives_is_not_saved(tmp_path):
    x = N.var("x", (3,))
    g = graphc.compile([x], all_reduce(x, Local()))
    with pytest.raises(graphc.GraphError, match="holds its communicator"):
        g.save(tmp_path / "g.graphc")
