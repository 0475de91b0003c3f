"""The lowering of convolutions to im2col/col2im + GEMM: same results as the
direct kernels, the column workspace a planned value, CSE kept from holding
forward columns through the backward pass, constants reshaped as views."""
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from neural_reference import (SEEDS, conv_cases, data, output_shape, ref_conv,
                              ref_conv_backward_input, ref_conv_backward_kernel)
from opcheck import examples, feeds, make_vars

import graphc
import graphc.eager as E
import graphc.ndarray as N


CONV_KINDS = {"conv2d", "conv2d_backward_input", "conv2d_backward_kernel"}


def kinds(executable):
    return [n.op.kind for n in executable.graph.order]


def conv_and_gradients(ns, x, w, g, kw):
    return [ns.conv2d(x, w, **kw), ns.conv2d_backward_input(g, w, x.shape, **kw),
            ns.conv2d_backward_kernel(x, g, w.shape, **kw)]


@examples(25)
@given(conv_cases(), SEEDS, st.sampled_from(["blocks", "offsets"]))
def test_lowering_keeps_results_and_plans_the_columns(case, seed, plan):
    g_shape = output_shape(case)
    if g_shape is None:
        return
    arrays = [data(seed, case["x_shape"], np.float64),
              data(seed + 1, case["w_shape"], np.float64), data(seed + 2, g_shape, np.float64)]
    kw = case["kwargs"]
    xs = make_vars(arrays)
    # fast_math: the stride-1 input gradient as a forward convolution sums in another order
    lowered = graphc.compile(xs, conv_and_gradients(N, *xs, kw), plan=plan, check=True, kernels="numpy",
                             fast_math=True)
    ys = make_vars(arrays)
    plain = graphc.compile(ys, conv_and_gradients(N, *ys, kw), plan=plan, optimise=False, kernels="numpy")
    assert CONV_KINDS <= set(kinds(plain))
    for a, b in zip(lowered.run(**feeds(arrays)), plain.run(**feeds(arrays))):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10 * case["terms"] * g_shape[0])
    present = kinds(lowered)
    if (case["w_shape"][2:], case["geometry"][:2]) == ((1, 1), ((1, 1), ((0, 0), (0, 0)))):
        return  # 1x1 of variables: kept as the direct GEMM on views (next test)
    assert not CONV_KINDS & set(present), present
    assert "matmul" in present
    # with stride 1 the input gradient is a forward convolution of g (flipped kernel,
    # padding (k - 1) * d - p) when that padding is not negative; else GEMM + col2im
    stride, pad, dil, _ = case["geometry"]
    as_forward = stride == (1, 1) and all(
        (k - 1) * d >= p for k, d, pair in zip(case["w_shape"][2:], dil, pad) for p in pair)
    assert ("col2im" in present) != as_forward
    columns = [n for n in lowered.graph.order if n.op.kind == "im2col"]
    # the kernel gradient recomputes its columns in another layout: were it the forward's
    # node, hash-consing would keep those columns alive through the backward pass
    layouts = sorted(n.op["layout"] for n in columns)
    assert layouts == (["batch", "batch", "flat"] if as_forward else ["batch", "flat"])
    for n in columns:
        assert id(n) in lowered.plan.place, "the workspace is a planned value"
    assert lowered.stats()["planned_bytes"] >= max(n.nbytes for n in columns)


@pytest.mark.cpu_engine   # the CPU's lowering policy (the device lowers every convolution)
def test_pointwise_convolution_is_a_gemm_without_columns():
    x, w = N.var("x", (2, 8, 5, 5)), N.var("w", (4, 8, 1, 1))
    h = N.relu(x)   # computed and used once: the reshape into (N, C, H*W) takes its memory
    g = graphc.compile([x, w], N.conv2d(h, w), check=True)
    assert set(kinds(g)).isdisjoint({"conv2d", "im2col"}) and "matmul" in kinds(g)
    # a variable would be copied by the reshape on every run: the direct kernel
    # (one GEMM on views of x and w) is kept instead
    assert "conv2d" in kinds(graphc.compile([x, w], N.conv2d(x, w)))
    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((2, 8, 5, 5), np.float32), rng.standard_normal((4, 8, 1, 1),
                                                                                np.float32)
    np.testing.assert_allclose(g.run(x=X, w=W), ref_conv(np.maximum(X, 0), W, (1, 1),
                                                         ((0, 0), (0, 0)), (1, 1), 1), rtol=1e-5,
                               atol=1e-5)


