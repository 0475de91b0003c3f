"""The CPU's generated kernels (graphc/engine/numba_codegen.py, numba_kernels.py)
against the NumPy kernels, the reference.

Every elementwise kind on special values in every dtype (exact, signed zeros
included, except the C library's maths: within a few ulps, as in
test_cuda_codegen.py, whose cases these are); broadcasting geometries; graphs
whose fused programs run generated, serially and split across threads, computing
in place over their inputs and into their variables; a training step bit for bit;
the disk cache; the options.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

numba = pytest.importorskip("numba")

import graphc  # noqa: E402
import graphc.ndarray as N  # noqa: E402
from graphc.engine import numba_codegen  # noqa: E402
from graphc.engine.cuda_codegen import supported  # noqa: E402
from graphc.engine.numba_kernels import element_strides, generated_kernel, geometry  # noqa: E402
from graphc.engine.strategy import PARALLEL_MIN, kernel_choice  # noqa: E402
from graphc.type import Op  # noqa: E402

from elementwise_cases import (INEXACT, assert_same, infer_out, kind_cases,  # noqa: E402
                               reference)
from graphc.type.errors import DTypeError  # noqa: E402

#: kinds with no template at all (gcd, frexp's parts, ...) run NumPy's kernel only
KINDS_TESTED = sorted(k for k, templates in numba_codegen.NUMBA_EXPRESSIONS.items()
                      if k != "fused" and templates)


def run_generated(op, inputs, out_dtype, parallel=False):
    out = np.empty(np.broadcast_shapes(*[np.shape(a) for a in inputs]), out_dtype)
    kernel = generated_kernel(op, [np.asarray(a) for a in inputs], out, parallel=parallel)
    if kernel is None:
        return None
    with np.errstate(all="ignore"):
        kernel()
    return out


# -- every kind -----------------------------------------------------------------------------
def test_both_generators_know_the_same_kinds():
    from graphc.engine.cuda_codegen import C_EXPRESSIONS
    assert set(numba_codegen.NUMBA_EXPRESSIONS) == set(C_EXPRESSIONS)
    for kind, templates in C_EXPRESSIONS.items():
        assert set(numba_codegen.NUMBA_EXPRESSIONS[kind]) == set(templates), kind


@pytest.mark.parametrize("kind", KINDS_TESTED)
def test_kind_matches_the_numpy_kernel(kind):
    tested = 0
    for op, inputs in kind_cases(kind):
        dtypes = [a.dtype for a in inputs]
        try:
            out = infer_out(op, dtypes)
        except DTypeError:
            continue  # NumPy itself does not define it (negative of bool, ...)
        got = run_generated(op, inputs, out)
        # the CPU generator covers exactly what the GPU one does
        assert (got is not None) == supported(op, dtypes, out), (op, dtypes)
        if got is None:
            continue
        want = reference(op, inputs)
        assert_same(got, want, kind not in INEXACT, f"{op} on {[str(d) for d in dtypes]}")
        tested += 1
    assert tested > 0


# -- geometries -------------------------------------------------------------------------------
def _geometry(*arrays, out):
    return geometry([element_strides(a, out) for a in arrays], out)


def test_geometry_merges_what_every_operand_walks_contiguously():
    e = np.empty
    assert _geometry(e((4, 5)), e((4, 5)), out=(4, 5)) == ((20,), [(1,), (1,)])
    assert _geometry(e((4, 5)), e(5), out=(4, 5)) == ((4, 5), [(5, 1), (0, 1)])
    assert _geometry(e((4, 1)), e((1, 5)), out=(4, 5)) == ((4, 5), [(1, 0), (0, 1)])
    assert _geometry(e((2, 3, 4)), e((1, 1, 1)), out=(2, 3, 4)) == ((24,), [(1,), None])
    assert _geometry(e((1, 1)), out=(1, 1)) == ((1,), [None])
    # a strided view keeps its strides; a transposed one is walked as it lies
    assert _geometry(e((6, 8))[::2, 1::3], out=(3, 3)) == ((3, 3), [(16, 3)])
    assert _geometry(e((3, 4)).T, out=(4, 3)) == ((4, 3), [(1, 4)])


_FMA_RELU = ((Op.make("fma"), (("in", 0), ("in", 1), ("in", 2))), (Op.make("relu"), (("acc",),)))


@settings(max_examples=40)
@given(shapes=mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=4, max_side=5),
       dtype=st.sampled_from(["float32", "float64"]), parallel=st.booleans())
def test_broadcasting_geometries(shapes, dtype, parallel):
    rng = np.random.default_rng(0)
    inputs = [rng.normal(size=s).astype(dtype) for s in shapes.input_shapes]
    op = Op.make("fused", program=_FMA_RELU, shape=shapes.result_shape, dtype=np.dtype(dtype))
    got = run_generated(op, inputs, dtype, parallel)
    want = reference(op, inputs)
    assert_same(got, np.broadcast_to(want, got.shape), True)


def test_strided_and_read_only_inputs():
    base = np.arange(48.0).reshape(6, 8)
    x = base[::2, 1::3]                    # a strided view
    y = np.broadcast_to(np.arange(3.0), (3, 3))   # a read-only broadcast view
    got = run_generated(Op.make("subtract"), [x, y], "float64")
    np.testing.assert_array_equal(got, x - y)
    flipped = base[::-1, ::-2]                   # negative strides
    got = run_generated(Op.make("multiply"), [flipped, np.float64(2.0)], "float64")
    np.testing.assert_array_equal(got, flipped * 2.0)


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=4),
       steps=st.lists(st.integers(1, 3), min_size=4, max_size=4),
       transpose=st.booleans(), parallel=st.booleans())
def test_views_read_through_a_flat_base(shape, steps, transpose, parallel):
    """Slices and transposes of a buffer (positive strides, unit or not innermost) are
    read as ``x[start + i]`` from a flat base: the same values as NumPy's."""
    rng = np.random.default_rng(len(shape))
    rank = len(shape)
    base = rng.standard_normal([n * k + 2 for n, k in zip(shape, steps)]).astype(np.float32)
    view = base[tuple(slice(1, 1 + n * k, k) for n, k in zip(shape, steps[:rank]))]
    if transpose:
        view = view.T
    other = rng.standard_normal(view.shape).astype(np.float32)
    row = rng.standard_normal(view.shape[:-1] + (1,)).astype(np.float32)
    for inputs in ([view, other], [other, view], [view, row], [view, view]):
        got = run_generated(Op.make("add"), inputs, "float32", parallel=parallel)
        np.testing.assert_array_equal(got, inputs[0] + inputs[1])


