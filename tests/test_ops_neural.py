"""The NCHW neural ops against the float64 loop references of
``neural_reference``, in graph mode (optimised, with convolutions lowered to
im2col + GEMM, and ``optimise=False``, the direct kernels) with both memory
plans, and in eager mode; their errors."""
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from neural_reference import (DTYPES, SEEDS, check_everywhere, conv_cases, data, output_shape,
                              pool_cases, pooled_shape, ref_avg_pool, ref_avg_pool_backward,
                              ref_conv, ref_conv_backward_input, ref_conv_backward_kernel,
                              ref_lrn, ref_lrn_backward, ref_max_pool, ref_max_pool_backward,
                              tolerance)
from opcheck import check_op, examples, feeds, make_vars

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc import ShapeError
from graphc.type.errors import DTypeError


# -- convolution ---------------------------------------------------------------------------
@examples(60)
@given(conv_cases(), DTYPES, SEEDS)
def test_conv2d(case, dtype, seed):
    x, w = data(seed, case["x_shape"], dtype), data(seed + 1, case["w_shape"], dtype)
    kw = case["kwargs"]
    stride, pad, dil, groups = case["geometry"]
    check_everywhere(lambda ns, x, w: ns.conv2d(x, w, **kw),
                     lambda x, w: ref_conv(x, w, stride, pad, dil, groups), x, w,
                     terms=case["terms"])


@examples(50)
@given(conv_cases(), DTYPES, SEEDS)
def test_conv2d_backward_input(case, dtype, seed):
    g_shape = output_shape(case)
    if g_shape is None:
        return
    g, w = data(seed, g_shape, dtype), data(seed + 1, case["w_shape"], dtype)
    kw, x_shape = case["kwargs"], case["x_shape"]
    stride, pad, dil, groups = case["geometry"]
    terms = case["w_shape"][0] * case["w_shape"][2] * case["w_shape"][3]
    check_everywhere(lambda ns, g, w: ns.conv2d_backward_input(g, w, x_shape, **kw),
                     lambda g, w: ref_conv_backward_input(g, w, x_shape, stride, pad, dil, groups),
                     g, w, terms=terms)


@examples(50)
@given(conv_cases(), DTYPES, SEEDS)
def test_conv2d_backward_kernel(case, dtype, seed):
    g_shape = output_shape(case)
    if g_shape is None:
        return
    x, g = data(seed, case["x_shape"], dtype), data(seed + 1, g_shape, dtype)
    kw, w_shape = case["kwargs"], case["w_shape"]
    stride, pad, dil, groups = case["geometry"]
    terms = g_shape[0] * g_shape[2] * g_shape[3]
    check_everywhere(lambda ns, x, g: ns.conv2d_backward_kernel(x, g, w_shape, **kw),
                     lambda x, g: ref_conv_backward_kernel(x, g, w_shape, stride, pad, dil,
                                                           groups),
                     x, g, terms=terms)


@examples(20)
@given(conv_cases(), SEEDS)
def test_backward_ops_are_transposes(case, seed):
    """<conv(x, w), g> = <x, backward_input(g, w)> = <w, backward_kernel(x, g)>."""
    g_shape = output_shape(case)
    if g_shape is None:
        return
    x = data(seed, case["x_shape"], np.float64)
    w = data(seed + 1, case["w_shape"], np.float64)
    g = data(seed + 2, g_shape, np.float64)
    kw = case["kwargs"]
    for ns in (E, None):
        if ns is None:  # the same three values from one compiled (lowered) graph
            xs = make_vars([x, w, g])
            values = graphc.compile(xs, [
                N.conv2d(xs[0], xs[1], **kw),
                N.conv2d_backward_input(xs[2], xs[1], x.shape, **kw),
                N.conv2d_backward_kernel(xs[0], xs[2], w.shape, **kw)]).run(**feeds([x, w, g]))
        else:
            values = [E.conv2d(x, w, **kw), E.conv2d_backward_input(g, w, x.shape, **kw),
                      E.conv2d_backward_kernel(x, g, w.shape, **kw)]
        y, dx, dw = values
        forward = np.vdot(y, g)
        scale = 1e-10 * (1 + np.abs(y).sum() * np.abs(g).max())
        assert abs(forward - np.vdot(x, dx)) <= scale
        assert abs(forward - np.vdot(w, dw)) <= scale


