"""Checkpoints: variable values (optimiser state included) and random generator
states saved beside a graph or in its file, read back only as plain arrays,
checked against the graph before anything is assigned, and written atomically.
Training resumed from a checkpoint computes bit for bit what uninterrupted
training computes, for a hand-built graph, a ``Trainer`` and a ``Model`` (eager
or traced), with dropout drawing from the saved generators."""
from __future__ import annotations

import errno
import io
import json
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import zipfile

import numpy as np
import pytest
from untrusted import Payload

import graphc
import graphc.checkpoint as checkpoint
import graphc.eager as E
import graphc.ndarray as N
import graphc.neural as nn

F32 = np.float32
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- a small training step with dropout and momentum --------------------------------------
def build_step(seed=0, schedule="serial"):
    """A regression step: dropout (random draws every run), SGD with momentum."""
    x, y = N.var("x", (8, 6)), N.var("y", (8, 4))
    w, v = N.var("w", (6, 4)), N.var("v", (6, 4))
    loss = N.mean(N.square(N.dropout(x @ w, 0.5) - y))
    (gw,) = N.grad(loss, [w])
    v_new = 0.9 * v + gw
    return graphc.compile([x, y, w, v], loss, updates={w: w - 0.1 * v_new, v: v_new},
                          seed=seed, schedule=schedule)


def batches(count, seed=1):
    rng = np.random.default_rng(seed)
    return [dict(x=rng.standard_normal((8, 6)).astype(F32),
                 y=rng.standard_normal((8, 4)).astype(F32)) for _ in range(count)]


def started(seed=0, schedule="serial"):
    g = build_step(seed, schedule)
    g.assign(w=np.random.default_rng(2).standard_normal((6, 4)).astype(F32),
             v=np.zeros((6, 4), F32))
    return g


def state_of(g):
    return {n: g.value(n) for n in ("w", "v")}


def assert_same_arrays(a: dict, b: dict):
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        np.testing.assert_array_equal(a[name], b[name], err_msg=name, strict=True)


def files_in(folder):
    return sorted(os.listdir(folder))


# -- resuming: bit for bit ---------------------------------------------------------------
@pytest.mark.parametrize("schedule", ["serial", "parallel"])
def test_values_resume_bit_for_bit(tmp_path, schedule):
    data = batches(7)
    path = tmp_path / "run.npz"
    g = started(schedule=schedule)
    for feed in data[:3]:
        g.run(**feed)
    g.save_values(path)
    losses_a = [float(g.run(**feed)) for feed in data[3:]]
    # a fresh graph, seeded differently: the checkpoint brings the generator along
    h = build_step(seed=99, schedule=schedule)
    h.load_values(path)
    losses_b = [float(h.run(**feed)) for feed in data[3:]]
    assert losses_a == losses_b
    assert_same_arrays(state_of(g), state_of(h))
    # the draws matter: the same values with the generator restarted train differently
    k = build_step(seed=99, schedule=schedule)
    k.load_values(path)
    k.seed(99)
    assert [float(k.run(**feed)) for feed in data[3:]] != losses_a


def test_values_hold_every_variable_and_fed_inputs(tmp_path):
    g = started()
    g.run(**batches(1)[0])
    g.save_values(tmp_path / "a.npz")
    saved = graphc.read_checkpoint(tmp_path / "a.npz")
    assert sorted(saved.values) == ["v", "w", "x", "y"] and saved.unset == ()
    assert_same_arrays({n: saved.values[n] for n in ("w", "v")}, state_of(g))
    assert set(saved.random) == {"graph"}
    # before any run the data inputs have no value: recorded as unset, and a
    # strict load into a fresh graph leaves them without one
    fresh = started()
    fresh.save_values(tmp_path / "b.npz")
    assert sorted(graphc.read_checkpoint(tmp_path / "b.npz").unset) == ["x", "y"]
    h = build_step()
    h.load_values(tmp_path / "b.npz")
    assert_same_arrays(state_of(h), state_of(fresh))
    with pytest.raises(graphc.InputError, match="no value yet"):
        h.value("x")