def test_a_sliced_input_is_read_through_its_flat_base():
    x = np.arange(40.0, dtype=np.float32).reshape(5, 8)
    source = numba_codegen.kernel_source(Op.make("add"), ["float32"] * 2, "float32", 2,
                                         (), (), [(0, True)])
    assert "a0 = x0[np.uint64(b0 + i1)]" in source and "b0 = i0 * t0[0]" in source
    got = run_generated(Op.make("add"), [x[1:, 2:6], x[:4, :4]], "float32")
    np.testing.assert_array_equal(got, x[1:, 2:6] + x[:4, :4])


# -- graphs ------------------------------------------------------------------------------------
def _compare_engines(inputs, outputs, feeds, updates=None, runs=2, **options):
    """Compile with both kernel choices, run each ``runs`` times from the same variables;
    returns (generated steps, outputs per run) after asserting bit equality."""
    results, counts = {}, {}
    for kernels in ("numpy", "generated"):
        g = graphc.compile(inputs, outputs, updates, kernels=kernels, **options)
        counts[kernels] = g.stats()["generated_steps"]
        got = []
        for _ in range(runs):
            with np.errstate(all="ignore"):
                got.append(g.run(**feeds))
        if updates:
            got.append([g.value(v.name) for v in updates])
        results[kernels] = got
    for a, b in zip(results["numpy"], results["generated"]):
        for x, y in zip(a, b):
            assert_same(np.asarray(y), np.asarray(x), True)
    assert counts["numpy"] == 0
    return counts["generated"]


