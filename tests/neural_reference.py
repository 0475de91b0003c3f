"""References for the neural op tests: float64 loops over output positions
(obviously correct, slow), the hypothesis strategies of convolution and
pooling cases, and ``check_everywhere`` (graph optimised and unoptimised,
both plans, eager)."""
import math

import hypothesis.strategies as st
import numpy as np
from opcheck import as_list, assert_all_same, check_op, feeds, make_vars, quiet

import graphc
import graphc.ndarray as N


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


def run_unoptimised(fn, arrays, plan):
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
        for plan in ("blocks", "offsets"):
            assert_all_same(run_unoptimised(fn, arrays, plan), expected, **tol,
                            what=f"optimise=False ({plan})")
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


def output_shape(case):
    """The conv output shape of a case, or None when the kernel does not fit."""
    stride, pad, dil, _ = case["geometry"]
    try:
        oh, ow = conv_geometry(case["x_shape"], case["w_shape"], stride, pad, dil)
    except ValueError:
        return None
    return (case["x_shape"][0], case["w_shape"][0], oh, ow)


def pooled_shape(case):
    kernel, stride, pad = case["geometry"]
    n, c, h, w = case["x_shape"]
    ceil_mode = case["kwargs"]["ceil_mode"]
    try:
        return (n, c, pool_extent(h, kernel[0], stride[0], pad[0], ceil_mode),
                pool_extent(w, kernel[1], stride[1], pad[1], ceil_mode))
    except ValueError:
        return None


def trained_looking(model, seed=0, dtype=np.float32):
    """Parameters whose batch norms do something: random gamma, beta, running
    statistics (as after training), biases non-zero."""
    rng = np.random.default_rng(seed)
    params = model.init(seed)
    for name, value in params.items():
        if name.endswith("running_var") or name.endswith(".weight") and value.ndim == 1:
            params[name] = rng.uniform(0.5, 2.0, value.shape)
        elif name.endswith(("running_mean", ".bias")):
            params[name] = rng.normal(0, 0.5, value.shape)
    return {k: np.asarray(v, dtype) for k, v in params.items()}