# -- pooling ----------------------------------------------------------------------------------
@examples(60)
@given(pool_cases(), DTYPES, SEEDS, st.booleans())
def test_max_pool2d(case, dtype, seed, ties):
    x = data(seed, case["x_shape"], dtype, ties)
    kernel, stride, pad = case["geometry"]
    ceil_mode, kw = case["kwargs"]["ceil_mode"], case["kwargs"]
    check_everywhere(lambda ns, x: ns.max_pool2d(x, **kw),
                     lambda x: ref_max_pool(x, kernel, stride, pad, ceil_mode), x)


@examples(60)
@given(pool_cases(), DTYPES, SEEDS, st.booleans())
def test_avg_pool2d(case, dtype, seed, include_pad):
    x = data(seed, case["x_shape"], dtype)
    kernel, stride, pad = case["geometry"]
    ceil_mode, kw = case["kwargs"]["ceil_mode"], case["kwargs"]
    check_everywhere(lambda ns, x: ns.avg_pool2d(x, **kw, count_include_pad=include_pad),
                     lambda x: ref_avg_pool(x, kernel, stride, pad, ceil_mode, include_pad), x,
                     terms=kernel[0] * kernel[1])


@examples(60)
@given(pool_cases(), DTYPES, SEEDS)
def test_max_pool2d_backward(case, dtype, seed):
    """Ties (few distinct values) go to the first maximum of each window."""
    y_shape = pooled_shape(case)
    if y_shape is None:
        return
    x, g = data(seed, case["x_shape"], dtype, ties=True), data(seed + 1, y_shape, dtype)
    if seed % 3 == 0:  # a NaN wins its windows and takes their gradient
        x.reshape(-1)[seed % x.size] = np.nan
    kernel, stride, pad = case["geometry"]
    ceil_mode, kw = case["kwargs"]["ceil_mode"], case["kwargs"]
    check_everywhere(lambda ns, x, g: ns.max_pool2d_backward(x, ns.max_pool2d(x, **kw), g, **kw),
                     lambda x, g: ref_max_pool_backward(x, g, kernel, stride, pad, ceil_mode),
                     x, g, terms=kernel[0] * kernel[1])


@examples(60)
@given(pool_cases(), DTYPES, SEEDS, st.booleans())
def test_avg_pool2d_backward(case, dtype, seed, include_pad):
    y_shape = pooled_shape(case)
    if y_shape is None:
        return
    g = data(seed, y_shape, dtype)
    kernel, stride, pad = case["geometry"]
    ceil_mode, kw, x_shape = case["kwargs"]["ceil_mode"], case["kwargs"], case["x_shape"]
    check_everywhere(
        lambda ns, g: ns.avg_pool2d_backward(g, x_shape, **kw, count_include_pad=include_pad),
        lambda g: ref_avg_pool_backward(g, x_shape, kernel, stride, pad, ceil_mode, include_pad),
        g, terms=kernel[0] * kernel[1])


def test_max_pool2d_specials():
    """NaN in a window wins (as np.max); -inf windows stay -inf; padding never wins."""
    x = np.full((1, 1, 4, 4), -np.inf, np.float32)
    x[0, 0, 0, 0] = np.nan
    x[0, 0, 3, 3] = -5.0
    check_everywhere(lambda ns, x: ns.max_pool2d(x, 2, padding=1),
                     lambda x: ref_max_pool(x, (2, 2), (2, 2), ((1, 1), (1, 1)), False), x)


# -- local response normalisation ------------------------------------------------------------
LRN_PARAMS = st.tuples(st.integers(1, 6), st.floats(1e-4, 2.0), st.floats(0.25, 1.5),
                       st.floats(0.5, 2.0))


@examples(50)
@given(st.integers(1, 7), st.integers(2, 4), LRN_PARAMS, DTYPES, SEEDS)
def test_lrn(channels, ndim, params, dtype, seed):
    x = data(seed, (2, channels) + (3,) * (ndim - 2), dtype)
    check_everywhere(lambda ns, x: ns.lrn(x, *params), lambda x: ref_lrn(x, *params), x,
                     terms=params[0])


@examples(50)
@given(st.integers(1, 7), LRN_PARAMS, DTYPES, SEEDS)
def test_lrn_backward(channels, params, dtype, seed):
    x, g = data(seed, (2, channels, 2, 3), dtype), data(seed + 1, (2, channels, 2, 3), dtype)
    check_everywhere(lambda ns, x, g: ns.lrn_backward(x, g, *params),
                     lambda x, g: ref_lrn_backward(x, g, *params), x, g, terms=params[0])