@pytest.mark.parametrize("n", [96, PARALLEL_MIN * 2 + 3])
def test_fused_graphs_bit_for_bit(n):
    rng = np.random.default_rng(1)
    x, y, z = (N.var(s, (n,)) for s in "xyz")
    b = N.var("b", (1,))
    feeds = {s: rng.normal(size=n).astype(np.float32) for s in "xyz"}
    feeds["b"] = np.array([0.25], np.float32)
    feeds["x"][:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-30]
    outputs = [N.clip(N.maximum(x - y, 0.0) * 2.5 + z, -1.0, 3.0),
               N.where(x > y, N.sqrt(N.abs(z)) / 3.0, -z * z) + b,
               x - 0.01 / N.sqrt(N.square(y) + 1e-8),
               N.relu(N.floor(x * 4.0) - N.negative(z)),
               N.logical_or(N.logical_not(x < y), z > 1.0)]
    assert _compare_engines([x, y, z, b], outputs, feeds) >= 4


def test_broadcast_bias_and_residual_in_place():
    rng = np.random.default_rng(2)
    x = N.var("x", (4, 16, 9, 9))
    bias, skip = N.var("bias", (1, 16, 1, 1)), N.var("skip", (4, 16, 9, 9))
    y = N.relu(x * 0.5 + bias + skip)
    out = N.relu(y * y - 1.0)        # computed over y, which dies here
    feeds = {"x": rng.normal(size=(4, 16, 9, 9)).astype(np.float32),
             "bias": rng.normal(size=(1, 16, 1, 1)).astype(np.float32),
             "skip": rng.normal(size=(4, 16, 9, 9)).astype(np.float32)}
    before = {k: v.copy() for k, v in feeds.items()}
    assert _compare_engines([x, bias, skip], [out], feeds) >= 1
    for k in feeds:                  # the user's arrays are never written
        np.testing.assert_array_equal(feeds[k], before[k])


@pytest.mark.parametrize("parallel", [False, True])
def test_a_kernel_in_place_reads_its_input_through_the_output(parallel):
    # LLVM checks at run time whether two arrays overlap and runs its scalar loop where
    # they do: an input that is the output's own memory is read through ``out``
    rng = np.random.default_rng(9)
    x = rng.normal(size=(48, 40)).astype(np.float32)
    bias = rng.normal(size=(48, 1)).astype(np.float32)
    program = Op.make("fused", program=((Op.make("add"), (("in", 0), ("in", 1))),
                                        (Op.make("exp"), (("acc",),))),
                      shape=x.shape, dtype=np.dtype(np.float32))
    apart = np.empty_like(x)
    generated_kernel(program, [x, bias], apart, parallel)()
    in_place = x.copy()
    run = generated_kernel(program, [in_place, bias], in_place, parallel)
    run()
    np.testing.assert_array_equal(in_place, apart)
    with open(run.func.py_func.__code__.co_filename) as f:     # the kernel bound
        assert "a0 = out[" in f.read()
    source = numba_codegen.kernel_source(program, ["float32"] * 2, "float32", 2, (), (1,),
                                         (), aliased=(0,))
    assert "a0 = out[i0, i1]" in source and "a0 = x0[" not in source


def test_updates_computed_into_their_variables():
    n = PARALLEL_MIN + 5
    w, v, g = N.var("w", (n,)), N.var("v", (n,)), N.var("g", (n,))
    v_new = v * 0.9 + g
    updates = {v: v_new, w: w - 0.01 * v_new}
    rng = np.random.default_rng(3)
    feeds = {"g": rng.normal(size=n).astype(np.float32)}
    results = {}
    for kernels in ("numpy", "generated"):
        exe = graphc.compile([w, v, g], [], updates, kernels=kernels)
        exe.assign(w=np.ones(n, np.float32), v=np.zeros(n, np.float32))
        for _ in range(3):
            exe.run(**feeds)
        results[kernels] = (exe.value("w"), exe.value("v"))
    for a, b in zip(*results.values()):
        np.testing.assert_array_equal(a, b)