def test_stacked_convolutions_reuse_the_column_workspace():
    x, w1, w2 = N.var("x", (1, 8, 12, 12)), N.var("w1", (8, 8, 3, 3)), N.var("w2", (8, 8, 3, 3))
    y = N.conv2d(N.relu(N.conv2d(x, w1, padding=1)), w2, padding=1)
    g = graphc.compile([x, w1, w2], y, plan="blocks", check=True)
    columns = [n for n in g.graph.order if n.op.kind == "im2col"]
    assert len(columns) == 2
    groups = g.memory_groups()
    assert groups[id(columns[0])] == groups[id(columns[1])]
    stats = g.stats()
    assert stats["planned_bytes"] < stats["naive_bytes"]
    # the second columns sit on the first's stale values: padding cells must be rewritten
    rng = np.random.default_rng(1)
    X, W1, W2 = (rng.standard_normal(v.shape).astype(np.float32) for v in (x, w1, w2))
    same = ((1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    expected = ref_conv(np.maximum(ref_conv(X, W1, *same), 0), W2, *same)
    for _ in range(2):
        np.testing.assert_allclose(g.run(x=X, w1=W1, w2=W2), expected, rtol=1e-4, atol=1e-4)


def test_forward_columns_die_before_the_backward_pass():
    """A training-like graph: the forward columns are read once, by the GEMM."""
    x, w = N.var("x", (2, 4, 9, 9)), N.var("w", (6, 4, 3, 3))
    y = N.conv2d(x, w, padding=1, stride=2)
    g = y * 2.0  # the gradient of sum(y ** 2)
    dx = N.conv2d_backward_input(g, w, x.shape, padding=1, stride=2)
    dw = N.conv2d_backward_kernel(x, g, w.shape, padding=1, stride=2)
    ex = graphc.compile([x, w], [dx, dw], check=True)
    live = ex.liveness
    forward = [n for n in ex.graph.order if n.op.kind == "im2col" and n.op["layout"] == "batch"]
    assert len(forward) == 1
    readers = [n for n in ex.graph.order if any(p is forward[0] for p in n.parents)]
    assert len(readers) == 1
    assert live.last_use[id(forward[0])] == live.step_of[id(readers[0])]


def test_non_contiguous_inputs_and_save_load(tmp_path):
    rng = np.random.default_rng(0)
    x = np.asfortranarray(rng.standard_normal((2, 3, 6, 7)))
    w = rng.standard_normal((3, 3, 2, 4)).transpose(2, 1, 3, 0)[:, :, :2, :]  # (2, 3, 3, 2)
    expected = ref_conv(x, w, (1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    np.testing.assert_allclose(E.conv2d(x, w, padding=1), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(E.conv2d_backward_input(np.asfortranarray(expected), w, x.shape,
                                                       padding=1),
                               ref_conv_backward_input(expected, w, x.shape, (1, 1),
                                                       ((1, 1), (1, 1)), (1, 1), 1), rtol=1e-12)
    xv, wv = N.var("x", x.shape, np.float64), N.var("w", w.shape, np.float64)
    g = graphc.compile([xv, wv], N.max_pool2d(N.conv2d(xv, wv, padding=1), 2, ceil_mode=True))
    path = tmp_path / "conv.npz"
    g.save(path)
    again = graphc.load(path)
    np.testing.assert_array_equal(again.run(x=x, w=w), g.run(x=x, w=w))


def test_constant_weights_are_reshaped_without_a_copy():
    W = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    w = N.const(W)
    x = N.var("x", (1, 3, 6, 6))
    g = graphc.compile([x], N.conv2d(x, w, padding=1))
    weights = [n for n in g.graph.order if n.op.kind == "const"]
    assert len(weights) == 1 and weights[0].shape == (4, 27)
    assert np.shares_memory(weights[0].value, w.value)
    X = np.ones((1, 3, 6, 6), np.float32)
    np.testing.assert_allclose(g.run(x=X), E.conv2d(X, W, padding=1), rtol=1e-5, atol=1e-5)


@pytest.mark.cpu_engine   # the CPU's lowering policy (the device lowers every convolution)
def test_pointwise_gradients_are_lowered_only_where_the_reshape_is_free():
    """A 1x1 input gradient's GEMM reads ``g`` reshaped, a 1x1 kernel gradient of one
    image reads ``x`` reshaped: lowered (no columns) where that operand is a computed
    value used once, kept as the direct kernel (the same GEMM on views) for a variable.
    Of two images the kernel gradient needs its channel-major columns either way."""
    rng = np.random.default_rng(2)
    W = rng.standard_normal((4, 6, 1, 1))
    w = N.var("w", W.shape, np.float64)
    window = ((1, 1), ((0, 0), (0, 0)), (1, 1), 1)
    for n in (1, 2):
        X, G = rng.standard_normal((n, 6, 5, 3)), rng.standard_normal((n, 4, 5, 3))
        x, g = N.var("x", X.shape, np.float64), N.var("g", G.shape, np.float64)
        for computed in (False, True):
            operand = N.relu if computed else (lambda v: v)
            dx = N.conv2d_backward_input(operand(g), w, X.shape)
            dw = N.conv2d_backward_kernel(operand(x), g, W.shape)
            ex = graphc.compile([x, g, w], [dx, dw], check=True)
            present = kinds(ex)
            assert ("conv2d_backward_input" in present) == (not computed)
            assert ("conv2d_backward_kernel" in present) == (not computed and n == 1)
            assert ("im2col" in present) == (n == 2) and "col2im" not in present
            Xo, Go = (np.maximum(X, 0), np.maximum(G, 0)) if computed else (X, G)
            got = ex.run(x=X, g=G, w=W)
            np.testing.assert_allclose(got[0], ref_conv_backward_input(Go, W, X.shape, *window),
                                       rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(got[1], ref_conv_backward_kernel(Xo, G, W.shape, *window),
                                       rtol=1e-10, atol=1e-12)
