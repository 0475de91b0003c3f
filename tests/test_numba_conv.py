"""The direct kernels of grouped and depthwise convolutions (graphc/engine/numba_conv.py,
conv_builders.py) against the NumPy kernels, the reference: the same graph compiled
with kernels="numpy" (lowered to im2col + GEMM) and kernels="generated" (kept whole,
run directly).

The direct kernels sum each cell's terms in another order than BLAS does, so results
agree to rounding, not bit for bit: within TOLERANCE (relative to the size of the
terms summed) of the float64 reference, in both dtypes. Geometries are drawn by
hypothesis (channels per group, groups, kernel, stride, padding, dilation, odd and
large sizes), forward and both backward kinds, serial and split across threads.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

numba = pytest.importorskip("numba")

import graphc  # noqa: E402
import graphc.eager as E  # noqa: E402
import graphc.ndarray as N  # noqa: E402
from graphc.engine import conv_builders as builders  # noqa: E402
from graphc.engine.conv_builders import conv_kernel, geometry  # noqa: E402
from graphc.optimiser import optimise  # noqa: E402
from graphc.optimiser.lowering import DIRECT_GROUP_CHANNELS  # noqa: E402
from graphc.type import Op  # noqa: E402

from gradcheck import finite_difference  # noqa: E402
from opcheck import examples  # noqa: E402

KINDS = ("conv2d", "conv2d_backward_input", "conv2d_backward_kernel")
#: error allowed per unit of sum(|term|) of a cell: a few ulps per term summed
TOLERANCE = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-14}


# -- graphs -------------------------------------------------------------------------------------
def convolution(kind, x, w, g, options):
    """The node of ``kind`` on the variables ``x`` (image), ``w`` (kernel), ``g`` (result's
    gradient)."""
    if kind == "conv2d":
        return N.conv2d(x, w, **options)
    if kind == "conv2d_backward_input":
        return N.conv2d_backward_input(g, w, x.shape, **options)
    return N.conv2d_backward_kernel(x, g, w.shape, **options)


def inputs_of(kind):
    return {"conv2d": "xw", "conv2d_backward_input": "gw", "conv2d_backward_kernel": "xg"}[kind]


def compile_both(kind, shapes, options, dtype, **compile_options):
    """The node of ``kind`` compiled with each kernel choice: {choice: executable}."""
    vs = {name: N.var(name, shape, dtype) for name, shape in shapes.items()}
    node = convolution(kind, vs["x"], vs["w"], vs["g"], options)
    used = [vs[name] for name in inputs_of(kind)]
    return {k: graphc.compile(used, node, kernels=k, **compile_options)
            for k in ("numpy", "generated")}


def magnitude(kind, arrays, options):
    """Per cell of the result, sum(|term|): the same op on the absolute values."""
    absolute = {name: np.abs(a).astype(np.float64) for name, a in arrays.items()}
    xs = [absolute[name] for name in inputs_of(kind)]
    if kind == "conv2d":
        return np.asarray(E.conv2d(*xs, **options))
    if kind == "conv2d_backward_input":
        return np.asarray(E.conv2d_backward_input(*xs, absolute["x"].shape, **options))
    return np.asarray(E.conv2d_backward_kernel(*xs, absolute["w"].shape, **options))


def assert_agree(got, reference, scale, dtype, what):
    """``got`` within :data:`TOLERANCE` of ``reference`` per unit of ``scale``."""
    allowed = TOLERANCE[np.dtype(dtype)] * (scale + 1.0)
    error = np.abs(got.astype(np.float64) - reference)
    assert got.shape == reference.shape and got.dtype == dtype, what
    assert np.all(error <= allowed), (f"{what}: error {error.max():.3g} over "
                                      f"{allowed.ravel()[error.argmax()]:.3g} allowed")


def check_kind(kind, shapes, options, dtype, seed=0, **compile_options):
    """The direct kernel of ``kind`` runs (the node is not lowered) and agrees with the
    NumPy kernels, both compared with the float64 NumPy result."""
    rng = np.random.default_rng(seed)
    arrays = {name: rng.standard_normal(shape) for name, shape in shapes.items()}
    feeds = {name: arrays[name].astype(dtype) for name in inputs_of(kind)}
    both = compile_both(kind, shapes, options, dtype, **compile_options)
    exact = compile_both(kind, shapes, options, np.float64)["numpy"]
    reference = exact.run(**{n: a.astype(np.float64) for n, a in feeds.items()})
    scale = magnitude(kind, {n: a.astype(np.float64) for n, a in arrays.items()}, options)
    assert both["generated"].stats()["ops"].get(kind) == 1        # kept whole
    assert both["generated"].stats()["generated_steps"] == 1      # and run directly
    for choice, executable in both.items():
        assert_agree(executable.run(**feeds), reference, scale, dtype,
                     f"{kind} {choice} {shapes} {options}")


@st.composite
def grouped_convolutions(draw):
    """(shapes of x, w, g; conv2d options): any geometry the direct kernel takes."""
    groups, per_group = draw(st.integers(2, 4)), draw(st.integers(1, 3))
    channels = draw(st.sampled_from([1, 1, 2, 3, DIRECT_GROUP_CHANNELS]))
    kernel = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(2))
    sides = st.integers(1, 13) | st.integers(40, 75)     # large: several blocks of rows
    hw = (draw(sides), draw(sides))
    out_hw = tuple((size + sum(pad) - (k - 1) * d - 1) // s + 1 for size, pad, k, d, s in
                   zip(hw, padding, kernel, dilation, stride))
    assume(min(out_hw) >= 1)
    n = draw(st.integers(1, 2))
    shapes = {"x": (n, channels * groups) + hw,
              "w": (per_group * groups, channels) + kernel,
              "g": (n, per_group * groups) + out_hw}
    return shapes, dict(stride=stride, padding=padding, dilation=dilation, groups=groups)


# -- every kind on drawn geometries ------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
@examples(40)
@given(grouped_convolutions(), st.integers(0, 2 ** 16))
def test_direct_kernel_matches_numpy_float64(kind, case, seed):
    shapes, options = case
    check_kind(kind, shapes, options, np.float64, seed)


#: one geometry per layout the kernels walk (conv_builders.layout): x (N, C, H, W), w
LAYOUT_CASES = {
    "shifted": ((2, 6, 9, 11), (6, 2, 3, 3), dict(stride=1, padding=1, groups=3)),
    "phases": ((1, 8, 13, 12), (8, 2, 5, 3), dict(stride=2, padding=(2, 1), groups=4)),
    "rows": ((1, 4, 10, 9), (8, 2, 3, 3), dict(stride=1, padding=0, dilation=2, groups=2)),
    "channels_last": ((2, 24, 7, 7), (24, 1, 3, 3), dict(stride=1, padding=1, groups=24)),
    "channels_last_strided": ((1, 40, 13, 13), (40, 1, 3, 3),
                              dict(stride=2, padding=1, groups=40)),
    "padded": ((2, 16, 15, 17), (16, 1, 3, 3), dict(stride=1, padding=1, groups=16)),
    "padded_uneven": ((1, 8, 12, 20), (8, 1, 5, 3),
                      dict(stride=1, padding=((2, 1), (0, 3)), dilation=(1, 2), groups=8)),
    # an explicit "same" pad then a strided convolution: phase rows wider than the result's
    "padded_strided": ((1, 8, 31, 33), (8, 1, 5, 3), dict(stride=2, padding=0, groups=8)),
}


def test_layout_cases_cover_every_layout():
    found = set()
    for x, w, options in LAYOUT_CASES.values():
        node = N.conv2d(N.var("x", x), N.var("w", w), **options)
        shape = geometry(node.op, [np.empty(x), np.empty(w)], np.empty(node.shape))
        found.add(builders.layout(shape, depthwise=w[1] == 1 and w[0] == options["groups"]))
    assert found == {builders.ROWS, builders.SHIFTED, builders.PHASES,
                     builders.CHANNELS_LAST, builders.PADDED}


def layout_shapes(name):
    x, w, options = LAYOUT_CASES[name]
    out = N.conv2d(N.var("x", x), N.var("w", w), **options).shape
    return {"x": x, "w": w, "g": out}, options


@pytest.mark.parametrize("name", sorted(LAYOUT_CASES))
@pytest.mark.parametrize("kind", KINDS)
def test_direct_kernel_matches_numpy_float32(kind, name):
    shapes, options = layout_shapes(name)
    check_kind(kind, shapes, options, np.float32)


@pytest.mark.parametrize("schedule", ["serial", "parallel"])
@pytest.mark.parametrize("kind", KINDS)
def test_threaded_and_under_a_parallel_schedule(kind, schedule):
    # large enough to split across threads in the serial schedule; a parallel schedule
    # runs the kernel on one thread (the schedule uses the cores)
    shapes = {"x": (2, 32, 40, 40), "w": (32, 1, 3, 3), "g": (2, 32, 20, 20)}
    check_kind(kind, shapes, dict(stride=2, padding=1, groups=32), np.float64,
               schedule=schedule)


# -- what the optimiser does with each kernel choice --------------------------------------------
def depthwise_training_graph():
    x, w = N.var("x", (2, 8, 10, 10)), N.var("w", (8, 1, 3, 3))
    loss = N.sum(N.conv2d(x, w, padding=1, groups=8) ** 2)
    return [x, w], N.grad(loss, [x, w])


def test_generated_kernels_keep_depthwise_convolutions_whole():
    inputs, grads = depthwise_training_graph()
    kept = graphc.compile(inputs, grads, kernels="generated").stats()["ops"]
    lowered = graphc.compile(inputs, grads, kernels="numpy").stats()["ops"]
    assert kept.get("conv2d") == 1 and kept.get("conv2d_backward_input") == 1
    assert kept.get("conv2d_backward_kernel") == 1 and "im2col" not in kept
    assert not set(KINDS) & set(lowered) and lowered.get("im2col", 0) >= 1


def test_wide_groups_and_one_group_are_still_lowered():
    x = N.var("x", (1, 4 * (DIRECT_GROUP_CHANNELS + 1), 8, 8))
    wide = N.conv2d(x, N.var("w", (8, DIRECT_GROUP_CHANNELS + 1, 3, 3)), padding=1, groups=4)
    dense = N.conv2d(x, N.var("v", (8, x.shape[1], 3, 3)), padding=1)
    for node in (wide, dense):
        root = optimise([node], kernels="generated").roots[0]
        assert root.op.kind != "conv2d"      # lowered: a reshape of the GEMM


def test_optimise_names_a_bad_kernel_choice():
    with pytest.raises(ValueError, match="optimise: unknown kernels='gpu'"):
        optimise([N.var("x", (3,))], kernels="gpu")


def test_unlowered_convolutions_the_kernel_does_not_take_run_their_decomposition():
    # optimise=False keeps every convolution whole: one group, which the direct kernel does
    # not take, runs its decomposition with generated steps (the GEMM on the team's
    # threads, engine/numba_gemm.py) where they serve, else NumPy's kernel
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3))
    xv, wv = N.var("x", x.shape, np.float64), N.var("w", w.shape, np.float64)
    got = graphc.compile([xv, wv], N.conv2d(xv, wv, padding=1), optimise=False,
                         kernels="generated")
    want = graphc.compile([xv, wv], N.conv2d(xv, wv, padding=1), optimise=False,
                          kernels="numpy")
    from graphc.engine.numba_gemm import unavailable
    assert got.stats()["generated_steps"] == (0 if unavailable() else 1)
    np.testing.assert_allclose(got.run(x=x, w=w), want.run(x=x, w=w), rtol=1e-12,
                               atol=1e-12)


def test_the_builder_refuses_an_output_of_the_wrong_shape():
    op = Op.make("conv2d", stride=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=2)
    x, w = np.ones((1, 2, 4, 4)), np.ones((2, 1, 3, 3))
    with pytest.raises(ValueError, match=r"conv2d: .* output of shape \(1, 2, 4, 4\)"):
        conv_kernel(op, [x, w], np.empty((1, 2, 3, 3)), None, threaded=False)


def test_the_builder_declines_what_it_does_not_cover():
    op = Op.make("conv2d", stride=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=2)
    x, w, out = np.ones((1, 2, 4, 4)), np.ones((2, 1, 3, 3)), np.empty((1, 2, 4, 4))
    strided = np.ones((1, 2, 4, 8))[..., ::2]
    assert conv_kernel(op, [strided, w], out, None, threaded=False) is None
    assert conv_kernel(op, [x.astype(np.float16), w.astype(np.float16)],
                       out.astype(np.float16), None, threaded=False) is None
    one_group = Op.make("conv2d", stride=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1),
                        groups=1)
    assert conv_kernel(one_group, [x, np.ones((2, 2, 3, 3))], out, None, False) is None


# -- a mobile block, and gradients ------------------------------------------------------------
def inverted_residual(x, expand, depthwise, project):
    """MobileNetV2's block: 1x1 expansion, ReLU6, depthwise 3x3, ReLU6, 1x1 projection,
    and the residual."""
    hidden = N.clip(N.conv2d(x, expand), 0.0, 6.0)
    hidden = N.clip(N.conv2d(hidden, depthwise, padding=1, groups=depthwise.shape[0]), 0.0, 6.0)
    return x + N.conv2d(hidden, project)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mobilenet_block_agrees_with_numpy(dtype):
    rng = np.random.default_rng(2)
    shapes = {"x": (2, 8, 14, 14), "e": (48, 8, 1, 1), "d": (48, 1, 3, 3), "p": (8, 48, 1, 1)}
    arrays = {k: (rng.standard_normal(s) * (0.3 if k != "x" else 1.0)).astype(dtype)
              for k, s in shapes.items()}
    vs = {k: N.var(k, s, dtype) for k, s in shapes.items()}
    y = inverted_residual(vs["x"], vs["e"], vs["d"], vs["p"])
    compiled = {k: graphc.compile(list(vs.values()), y, kernels=k)
                for k in ("numpy", "generated")}
    assert "im2col" in compiled["numpy"].stats()["ops"]          # the depthwise lowered
    assert "im2col" not in compiled["generated"].stats()["ops"]  # kept whole
    results = {k: executable.run(**arrays) for k, executable in compiled.items()}
    tolerance = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(results["generated"], results["numpy"], rtol=tolerance,
                               atol=tolerance * np.abs(results["numpy"]).max())


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_gradients_match_finite_differences(stride):
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 3, 7, 6)), rng.standard_normal((3, 1, 3, 3))
    weights = rng.uniform(0.5, 1.5, (2, 3, math.ceil(7 / stride), math.ceil(6 / stride)))

    def loss(M, x, w):
        return M.sum(M.multiply(M.conv2d(x, w, stride=stride, padding=1, groups=3), weights))

    xv, wv = N.var("x", x.shape, np.float64), N.var("w", w.shape, np.float64)
    grads = graphc.compile([xv, wv], N.grad(loss(N, xv, wv), [xv, wv]), kernels="generated")
    assert grads.stats()["ops"].get("conv2d_backward_kernel") == 1
    got = grads.run(x=x, w=w)
    for i, (gradient, array) in enumerate(zip(got, (x, w))):
        numeric = finite_difference(lambda *a: float(loss(E, *a)), [x, w], i, 1e-6)
        np.testing.assert_allclose(gradient, numeric, rtol=1e-6, atol=1e-7)