@pytest.mark.parametrize("size", [2 * 5, 2**40, 2**62])
def test_lrn_windows_wider_than_the_channels_sum_every_channel_once(size):
    """A window past every channel (a saved file may ask for 2**62) sums each
    channel once, at the cost of a window of twice the channel count."""
    x = data(3, (2, 5, 3, 3), np.float64)
    alpha, beta, k = 0.5, 0.75, 1.5
    want = x / (k + alpha / size * np.sum(x * x, axis=1, keepdims=True)) ** beta
    np.testing.assert_allclose(E.lrn(x, size, alpha, beta, k), want, rtol=1e-12)
    g = np.ones_like(x)
    assert np.all(np.isfinite(E.lrn_backward(x, g, size, alpha, beta, k)))


def test_lrn_backward_matches_finite_differences():
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((1, 6, 2, 2)), rng.standard_normal((1, 6, 2, 2))
    params = (3, 0.5, 0.75, 1.5)
    grad = E.lrn_backward(x, g, *params)
    eps = 1e-6
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = eps
        numeric = np.vdot(E.lrn(x + step, *params) - E.lrn(x - step, *params), g) / (2 * eps)
        assert abs(numeric - grad[index]) < 1e-6


# -- composites --------------------------------------------------------------------------------
def ref_log_softmax(x, axis):
    x = x.astype(np.float64)
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


@examples(20)
@given(st.integers(1, 3), st.integers(0, 2), DTYPES, SEEDS)
def test_softmax_and_log_softmax(ndim_extra, axis_choice, dtype, seed):
    x = data(seed, (2, 3, 4)[:ndim_extra] + (5,), dtype) * 10
    axis = -1 - (axis_choice % x.ndim)
    check_everywhere(lambda ns, x: ns.softmax(x, axis=axis),
                     lambda x: np.exp(ref_log_softmax(x, axis)), x)
    check_everywhere(lambda ns, x: ns.log_softmax(x, axis=axis),
                     lambda x: ref_log_softmax(x, axis), x, terms=5)


@examples(20)
@given(st.integers(1, 4), st.integers(1, 6), DTYPES, SEEDS, st.booleans())
def test_softmax_cross_entropy(batch, classes, dtype, seed, one_hot):
    logits = data(seed, (batch, classes), dtype) * 5
    if one_hot:
        labels = np.eye(classes, dtype=dtype)[np.arange(batch) % classes]
    else:
        labels = np.abs(data(seed + 1, (batch, classes), dtype))
    # large logits: the loss is computed through logsumexp, never exp alone
    check_everywhere(lambda ns, z, y: ns.softmax_cross_entropy(z, y),
                     lambda z, y: -(y * ref_log_softmax(z, -1)).sum(-1).mean(), logits, labels,
                     terms=classes)
    big = check_op(lambda ns, z, y: ns.softmax_cross_entropy(z * 1e3, y),
                   lambda z, y: np.asarray(-(y * ref_log_softmax(z * 1e3, -1)).sum(-1).mean(),
                                           dtype), logits, labels, **tolerance(dtype, 1e3))
    assert np.isfinite(big[0])


@examples(15)
@given(st.integers(1, 3), st.integers(1, 4), DTYPES, SEEDS)
def test_pool_linear_flatten(n, c, dtype, seed):
    x = data(seed, (n, c, 3, 2), dtype)
    w, b = data(seed + 1, (c * 6, 4), dtype), data(seed + 2, (4,), dtype)
    check_everywhere(lambda ns, x: ns.global_avg_pool2d(x),
                     lambda x: x.astype(np.float64).mean(axis=(2, 3)), x)
    check_everywhere(lambda ns, x: ns.flatten(x), lambda x: x.reshape(n, -1), x)
    check_everywhere(lambda ns, x, w, b: ns.linear(ns.flatten(x), w, b),
                     lambda x, w, b: x.reshape(n, -1).astype(np.float64) @ w + b, x, w, b,
                     terms=c * 6)
    check_everywhere(lambda ns, x, w: ns.linear(ns.flatten(x), w),
                     lambda x, w: x.reshape(n, -1).astype(np.float64) @ w, x, w, terms=c * 6)


