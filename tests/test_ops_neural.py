"""The NCHW neural ops against references written here in float64 with loops
over output positions (obviously correct, slow), in graph mode (optimised,
with convolutions lowered to im2col + GEMM, and ``optimise=False``, the
direct kernels) with both memory plans, and in eager mode."""
import math

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given
from opcheck import assert_all_same, as_list, check_op, examples, feeds, make_vars, quiet

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc import ShapeError
from graphc.type.errors import DTypeError


# -- references (float64, loops over output positions) ----------------------------------------
def ref_same(size, k, s, d=1):
    """TensorFlow's "same": ceil(size / s) outputs, the extra pixel at the end."""
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    return total // 2, total - total // 2


def ref_padding(padding, hw, kernel, stride, dilation=(1, 1)):
    if padding == "valid":
        return (0, 0), (0, 0)
    if padding == "same":
        return tuple(ref_same(n, k, s, d) for n, k, s, d in zip(hw, kernel, stride, dilation))
    if isinstance(padding, int):
        return (padding, padding), (padding, padding)
    if isinstance(padding[0], int):
        return (padding[0], padding[0]), (padding[1], padding[1])
    return tuple(tuple(p) for p in padding)


def two(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def padded(x, pad):
    (t, b), (l, r) = pad
    n, c, h, w = x.shape
    out = np.zeros((n, c, h + t + b, w + l + r))
    out[:, :, t:t + h, l:l + w] = x
    return out


def conv_geometry(x_shape, w_shape, stride, pad, dil):
    _, _, h, w = x_shape
    _, _, kh, kw = w_shape
    (sh, sw), ((t, b), (l, r)), (dh, dw) = stride, pad, dil
    oh = (h + t + b - (kh - 1) * dh - 1) // sh + 1
    ow = (w + l + r - (kw - 1) * dw - 1) // sw + 1
    if h + t + b < (kh - 1) * dh + 1 or w + l + r < (kw - 1) * dw + 1:
        raise ValueError("kernel larger than the padded input")
    return oh, ow


def windows(xp, a, b, kernel, stride, dil):
    """The (N, C, kh, kw) window of output cell (a, b) of a padded input."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dil
    return xp[:, :, a * sh:a * sh + (kh - 1) * dh + 1:dh, b * sw:b * sw + (kw - 1) * dw + 1:dw]


def ref_conv(x, w, stride, pad, dil, groups):
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    if c != cg * groups or o % groups:
        raise ValueError("channels do not match the groups")
    oh, ow = conv_geometry(x.shape, w.shape, stride, pad, dil)
    xp, og = padded(x, pad), o // groups
    out = np.zeros((n, o, oh, ow))
    for a in range(oh):
        for b in range(ow):
            win = windows(xp, a, b, w.shape[2:], stride, dil)
            for k in range(groups):
                out[:, k * og:(k + 1) * og, a, b] = np.einsum(
                    "ncij,ocij->no", win[:, k * cg:(k + 1) * cg], w[k * og:(k + 1) * og])
    return out


def ref_conv_backward_input(g, w, x_shape, stride, pad, dil, groups):
    g, w = g.astype(np.float64), w.astype(np.float64)
    o, cg, kh, kw = w.shape
    og = o // groups
    (t, _), (l, _) = pad
    dxp = np.zeros(padded(np.zeros(x_shape), pad).shape)
    (sh, sw), (dh, dw) = stride, dil
    for a in range(g.shape[2]):
        for b in range(g.shape[3]):
            win = dxp[:, :, a * sh:a * sh + (kh - 1) * dh + 1:dh,
                      b * sw:b * sw + (kw - 1) * dw + 1:dw]
            for k in range(groups):
                win[:, k * cg:(k + 1) * cg] += np.einsum(
                    "no,ocij->ncij", g[:, k * og:(k + 1) * og, a, b], w[k * og:(k + 1) * og])
    return dxp[:, :, t:t + x_shape[2], l:l + x_shape[3]]


def ref_conv_backward_kernel(x, g, w_shape, stride, pad, dil, groups):
    x, g = x.astype(np.float64), g.astype(np.float64)
    o, cg = w_shape[:2]
    og = o // groups
    xp = padded(x, pad)
    dw = np.zeros(w_shape)
    for a in range(g.shape[2]):
        for b in range(g.shape[3]):
            win = windows(xp, a, b, w_shape[2:], stride, dil)
            for k in range(groups):
                dw[k * og:(k + 1) * og] += np.einsum(
                    "no,ncij->ocij", g[:, k * og:(k + 1) * og, a, b], win[:, k * cg:(k + 1) * cg])
    return dw


def pool_extent(size, k, s, pad, ceil_mode):
    """PyTorch's pooling output length; ValueError where a window holds no input cell."""
    lo, hi = pad
    if ceil_mode:
        out = math.ceil((size + lo + hi - k) / s) + 1
        if (out - 1) * s >= size + lo:
            out -= 1
    else:
        out = (size + lo + hi - k) // s + 1
    if size + lo + hi < k or out < 1 or lo >= k or (out - 1) * s - lo >= size:
        raise ValueError("a pooling window has no input cell")
    return out


def pool_windows(x_shape, kernel, stride, pad, ceil_mode):
    """Per output cell (a, b): (real rows, real cols, padded-window rows, padded-window cols)."""
    h, w = x_shape[2:]
    oh = pool_extent(h, kernel[0], stride[0], pad[0], ceil_mode)
    ow = pool_extent(w, kernel[1], stride[1], pad[1], ceil_mode)
    cells = {}
    for a in range(oh):
        top = a * stride[0] - pad[0][0]
        for b in range(ow):
            left = b * stride[1] - pad[1][0]
            rows = range(max(top, 0), min(top + kernel[0], h))
            cols = range(max(left, 0), min(left + kernel[1], w))
            # PyTorch's divisor with count_include_pad: the window within the padded input
            size = ((min(top + kernel[0], h + pad[0][1]) - top)
                    * (min(left + kernel[1], w + pad[1][1]) - left))
            cells[a, b] = rows, cols, size
    return (oh, ow), cells


def ref_max_pool(x, kernel, stride, pad, ceil_mode):
    (oh, ow), cells = pool_windows(x.shape, kernel, stride, pad, ceil_mode)
    out = np.empty(x.shape[:2] + (oh, ow))
    for (a, b), (rows, cols, _) in cells.items():
        out[:, :, a, b] = x[:, :, rows.start:rows.stop, cols.start:cols.stop].max(axis=(2, 3))
    return out


def ref_avg_pool(x, kernel, stride, pad, ceil_mode, include_pad):
    (oh, ow), cells = pool_windows(x.shape, kernel, stride, pad, ceil_mode)
    out = np.empty(x.shape[:2] + (oh, ow))
    for (a, b), (rows, cols, size) in cells.items():
        total = x[:, :, rows.start:rows.stop, cols.start:cols.stop].astype(np.float64).sum((2, 3))
        out[:, :, a, b] = total / (size if include_pad else len(rows) * len(cols))
    return out


def ref_max_pool_backward(x, g, kernel, stride, pad, ceil_mode):
    _, cells = pool_windows(x.shape, kernel, stride, pad, ceil_mode)
    dx = np.zeros(x.shape)
    for (a, b), (rows, cols, _) in cells.items():
        for n in range(x.shape[0]):
            for c in range(x.shape[1]):
                win = x[n, c, rows.start:rows.stop, cols.start:cols.stop]
                i, j = np.unravel_index(np.argmax(win), win.shape)  # first maximum
                dx[n, c, rows.start + i, cols.start + j] += g[n, c, a, b]
    return dx


def ref_avg_pool_backward(g, x_shape, kernel, stride, pad, ceil_mode, include_pad):
    _, cells = pool_windows(x_shape, kernel, stride, pad, ceil_mode)
    dx = np.zeros(x_shape)
    for (a, b), (rows, cols, size) in cells.items():
        count = size if include_pad else len(rows) * len(cols)
        dx[:, :, rows.start:rows.stop, cols.start:cols.stop] += \
            g[:, :, a, b, None, None].astype(np.float64) / count
    return dx


def lrn_window(c, channels, size):
    return range(max(0, c - size // 2), min(channels, c + (size - 1) // 2 + 1))


def ref_lrn(x, size, alpha, beta, k):
    x = x.astype(np.float64)
    out = np.empty(x.shape)
    for c in range(x.shape[1]):
        s = sum(x[:, j] ** 2 for j in lrn_window(c, x.shape[1], size))
        out[:, c] = x[:, c] / (k + alpha / size * s) ** beta
    return out


def ref_lrn_backward(x, g, size, alpha, beta, k):
    """sum_c g_c dy_c/dx_j with the derivative of each output channel written out."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    channels = x.shape[1]
    d = [k + alpha / size * sum(x[:, j] ** 2 for j in lrn_window(c, channels, size))
         for c in range(channels)]
    dx = np.zeros(x.shape)
    for c in range(channels):
        dx[:, c] += g[:, c] * d[c] ** -beta
        for j in lrn_window(c, channels, size):
            dx[:, j] -= g[:, c] * x[:, c] * 2 * alpha * beta / size * x[:, j] * d[c] ** (-beta - 1)
    return dx


# -- running --------------------------------------------------------------------------------
def tolerance(dtype, terms=1):
    """Float32 error grows with the number of products summed per output."""
    if np.dtype(dtype) == np.float32:
        return dict(rtol=2e-4, atol=2e-5 * max(terms, 1))
    return dict(rtol=1e-9, atol=1e-11 * max(terms, 1))


def run_unoptimised(fn, arrays, plan="offsets"):
    """``fn`` in a graph compiled with ``optimise=False`` (the direct kernels)."""
    xs = make_vars(arrays)
    g = graphc.compile(xs, as_list(fn(N, *xs)), plan=plan, optimise=False, check=True)
    with quiet():
        return g.run(**feeds(arrays))


def check_everywhere(fn, ref, *arrays, terms=1):
    """``check_op`` (optimised graph with both plans, eager) plus the unoptimised
    graph, all against ``ref`` cast to the inputs' dtype."""
    dtype = arrays[0].dtype
    tol = tolerance(dtype, terms)

    def typed_ref(*a):
        return [np.asarray(r).astype(dtype) for r in as_list(ref(*a))]
    expected = check_op(fn, typed_ref, *arrays, **tol)
    if expected is not None:
        assert_all_same(run_unoptimised(fn, arrays), expected, **tol, what="optimise=False")
    return expected


def data(seed, shape, dtype, ties=False):
    rng = np.random.default_rng(seed)
    if ties:  # few distinct values: windows with several maxima
        return rng.integers(-2, 3, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


DTYPES = st.sampled_from([np.dtype(np.float32), np.dtype(np.float64)])
SEEDS = st.integers(0, 2 ** 32 - 1)


# -- strategies -------------------------------------------------------------------------------
def pair_arg(draw, value):
    """An (a, b) argument, given as an int when both are equal half of the time."""
    return value[0] if value[0] == value[1] and draw(st.booleans()) else value


@st.composite
def paddings(draw, most=2):
    form = draw(st.sampled_from(["int", "pair", "pairs", "same", "valid"]))
    p = st.integers(0, most)
    return {"int": lambda: draw(p), "pair": lambda: (draw(p), draw(p)),
            "pairs": lambda: ((draw(p), draw(p)), (draw(p), draw(p))),
            "same": lambda: "same", "valid": lambda: "valid"}[form]()


@st.composite
def conv_cases(draw):
    """Keyword arguments of conv2d (any accepted form) and the normalised geometry."""
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cg, og, n = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    hw = (draw(st.integers(1, 7)), draw(st.integers(1, 7)))
    padding = draw(paddings())
    return dict(
        x_shape=(n, cg * groups) + hw, w_shape=(og * groups, cg) + kernel,
        kwargs=dict(stride=pair_arg(draw, stride), padding=padding,
                    dilation=pair_arg(draw, dilation), groups=groups),
        geometry=(stride, ref_padding(padding, hw, kernel, stride, dilation), dilation, groups),
        terms=cg * kernel[0] * kernel[1])


@st.composite
def pool_cases(draw):
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = draw(st.none() | st.tuples(st.integers(1, 3), st.integers(1, 3)))
    hw = (draw(st.integers(1, 7)), draw(st.integers(1, 7)))
    padding = draw(paddings(most=1))
    actual_stride = kernel if stride is None else stride
    return dict(
        x_shape=(draw(st.integers(1, 2)), draw(st.integers(1, 3))) + hw,
        kwargs=dict(kernel=pair_arg(draw, kernel),
                    stride=None if stride is None else pair_arg(draw, stride),
                    padding=padding, ceil_mode=draw(st.booleans())),
        geometry=(kernel, actual_stride, ref_padding(padding, hw, kernel, actual_stride)))


# -- convolution ---------------------------------------------------------------------------
@examples(40)
@given(conv_cases(), DTYPES, SEEDS)
def test_conv2d(case, dtype, seed):
    x, w = data(seed, case["x_shape"], dtype), data(seed + 1, case["w_shape"], dtype)
    kw = case["kwargs"]
    stride, pad, dil, groups = case["geometry"]
    check_everywhere(lambda ns, x, w: ns.conv2d(x, w, **kw),
                     lambda x, w: ref_conv(x, w, stride, pad, dil, groups), x, w,
                     terms=case["terms"])


def output_shape(case):
    """The conv output shape of a case, or None when the kernel does not fit."""
    stride, pad, dil, _ = case["geometry"]
    try:
        oh, ow = conv_geometry(case["x_shape"], case["w_shape"], stride, pad, dil)
    except ValueError:
        return None
    return (case["x_shape"][0], case["w_shape"][0], oh, ow)


@examples(30)
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


@examples(30)
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
@examples(40)
@given(pool_cases(), DTYPES, SEEDS, st.booleans())
def test_max_pool2d(case, dtype, seed, ties):
    x = data(seed, case["x_shape"], dtype, ties)
    kernel, stride, pad = case["geometry"]
    ceil_mode, kw = case["kwargs"]["ceil_mode"], case["kwargs"]
    check_everywhere(lambda ns, x: ns.max_pool2d(x, **kw),
                     lambda x: ref_max_pool(x, kernel, stride, pad, ceil_mode), x)


@examples(40)
@given(pool_cases(), DTYPES, SEEDS, st.booleans())
def test_avg_pool2d(case, dtype, seed, include_pad):
    x = data(seed, case["x_shape"], dtype)
    kernel, stride, pad = case["geometry"]
    ceil_mode, kw = case["kwargs"]["ceil_mode"], case["kwargs"]
    check_everywhere(lambda ns, x: ns.avg_pool2d(x, **kw, count_include_pad=include_pad),
                     lambda x: ref_avg_pool(x, kernel, stride, pad, ceil_mode, include_pad), x,
                     terms=kernel[0] * kernel[1])


def pooled_shape(case):
    kernel, stride, pad = case["geometry"]
    n, c, h, w = case["x_shape"]
    ceil_mode = case["kwargs"]["ceil_mode"]
    try:
        return (n, c, pool_extent(h, kernel[0], stride[0], pad[0], ceil_mode),
                pool_extent(w, kernel[1], stride[1], pad[1], ceil_mode))
    except ValueError:
        return None


@examples(40)
@given(pool_cases(), DTYPES, SEEDS)
def test_max_pool2d_backward(case, dtype, seed):
    """Ties (few distinct values) go to the first maximum of each window."""
    y_shape = pooled_shape(case)
    if y_shape is None:
        return
    x, g = data(seed, case["x_shape"], dtype, ties=True), data(seed + 1, y_shape, dtype)
    kernel, stride, pad = case["geometry"]
    ceil_mode, kw = case["kwargs"]["ceil_mode"], case["kwargs"]
    check_everywhere(lambda ns, x, g: ns.max_pool2d_backward(x, ns.max_pool2d(x, **kw), g, **kw),
                     lambda x, g: ref_max_pool_backward(x, g, kernel, stride, pad, ceil_mode),
                     x, g, terms=kernel[0] * kernel[1])


@examples(40)
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


@examples(30)
@given(st.integers(1, 7), st.integers(2, 4), LRN_PARAMS, DTYPES, SEEDS)
def test_lrn(channels, ndim, params, dtype, seed):
    x = data(seed, (2, channels) + (3,) * (ndim - 2), dtype)
    check_everywhere(lambda ns, x: ns.lrn(x, *params), lambda x: ref_lrn(x, *params), x,
                     terms=params[0])


@examples(30)
@given(st.integers(1, 7), LRN_PARAMS, DTYPES, SEEDS)
def test_lrn_backward(channels, params, dtype, seed):
    x, g = data(seed, (2, channels, 2, 3), dtype), data(seed + 1, (2, channels, 2, 3), dtype)
    check_everywhere(lambda ns, x, g: ns.lrn_backward(x, g, *params),
                     lambda x, g: ref_lrn_backward(x, g, *params), x, g, terms=params[0])


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


# -- lowering to im2col + GEMM -------------------------------------------------------------------
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
    lowered = graphc.compile(xs, conv_and_gradients(N, *xs, kw), plan=plan, check=True)
    ys = make_vars(arrays)
    plain = graphc.compile(ys, conv_and_gradients(N, *ys, kw), plan=plan, optimise=False)
    assert CONV_KINDS <= set(kinds(plain))
    for a, b in zip(lowered.run(**feeds(arrays)), plain.run(**feeds(arrays))):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10 * case["terms"] * g_shape[0])
    present = kinds(lowered)
    if (case["w_shape"][2:], case["geometry"][:2]) == ((1, 1), ((1, 1), ((0, 0), (0, 0)))):
        return  # 1x1 of variables: kept as the direct GEMM on views (next test)
    assert not CONV_KINDS & set(present), present
    assert "matmul" in present and "col2im" in present
    columns = [n for n in lowered.graph.order if n.op.kind == "im2col"]
    # the kernel gradient recomputes its columns in another layout: were it the forward's
    # node, hash-consing would keep those columns alive through the backward pass
    assert sorted(n.op["layout"] for n in columns) == ["batch", "flat"]
    for n in columns:
        assert id(n) in lowered.plan.place, "the workspace is a planned value"
    assert lowered.stats()["planned_bytes"] >= max(n.nbytes for n in columns)


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