def test_graph_file_with_values_loads_with_graphc_load(tmp_path):
    data = batches(5)
    g = started()
    for feed in data[:2]:
        g.run(**feed)
    path = tmp_path / "model.npz"
    g.save(path, values=True)
    h = graphc.load(path)
    assert_same_arrays(state_of(h), state_of(g))
    assert [float(g.run(**f)) for f in data[2:]] == [float(h.run(**f)) for f in data[2:]]
    # without values the file is the graph alone, as before
    g.save(path)
    assert not checkpoint.has_values(path)
    with pytest.raises(graphc.InputError, match="missing value"):
        graphc.load(path).run(**data[0])


def small_model():
    return nn.MnistCNN(image_size=8, filters=4, hidden=16, dropout=0.5)


def image_batches(count, seed=3):
    rng = np.random.default_rng(seed)
    return [((rng.random((4, 1, 8, 8)) * 255).astype(F32), rng.integers(0, 10, 4))
            for _ in range(count)]


@pytest.mark.parametrize("schedule", ["serial", "parallel"])
def test_trainer_resumes_bit_for_bit(tmp_path, schedule):
    data = image_batches(6)
    path = tmp_path / "trainer.npz"
    trainer = nn.compile_training(small_model(), nn.Adam(1e-2), (4, 1, 8, 8), seed=0,
                                  schedule=schedule)
    for xb, yb in data[:3]:
        trainer.step(xb, yb)
    trainer.save_checkpoint(path)
    losses_a = [trainer.step(xb, yb) for xb, yb in data[3:]]
    resumed = nn.compile_training(small_model(), nn.Adam(1e-2), (4, 1, 8, 8), seed=7,
                                  schedule=schedule)
    resumed.load_checkpoint(path)
    assert resumed.steps == 3
    losses_b = [resumed.step(xb, yb) for xb, yb in data[3:]]
    assert losses_a == losses_b
    assert_same_arrays(trainer.params(), resumed.params())
    assert_same_arrays(trainer.optimiser_state(), resumed.optimiser_state())
    assert resumed.steps == trainer.steps == 6
    # the last batch is data, not state: it is not in a trainer's checkpoint
    assert {"x", "labels"}.isdisjoint(graphc.read_checkpoint(path).values)


@pytest.mark.parametrize("use_graph", [True, False])
def test_model_resumes_bit_for_bit(tmp_path, use_graph):
    data = image_batches(6)
    path = tmp_path / "model.npz"

    def compiled(seed=0):
        model = small_model()
        model.compile(list(data[0]), is_train=True, use_graph=use_graph,
                      optimiser=nn.Adam(1e-2), seed=seed)
        return model

    model = compiled()
    for xb, yb in data[:3]:
        model.train_one_batch(xb, yb)
    model.save_checkpoint(path)
    losses_a = [model.train_one_batch(xb, yb) for xb, yb in data[3:]]
    E.random.seed(123)      # whatever ran in between, the generators come back
    resumed = compiled(seed=0)
    resumed.load_checkpoint(path)
    assert resumed.steps == 3
    assert [resumed.train_one_batch(xb, yb) for xb, yb in data[3:]] == losses_a
    assert_same_arrays(model.params(), resumed.params())
    assert_same_arrays(model.optimiser_state(), resumed.optimiser_state())
    # the draws matter: restarting the generator after loading changes training
    again = compiled(seed=0)
    again.load_checkpoint(path)
    if use_graph:
        again.graph(*data[0]).seed(0)
    else:
        E.random.seed(0)
    assert [again.train_one_batch(xb, yb) for xb, yb in data[3:]] != losses_a


def test_model_checkpoint_of_a_shape_not_compiled_yet(tmp_path):
    """A generator saved for a batch shape the loading model has not compiled is
    given to that shape's graph when it is first trained on."""
    rng = np.random.default_rng(0)
    small = [((rng.random((2, 1, 8, 8)) * 255).astype(F32), rng.integers(0, 10, 2))
             for _ in range(4)]
    data = image_batches(4)
    model = small_model()
    model.compile(list(data[0]), optimiser=nn.SGD(0.1, momentum=0.9), seed=0)
    model.train_one_batch(*data[0])
    model.train_one_batch(*small[0])
    model.save_checkpoint(tmp_path / "m.npz")
    expected = [model.train_one_batch(*b) for b in small[1:]]
    resumed = small_model()
    resumed.compile(list(data[0]), optimiser=nn.SGD(0.1, momentum=0.9), seed=0)
    resumed.load_checkpoint(tmp_path / "m.npz")
    assert [resumed.train_one_batch(*b) for b in small[1:]] == expected