@examples(15)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(2, 4), DTYPES, SEEDS)
def test_batch_norm(n, c, ndim, dtype, seed):
    shape = (n, c) + (3,) * (ndim - 2)
    x = data(seed, shape, dtype) * 3 + 1
    gamma, beta = data(seed + 1, (c,), dtype), data(seed + 2, (c,), dtype)
    mean, var = data(seed + 3, (c,), dtype), np.abs(data(seed + 4, (c,), dtype)) + 0.5
    axes = (0,) + tuple(range(2, ndim))
    channel = (c,) + (1,) * (ndim - 2)

    def ref_inference(x, gamma, beta, mean, var):
        x = x.astype(np.float64)
        return ((x - mean.reshape(channel)) / np.sqrt(var.reshape(channel) + 1e-3)
                * gamma.reshape(channel) + beta.reshape(channel))

    check_everywhere(lambda ns, *a: ns.batch_norm(*a, eps=1e-3), ref_inference,
                     x, gamma, beta, mean, var, terms=4)

    def ref_train(x, gamma, beta):
        x64 = x.astype(np.float64)
        mu, sigma2 = x64.mean(axis=axes), x64.var(axis=axes)
        return [ref_inference(x, gamma, beta, mu, sigma2), mu, sigma2]

    check_everywhere(lambda ns, *a: list(ns.batch_norm_train(*a, eps=1e-3)), ref_train,
                     x, gamma, beta, terms=4 * n * 9)


@pytest.mark.parametrize("rate", [0.0, 0.25, 0.5, 0.9])
def test_dropout(rate):
    x = np.arange(1.0, 2001.0, dtype=np.float32).reshape(40, 50)
    xs = make_vars([x])
    g = graphc.compile(xs, N.dropout(xs[0], rate), seed=3)
    first, second = g.run(x0=x), g.run(x0=x)
    for y in (first, second):
        kept = y != 0
        np.testing.assert_allclose(y[kept], x[kept] / np.float32(1 - rate), rtol=1e-6)
        assert abs(kept.mean() - (1 - rate)) < 0.05
    if 0 < rate:
        assert not np.array_equal(first, second), "the mask is redrawn on every run"
    ys = make_vars([x])
    again = graphc.compile(ys, N.dropout(ys[0], rate), seed=3)
    np.testing.assert_array_equal(again.run(x0=x), first)
    assert E.dropout(x, rate, training=False) is x
    eager = E.dropout(x, rate)
    kept = eager != 0
    np.testing.assert_allclose(eager[kept], x[kept] / np.float32(1 - rate), rtol=1e-6)
    assert abs(kept.mean() - (1 - rate)) < 0.05


# -- errors ------------------------------------------------------------------------------------
def refuses(fn, arrays, error, *words):
    """``fn`` raises ``error`` while building in both modes; the message holds ``words``."""
    xs = make_vars(arrays)
    for call in (lambda: fn(N, *xs), lambda: fn(E, *arrays)):
        with pytest.raises(error) as info:
            call()
        for word in words:
            assert word in str(info.value), f"{word!r} not in {info.value}"


F32 = np.float32


def z(*shape, dtype=F32):
    return np.zeros(shape, dtype)


def test_errors_name_the_op_and_shapes():
    x, w = z(1, 4, 6, 6), z(8, 3, 3, 3)
    refuses(lambda ns, x, w: ns.conv2d(x, w), [x, w], ShapeError, "conv2d", "(1, 4, 6, 6)",
            "(8, 3, 3, 3)")
    refuses(lambda ns, x, w: ns.conv2d(x, w, groups=3), [x, z(6, 1, 3, 3)], ShapeError,
            "conv2d", "groups=3")
    refuses(lambda ns, x, w: ns.conv2d(x, w, groups=2), [x, z(3, 2, 3, 3)], ShapeError,
            "groups=2", "(3, 2, 3, 3)")
    refuses(lambda ns, x, w: ns.conv2d(x, w, padding=1), [x, z(2, 4, 9, 3)], ShapeError,
            "conv2d", "larger than the padded input", "(1, 4, 6, 6)")
    refuses(lambda ns, x, w: ns.conv2d(x, w, dilation=3), [x, z(2, 4, 3, 3)], ShapeError,
            "dilation")
    for stride in (0, -1, (1, 0), (1, 2, 3), 1.5, True):
        refuses(lambda ns, x, w: ns.conv2d(x, w, stride=stride), [x, z(2, 4, 3, 3)],
                ShapeError, "conv2d", "stride")
    for padding in (-1, "full", (1, 2, 3), ((1, 2), (3,))):
        refuses(lambda ns, x, w: ns.conv2d(x, w, padding=padding), [x, z(2, 4, 3, 3)],
                ShapeError, "conv2d", "padding")
    refuses(lambda ns, x, w: ns.conv2d(x, w), [z(4, 6, 6), z(2, 4, 3, 3)], ShapeError,
            "conv2d", "4-D", "(4, 6, 6)")
    refuses(lambda ns, x, w: ns.conv2d(x, w), [x, z(2, 4, 3)], ShapeError, "conv2d", "kernel")
    refuses(lambda ns, x, w: ns.conv2d(x, w), [z(1, 4, 6, 6, dtype=np.int32),
                                               z(2, 4, 3, 3, dtype=np.int32)],
            DTypeError, "conv2d", "int32")
    refuses(lambda ns, x, w: ns.conv2d(x, w), [x, z(2, 4, 3, 3, dtype=np.float64)],
            DTypeError, "conv2d", "float32", "float64")


