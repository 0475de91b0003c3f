"""A GEMM with the elementwise program that reads its product (graphc.optimiser.
fuse_epilogue, the ``fused_matmul`` op): where the rewrite fires and where not, the
generated kernel against unoptimised NumPy graphs over operand layouts, roles and
dtypes, the NumPy kernel against the two nodes it replaces, gradients, export."""
import hypothesis.strategies as st
import numpy as np
import pytest
from gradcheck import check_gradient, ns_of
from hypothesis import given
from numpy.testing import assert_allclose
from opcheck import examples

import graphc
import graphc.ndarray as N
from graphc.engine.cpu_kernels import KERNELS
from graphc.engine.numba_kernels import available
from graphc.optimiser.fuse_epilogue import role
from graphc.type import Op

needs_numba = pytest.mark.skipif(available() is not None, reason="Numba is not installed")


def kinds(exe):
    return [n.op.kind for n in exe.liveness.steps]


def both(inputs, outputs_fn, feeds):
    """The graph compiled with generated kernels and unoptimised on NumPy's: the runs."""
    results = []
    for kernels, optimise in (("generated", True), ("numpy", False)):
        xs = [N.var(name, a.shape, a.dtype) for name, a in feeds.items()]
        exe = graphc.compile(xs, outputs_fn(*xs), kernels=kernels, optimise=optimise,
                             check=optimise)
        results.append((exe, exe.run(**feeds)))
    return results


def test_roles_line_operands_up_with_the_products_rows_and_columns():
    assert role((1, 7, 7, 64), 64, (64,)) == "col"
    assert role((1, 64, 7, 7), 49, (1, 64, 1, 1)) == "row"
    assert role((2, 5, 8), 8, (2, 5, 8)) == "full"
    assert role((2, 5, 8), 8, ()) == role((2, 5, 8), 8, (1, 1)) == "scalar"
    assert role((2, 5, 8), 8, (2, 1, 8)) is None        # per image and column: neither
    assert role((4, 6), 3, (6,)) is None                 # the columns do not split the axes


@needs_numba
@pytest.mark.parametrize("layout", ["nhwc", "nchw", "residual"])
def test_a_convolutions_bias_activation_and_residual_join_its_gemm(layout):
    rng = np.random.default_rng(0)
    if layout == "nchw":
        feeds = {"x": rng.standard_normal((1, 8, 5, 5)).astype(np.float32),
                 "w": rng.standard_normal((16, 8, 1, 1)).astype(np.float32),
                 "b": rng.standard_normal((16, 1, 1)).astype(np.float32)}

        def fn(x, w, b):
            return [N.clip(N.conv2d(N.relu(x), w) + b, 0.0, 6.0)]
    else:
        feeds = {"x": rng.standard_normal((2, 49, 32)).astype(np.float32),
                 "w": rng.standard_normal((32, 24)).astype(np.float32),
                 "b": rng.standard_normal((24,)).astype(np.float32)}
        if layout == "residual":
            feeds["r"] = rng.standard_normal((2, 7, 7, 24)).astype(np.float32)

        def fn(x, w, b, *r):
            y = N.reshape(N.matmul(N.tanh(x), w), (2, 7, 7, 24)) + b
            return [N.maximum(y + r[0] if r else y, 0.0)]
    (fast, got), (_, want) = both(None, fn, feeds)
    assert "fused_matmul" in kinds(fast) and "matmul" not in kinds(fast), kinds(fast)
    assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


@needs_numba
def test_a_product_read_twice_or_broadcast_otherwise_stays_apart():
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((40, 16)).astype(np.float32),
             "w": rng.standard_normal((16, 32)).astype(np.float32),
             "v": rng.standard_normal((40, 1)).astype(np.float32)}

    def twice(x, w, v):
        p = N.matmul(x, w)
        return [N.exp(p), p * 2.0]

    def per_row_and_column(x, w, v):       # a (40, 1) operand is per row: fused
        return [N.matmul(x, w) * v]
    (fast, got), (_, want) = both(None, twice, feeds)
    assert "fused_matmul" not in kinds(fast)
    (fast, got), (_, want) = both(None, per_row_and_column, feeds)
    assert "fused_matmul" in kinds(fast)
    assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


@needs_numba
@examples(25)
@given(st.integers(0, 2**16), st.integers(1, 3), st.sampled_from([1, 17, 64, 200]),
       st.sampled_from([3, 16, 70]), st.sampled_from([2, 33, 130]), st.booleans(),
       st.booleans(), st.sampled_from([np.float32, np.float64]),
       st.sampled_from(["col", "row", "full", "scalar"]))
