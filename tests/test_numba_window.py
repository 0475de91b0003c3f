"""The generated window kernels (graphc/engine/numba_window.py, bound by
graphc/engine/window_builders.py) against the NumPy kernels
(graphc/engine/neural_kernels.py), the reference.

Every kind (``im2col`` in both layouts, ``col2im``, the max and average poolings and
their backward ops), float32 and float64, serial and split across threads, on
hypothesis-drawn geometries: kernel, stride, padding (windows hanging over the
border), dilation, ``ceil_mode``'s extra windows, ``count_include_pad``, odd shapes.
The generated kernels repeat the NumPy kernels' operations in the same order, so
every comparison is bit for bit (signed zeros included, any NaN matching any NaN),
sums included; values include ties, signed zeros, infinities and NaN, and pooled
values that match no cell. Then graphs compiled both ways, and a training step
whose weights are the same bits with and without these kernels.
"""
from __future__ import annotations

import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

numba = pytest.importorskip("numba")

import graphc  # noqa: E402
import graphc.ndarray as N  # noqa: E402
from graphc.engine.cpu_kernels import GENERATED_KERNELS, KERNELS  # noqa: E402
from graphc.engine.numba_kernels import threading_layer  # noqa: E402
from graphc.engine.strategy import PARALLEL_MIN  # noqa: E402
from graphc.engine.window_builders import KINDS, generated_window, window_kernel  # noqa: E402
from graphc.type.errors import ShapeError  # noqa: E402

DTYPES = ("float32", "float64")
STATS: Counter = Counter()            # what the properties exercised


# -- running one node both ways ------------------------------------------------------------
def numpy_result(node, inputs, dtype):
    out = np.empty(node.shape, dtype)
    with np.errstate(all="ignore"):
        KERNELS[node.op.kind](node.op, [np.asarray(a, dtype) for a in inputs], out, None)()
    return out


def generated_result(node, inputs, dtype, threaded):
    out = np.full(node.shape, 12345.0, dtype)     # every cell must be written
    kernel = window_kernel(node.op, [np.asarray(a, dtype) for a in inputs], out, threaded)
    assert kernel is not None, node.op
    kernel()
    return out


def assert_bitwise(got, want, what=""):
    """Equal bit for bit, except that any NaN equals any NaN."""
    assert got.shape == want.shape and got.dtype == want.dtype, what
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=what)
    bits = f"u{want.itemsize}"
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits), err_msg=what)


def check(node, inputs):
    """The generated kernel of ``node`` on ``inputs``, serial and threaded, in both dtypes,
    against the NumPy kernel; returns the float64 result."""
    for dtype in DTYPES:
        want = numpy_result(node, inputs, dtype)
        for threaded in (False, True):
            got = generated_result(node, inputs, dtype, threaded)
            assert_bitwise(got, want, f"{node.op} {dtype} threaded={threaded}")
    return want


# -- values and geometries -------------------------------------------------------------------
TIES = [0.0, -0.0, 1.0, -1.0, 2.0, 2.0, np.inf, -np.inf]
SPECIALS = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0]
STYLES = ["normal", "ties", "specials", "zeros"]


def values(rng, shape, style):
    a = rng.standard_normal(shape)
    if style == "ties":                  # few distinct values: ties in most windows
        a = rng.choice(TIES + [np.nan] * int(rng.integers(0, 2)), shape)
    elif style == "specials":            # a sprinkling of NaN, infinities, signed zeros
        mask = rng.random(shape) < 0.15
        a[mask] = rng.choice(SPECIALS, int(mask.sum()))
    elif style == "zeros":               # signed zeros only: sums of 0.0 and -0.0
        a = rng.choice([0.0, -0.0], shape)
    return a.astype(np.float32).astype(np.float64)   # exact in both dtypes