def test_backward_and_pool_errors():
    x, w = z(1, 4, 6, 6), z(2, 4, 3, 3)
    refuses(lambda ns, g, w: ns.conv2d_backward_input(g, w, (1, 4, 6, 6)),
            [z(1, 2, 5, 5), w], ShapeError, "conv2d_backward_input", "(1, 2, 5, 5)",
            "(1, 2, 4, 4)")
    refuses(lambda ns, g, w: ns.conv2d_backward_input(g, w, (1, 4, 6)), [z(1, 2, 4, 4), w],
            ShapeError, "conv2d_backward_input", "input_shape")
    refuses(lambda ns, x, g: ns.conv2d_backward_kernel(x, g, (2, 4, 3, 3)),
            [x, z(1, 3, 4, 4)], ShapeError, "conv2d_backward_kernel", "(1, 3, 4, 4)")
    refuses(lambda ns, x: ns.max_pool2d(x, 7), [x], ShapeError, "max_pool2d", "(7, 7)")
    refuses(lambda ns, x: ns.max_pool2d(x, 2, padding=2), [x], ShapeError, "max_pool2d",
            "padding")
    refuses(lambda ns, x: ns.avg_pool2d(x, 2, stride=0), [x], ShapeError, "avg_pool2d",
            "stride")
    refuses(lambda ns, x: ns.max_pool2d(x, 2), [z(1, 4, 6, 6, dtype=np.int64)], DTypeError,
            "max_pool2d")
    refuses(lambda ns, x, y, g: ns.max_pool2d_backward(x, y, g, 2),
            [x, z(1, 4, 3, 3), z(1, 4, 2, 2)], ShapeError, "max_pool2d_backward", "(1, 4, 2, 2)")
    refuses(lambda ns, g: ns.avg_pool2d_backward(g, (1, 4, 6, 6), 2), [z(1, 4, 2, 2)],
            ShapeError, "avg_pool2d_backward", "(1, 4, 3, 3)")
    refuses(lambda ns, x: ns.lrn(x, size=0), [x], ShapeError, "lrn", "size")
    refuses(lambda ns, x: ns.lrn(x), [z(4)], ShapeError, "lrn", "(4,)")
    refuses(lambda ns, x, g: ns.lrn_backward(x, g), [x, z(1, 4, 6, 5)], ShapeError,
            "lrn_backward", "(1, 4, 6, 5)")
    refuses(lambda ns, z_, y: ns.softmax_cross_entropy(z_, y), [z(2, 3), z(2, 4)], ShapeError,
            "softmax_cross_entropy", "(2, 4)")
    refuses(lambda ns, x: ns.softmax(x), [z(3, dtype=np.int32)], DTypeError, "softmax")
    refuses(lambda ns, x, g: ns.batch_norm(x, g, g, g, g), [x, z(3)], ShapeError, "batch_norm",
            "(4,)")
    with pytest.raises(ValueError, match="rate"):
        E.dropout(x, 1.0)


def test_errors_carry_the_user_line():
    with pytest.raises(ShapeError, match=r"test_ops_neural.py:\d+"):
        N.conv2d(N.var("x", (1, 3, 4, 4)), N.var("w", (2, 2, 3, 3)))
