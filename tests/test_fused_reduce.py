"""Reductions fused with the elementwise program that feeds them (``fused_reduce``:
graphc/optimiser/fuse_reduce.py, graphc/engine/fused_reduce.py, the generated kernel
of graphc/engine/numba_kernels.py).

With ``kernels="generated"`` the fused graph is compared with the unfused graph on
the NumPy kernels (the reference) and with NumPy itself: sums and means within a
stated tolerance (the generated kernel accumulates in float64, in another order than
NumPy's pairwise sums), maxima and minima exactly. Both of its kernels are covered:
the generated loop, and the NumPy kernel that computes the value block by block in
the scratch (large programs that call the C library element by element, ``exp``).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

numba = pytest.importorskip("numba")

import graphc  # noqa: E402
import graphc.ndarray as N  # noqa: E402
from graphc.engine.fused_reduce import fused_reduce, reduce_geometry  # noqa: E402
from graphc.engine.numba_kernels import fused_reduce_kernel  # noqa: E402
from graphc.optimiser.fuse_reduce import reduces_innermost  # noqa: E402
from graphc.type import Op  # noqa: E402

pytestmark = pytest.mark.cpu_engine   # the CPU engine's fused-reduction policy

#: a sum of n terms accumulated in another order differs by at most about n ulps of
#: the sum of the terms' magnitudes; these are generous bounds on that
RTOL = {np.float32: 2e-5, np.float64: 1e-12}

#: elementwise programs of a value x and an input y broadcasting against it, written
#: for either namespace (graphc's N or NumPy)
PROGRAMS = {
    "square_diff": lambda M, x, y: M.square(x - y),
    "scaled_product": lambda M, x, y: x * y * 0.5 + 1.0,
    "relu_mask": lambda M, x, y: M.where(x > 0.0, y, 0.0) * x,
    "exp_shift": lambda M, x, y: M.exp(x - y),    # calls the C library: small ones generated
}


def compiled(build, shapes, dtype, kernels):
    names = [f"v{k}" for k in range(len(shapes))]
    variables = [N.var(n, s, dtype) for n, s in zip(names, shapes)]
    return graphc.compile(variables, build(*variables), kernels=kernels)


def kinds(g) -> dict:
    return g.stats()["ops"]


def assert_sums_close(got, want, magnitude, dtype, count):
    """Within ``RTOL * count`` (at least one) of the sum of the terms' magnitudes."""
    bound = RTOL[dtype] * max(count, 1) ** 0.5 * magnitude + np.finfo(dtype).tiny
    assert np.all(np.abs(got.astype(np.float64) - want.astype(np.float64)) <= bound), \
        (got, want)


@st.composite
def reductions(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=rank, max_size=rank)))
    # the second input broadcasts: some of its axes are 1, some leading ones missing
    ones = draw(st.lists(st.booleans(), min_size=rank, max_size=rank))
    other = tuple(1 if one else n for one, n in zip(ones, shape))[draw(st.integers(0, rank)):]
    axis = draw(st.none() | st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                                     unique_by=lambda a: a % rank).map(tuple))
    if isinstance(axis, tuple) and len(axis) == 1 and draw(st.booleans()):
        axis = axis[0]
    return dict(shape=shape, other=other, axis=axis, keepdims=draw(st.booleans()),
                reduce=draw(st.sampled_from(["sum", "mean"])),
                program=draw(st.sampled_from(sorted(PROGRAMS))),
                dtype=draw(st.sampled_from([np.float32, np.float64])),
                seed=draw(st.integers(0, 2 ** 16)))


def _normalised(axis, rank):
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, int) else axis
    return tuple(sorted(a % rank for a in axes))


@settings(max_examples=40)
@given(reductions())
def test_fused_graph_matches_the_unfused_numpy_graph_and_numpy(case):
    dtype, shape, other = case["dtype"], case["shape"], case["other"]
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(shape).astype(dtype)
    y = rng.standard_normal(other).astype(dtype)
    program = PROGRAMS[case["program"]]
    reduce = getattr(N, case["reduce"])

    def build(a, b):
        return reduce(program(N, a, b), axis=case["axis"], keepdims=case["keepdims"])

    fused = compiled(build, [shape, other], dtype, "generated")
    plain = compiled(build, [shape, other], dtype, "numpy")
    axes = _normalised(case["axis"], len(shape))
    # fused exactly where the reduction covers the innermost axis of more than one element
    assert ("fused_reduce" in kinds(fused)) == reduces_innermost(shape, axes)
    assert "fused_reduce" not in kinds(plain)
    with np.errstate(all="ignore"):
        got, want = fused.run(v0=x, v1=y), plain.run(v0=x, v1=y)
        terms = program(np, x, y).astype(np.float64)
    numpy_result = getattr(np, case["reduce"])(terms, axis=axes, keepdims=case["keepdims"])
    assert got.shape == want.shape == numpy_result.shape and got.dtype == want.dtype == dtype
    count = x.size if axes is None else math.prod(shape[a] for a in axes)
    magnitude = np.sum(np.abs(terms), axis=axes, keepdims=case["keepdims"])
    if case["reduce"] == "mean":
        magnitude = magnitude / max(count, 1)
    assert_sums_close(got, want, magnitude, dtype, count)
    assert_sums_close(got, numpy_result, magnitude, dtype, count)