@st.composite
def geometries(draw, pool):
    kernel = tuple(draw(st.integers(1, 4), label="kernel") for _ in range(2))
    stride = tuple(draw(st.integers(1, 3), label="stride") for _ in range(2))
    most = (lambda k: k // 2) if pool else (lambda k: k)
    padding = tuple((draw(st.integers(0, most(k))), draw(st.integers(0, most(k))))
                    for k in kernel)
    dilation = (1, 1) if pool else tuple(draw(st.integers(1, 3), label="dilation")
                                         for _ in range(2))
    hw = tuple(draw(st.integers(max(1, (k - 1) * d + 1 - sum(p)), 11))
               for k, d, p in zip(kernel, dilation, padding))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3))) + hw
    return dict(shape=shape, kernel=kernel, stride=stride, padding=padding,
                dilation=dilation, ceil_mode=draw(st.booleans()),
                count_include_pad=draw(st.booleans()))


def pooled(kind, geo):
    """The forward pooling node of ``kind`` (max or avg) on an input of ``geo``'s shape."""
    x = N.var("x", geo["shape"])
    attrs = dict(stride=geo["stride"], padding=geo["padding"], ceil_mode=geo["ceil_mode"])
    try:
        if kind.startswith("max"):
            return N.max_pool2d(x, geo["kernel"], **attrs)
        return N.avg_pool2d(x, geo["kernel"], count_include_pad=geo["count_include_pad"],
                            **attrs)
    except ShapeError:   # a window of padding only: graphc refuses the geometry
        assume(False)


CEIL = dict(shape=(2, 3, 6, 7), kernel=(3, 2), stride=(2, 3), padding=((1, 1), (1, 0)),
            dilation=(1, 1), ceil_mode=True, count_include_pad=False)
# a 3x3 window with stride 1 and padding 1: the centre tap covers every window, so the
# NumPy poolings start from it (the order shows in which signed zero wins a tie)
CENTRE = dict(shape=(1, 2, 6, 6), kernel=(3, 3), stride=(1, 1), padding=((1, 1), (1, 1)),
              dilation=(1, 1), ceil_mode=False, count_include_pad=True)
# up to four windows of 3x3 stride 2 reach a cell: a sum of several terms, in tap order
OVERLAP = dict(CENTRE, shape=(2, 2, 9, 8), stride=(2, 2))


@settings(max_examples=30, deadline=None)
@given(geo=geometries(pool=True), seed=st.integers(0, 2**32 - 1),
       style=st.sampled_from(STYLES), perturb=st.booleans())
@example(geo=CEIL, seed=0, style="ties", perturb=True)
@example(geo=CEIL, seed=1, style="specials", perturb=False)
@example(geo=CENTRE, seed=2, style="zeros", perturb=False)
@example(geo=OVERLAP, seed=3, style="normal", perturb=False)
def _pool_property(kind, geo, seed, style, perturb):
    rng = np.random.default_rng(seed)
    y = pooled(kind, geo)
    x = values(rng, geo["shape"], style)
    floor = [(s + sum(p) - k) // st_ + 1 for s, k, st_, p in zip(
        geo["shape"][2:], geo["kernel"], geo["stride"], geo["padding"])]
    STATS["ceil window"] += list(y.shape[2:]) != floor
    STATS["padding"] += y.op["padding"] != ((0, 0), (0, 0))
    STATS["overlap"] += any(s < k for s, k in zip(geo["stride"], geo["kernel"]))
    if kind == "max_pool2d_backward":
        pooled_x = numpy_result(y, [x], "float64")
        if perturb:       # pooled values that match no cell, or NaN
            mask = rng.random(pooled_x.shape) < 0.3
            pooled_x[mask] = rng.choice([np.nan, 0.5, 7.0], int(mask.sum()))
        STATS["NaN window"] += bool(np.isnan(pooled_x).any())
        g = values(rng, y.shape, "zeros" if style == "zeros" else "normal")
        node = N.max_pool2d_backward(y.parents[0], N.var("y", y.shape), N.var("g", y.shape),
                                     geo["kernel"], stride=geo["stride"],
                                     padding=geo["padding"], ceil_mode=geo["ceil_mode"])
        inputs = [x, pooled_x, g]
    elif kind == "avg_pool2d_backward":
        node = N.avg_pool2d_backward(N.var("g", y.shape), geo["shape"], geo["kernel"],
                                     stride=geo["stride"], padding=geo["padding"],
                                     ceil_mode=geo["ceil_mode"],
                                     count_include_pad=geo["count_include_pad"])
        inputs = [values(rng, y.shape, style)]
    else:
        node, inputs = y, [x]
    want = check(node, inputs)
    STATS["NaN out"] += bool(np.isnan(want).any())
    STATS["examples"] += 1


