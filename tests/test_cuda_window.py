"""The CUDA window-kernel generator (graphc/engine/cuda_window.py), proved on the CPU.

Each generated ``RawSource`` is compiled as C (``__device__`` defined away, a loop
over the work items standing in for the grid) with gcc, called through ctypes and
compared with graphc's CPU kernel for the same node (``KERNELS``), on random
geometries built the way graphc builds them: poolings by ``graphc.ndarray``, their
backward ops by ``N.grad``, ``im2col``/``col2im`` by the optimiser's lowering of
convolutions and by ``grad``. The generator reproduces the CPU kernels' order of
operations, so every comparison is bit for bit (signed zeros included; NaN where
the CPU has NaN), sums too. Values include ties, signed zeros, infinities and NaN.
Finally all sources of the run are compiled to PTX with nvcc in one ``.cu``. Each
part skips when its compiler is missing. The CPU kernel itself is held to a float64
loop reference for the max-pooling gradient (no compiler needed).
"""
from __future__ import annotations

import ctypes
import subprocess
from collections import Counter

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.engine.cuda_window import KINDS, supported, window_kernel
from graphc.engine.cpu_kernels import KERNELS
from graphc.optimiser.lowering import LOWERING
from graphc.optimiser.rewriter import rewrite
from graphc.shape.neural import pool_output_size
from graphc.shape.rules import infer
from graphc.type import Op
from graphc.type.errors import ShapeError

from c_kernels import _BUILD, GCC, NVCC, RAW_SEEN as SEEN, load_raw as load, run_raw
from neural_reference import ref_max_pool_backward

needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc is not installed")
DTYPES = ("float32", "float64")
STATS: Counter = Counter()           # what the properties exercised


def run_source(src, inputs, out_shape, dtype):
    arrays = [np.ascontiguousarray(a, dtype) for a in inputs]
    out = np.full(out_shape, 12345.0, dtype)  # every element must be written
    assert src.threads == out.size and len(src.args) == len(arrays) + 1
    run_raw(src, arrays, out)
    return out


def cpu(op, inputs, out_shape, dtype):
    out = np.empty(out_shape, dtype)
    with np.errstate(all="ignore"):
        KERNELS[op.kind](op, [np.asarray(a, dtype) for a in inputs], out, None)()
    return out


def assert_bitwise(got, want, what=""):
    """Equal bit for bit, except that any NaN equals any NaN."""
    assert got.shape == want.shape and got.dtype == want.dtype, what
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=what)
    bits = f"u{want.itemsize}"
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits), err_msg=what)


def check(op, inputs, out_shape):
    """The generated kernel of ``op`` against the CPU kernel, in both dtypes (one gcc call)."""
    shapes = [np.shape(a) for a in inputs]
    sources = [window_kernel(op, shapes, [d] * len(inputs), out_shape, d) for d in DTYPES]
    load(sources)
    results = []
    for src, dtype in zip(sources, DTYPES):
        want = cpu(op, inputs, out_shape, dtype)
        assert_bitwise(run_source(src, inputs, out_shape, dtype), want, f"{op} {dtype}")
        results.append(want)
    return results


# -- values --------------------------------------------------------------------------------
TIES = [0.0, -0.0, 1.0, -1.0, 2.0, 2.0, np.inf, -np.inf]
SPECIALS = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0]


def values(rng, shape, style):
    a = rng.standard_normal(shape)
    if style == "ties":                  # few distinct values: ties in most windows
        a = rng.choice(TIES + [np.nan] * rng.integers(0, 2), shape)
    elif style == "specials":            # a sprinkling of NaN, infinities, signed zeros
        mask = rng.random(shape) < 0.15
        a[mask] = rng.choice(SPECIALS, int(mask.sum()))
    elif style == "zeros":               # signed zeros only: sums 0 + -0.0
        a = rng.choice([0.0, -0.0], shape)
    return a.astype(np.float32).astype(np.float64)  # exact in both dtypes


def has_ties(x, y, op):
    """Whether some window has two or more cells matching its pooled value."""
    (kh, kw), (sh, sw), ((pt, _), (pl, _)) = op["kernel"], op["stride"], op["padding"]
    for n, c, oh, ow in np.ndindex(*y.shape):
        h0, w0, m = oh * sh - pt, ow * sw - pl, y[n, c, oh, ow]
        cells = x[n, c, max(h0, 0):h0 + kh, max(w0, 0):w0 + kw]
        if np.sum((cells == m) | (np.isnan(cells) & np.isnan(m))) > 1:
            return True
    return False