def test_fused_products_agree_with_unoptimised_graphs(seed, batch, m, k, n, ta, tb, dtype,
                                                       extra):
    rng = np.random.default_rng(seed)
    a_shape = (batch, k, m) if ta else (batch, m, k)
    b_shape = (n, k) if tb else (k, n)
    extra_shape = {"col": (n,), "row": (batch, m, 1), "full": (batch, m, n), "scalar": ()}[extra]
    feeds = {"a": rng.standard_normal(a_shape).astype(dtype),
             "b": rng.standard_normal(b_shape).astype(dtype),
             "e": rng.standard_normal(extra_shape).astype(dtype)}

    def fn(a, b, e):
        a = N.swapaxes(a, -1, -2) if ta else a
        b = N.transpose(b) if tb else b
        return [N.tanh(N.matmul(a, b) * 0.5 + e) - 1.0]
    (fast, got), (_, want) = both(None, fn, feeds)
    assert "fused_matmul" in kinds(fast), kinds(fast)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    assert_allclose(got[0], want[0], rtol=tol, atol=tol)


def test_the_numpy_kernel_runs_the_product_then_the_program():
    rng = np.random.default_rng(2)
    # small integers: the product is exact in any summation order (BLAS's or NumPy's)
    a, b, bias = (rng.integers(-4, 5, s).astype(np.float64) for s in [(6, 4), (5, 4), (5,)])
    program = ((Op.make("add"), (("in", 1), ("in", 0))), (Op.make("relu"), (("acc",),)))
    op = Op.make("fused_matmul", trans_a=False, trans_b=True, program=program, product=1,
                 roles=("col",), gemm=(6, 5), shape=(6, 5), dtype=np.dtype("float64"))
    out = np.empty((6, 5))
    KERNELS["fused_matmul"](op, [a, b, bias], out, None)()
    np.testing.assert_array_equal(out, np.maximum(bias + a @ b.T, 0.0))


@pytest.mark.parametrize("product,roles", [(0, ("col",)), (1, ("row",)), (0, ("full",))])
def test_gradients_match_finite_differences(product, roles):
    rng = np.random.default_rng(3)
    other = {"col": (5,), "row": (3, 1), "full": (3, 5)}[roles[0]]
    program = ((Op.make("multiply"), (("in", 0), ("in", 1))), (Op.make("tanh"), (("acc",),)))
    attrs = dict(trans_a=False, trans_b=False, program=program, product=product,
                 roles=roles, gemm=(3, 5), shape=(3, 5), dtype=np.dtype("float64"))

    def fn(M, a, b, e):
        return ns_of(M)._op("fused_matmul", [a, b, e], **attrs)
    check_gradient(fn, rng.standard_normal((3, 4)), rng.standard_normal((4, 5)),
                   rng.uniform(0.5, 1.5, other))


def test_export_writes_the_product_then_the_program(tmp_path):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import graphc.onnx as G
    rng = np.random.default_rng(4)
    a, b, bias = (rng.standard_normal(s).astype(np.float32) for s in [(6, 4), (4, 5), (5,)])
    program = ((Op.make("add"), (("in", 0), ("in", 1))), (Op.make("relu"), (("acc",),)))
    av, bv, cv = N.var("a", a.shape), N.var("b", b.shape), N.var("c", bias.shape)
    y = ns_of(N)._op("fused_matmul", [av, bv, cv], trans_a=False, trans_b=False,
                     program=program, product=0, roles=("col",), gemm=(6, 5), shape=(6, 5),
                     dtype=np.dtype("float32"))
    path = tmp_path / "fm.onnx"
    G.save(graphc.compile([av, bv, cv], [y], optimise=False, kernels="numpy"), str(path))
    import onnxruntime as ort
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"a": a, "b": b, "c": bias})[0]
    assert_allclose(got, np.maximum(a @ b + bias, 0.0), rtol=1e-5, atol=1e-6)
    assert {n.op_type for n in onnx.load(str(path)).graph.node} >= {"MatMul", "Relu"}


@needs_numba
def test_rematerialisation_keeps_the_epilogue_apart():
    """remat recomputes a ReLU's output in the backward pass; inside the GEMM's
    epilogue it could not, so a graph compiled with remat keeps the two apart."""
    x, w = N.var("x", (64, 32)), N.var("w", (32, 48))
    loss = N.sum(N.square(N.relu(x @ w)))
    (g,) = N.grad(loss, [w])
    fused = graphc.compile([x, w], [loss, g], kernels="generated")
    kept = graphc.compile([x, w], [loss, g], kernels="generated", remat="auto")
    assert "fused_matmul" in kinds(fused) and "fused_matmul" not in kinds(kept)