@pytest.mark.parametrize("kind", ["max_pool2d", "max_pool2d_backward", "avg_pool2d",
                                  "avg_pool2d_backward"])
def test_pooling_matches_the_numpy_kernel(kind):
    STATS.clear()
    _pool_property(kind)
    assert STATS["examples"] >= 20, STATS
    assert STATS["ceil window"] and STATS["padding"] and STATS["overlap"], STATS
    if kind.startswith("max"):
        assert STATS["NaN out"] or STATS["NaN window"], STATS


@settings(max_examples=40, deadline=None)
@given(kernel=st.tuples(st.integers(1, 5), st.integers(1, 5)), data=st.data(),
       planes=st.integers(1, 40), hw=st.tuples(st.integers(1, 20), st.integers(1, 20)),
       count_include_pad=st.booleans(), seed=st.integers(0, 2**32 - 1),
       style=st.sampled_from(STYLES))
def test_same_size_average_pooling_matches_the_numpy_kernel(kernel, data, planes, hw,
                                                             count_include_pad, seed, style):
    """Stride-1 windows that keep the image's size run whole planes a tap at a time
    (numba_window._avg_pool_planes): several planes per work item (POOL_PLANE_CELLS),
    a short last item, taps whose shift leaves the plane or wraps onto the next row."""
    # padding summing to kernel - 1 keeps the size; each side at most kernel // 2
    padding = tuple(data.draw(st.sampled_from([(k // 2, (k - 1) - k // 2), ((k - 1) - k // 2,
                                                                            k // 2)]))
                    for k in kernel)
    x = N.var("x", (1 if planes % 2 else 2, planes // (1 if planes % 2 else 2)) + hw)
    try:
        node = N.avg_pool2d(x, kernel, stride=1, padding=padding,
                            count_include_pad=count_include_pad)
    except ShapeError:
        assume(False)
    assert node.shape == x.shape
    check(node, [values(np.random.default_rng(seed), x.shape, style)])


@settings(max_examples=30, deadline=None)
@given(geo=geometries(pool=False), seed=st.integers(0, 2**32 - 1),
       style=st.sampled_from(STYLES), layout=st.sampled_from(["batch", "flat"]))
@example(geo=OVERLAP, seed=0, style="normal", layout="batch")
def _columns_property(kind, geo, seed, style, layout):
    rng = np.random.default_rng(seed)
    window = dict(stride=geo["stride"], padding=geo["padding"], dilation=geo["dilation"])
    try:
        cols = N.im2col(N.var("x", geo["shape"]), geo["kernel"],
                        layout="batch" if kind == "col2im" else layout, **window)
    except ShapeError:   # the (dilated) window does not fit the padded image
        assume(False)
    if kind == "col2im":
        node = N.col2im(N.var("cols", cols.shape), geo["shape"], geo["kernel"], **window)
        inputs = [values(rng, cols.shape, style)]
    else:
        node, inputs = cols, [values(rng, geo["shape"], style)]
    check(node, inputs)
    STATS[f"layout {node.op.get('layout', 'batch')}"] += 1
    STATS["dilation"] += geo["dilation"] != (1, 1)
    STATS["padding"] += node.op["padding"] != ((0, 0), (0, 0))
    STATS["overlap"] += any(s < (k - 1) * d + 1 for s, k, d in zip(
        geo["stride"], geo["kernel"], geo["dilation"]))
    STATS["examples"] += 1


@pytest.mark.parametrize("kind", ["im2col", "col2im"])
def test_columns_match_the_numpy_kernel(kind):
    STATS.clear()
    _columns_property(kind)
    assert STATS["examples"] >= 20 and STATS["dilation"] and STATS["padding"], STATS
    assert STATS["overlap"], STATS
    if kind == "im2col":
        assert STATS["layout flat"] and STATS["layout batch"], STATS


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 3), h=st.integers(1, 9), w=st.integers(1, 9),
       kernel=st.tuples(st.integers(1, 5), st.integers(1, 5)),
       dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       split=st.floats(0, 1), top=st.integers(0, 3), bottom=st.integers(0, 3),
       layout=st.sampled_from(["batch", "flat"]), seed=st.integers(0, 2**32 - 1),
       style=st.sampled_from(STYLES))
def test_whole_block_im2col_matches_the_numpy_kernel(n, c, h, w, kernel, dilation, split,
                                                     top, bottom, layout, seed, style):
    """Stride 1 with rows as wide as the image's (the horizontal padding adds up to the
    dilated window's width, split anyhow): each tap's block is one shifted flat copy."""
    from graphc.engine.window_builders import whole_blocks
    span = (kernel[1] - 1) * dilation[1]
    left = round(split * span)
    try:
        cols = N.im2col(N.var("x", (n, c, h, w)), kernel, stride=1, dilation=dilation,
                        padding=((top, bottom), (left, span - left)), layout=layout)
    except ShapeError:
        assume(False)
    assert whole_blocks(cols.op, (n, c, h, w))
    check(cols, [values(np.random.default_rng(seed), (n, c, h, w), style)])


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 3), h=st.integers(1, 11), w=st.integers(1, 11),
       kernel=st.tuples(st.integers(1, 7), st.integers(1, 7)), row_stride=st.integers(1, 3),
       dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       padding=st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3),
                         st.integers(0, 3)),
       layout=st.sampled_from(["batch", "flat"]), seed=st.integers(0, 2**32 - 1),
       style=st.sampled_from(STYLES))