def test_mnist_training_steps_agree():
    # elementwise steps give NumPy's bits; the generated per-channel sums (bias
    # gradients) accumulate in another order, so the weights agree within float32 noise
    from training_cases import mnist_batch, mnist_trainer
    model, x, labels = mnist_batch()
    weights = {}
    for kernels in ("numpy", "generated"):
        trainer = mnist_trainer(model, x.shape, kernels)
        for _ in range(2):
            trainer.executable.run(x=x, labels=labels)
        weights[kernels] = trainer.params()
        if kernels == "generated":
            assert trainer.executable.stats()["generated_steps"] > 0
    for name, value in weights["numpy"].items():
        np.testing.assert_allclose(weights["generated"][name], value, rtol=1e-4, atol=1e-6,
                                   err_msg=name)


# -- reductions ---------------------------------------------------------------------------------
REDUCED = [((8, 64, 9, 9), (0, 2, 3), True), ((8, 64, 9, 9), (0, 2, 3), False),
           ((512, 70), (1,), False), ((30, 130, 40), (0, 2), True), ((4, 6, 50, 30), (0, 3), False),
           ((4, 6, 50, 30), (2, 3), True)]


@pytest.mark.parametrize("kind, dtype", [(k, d) for k in ("sum", "mean")
                                         for d in ("float32", "float64")])