# -- the rewrite ---------------------------------------------------------------------------------
def test_the_rewrite_fires_for_softmax_batch_norm_and_loss_terms():
    x = N.var("x", (16, 10))
    shifted = N.exp(x - N.max(x, axis=-1, keepdims=True))
    assert "fused_reduce" in kinds(graphc.compile([x], N.sum(shifted, axis=-1),
                                                  kernels="generated"))
    t = N.var("t", (8, 3, 5, 5))
    mu = N.mean(t, axis=(0, 2, 3), keepdims=True)
    variance = N.mean(N.square(t - mu), axis=(0, 2, 3))
    g = graphc.compile([t], variance, kernels="generated")
    assert kinds(g)["fused_reduce"] == 1 and "square" not in kinds(g)
    p, q = N.var("p", (32, 10)), N.var("q", (32, 10))
    loss = N.mean(N.square(p - q))
    assert kinds(graphc.compile([p, q], loss, kernels="generated"))["fused_reduce"] == 1


def test_the_rewrite_keeps_a_value_with_another_consumer():
    x = N.var("x", (16, 10))
    e = N.exp(x)
    g = graphc.compile([x], [N.sum(e, axis=1), e * 2.0], kernels="generated")
    assert "fused_reduce" not in kinds(g)
    g = graphc.compile([x], [N.sum(e, axis=1), e], kernels="generated")   # an output
    assert "fused_reduce" not in kinds(g)


def test_the_rewrite_leaves_outer_reductions_extremes_and_the_numpy_engine():
    x = N.var("x", (16, 10))
    for out in (N.sum(N.exp(x), axis=0), N.max(N.abs(x), axis=1), N.min(x * 2.0)):
        assert "fused_reduce" not in kinds(graphc.compile([x], out, kernels="generated"))
    assert "fused_reduce" not in kinds(graphc.compile([x], N.sum(x * x), kernels="numpy"))
    i = N.var("i", (16, 10), np.int32)
    assert "fused_reduce" not in kinds(graphc.compile([i], N.sum(i * i, axis=1),
                                                      kernels="generated"))


def test_a_whole_array_sum_splits_across_threads():
    # large enough for the parallel kernel; the whole reduction uses Numba's prange sum
    shape = (300, 400)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    g = compiled(lambda a: N.sum(a * a), [shape], np.float32, "generated")
    assert "fused_reduce" in kinds(g) and g.program.generated >= 1
    want = np.sum(x.astype(np.float64) ** 2)
    assert abs(float(g.run(v0=x)) - want) <= 1e-6 * want


# -- the NumPy kernel, block by block -----------------------------------------------------------
BLOCKED = [((3, 70000), (1,)), ((70000, 3), (0, 1)), ((5, 300, 300), (0, 2)),
           ((2, 40, 50, 70), (0, 2, 3)), ((200, 700), None), ((9, 3, 11), (1, 2))]


def _op(program, reduce, axis, keepdims, full, dtype):
    reduced = range(len(full)) if axis is None else axis
    shape = tuple(1 if d in reduced else n for d, n in enumerate(full) if keepdims or
                  d not in reduced)
    return Op.make("fused_reduce", program=program, reduce=reduce, axis=axis,
                   keepdims=keepdims, full=full, shape=shape, dtype=np.dtype(dtype))


_SQUARE_DIFF = ((Op.make("subtract"), (("in", 0), ("in", 1))), (Op.make("square"), (("acc",),)))