def test_column_stride_two_im2col_matches_the_numpy_kernel(n, c, h, w, kernel, row_stride,
                                                           dilation, padding, layout, seed,
                                                           style):
    """A column stride of 2 reads each input row split into its even and odd cells
    (odd widths, dilations and paddings that shift the first cell included)."""
    top, bottom, left, right = padding
    try:
        cols = N.im2col(N.var("x", (n, c, h, w)), kernel, stride=(row_stride, 2),
                        dilation=dilation, padding=((top, bottom), (left, right)),
                        layout=layout)
    except ShapeError:
        assume(False)
    check(cols, [values(np.random.default_rng(seed), (n, c, h, w), style)])


def test_every_window_kind_has_a_generated_kernel():
    assert set(KINDS) == {"im2col", "col2im", "max_pool2d", "max_pool2d_backward",
                          "avg_pool2d", "avg_pool2d_backward"}
    for kind in KINDS:
        assert GENERATED_KERNELS[kind] is generated_window, kind


# -- what the builder leaves to NumPy, and bad arguments ----------------------------------------
def test_unsupported_arrays_fall_back_to_the_numpy_kernel():
    x = N.var("x", (2, 3, 8, 8), "float16")
    y = N.max_pool2d(x, 2)
    image = np.random.default_rng(0).standard_normal((2, 3, 8, 8))
    assert window_kernel(y.op, [image.astype(np.float16)], np.empty(y.shape, np.float16),
                         False) is None
    strided = np.empty((2, 3, 8, 16))[..., ::2]      # not C-contiguous
    assert window_kernel(y.op, [strided], np.empty(y.shape), False) is None
    # and a graph on float16 still runs, on the NumPy kernel
    g = graphc.compile([x], [y], kernels="generated")
    assert g.stats()["generated_steps"] == 0
    np.testing.assert_array_equal(g.run(x=image.astype(np.float16))[0],
                                  numpy_result(y, [image.astype(np.float16)], "float16"))


