"""Concatenations that grow one from another as one buffer written part by part
(graphc/optimiser/grow_concat.py): a dense block's graph against the same pipeline
without the pass, bit for bit (the values are copies either way), and against NumPy;
the plan's facts (no concatenation, each part written once and in place, each member a
view); and where the pass must not apply."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc
import graphc.ndarray as N
from graphc.optimiser.grow_concat import MIN_BYTES, grown_concatenations
from graphc.optimiser.passes import DEFAULT
from graphc.symbol.traverse import topological_order

pytestmark = pytest.mark.cpu_engine

WITHOUT = [p for p in DEFAULT if p != "grow_concat"]


def dense_block(x, layers: int, growth: int, axis: int):
    """DenseNet's block with exactly rounded layers: each layer reads the concatenation
    of everything before it and adds ``growth`` channels along ``axis``."""
    features, made = [x], []
    for _ in range(layers):
        joined = N.concatenate(features, axis=axis)
        made.append(joined)
        head = N.moveaxis(joined, axis, -1)[..., :growth]
        features.append(N.moveaxis(N.relu(head * 2.0) - 0.5, -1, axis))
    return N.concatenate(features, axis=axis), made


def _compile(shape, layers, growth, axis, passes):
    x = N.var("x", shape)
    out, _ = dense_block(x, layers, growth, axis)
    return graphc.compile([x], [out * 0.5], kernels="generated", optimise=passes, check=True)


def _numpy_block(x, layers, growth, axis):
    features = [x]
    for _ in range(layers):
        joined = np.concatenate(features, axis=axis)
        head = np.moveaxis(joined, axis, -1)[..., :growth]
        features.append(np.moveaxis(np.maximum(head * 2.0, 0) - 0.5, -1, axis))
    return np.concatenate(features, axis=axis) * 0.5


@settings(max_examples=12, deadline=None)
@given(layers=st.integers(2, 5), growth=st.sampled_from([8, 16, 32]),
       last=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_a_dense_block_gives_the_concatenations_bits(layers, growth, last, seed):
    shape, axis = ((1, 32, 32, 32), 3) if last else ((1, 32, 32, 32), 1)
    grown = _compile(shape, layers, growth, axis, list(DEFAULT))
    plain = _compile(shape, layers, growth, axis, WITHOUT)
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    kept = x.copy()
    got = grown.run(x=x)[0]
    np.testing.assert_array_equal(got, plain.run(x=x)[0])
    np.testing.assert_array_equal(got, _numpy_block(x, layers, growth, axis))
    assert x.tobytes() == kept.tobytes()
    kinds = grown.stats()["ops"]
    assert "concatenate" not in kinds and kinds["fill"] == 1
    assert kinds["scatter"] == layers + 1          # the block's input, then each layer's
    # the first layer's concatenation of one part is that part
    assert plain.stats()["ops"]["concatenate"] == layers


def test_each_part_is_written_once_in_place_and_each_member_is_a_view():
    shape = (1, 16, 16, 64)
    grown = _compile(shape, 4, 32, 3, list(DEFAULT))
    plain = _compile(shape, 4, 32, 3, WITHOUT)
    live = grown.liveness
    scatters = [n for n in live.steps if n.op.kind == "scatter"]
    # every scatter takes over the buffer it adds to (the fill first)
    taken = [live.inplace.get(id(n), []) for n in scatters]
    assert all(len(t) == 1 and t[0] is n.parents[0] for t, n in zip(taken, scatters))
    ids = {id(n) for n in scatters}
    members = [n for n in live.steps if n.op.kind == "slice" and id(n.parents[0]) in ids]
    assert len(members) == 3 and all(id(m) in live.views for m in members)   # the last: B
    # one buffer of the last concatenation's size, against the concatenations' own
    assert grown.stats()["planned_bytes"] < plain.stats()["planned_bytes"]


def test_concatenations_that_do_not_grow_one_from_another_stay():
    x = N.var("x", (1, 64, 16, 16))
    a, b = N.exp(x), N.sin(x)
    unrelated = [N.concatenate([x, a], axis=1), N.concatenate([x, b], axis=1),
                 N.concatenate([a, x, b], axis=1), N.concatenate([x, a, b], axis=0)]
    roots, changes = grown_concatenations([N.sum(c) for c in unrelated])
    assert changes == 0
    assert sum(n.op.kind == "concatenate" for n in topological_order(roots)) == 4


def test_a_small_chain_stays_a_copy():
    side = 4
    x = N.var("x", (1, 4, side, side))
    out, _ = dense_block(x, 3, 4, 1)
    assert out.nbytes < MIN_BYTES
    roots, changes = grown_concatenations([out])
    assert changes == 0


def test_a_member_read_after_the_buffer_grows_keeps_its_values():
    """The first concatenation is also read at the very end, after later parts were
    written: the buffer is then copied, not overwritten, and every value is right."""
    x = N.var("x", (1, 16, 16, 64))
    out, made = dense_block(x, 3, 32, 3)
    g = graphc.compile([x], [out, made[0] * 3.0], kernels="generated", check=True)
    X = np.random.default_rng(1).standard_normal((1, 16, 16, 64)).astype(np.float32)
    got_out, got_first = g.run(x=X)
    np.testing.assert_array_equal(got_out, _numpy_block(X, 3, 32, 3) * 2.0)
    np.testing.assert_array_equal(got_first, X * 3.0)
    assert "concatenate" not in g.stats()["ops"]


def test_a_longer_concatenation_computed_first_starts_no_chain_out_of_order():
    """``concatenate([x, a, b])`` may come before ``concatenate([x, a])`` in the graph's
    order (nothing orders them): the buffer only grows forward, so that pair stays."""
    x = N.var("x", (1, 64, 32, 32))
    a, b = N.exp(x), N.sin(x)
    longer = N.concatenate([x, a, b], axis=1)
    shorter = N.concatenate([x, a], axis=1)
    roots = [N.sum(longer), N.sum(shorter)]
    order = topological_order(roots)
    new_roots, changes = grown_concatenations(roots)
    rank = {id(n): i for i, n in enumerate(order)}
    assert changes == (2 if rank[id(shorter)] < rank[id(longer)] else 0)
    g = graphc.compile([x], roots, kernels="generated", check=True)
    X = np.random.default_rng(2).standard_normal((1, 64, 32, 32)).astype(np.float32) * 0.1
    plain = graphc.compile([x], roots, kernels="generated", check=True, optimise=WITHOUT)
    for got, want in zip(g.run(x=X), plain.run(x=X)):
        np.testing.assert_array_equal(got, want)