def _square_diff_case(full, axis, reduce):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(full) * 0.05 + 1.0).astype(np.float32)   # products stay finite
    y = np.float32(0.25) * rng.standard_normal(full[-1:]).astype(np.float32)
    if reduce in ("max", "min"):
        x.flat[len(x.flat) // 3] = np.nan          # NaN propagates, as in NumPy
    op = _op(_SQUARE_DIFF, reduce, axis, False, full, np.float32)
    return op, [x, y], getattr(np, reduce)(np.square(x - y), axis=axis)


def _check_kernel(build, op, want):
    out = np.full(op["shape"], -1.0, np.float32)
    kernel = build(out)
    assert kernel is not None
    kernel()
    kernel()   # runs again over its own result: nothing accumulates across runs
    if op["reduce"] in ("max", "min"):
        np.testing.assert_array_equal(out, want)
    else:
        np.testing.assert_allclose(out, want, rtol=2e-5 if op["reduce"] != "prod" else 1e-4)


@pytest.mark.parametrize("full,axis", BLOCKED)
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_the_numpy_kernel_matches_numpy_block_by_block(full, axis, reduce):
    # every case is larger than one block of the scratch: blocks of whole slices, or
    # runs of a reduced axis whose partial results are combined
    op, ins, want = _square_diff_case(full, axis, reduce)
    _check_kernel(lambda out: fused_reduce(op, ins, out, None), op, want)


# each generated case compiles a kernel on a cold cache: every reduction on one
# geometry, every geometry on one reduction
@pytest.mark.parametrize("full,axis,reduce",
                         [(BLOCKED[3][0], BLOCKED[3][1], r) for r in
                          ("sum", "mean", "max", "min", "prod")]
                         + [(f, a, "sum") for f, a in BLOCKED if f != BLOCKED[3][0]])
def test_the_generated_kernel_matches_numpy(full, axis, reduce):
    op, ins, want = _square_diff_case(full, axis, reduce)
    _check_kernel(lambda out: fused_reduce_kernel(op, ins, out, None, True), op, want)
    if full == BLOCKED[0][0]:   # the serial kernel too
        _check_kernel(lambda out: fused_reduce_kernel(op, ins, out, None, False), op, want)


def test_the_numpy_kernel_gives_numpys_bits_when_one_block_holds_everything():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((40, 50)), rng.standard_normal((40, 1))
    for reduce in ("sum", "mean"):
        op = _op(_SQUARE_DIFF, reduce, (1,), True, (40, 50), np.float64)
        out = np.empty((40, 1))
        fused_reduce(op, [x, y], out, None)()
        np.testing.assert_array_equal(out, getattr(np, reduce)(np.square(x - y), axis=1,
                                                               keepdims=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_large_exp_program_runs_on_the_numpy_kernel_and_a_small_one_generated(dtype):
    # a double exp calls the C library element by element in a generated loop: NumPy's
    # vectorised exp on a block in cache is faster once the value is large; a float32
    # exp is arithmetic the loop vectorises (numba_prelude), generated at any size
    for rows, generated in ((10, True), (400, dtype == np.float32)):
        shape = (rows, 300 if rows == 400 else 10)
        x = np.random.default_rng(0).standard_normal(shape).astype(dtype)

        def softmax_denominator(a):
            return N.sum(N.exp(a - N.max(a, axis=1, keepdims=True)), axis=1)
        g = compiled(softmax_denominator, [shape], dtype, "generated")
        assert kinds(g)["fused_reduce"] == 1
        step = next(k for n, k in zip(g.liveness.steps, g.program.kernels)
                    if n.op.kind == "fused_reduce")
        assert (getattr(step, "func", None) is not None and
                hasattr(step.func, "py_func")) == generated
        want = np.sum(np.exp(x - x.max(axis=1, keepdims=True)), axis=1)
        np.testing.assert_allclose(g.run(v0=x), want, rtol=2e-6)


def test_geometry_merges_runs_of_one_role_and_one_span():
    assert reduce_geometry([(8, 64, 7, 7), (64, 1, 1)], (8, 64, 7, 7), (0, 2, 3)) == \
        ((8, 64, 49), "rkr", [(True, True, True), (False, True, False)])
    # nothing reduced of more than one element: one reduced step of 1
    assert reduce_geometry([(5, 1)], (5, 1), (1,)) == ((5, 1), "kr", [(True, False)])


# -- a training step ----------------------------------------------------------------------------
def test_a_training_step_with_fused_reductions_gives_the_same_loss():
    from training_cases import mnist_batch, mnist_trainer
    model, x, labels = mnist_batch()
    losses = {}
    for kernels in ("numpy", "generated"):
        trainer = mnist_trainer(model, x.shape, kernels)
        fused = kinds(trainer.executable).get("fused_reduce", 0)
        assert (fused > 0) == (kernels == "generated")
        losses[kernels] = [float(np.asarray(trainer.executable.run(x=x, labels=labels))
                                 .reshape(-1)[0]) for _ in range(3)]
    np.testing.assert_allclose(losses["generated"], losses["numpy"], rtol=1e-4)