def test_arrays_that_do_not_match_the_node_are_refused():
    y = N.max_pool2d(N.var("x", (2, 3, 8, 8)), 2)
    with pytest.raises(ValueError, match=r"max_pool2d: .*\(2, 3, 8, 8\).*\(2, 3, 4, 4\)"):
        window_kernel(y.op, [np.zeros((2, 3, 8, 8))], np.empty((2, 3, 5, 5)), False)
    with pytest.raises(ShapeError, match="max_pool2d"):
        window_kernel(y.op, [np.zeros((2, 3, 8))], np.empty((2, 3, 4, 4)), False)
    with pytest.raises(ValueError, match="exp is not a window kind"):
        window_kernel(N.exp(N.var("v", (3,))).op, [np.zeros(3)], np.empty(3), False)


def test_graphc_imports_without_numba():
    code = "import sys, graphc; assert 'numba' not in sys.modules, 'numba imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- graphs ---------------------------------------------------------------------------------
def window_steps(exe):
    """``{kind: [threaded flag]}`` of the steps of ``exe`` that run a window kernel."""
    found: dict = {}
    for k in exe.program.kernels:
        name = getattr(getattr(k, "func", None), "py_func", None)
        # max pooling's separable kernel (numba_pool) counts as its own
        kind = {"max_pool2d_planes": "max_pool2d"}.get(getattr(name, "__name__", None),
                                                        getattr(name, "__name__", None))
        if kind in KINDS:
            found.setdefault(kind, []).append(k.args[-1])
    return found


def _cnn_graph():
    """A convolution (lowered to im2col, its input gradient to col2im), both poolings
    and their gradients, in one float32 graph with no reduction (whose generated kernel
    sums in another order)."""
    # planes of 48x48 windows: im2col of smaller planes stays on NumPy (IM2COL_MIN_PLANE)
    x, w = N.var("x", (2, 8, 96, 96)), N.var("w", (8, 8, 3, 3))
    h = N.conv2d(x, w, stride=2, padding=1)               # (2, 8, 48, 48)
    a = N.max_pool2d(N.relu(h), 3, stride=2, padding=1, ceil_mode=True)
    b = N.avg_pool2d(h, 3, stride=1, padding=1, count_include_pad=False)
    ga, gb = N.var("ga", a.shape), N.var("gb", b.shape)
    grads = N.grad(N.sum(a * ga) + N.sum(b * N.relu(b) * gb), [x, w])
    return [x, w, ga, gb], [a, b] + list(grads)


@pytest.mark.parametrize("schedule", ["sequential", "parallel"])
def test_graphs_give_the_numpy_kernels_bits(schedule, monkeypatch):
    # the GEMMs stay on NumPy's matmul in both graphs: a team GEMM's library (oneDNN)
    # may order its sums otherwise, and no test depends on BLAS's summation order
    from graphc.engine import numba_gemm
    monkeypatch.setattr(numba_gemm, "gemm_kernel", lambda *args, **kw: None)
    monkeypatch.setattr(numba_gemm, "epilogue_kernel", lambda *args, **kw: None)
    inputs, outputs = _cnn_graph()
    rng = np.random.default_rng(7)
    feeds = {v.name: values(rng, v.shape, "normal").astype(np.float32) for v in inputs}
    # NaN is left to the kernel properties above: one NaN pixel would make dw all NaN.
    # The relu's zeros tie in the max windows.
    feeds["x"][0, :, :4, :4] = np.where(np.eye(4) > 0, 0.0, -0.0)
    options = dict(schedule="parallel", workers=2) if schedule == "parallel" else {}
    results, steps = {}, {}
    for kernels in ("numpy", "generated"):
        exe = graphc.compile(inputs, outputs, kernels=kernels, **options)
        results[kernels] = exe.run(**feeds)
        steps[kernels] = window_steps(exe)
    assert steps["numpy"] == {}
    generated = steps["generated"]
    assert set(generated) == set(KINDS), generated
    # one thread per kernel under a parallel schedule; these large nodes threaded
    # otherwise (where a thread-safe threading layer loads)
    flags = {f for fs in generated.values() for f in fs}
    threads = schedule != "parallel" and bool(threading_layer())
    assert flags == ({True} if threads else {False}), generated
    for got, want in zip(results["generated"], results["numpy"]):
        assert_bitwise(np.asarray(got), np.asarray(want))