def test_reductions(kind, dtype):
    rng = np.random.default_rng(5)
    for shape, axis, keepdims in REDUCED:
        x = N.var("x", shape, dtype)
        value = (rng.normal(size=shape) * 100).astype(dtype)
        g = graphc.compile([x], [getattr(N, kind)(x, axis=axis, keepdims=keepdims)],
                           kernels="generated")
        assert g.stats()["generated_steps"] == 1, (shape, axis)
        got = g.run(x=value)[0]
        want = getattr(np, kind)(value, axis=axis, keepdims=keepdims)
        assert got.dtype == want.dtype and got.shape == want.shape
        # float64 accumulation in another order: a few float32 ulps at most
        rtol = 1e-5 if dtype == "float32" else 1e-12
        scale = np.abs(value).sum(axis=axis, keepdims=keepdims)
        if kind == "mean":
            scale = scale / (value.size // want.size)
        assert np.all(np.abs(got - want) <= rtol * scale + 1e-30), (shape, axis)


@pytest.mark.parametrize("kind", ["sum", "mean"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sums_over_a_middle_run_are_numpy_s_bits(kind, dtype):
    # kept, reduced, kept (an n-body step's forces over their second axis): whole rows
    # added in NumPy's order and precision, threaded over the outer groups
    rng = np.random.default_rng(6)
    for shape, axis, keepdims in [((768, 768, 3), (1,), False), ((8, 64, 9, 9), (1,), True),
                                  ((6, 40, 30, 7), (1, 2), False),
                                  # one group: a channels-last global average pool
                                  ((1, 14, 14, 96), (1, 2), True), ((1, 3, 5), (1,), False)]:
        value = (rng.normal(size=shape) * 100).astype(dtype)
        x = N.var("x", shape, dtype)
        g = graphc.compile([x], getattr(N, kind)(x, axis=axis, keepdims=keepdims),
                           kernels="generated")
        assert g.stats()["generated_steps"] == 1, (shape, axis)
        got = g.run(x=value)
        want = getattr(np, kind)(value, axis=axis, keepdims=keepdims)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_reductions_the_generator_leaves_to_numpy():
    x = N.var("x", (8, 64, 9, 9))
    outputs = [N.max(x, axis=(0, 2, 3)),        # NumPy's SIMD maxima and minima are faster
               N.min(x, axis=(0, 2, 3)),
               N.sum(x, axis=(0, 2)),           # reduced dimensions not one run
               N.sum(x),                        # nothing kept
               N.sum(N.var("y", (4, 100)), axis=1),   # too small to pay for threads
               N.sum(N.var("i", (64, 1000), "int64"), axis=1),   # integers wrap: NumPy's
               N.mean(N.var("c", (300, 130)), axis=0)]   # columns: NumPy adds whole rows
    g = graphc.compile([x] + [o.parents[0] for o in outputs[4:]], outputs, kernels="generated")
    assert g.stats()["generated_steps"] == 0


def test_parallel_schedule_runs_generated_kernels_on_one_thread():
    n = PARALLEL_MIN * 2
    x, y = N.var("x", (n,)), N.var("y", (n,))
    feeds = {"x": np.linspace(-1, 1, n, dtype=np.float32),
             "y": np.linspace(2, 3, n, dtype=np.float32)}
    outputs = [N.maximum(x * y + 1.0, 0.0), N.abs(x - y) * 2.0]
    assert _compare_engines([x, y], outputs, feeds, schedule="parallel", workers=2) == 2
    exe = graphc.compile([x, y], outputs, kernels="generated", schedule="parallel", workers=2)
    names = {k.func.py_func.__name__ for k in exe.program.kernels
             if hasattr(getattr(k, "func", None), "py_func")}
    assert names == {"serial"}


# -- the disk cache and the options ------------------------------------------------------------
_CHILD = textwrap.dedent("""
    import json, numpy as np, graphc, graphc.ndarray as N
    from graphc.engine import numba_kernels
    x = N.var("x", (50,), "float64")
    g = graphc.compile([x], [N.maximum(x * 3.0 - 1.0, 0.5)], kernels="generated")
    out = g.run(x=np.linspace(-1, 1, 50))[0]
    (module,) = numba_kernels._modules.values()
    stats = module.serial.stats
    print(json.dumps({"hits": sum(stats.cache_hits.values()),
                      "misses": sum(stats.cache_misses.values()),
                      "right": bool(np.array_equal(out, np.maximum(np.linspace(-1, 1, 50) * 3.0
                                                                   - 1.0, 0.5)))}))
""")


def test_kernels_are_compiled_once_per_machine(tmp_path):
    env = {**os.environ, "GRAPHC_CACHE_DIR": str(tmp_path)}
    runs = [json.loads(subprocess.run([sys.executable, "-c", _CHILD], env=env, check=True,
                                      capture_output=True, text=True).stdout)
            for _ in range(2)]
    assert runs[0] == {"hits": 0, "misses": 1, "right": True}
    assert runs[1] == {"hits": 1, "misses": 0, "right": True}
    assert [p.suffix for p in (tmp_path / "kernels").glob("k*.py")] == [".py"]


def test_kernel_choice(monkeypatch):
    x = N.var("x", (PARALLEL_MIN,))
    with pytest.raises(ValueError, match="unknown kernels='fast'.*'numpy', 'generated'"):
        graphc.compile([x], [x + 1.0], kernels="fast")
    monkeypatch.setenv("GRAPHC_KERNELS", "gpu")
    with pytest.raises(ValueError, match=r"unknown \$GRAPHC_KERNELS='gpu'"):
        kernel_choice()
    monkeypatch.setenv("GRAPHC_KERNELS", "generated")
    assert kernel_choice() == "generated"
    assert graphc.compile([x], [x * 2.0 + 1.0]).stats()["generated_steps"] == 1
    monkeypatch.delenv("GRAPHC_KERNELS")
    assert kernel_choice() == "generated"     # Numba is installed
    assert graphc.compile([x], [x * 2.0 + 1.0], kernels="numpy").stats()[
        "generated_steps"] == 0


def test_math_functions_are_generated_only_where_they_vectorise():
    # the C library's tanh and double exp run one element at a time: NumPy's vectorised
    # calls are faster; float32 exp is arithmetic in the generated loop (numba_prelude)
    x = N.var("x", (PARALLEL_MIN,), np.float32)
    y = N.var("y", (PARALLEL_MIN,), np.float64)
    assert graphc.compile([x], [N.tanh(x)], kernels="generated").stats()[
        "generated_steps"] == 0
    assert graphc.compile([y], [N.exp(y) * 2.0], kernels="generated").stats()[
        "generated_steps"] == 0
    assert graphc.compile([x], [N.exp(x) * 2.0], kernels="generated").stats()[
        "generated_steps"] == 1