# -- atomic writes -----------------------------------------------------------------------
def npy_bytes(array, allow_pickle=False):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


def failing_writer(monkeypatch, fail_at, error):
    """Make the writer die in the middle of member ``fail_at``: half of its bytes
    reach the file, then ``error`` is raised (a full disk, an interrupt)."""
    real = checkpoint._write_array

    def write(archive, key, array):
        if key != fail_at:
            return real(archive, key, array)
        data = npy_bytes(array)
        with archive.open(key + ".npy", "w", force_zip64=True) as member:
            member.write(data[:len(data) // 2])
            raise error

    monkeypatch.setattr(checkpoint, "_write_array", write)


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"),
                                   KeyboardInterrupt()], ids=["disk-full", "interrupt"])
def test_a_failed_save_leaves_the_previous_checkpoint(tmp_path, monkeypatch, error):
    g = started()
    g.run(**batches(1)[0])
    path = tmp_path / "run.npz"
    g.save_values(path)
    before = state_of(g)
    old_bytes = path.read_bytes()
    g.run(**batches(2)[1])
    failing_writer(monkeypatch, "checkpoint_value_2", error)
    with pytest.raises(type(error)):
        g.save_values(path)
    assert path.read_bytes() == old_bytes
    assert files_in(tmp_path) == ["run.npz"]          # no temporary file left behind
    h = build_step()
    h.load_values(path)
    assert_same_arrays(state_of(h), before)
    # a graph file with values is written the same way
    g.save(tmp_path / "graph.npz")
    old_graph = (tmp_path / "graph.npz").read_bytes()
    with pytest.raises(type(error)):
        g.save(tmp_path / "graph.npz", values=True)
    assert (tmp_path / "graph.npz").read_bytes() == old_graph
    assert files_in(tmp_path) == ["graph.npz", "run.npz"]


def test_a_failed_rename_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    g = started()
    path = tmp_path / "run.npz"
    g.save_values(path)
    old_bytes = path.read_bytes()
    g.run(**batches(1)[0])

    def no_rename(src, dst):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(OSError, match="Input/output"):
        g.save_values(path)
    assert path.read_bytes() == old_bytes and files_in(tmp_path) == ["run.npz"]