def test_mnist_training_weights_are_the_same_bits(monkeypatch):
    """The window kernels are bit-exact: MnistCNN's training step (max pooling and its
    gradient; its 28x28 im2col planes stay on NumPy, IM2COL_MIN_PLANE) gives the same weights with them as with the NumPy window kernels,
    every other kernel generated in both runs."""
    import graphc.neural as nn
    model = nn.MnistCNN()
    rng = np.random.default_rng(4)
    x = rng.random((8, 1, 28, 28), dtype=np.float32) * 255.0
    labels = rng.integers(0, 10, 8).astype(np.int64)
    weights = {}
    for with_windows in (True, False):
        if not with_windows:
            for kind in KINDS:
                monkeypatch.delitem(GENERATED_KERNELS, kind)
        trainer = nn.compile_training(model, nn.SGD(0.01, momentum=0.9), x.shape,
                                      kernels="generated")
        used = window_steps(trainer.executable)
        assert bool(used) == with_windows, used
        if with_windows:
            assert {"max_pool2d", "max_pool2d_backward"} <= set(used), used
        for _ in range(2):
            trainer.executable.run(x=x, labels=labels)
        weights[with_windows] = trainer.params()
    for name, value in weights[False].items():
        assert_bitwise(weights[True][name], value, name)


def test_large_nodes_are_threaded_and_small_ones_not():
    small = N.max_pool2d(N.var("x", (1, 2, 8, 8)), 2)
    large = N.max_pool2d(N.var("x", (2, 4, 64, 64)), 2)
    for node, threaded in ((small, False), (large, bool(threading_layer()))):
        x = np.random.default_rng(0).standard_normal(node.parents[0].shape)
        out = np.empty(node.shape)
        kernel = generated_window(node.op, [x], out, None, parallel=True)
        assert kernel.args[-1] is threaded
        kernel()
        assert_bitwise(out, numpy_result(node, [x], "float64"))
        assert generated_window(node.op, [x], out, None, parallel=False).args[-1] is False
    assert large.parents[0].size >= PARALLEL_MIN > small.parents[0].size


def test_im2col_of_small_planes_stays_on_numpy_unless_copied_whole():
    """Row by row (a stride, or rows narrower than the image's), small planes stay on
    NumPy's strided copies; a stride-1 "same" window copies each tap's block whole,
    generated at every size."""
    from graphc.engine.window_builders import IM2COL_MIN_PLANE
    w = N.var("w", (4, 4, 3, 3))
    for side, stride, padding, generated in ((16, 2, 1, False), (128, 2, 1, True),
                                             (16, 1, 0, False), (16, 1, 1, True)):
        x = N.var("x", (1, 4, side, side))
        exe = graphc.compile([x, w], N.conv2d(x, w, stride=stride, padding=padding),
                             kernels="generated")
        assert ("im2col" in window_steps(exe)) == generated
        assert generated == (stride == 1 and padding == 1
                             or (side // stride) ** 2 >= IM2COL_MIN_PLANE)