# -- nodes, built as graphc builds them ---------------------------------------------------
def find(node, kind):
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n.op.kind == kind:
            return n
        if id(n) not in seen:
            seen.add(id(n))
            stack.extend(n.parents)
    return None


def lowered(node, kind):
    return find(rewrite([node], LOWERING.rewrite_node)[0][0], kind)


@st.composite
def geometries(draw, pool):
    k = tuple(draw(st.integers(1, 3), label="kernel") for _ in range(2))
    stride = tuple(draw(st.integers(1, 3), label="stride") for _ in range(2))
    pad = tuple((draw(st.integers(0, kk // 2)), draw(st.integers(0, kk // 2))) for kk in k)
    dil = (1, 1) if pool else tuple(draw(st.integers(1, 2), label="dilation") for _ in range(2))
    hw = tuple(draw(st.integers(max(1, (kk - 1) * d + 1 - sum(p)), 9))
               for kk, d, p in zip(k, dil, pad))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3))) + hw
    return dict(shape=shape, kernel=k, stride=stride, padding=pad, dilation=dil,
                ceil_mode=draw(st.booleans()), count_include_pad=draw(st.booleans()))


def pool_node(kind, geo):
    x = N.var("x", geo["shape"])
    attrs = dict(stride=geo["stride"], padding=geo["padding"], ceil_mode=geo["ceil_mode"])
    try:
        if kind.startswith("max"):
            y = N.max_pool2d(x, geo["kernel"], **attrs)
        else:
            y = N.avg_pool2d(x, geo["kernel"], count_include_pad=geo["count_include_pad"],
                             **attrs)
    except ShapeError:   # a window of padding only: graphc refuses the geometry
        assume(False)
    return N.grad(y, x, seed=N.var("g", y.shape)) if kind.endswith("backward") else y


def conv_node(kind, geo, layout):
    """An ``im2col``/``col2im`` node from the lowering of a convolution or its input or
    kernel gradient, else from ``grad`` of a lowered ``im2col`` (its transpose)."""
    c = geo["shape"][1]
    x, w = N.var("x", geo["shape"]), N.var("w", (2, c) + geo["kernel"])
    conv = N.conv2d(x, w, stride=geo["stride"], padding=geo["padding"],
                    dilation=geo["dilation"])
    g = N.var("g", conv.shape)
    if kind == "col2im":
        node = lowered(N.grad(conv, x, seed=g), "col2im")
        if node is None:  # stride 1: lowered as a forward convolution instead
            cols = lowered(conv, "im2col")
            node = cols if cols is None else N.grad(cols, x, seed=N.var("gc", cols.shape))
    else:
        node = lowered(conv if layout == "batch" else N.grad(conv, w, seed=g), "im2col")
        assert node is None or node.op["layout"] == layout
    STATS[f"{kind} from graphc" if node is not None else f"{kind} by Op.make"] += 1
    if node is not None:
        return node.op, [p.shape for p in node.parents], node.shape
    # a pointwise convolution needs no columns: the lowering's attributes, by hand
    window = dict(kernel=geo["kernel"], stride=geo["stride"], padding=geo["padding"],
                  dilation=geo["dilation"])
    im2col = Op.make("im2col", layout=layout, **window)
    cols_shape = infer(im2col, [x])[0]
    if kind == "im2col":
        return im2col, [geo["shape"]], cols_shape
    return Op.make("col2im", shape=geo["shape"], **window), [cols_shape], geo["shape"]


# -- the properties --------------------------------------------------------------------------
CEIL = dict(shape=(2, 3, 6, 7), kernel=(3, 2), stride=(2, 3), padding=((1, 1), (1, 0)),
            dilation=(1, 1), ceil_mode=True, count_include_pad=False)
# found by hypothesis: windows whose maximum is NaN, read by a tap through a strided
# region of 18 cells; the CPU kernel's np.isnan into that strided mask (NumPy 2.4) lost
# the NaN at flat index 12, so the CPU gave 0 where the generated kernel was right
NAN_STRIDED = dict(shape=(2, 3, 3, 5), kernel=(1, 2), stride=(1, 3),
                   padding=((0, 0), (1, 0)), dilation=(1, 1), ceil_mode=False,
                   count_include_pad=False)


@settings(max_examples=25, deadline=None)
@given(geo=geometries(pool=True), seed=st.integers(0, 2**32 - 1),
       style=st.sampled_from(["ties", "specials", "normal", "zeros"]),
       perturb=st.booleans())
@example(geo=CEIL, seed=0, style="ties", perturb=True)    # ceil_mode's extra window,
@example(geo=CEIL, seed=1, style="specials", perturb=False)  # ties, NaN: always tried
@example(geo=dict(CEIL, count_include_pad=True), seed=2, style="normal", perturb=False)
@example(geo=NAN_STRIDED, seed=0, style="ties", perturb=False)
def _pool_property(kind, geo, seed, style, perturb):
    node = pool_node(kind, geo)
    op, rng = node.op, np.random.default_rng(seed)
    assert op.kind == kind, op
    x = values(rng, geo["shape"], style)
    oh, ow = node.shape[2:] if not kind.endswith("backward") else node.parents[-1].shape[2:]
    floor = [pool_output_size(s, k, st_, p, False) for s, k, st_, p in zip(
        geo["shape"][2:], geo["kernel"], geo["stride"], geo["padding"])]
    STATS[f"{kind} ceil window"] += [oh, ow] != floor
    STATS[f"{kind} padding"] += op["padding"] != ((0, 0), (0, 0))
    if kind == "max_pool2d_backward":
        pooled = node.parents[1]
        assert pooled.op.kind == "max_pool2d" and pooled.parents[0] is node.parents[0]
        y = cpu(pooled.op, [x], pooled.shape, "float64")
        if perturb:       # pooled values that match no cell, or a NaN
            mask = rng.random(y.shape) < 0.3
            y[mask] = rng.choice([np.nan, 0.5, 7.0], int(mask.sum()))
        STATS[f"{kind} ties"] += has_ties(x, y, op)
        STATS[f"{kind} NaN window"] += bool(np.isnan(y).any())
        inputs = [x, y, values(rng, y.shape, "normal" if style != "zeros" else "zeros")]
    elif kind == "avg_pool2d_backward":
        inputs = [values(rng, node.parents[0].shape, style)]
    else:
        inputs = [x]
    (want, _) = check(op, inputs, node.shape)
    STATS[f"{kind} NaN out"] += bool(np.isnan(want).any())
    STATS[f"{kind} examples"] += 1


@settings(max_examples=25, deadline=None)
@given(geo=geometries(pool=False), seed=st.integers(0, 2**32 - 1),
       style=st.sampled_from(["specials", "normal", "zeros"]),
       layout=st.sampled_from(["batch", "flat"]))
def _conv_property(kind, geo, seed, style, layout):
    op, shapes, out_shape = conv_node(kind, geo, "batch" if kind == "col2im" else layout)
    check(op, [values(np.random.default_rng(seed), shapes[0], style)], out_shape)
    STATS[f"{kind} {'flat' if op.get('layout') == 'flat' else 'batch'}"] += 1
    STATS[f"{kind} dilation"] += op["dilation"] != (1, 1)
    STATS[f"{kind} examples"] += 1


@needs_gcc
@pytest.mark.parametrize("kind", ["max_pool2d", "max_pool2d_backward", "avg_pool2d",
                                  "avg_pool2d_backward"])
def test_pooling_matches_the_cpu_kernel(kind):
    STATS.clear()
    _pool_property(kind)
    assert STATS[f"{kind} examples"] >= 10, STATS
    assert STATS[f"{kind} ceil window"] and STATS[f"{kind} padding"], STATS
    if kind.startswith("max"):
        assert STATS[f"{kind} NaN out"] or STATS[f"{kind} NaN window"], STATS
    if kind == "max_pool2d_backward":
        assert STATS[f"{kind} ties"] and STATS[f"{kind} NaN window"], STATS


@needs_gcc
@pytest.mark.parametrize("kind", ["im2col", "col2im"])
def test_columns_match_the_cpu_kernel(kind):
    STATS.clear()
    _conv_property(kind)
    assert STATS[f"{kind} examples"] >= 10 and STATS[f"{kind} dilation"], STATS
    assert STATS[f"{kind} from graphc"] >= STATS[f"{kind} by Op.make"], STATS
    if kind == "im2col":
        assert STATS["im2col flat"] and STATS["im2col batch"], STATS


def test_every_window_kind_is_covered():
    assert set(KINDS) == {"im2col", "col2im", "max_pool2d", "max_pool2d_backward",
                          "avg_pool2d", "avg_pool2d_backward"}
    assert set(KINDS) <= set(KERNELS)


# -- the CPU kernel against a float64 loop reference -----------------------------------------
@settings(max_examples=40, deadline=None)
@given(geo=geometries(pool=True), seed=st.integers(0, 2**32 - 1),
       style=st.sampled_from(["ties", "specials", "nan"]),
       dtype=st.sampled_from(DTYPES))
@example(geo=NAN_STRIDED, seed=0, style="ties", dtype="float32")
@example(geo=NAN_STRIDED, seed=0, style="ties", dtype="float64")
def test_max_pool_backward_matches_a_loop_reference(geo, seed, style, dtype):
    """The gradient of ``N.max_pool2d`` (compiled and eager) is a loop over the windows
    sending each window's gradient to its first cell, row-major, equal to its maximum, or
    to its first NaN (``np.argmax``'s rule). Needs no gcc: this is the CPU kernel's truth."""
    rng = np.random.default_rng(seed)
    if style == "nan":   # NaN maxima in most windows, whatever the stride
        x = rng.choice([np.nan, np.nan, 1.0, -np.inf, 0.0], geo["shape"])
    else:
        x = values(rng, geo["shape"], style)
    x = x.astype(dtype)
    kw = dict(stride=geo["stride"], padding=geo["padding"], ceil_mode=geo["ceil_mode"])
    xv = N.var("x", geo["shape"], dtype)
    try:
        y = N.max_pool2d(xv, geo["kernel"], **kw)
    except ShapeError:   # a window of padding only: graphc refuses the geometry
        assume(False)
    # small integers: every sum of gradients is exact in float32, in any order
    g = rng.integers(-8, 9, y.shape).astype(dtype)
    gv = N.var("g", y.shape, dtype)
    (compiled,) = graphc.compile([xv, gv], [N.grad(y, xv, seed=gv)]).run(x=x, g=g)
    eager = E.max_pool2d_backward(x, E.max_pool2d(x, geo["kernel"], **kw), g,
                                  geo["kernel"], **kw)
    want = ref_max_pool_backward(x.astype(np.float64), g.astype(np.float64), geo["kernel"],
                                 geo["stride"], geo["padding"], geo["ceil_mode"])
    np.testing.assert_array_equal(compiled, want.astype(dtype))
    np.testing.assert_array_equal(eager, want.astype(dtype))


# -- the semantics, by hand ---------------------------------------------------------------
def pool(kind, x, kernel, stride, padding=0, ceil_mode=False, count_include_pad=True, g=None):
    """The float64 result of one pooling node (or its gradient, given ``g``) after
    checking the generated kernel against the CPU kernel in both dtypes."""
    x = np.asarray(x, np.float64).reshape((1, 1) + np.shape(x)[-2:])
    xv = N.var("x", x.shape)
    extra = {} if kind == "max" else {"count_include_pad": count_include_pad}
    y = getattr(N, f"{kind}_pool2d")(xv, kernel, stride=stride, padding=padding,
                                      ceil_mode=ceil_mode, **extra)
    if g is None:
        return check(y.op, [x], y.shape)[1][0, 0]
    node = N.grad(y, xv, seed=N.var("g", y.shape))
    g = np.asarray(g, np.float64).reshape(y.shape)
    inputs = [x, cpu(y.op, [x], y.shape, "float64"), g] if kind == "max" else [g]
    return check(node.op, inputs, node.shape)[1][0, 0]


@needs_gcc
def test_max_pool_gradient_goes_to_the_first_maximum():
    x = [[1, 3, 3], [3, 2, 0], [0, 3, 3]]  # every window has a tie
    np.testing.assert_array_equal(pool("max", x, 2, 1), [[3, 3], [3, 3]])
    np.testing.assert_array_equal(pool("max", x, 2, 1, g=[[1, 2], [4, 8]]),
                                  [[0, 3, 0], [4, 0, 0], [0, 8, 0]])


@needs_gcc
def test_max_pool_nan_wins_and_takes_the_gradient():
    x = [[1, np.nan, np.nan, 5]]
    np.testing.assert_array_equal(pool("max", x, (1, 2), 1), [[np.nan] * 3])
    np.testing.assert_array_equal(pool("max", x, (1, 2), 1, g=[[1, 2, 4]]), [[0, 3, 4, 0]])


@needs_gcc
def test_max_pool_ignores_padding_and_keeps_np_maximum_ties():
    x = [[-5, -3]]
    np.testing.assert_array_equal(pool("max", x, (1, 3), 1, padding=(0, 1)), [[-3, -3]])
    np.testing.assert_array_equal(pool("max", x, (1, 3), 1, padding=(0, 1), g=[[1, 1]]),
                                  [[0, 2]])
    y = pool("max", [[0.0, -0.0, -0.0, 0.0]], (1, 2), 2)  # np.maximum(acc, x) on a tie
    want = [np.maximum(0.0, -0.0), np.maximum(-0.0, 0.0)]
    np.testing.assert_array_equal(np.signbit(y[0]), np.signbit(want))
    # the centre tap covers every window, so the CPU takes it first: the order shows in
    # which zero wins (check compares the signs)
    zeros = np.where(np.random.default_rng(0).random((6, 6)) < 0.5, 0.0, -0.0)
    pool("max", zeros, 3, 1, padding=1)
    pool("avg", zeros, 3, 1, padding=1)


@needs_gcc
def test_avg_pool_divisor_and_ceil_mode():
    # windows start at -1, 1, 3 and 5 (ceil_mode keeps the last, which hangs off the
    # padded input): the divisor counts padding only inside the padded input
    for axis in (0, 1):  # along the rows and along the columns
        def t(a, axis=axis):
            return np.reshape(a, (1, -1) if axis else (-1, 1))
        pair = (lambda a, b: (a, b)) if axis else (lambda a, b: (b, a))
        x = t([1, 2, 3, 4, 5, 6])
        args = dict(kernel=pair(1, 3), stride=pair(1, 2), padding=pair(0, 1), ceil_mode=True)
        np.testing.assert_array_equal(pool("avg", x, **args), t([1, 3, 5, 3]))
        np.testing.assert_array_equal(pool("avg", x, count_include_pad=False, **args),
                                      t([1.5, 3, 5, 6]))
        np.testing.assert_array_equal(pool("avg", x, g=t([3, 3, 6, 2]), **args),
                                      t([1, 2, 1, 3, 2, 3]))
        np.testing.assert_array_equal(pool("avg", x, count_include_pad=False,
                                           g=t([3, 3, 6, 2]), **args), t([1.5, 2.5, 1, 3, 2, 4]))


@needs_gcc
def test_im2col_and_col2im_by_hand():
    x = np.arange(1.0, 10.0).reshape(1, 1, 3, 3)
    op = Op.make("im2col", kernel=(2, 2), stride=(2, 2), padding=((1, 0), (0, 1)),
                 dilation=(1, 1), layout="batch")
    (cols, _) = check(op, [x], (1, 4, 4))
    np.testing.assert_array_equal(cols[0], [[0, 0, 4, 6], [0, 0, 5, 0], [1, 3, 7, 9],
                                            [2, 0, 8, 0]])
    back = Op.make("col2im", shape=(1, 1, 3, 3), kernel=(2, 2), stride=(1, 1),
                   padding=((0, 0), (0, 0)), dilation=(1, 1))
    (image, _) = check(back, [np.ones((1, 4, 4))], (1, 1, 3, 3))
    np.testing.assert_array_equal(image[0, 0], [[1, 2, 1], [2, 4, 2], [1, 2, 1]])


# -- sources, errors ------------------------------------------------------------------------
MAX = Op.make("max_pool2d", kernel=(3, 3), stride=(2, 2), padding=((1, 1), (1, 1)),
              ceil_mode=True)


def test_sources_are_stable_and_bake_the_geometry():
    a = window_kernel(MAX, [(2, 3, 9, 9)], ["float32"], (2, 3, 5, 5), "float32")
    b = window_kernel(MAX, [(2, 3, 9, 9)], [np.float32], (2, 3, 5, 5), np.dtype("float32"))
    c = window_kernel(MAX, [(2, 3, 9, 9)], ["float64"], (2, 3, 5, 5), "float64")
    d = window_kernel(MAX, [(2, 3, 8, 9)], ["float32"], (2, 3, 5, 5), "float32")
    assert a == b and len({a.name, c.name, d.name}) == 3 and a.name.isidentifier()
    assert a.threads == 150 and a.args == ("in0", "out") and a.grid == (1,)
    assert f'extern "C" __global__ void {a.name}(const float* in0, float* out)' in a.code
    assert "H = 9" in a.code and "KH = 3" in a.code and "double" in c.code


@pytest.mark.parametrize("op, shapes, dtypes, out_shape, out_dtype, message", [
    (MAX, [(1, 1, 4, 4)], ["float16"], (1, 1, 3, 3), "float16", "max_pool2d on float16"),
    (MAX, [(1, 1, 4, 4)], ["int32"], (1, 1, 3, 3), "int32", "max_pool2d on int32"),
    (Op.make("max_pool2d_backward", **MAX.params()), [(1, 1, 4, 4), (1, 1, 3, 3),
     (1, 1, 3, 3)], ["float32", "float64", "float32"], (1, 1, 4, 4), "float32",
     "max_pool2d_backward on float32/float64"),
    (Op.make("conv2d", stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1),
     [(1, 1, 4, 4), (1, 1, 3, 3)], ["float32"] * 2, (1, 1, 2, 2), "float32",
     "conv2d on float32"),
    (Op.make("lrn", size=3, alpha=1e-4, beta=0.75, k=1.0), [(1, 3, 2, 2)], ["float64"],
     (1, 3, 2, 2), "float64", "lrn on float64"),
    (Op.make("exp"), [(4,)], ["float32"], (4,), "float32", "exp on float32"),
])
def test_unsupported_is_a_clear_error(op, shapes, dtypes, out_shape, out_dtype, message):
    with pytest.raises(NotImplementedError, match=message):
        window_kernel(op, shapes, dtypes, out_shape, out_dtype)
    assert not supported(op, shapes, dtypes, out_shape, out_dtype)


def test_wrong_shapes_are_refused():
    for shapes, out_shape in [([(1, 1, 4, 4)], (1, 1, 2, 2)), ([(1, 1, 4, 4)] * 2, (1, 1, 3, 3)),
                              ([(1, 4, 4)], (1, 1, 3, 3))]:
        with pytest.raises(ValueError, match="cuda_window: max_pool2d"):
            window_kernel(MAX, shapes, ["float32"] * len(shapes), out_shape, "float32")
        assert not supported(MAX, shapes, ["float32"] * len(shapes), out_shape, "float32")
    assert supported(MAX, [(1, 1, 4, 4)], ["float64"], (1, 1, 3, 3), "float64")


# -- nvcc ---------------------------------------------------------------------------------
def test_nvcc_compiles_every_source(tmp_path):
    if NVCC is None:
        pytest.skip("nvcc is not installed")
    sources = dict(SEEN)
    for kind in KINDS:  # also when run alone: one node of each kind, both dtypes
        node = pool_node(kind, dict(shape=(2, 3, 9, 9), kernel=(3, 3), stride=(2, 2),
                                    padding=((1, 1), (1, 1)), ceil_mode=True,
                                    count_include_pad=False)) if "pool" in kind else None
        if node is None:
            geo = dict(shape=(2, 3, 9, 9), kernel=(3, 2), stride=(2, 1), padding=((1, 0),
                       (1, 1)), dilation=(1, 2))
            op, shapes, out_shape = conv_node(kind, geo, "flat" if kind == "im2col" else "batch")
        else:
            op, shapes, out_shape = node.op, [p.shape for p in node.parents], node.shape
        for d in DTYPES:
            src = window_kernel(op, shapes, [d] * len(shapes), out_shape, d)
            sources[src.name] = src
    cu, ptx = tmp_path / "windows.cu", tmp_path / "windows.ptx"
    cu.write_text("".join(s.code for s in sources.values()))
    result = subprocess.run([NVCC, "--ptx", "-arch=sm_90", "-o", str(ptx), str(cu)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]
    text = ptx.read_text()
    assert text.count(".entry") == len(sources)
    # sums stay plain IEEE adds and divisions (no contraction, no approximate division)
    assert "fma.rn" not in text and "div.approx" not in text and "div.full" not in text
    assert "div.rn.f32" in text and "div.rn.f64" in text