@pytest.mark.cpu_engine   # its child process compiles for the CPU
def test_a_process_killed_while_saving_leaves_the_previous_checkpoint(tmp_path):
    """A real crash: the saving process exits at once half-way through an array
    (no clean-up runs). The old file is intact; only a stray temporary file
    remains, and the next save succeeds."""
    path = tmp_path / "run.npz"
    g = started()
    g.save_values(path)
    before = state_of(g)
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {REPO!r}); sys.path.insert(0, {os.path.dirname(__file__)!r})
        import numpy as np, graphc.checkpoint as checkpoint
        from test_checkpoint import batches, npy_bytes, started
        g = started()
        g.run(**batches(1)[0])
        def dying(archive, key, array):
            if key == "checkpoint_value_2":
                data = npy_bytes(array)
                with archive.open(key + ".npy", "w", force_zip64=True) as member:
                    member.write(data[:len(data) // 2])
                    archive.fp.flush()
                    os._exit(3)
            real(archive, key, array)
        real, checkpoint._write_array = checkpoint._write_array, dying
        g.save_values({str(path)!r})
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 3, done.stderr
    stray = [f for f in files_in(tmp_path) if f != "run.npz"]
    assert len(stray) == 1 and stray[0].startswith(".run.npz.") and stray[0].endswith(".tmp")
    assert (tmp_path / stray[0]).stat().st_size > 0      # the crash really hit mid-write
    h = build_step()
    h.load_values(path)
    assert_same_arrays(state_of(h), before)
    g.run(**batches(1)[0])
    g.save_values(path)
    h.load_values(path)
    assert_same_arrays(state_of(h), state_of(g))


def test_saving_a_graph_that_cannot_be_saved_keeps_the_old_file(tmp_path):
    x = N.var("x", (3,))
    bad = graphc.compile([x], N.delay(np.sort, [x], (3,), np.float32))
    path = tmp_path / "g.npz"
    started().save(path)
    old_bytes = path.read_bytes()
    with pytest.raises(graphc.GraphError, match="delay"):
        bad.save(path)
    assert path.read_bytes() == old_bytes and files_in(tmp_path) == ["g.npz"]


def test_saving_keeps_the_old_files_permissions(tmp_path):
    g = started()
    path = tmp_path / "run.npz"
    g.save_values(path)
    os.chmod(path, 0o600)
    g.save_values(path)
    assert os.stat(path).st_mode & 0o777 == 0o600


# -- loading checks everything first ------------------------------------------------------
def other_step(w_shape=(6, 4), w_dtype=np.float32, extra=False, with_v=True):
    """A graph like build_step's with its variables changed."""
    x, y = N.var("x", (8, 6)), N.var("y", (8, 4))
    w = N.var("w", w_shape, w_dtype)
    inputs = [x, y, w]
    out = N.sum(x) + N.sum(y) + N.sum(w.astype(np.float32))
    if with_v:
        v = N.var("v", (6, 4))
        inputs.append(v)
        out = out + N.sum(v)
    if extra:
        z = N.var("z", (2,))
        inputs.append(z)
        out = out + N.sum(z)
    return graphc.compile(inputs, out)


@pytest.fixture
def saved(tmp_path):
    g = started()
    g.run(**batches(1)[0])
    path = tmp_path / "run.npz"
    g.save_values(path)
    return path, g


def test_names_must_match_unless_not_strict(saved):
    path, g = saved
    extra = other_step(extra=True)
    with pytest.raises(graphc.InputError, match=r"lacks variable\(s\) 'z'.*strict=False"):
        extra.load_values(path)
    with pytest.raises(graphc.InputError, match="has no value yet"):
        extra.value("w")                      # nothing was assigned
    extra.load_values(path, strict=False)
    np.testing.assert_array_equal(extra.value("w"), g.value("w"))
    fewer = other_step(with_v=False)
    with pytest.raises(graphc.InputError, match=r"holds variable\(s\) 'v' that are not "
                                                r"expected; pass strict=False"):
        fewer.load_values(path)
    fewer.load_values(path, strict=False)
    np.testing.assert_array_equal(fewer.value("w"), g.value("w"))


@pytest.mark.parametrize("graph, found", [
    (lambda: other_step(w_shape=(4, 6)), r"shape \(4, 6\) dtype float32 in the graph but "
                                         r"shape \(6, 4\) dtype float32 in"),
    (lambda: other_step(w_dtype=np.float64), r"shape \(6, 4\) dtype float64 in the graph but "
                                             r"shape \(6, 4\) dtype float32 in"),
])
def test_shapes_and_dtypes_must_match_and_nothing_is_assigned(saved, graph, found):
    path, _ = saved
    target = graph()
    target.assign(v=np.full((6, 4), 5, F32))
    for strict in (True, False):
        with pytest.raises(graphc.InputError, match="load_values: variable 'w' has " + found):
            target.load_values(path, strict=strict)
    # 'v' fits, but nothing is assigned unless everything fits
    np.testing.assert_array_equal(target.value("v"), np.full((6, 4), 5, F32))


def test_trainer_refuses_a_checkpoint_of_another_model(tmp_path):
    trainer = nn.compile_training(small_model(), nn.SGD(0.1), (4, 1, 8, 8))
    trainer.save_checkpoint(tmp_path / "a.npz")
    wider = nn.compile_training(nn.MnistCNN(image_size=8, filters=4, hidden=32),
                                nn.SGD(0.1), (4, 1, 8, 8))
    before = wider.params()
    with pytest.raises(graphc.InputError, match=r"variable 'fc1.weight' has shape \(64, 32\) "
                                                r"dtype float32 in the graph but shape "
                                                r"\(64, 16\)"):
        wider.load_checkpoint(tmp_path / "a.npz")
    assert_same_arrays(wider.params(), before)
    adam = nn.compile_training(small_model(), nn.Adam(0.1), (4, 1, 8, 8))
    with pytest.raises(graphc.InputError, match="lacks variable.*adam"):
        adam.load_checkpoint(tmp_path / "a.npz")


def members_of(path):
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def write_members(path, members):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def description_of(members):
    return json.loads(np.load(io.BytesIO(members["checkpoint_json.npy"])).tobytes().decode())


def with_description(members, doc):
    text = np.frombuffer(json.dumps(doc).encode(), np.uint8)
    return {**members, "checkpoint_json.npy": npy_bytes(text)}


def refused(target, path, error, *fragments):
    before = state_of(target)
    with pytest.raises(error) as info:
        target.load_values(path)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))
    assert_same_arrays(state_of(target), before)
    return str(info.value)


def test_files_that_are_no_checkpoints(tmp_path, saved):
    path, g = saved
    target = started(seed=5)
    g.save(tmp_path / "graph.npz")
    refused(target, tmp_path / "graph.npz", graphc.GraphError, "holds no variable values")
    (tmp_path / "junk.npz").write_bytes(b"not a zip at all" * 10)
    refused(target, tmp_path / "junk.npz", graphc.GraphError, "is not a graphc checkpoint")
    np.save(tmp_path / "one.npy", np.zeros(3))
    refused(target, tmp_path / "one.npy", graphc.GraphError, "single .npy array")
    refused(target, tmp_path / "missing.npz", graphc.GraphError, "No such file")
    members = members_of(path)
    doc = description_of(members)
    write_members(tmp_path / "v2.npz", with_description(members, {**doc, "version": 2}))
    refused(target, tmp_path / "v2.npz", graphc.GraphError,
            "version 2; expected 'graphc-values' version 1")


def test_loading_never_runs_code(tmp_path, saved):
    path, _ = saved
    marker = str(tmp_path / "code-ran")
    target = started(seed=5)
    members = members_of(path)
    doc = description_of(members)
    payload = npy_bytes(np.array([Payload(marker)], dtype=object), allow_pickle=True)
    # 1. an object array in place of a value
    index = [entry[0] for entry in doc["values"]].index("w")
    bad = tmp_path / "object-value.npz"
    write_members(bad, {**members, f"checkpoint_value_{index}.npy": payload})
    refused(target, bad, graphc.GraphError, "(variable 'w') holds Python objects")
    with pytest.raises(graphc.GraphError):
        graphc.read_checkpoint(bad)
    # 2. ... and declared as one in the description
    doc_o = json.loads(json.dumps(doc))
    doc_o["values"][index][1:] = [[1], "|O"]
    write_members(bad, with_description({**members, f"checkpoint_value_{index}.npy": payload},
                                        doc_o))
    refused(target, bad, graphc.GraphError, "malformed checkpoint description")
    # 3. the description itself an object array
    write_members(bad, {**members, "checkpoint_json.npy": payload})
    refused(target, bad, graphc.GraphError, "'checkpoint_json.npy' holds Python objects")
    # 4. a plain pickle
    (tmp_path / "plain.pickle").write_bytes(pickle.dumps(Payload(marker)))
    refused(target, tmp_path / "plain.pickle", graphc.GraphError, "is not a graphc checkpoint")
    assert not os.path.exists(marker)


def test_tampered_files_are_refused_before_allocating(tmp_path, saved):
    path, _ = saved
    target = started(seed=5)
    members = members_of(path)
    doc = description_of(members)
    index = [entry[0] for entry in doc["values"]].index("w")
    member = f"checkpoint_value_{index}.npy"
    bad = tmp_path / "bad.npz"
    # a header claiming 2**34 elements (64 GiB) with no data, description agreeing
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                  "shape": (1 << 17, 1 << 17)})
    huge = json.loads(json.dumps(doc))
    huge["values"][index][1] = [1 << 17, 1 << 17]
    write_members(bad, with_description({**members, member: header.getvalue()}, huge))
    refused(target, bad, graphc.InputError, "'w' has shape (6, 4) dtype float32 in the graph "
                                            "but shape (131072, 131072) dtype float32")
    with pytest.raises(graphc.GraphError, match=r"\(variable 'w'\) .* 128 \+ 68719476736 bytes"):
        graphc.read_checkpoint(bad)
    # the header disagrees with the description
    write_members(bad, {**members, member: npy_bytes(np.zeros((4, 6), F32))})
    refused(target, bad, graphc.GraphError, "(variable 'w') holds shape (4, 6) dtype float32, "
                                            "but its entry in the description is declared "
                                            "with shape (6, 4)")
    # a truncated array
    write_members(bad, {**members, member: members[member][:-8]})
    refused(target, bad, graphc.GraphError, "(variable 'w') is 216 bytes long", "128 + 96 bytes")
    # a member the description does not mention, a value without its member
    write_members(bad, {**members, "checkpoint_value_99.npy": npy_bytes(np.zeros(1, F32))})
    refused(target, bad, graphc.GraphError, "that its description does not mention")
    write_members(bad, {k: v for k, v in members.items() if k != member})
    refused(target, bad, graphc.GraphError, "lacks the array of variable 'w'")
    # a generator state that is not one
    broken = json.loads(json.dumps(doc))
    broken["random"]["graph"]["inc"] = "-5"
    write_members(bad, with_description(members, broken))
    refused(target, bad, graphc.GraphError, "generator 'graph'", "inc='-5'")
    # a description nested too deep for Python's parser
    write_members(bad, {**members, "checkpoint_json.npy": npy_bytes(
        np.frombuffer(b"[" * 100_000 + b"]" * 100_000, np.uint8))})
    refused(target, bad, graphc.GraphError, "damaged")
    # a read without a graph is bounded by max_bytes
    with pytest.raises(graphc.GraphError, match="more than max_bytes=100"):
        graphc.read_checkpoint(path, max_bytes=100)


def test_a_bad_step_count_sets_nothing(tmp_path):
    trainer = nn.compile_training(small_model(), nn.SGD(0.1), (4, 1, 8, 8))
    trainer.save_checkpoint(tmp_path / "a.npz")
    members = members_of(tmp_path / "a.npz")
    doc = description_of(members)
    doc["meta"]["steps"] = -1
    write_members(tmp_path / "b.npz", with_description(members, doc))
    other = nn.compile_training(small_model(), nn.SGD(0.1), (4, 1, 8, 8), seed=3)
    before = other.params()
    with pytest.raises(graphc.GraphError, match="'steps' should be a count"):
        other.load_checkpoint(tmp_path / "b.npz")
    assert_same_arrays(other.params(), before)


def test_mutated_files_load_the_same_values_or_raise_a_graphc_error(tmp_path, saved):
    """Byte flips, truncations and insertions anywhere in a checkpoint: every load
    gives back exactly the saved values or raises a graphc error and sets nothing."""
    path, g = saved
    original = path.read_bytes()
    expected = state_of(g)
    target = started(seed=5)
    sentinel = state_of(target)
    rng = np.random.default_rng(0)
    outcomes = {"loaded": 0, "refused": 0}
    bad = tmp_path / "mutated.npz"
    for trial in range(300):
        data = bytearray(original)
        kind = trial % 3
        at = int(rng.integers(0, len(data)))
        if kind == 0:
            data[at] ^= 1 << int(rng.integers(0, 8))
        elif kind == 1:
            del data[at:]
        else:
            data[at:at] = rng.integers(0, 256, int(rng.integers(1, 16)), dtype=np.uint8).tobytes()
        bad.write_bytes(bytes(data))
        try:
            target.load_values(bad)
        except graphc.GraphcError:
            outcomes["refused"] += 1
            assert_same_arrays(state_of(target), sentinel)
        else:
            outcomes["loaded"] += 1
            assert_same_arrays(state_of(target), expected)
            target.assign(**sentinel)
    assert outcomes["refused"] >= 200, outcomes       # not vacuous: most mutations break it


def test_a_snapshot_never_falls_between_runs(tmp_path):
    """Values saved while another thread runs the graph come from one moment:
    two variables that every run updates together are always equal."""
    x, a, b = N.var("x", (64,)), N.var("a", (64,)), N.var("b", (64,))
    g = graphc.compile([x, a, b], N.sum(a), updates={a: a + x, b: b + x})
    g.assign(a=np.zeros(64, F32), b=np.zeros(64, F32), x=np.ones(64, F32))
    stop = threading.Event()

    def keep_running():
        while not stop.is_set():
            g.run()

    worker = threading.Thread(target=keep_running)
    worker.start()
    try:
        for i in range(30):
            g.save_values(tmp_path / "s.npz")
            values = graphc.read_checkpoint(tmp_path / "s.npz").values
            np.testing.assert_array_equal(values["a"], values["b"])
    finally:
        stop.set()
        worker.join()
