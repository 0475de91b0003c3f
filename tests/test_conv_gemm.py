"""One convolution-as-GEMM decomposition (graphc.operator.conv_gemm) for every path: the
optimiser's lowering runs it to make nodes, the engine's convolution kernels (eager mode,
unoptimised graphs, 1x1 convolutions the lowering keeps) run it to bind arrays. Both make
the same ops on the same shapes, and agree with the float64 loop references."""
import contextlib
import tracemalloc
from unittest import mock

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import assume, example, given
from neural_reference import (SEEDS, conv_cases, output_shape, padded, ref_conv,
                              ref_conv_backward_input, ref_conv_backward_kernel, tolerance)
from opcheck import examples

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.operator.conv_gemm import DECOMPOSITIONS
from graphc.ops.conv_kernels import BindingNamespace, decomposed_kernel
from graphc.optimiser.lowering import LOWERING, NodeNamespace
from graphc.type.errors import ShapeError

KINDS = ("conv2d", "conv2d_backward_input", "conv2d_backward_kernel")


@st.composite
def geometries(draw):
    """``conv_cases`` (groups, dilation, strides, paddings, batches of 1 and 2), one in
    three made a 1x1, stride 1, unpadded convolution: the GEMM that needs no columns."""
    case = draw(conv_cases())
    if draw(st.integers(0, 2)):
        return case
    (o, cg), (_, dilation, groups) = case["w_shape"][:2], case["geometry"][1:]
    return dict(x_shape=case["x_shape"], w_shape=(o, cg, 1, 1),
                kwargs=dict(stride=1, padding=0, dilation=dilation, groups=groups),
                geometry=((1, 1), ((0, 0), (0, 0)), dilation, groups), terms=cg)


def _case(x_shape, w_shape, stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1):
    return dict(x_shape=x_shape, w_shape=w_shape,
                kwargs=dict(stride=stride, padding=padding, dilation=dilation, groups=groups),
                geometry=(stride, padding, dilation, groups), terms=w_shape[1] * 9)


#: the special cases of the decomposition, always tried: a 1x1 of one image and of two,
#: grouped; a dilated grouped 3x3 of one image
SPECIAL = [_case((1, 4, 3, 5), (6, 2, 1, 1), groups=2), _case((2, 3, 4, 4), (2, 3, 1, 1)),
           _case((1, 4, 7, 6), (4, 2, 3, 3), (2, 1), ((2, 1), (1, 1)), (2, 1), 2)]


def operand_shapes(kind, case):
    g_shape = output_shape(case)
    return {"conv2d": (case["x_shape"], case["w_shape"]),
            "conv2d_backward_input": (g_shape, case["w_shape"]),
            "conv2d_backward_kernel": (case["x_shape"], g_shape)}[kind]


def convolve(ns, kind, a, b, case):
    """``kind`` of operands ``a``, ``b`` with the case's geometry, in namespace ``ns``."""
    kw = case["kwargs"]
    if kind == "conv2d":
        return ns.conv2d(a, b, **kw)
    if kind == "conv2d_backward_input":
        return ns.conv2d_backward_input(a, b, case["x_shape"], **kw)
    return ns.conv2d_backward_kernel(a, b, case["w_shape"], **kw)


def reference(kind, a, b, case):
    stride, pad, dil, groups = case["geometry"]
    if kind == "conv2d":
        return ref_conv(a, b, stride, pad, dil, groups)
    if kind == "conv2d_backward_input":
        return ref_conv_backward_input(a, b, case["x_shape"], stride, pad, dil, groups)
    return ref_conv_backward_kernel(a, b, case["w_shape"], stride, pad, dil, groups)


def three_paths(kind, case, a, b):
    """``kind`` on arrays ``a``, ``b``: eagerly, in an unoptimised graph and in a lowered
    graph whose operands are computed values used once (so even a 1x1 is lowered)."""
    results = {"eager": convolve(E, kind, a, b, case)}
    va, vb = N.var("a", a.shape, a.dtype), N.var("b", b.shape, b.dtype)
    plain = graphc.compile([va, vb], convolve(N, kind, va, vb, case), optimise=False, kernels="numpy")
    results["unoptimised"] = plain.run(a=a, b=b)
    # x + 0.0 is no identity by default (-0.0 + 0.0 is +0.0): a computed operand
    lowered = graphc.compile([va, vb], convolve(N, kind, va + 0.0, vb + 0.0, case), check=True, kernels="numpy")
    assert not set(KINDS) & set(lowered.stats()["ops"]), "lowered"
    results["lowered"] = lowered.run(a=a, b=b)
    return results


@contextlib.contextmanager
def recorded_decompositions():
    """Every run of a decomposition while inside, as ``(namespace class, [(op, operand
    shapes) of each op it applied])``."""
    runs = []

    def spy(decomposition):
        def run(ns, a, b, op):
            applied, apply = [], ns._apply

            def recording(step, parents):
                applied.append((step, tuple(tuple(p.shape) for p in parents)))
                return apply(step, parents)
            ns._apply = recording
            runs.append((type(ns), applied))
            return decomposition(ns, a, b, op)
        return run
    with mock.patch.dict(DECOMPOSITIONS, {k: spy(f) for k, f in DECOMPOSITIONS.items()}):
        yield runs


@examples(30)
@given(geometries(), st.sampled_from(KINDS))
def test_every_path_runs_the_one_decomposition(case, kind):
    """Eager, unoptimised and lowered: the same ops on the same shapes, so the same BLAS
    calls (the engine binds them to arrays, the lowering makes them nodes)."""
    assume(output_shape(case) is not None)
    a, b = (np.ones(s, np.float32) for s in operand_shapes(kind, case))
    with recorded_decompositions() as runs:
        three_paths(kind, case, a, b)
    # eager, the unoptimised graph's kernel (built a second time where it takes a
    # workspace: once more on the program's shared arena), then the lowering
    names = [ns for ns, _ in runs]
    assert names[0] is BindingNamespace and names[-1] is NodeNamespace
    assert names[1:-1] in ([BindingNamespace], [BindingNamespace] * 2)
    eager, lowered = runs[0][1], runs[-1][1]
    for _, unoptimised in runs[1:-1]:
        assert eager == unoptimised
    # the lowered operands are computed values: the same shapes, other nodes
    assert lowered == eager
    assert any(op.kind == "matmul" for op, _ in eager)


@examples(40)
@given(geometries(), st.sampled_from(KINDS), SEEDS)
@example(SPECIAL[0], "conv2d_backward_kernel", 0)
@example(SPECIAL[0], "conv2d", 0)
@example(SPECIAL[1], "conv2d_backward_kernel", 0)
@example(SPECIAL[2], "conv2d_backward_input", 0)
def test_integer_data_give_the_loop_references_bits_on_every_path(case, kind, seed):
    """Small integers: every sum is exact in any order, so each path has the float64
    loop reference's bits."""
    assume(output_shape(case) is not None)
    rng = np.random.default_rng(seed)
    a, b = (rng.integers(-3, 4, s).astype(np.float32) for s in operand_shapes(kind, case))
    want = reference(kind, a, b, case).astype(np.float32)
    for path, got in three_paths(kind, case, a, b).items():
        np.testing.assert_array_equal(got, want, err_msg=path)


@examples(30)
@given(geometries(), st.sampled_from(KINDS), st.sampled_from([np.float32, np.float64]), SEEDS)
def test_random_data_agree_with_the_loop_reference_on_every_path(case, kind, dtype, seed):
    assume(output_shape(case) is not None)
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal(s).astype(dtype) for s in operand_shapes(kind, case))
    want = reference(kind, a, b, case)
    for path, got in three_paths(kind, case, a, b).items():
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, **tolerance(dtype, case["terms"]), err_msg=path)


def _strided(a):
    """``a`` in Fortran order: no C-contiguous reshape of it is a view."""
    return np.asfortranarray(a)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", SPECIAL, ids=["1x1-one-image", "1x1", "3x3-dilated"])
def test_a_kernel_built_once_reads_its_inputs_at_each_run(kind, case):
    """Bound once, as in a compiled graph: each run reads the inputs' current values
    (Fortran-ordered ones too, which a reshape cannot view), writes ``out`` (Fortran-
    ordered too),
    and leaves its inputs as they were."""
    rng = np.random.default_rng(0)
    a, b = (_strided(rng.standard_normal(s)) for s in operand_shapes(kind, case))
    node = convolve(N, kind, N.var("a", a.shape, np.float64), N.var("b", b.shape, np.float64),
                    case)
    out = _strided(np.zeros(node.shape))
    run = graphc.engine.build_kernel(node.op, [a, b], out, None)
    for _ in range(2):
        a[...], b[...] = rng.standard_normal(a.shape), rng.standard_normal(b.shape)
        before = a.copy(), b.copy()
        run()
        np.testing.assert_allclose(out, reference(kind, a, b, case), rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(a, before[0])
        np.testing.assert_array_equal(b, before[1])


def test_a_convolution_kernel_allocates_its_columns_once():
    x, w = np.ones((2, 8, 16, 16), np.float32), np.ones((8, 8, 3, 3), np.float32)
    op = N.conv2d(N.var("x", x.shape), N.var("w", w.shape), padding=1).op
    out = np.empty((2, 8, 16, 16), np.float32)
    columns = 2 * 8 * 9 * 16 * 16 * 4
    tracemalloc.start()
    try:
        run = decomposed_kernel(op, [x, w], out, None)
        built = tracemalloc.get_traced_memory()[0]
        assert built >= columns             # the columns, allocated while building
        tracemalloc.reset_peak()
        run()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - built < columns // 4, "a run allocated a workspace"
    assert np.all(out[:, :, 1:-1, 1:-1] == 72)   # 8 channels x 9 taps of ones


def test_lowering_is_a_pass_of_rules_over_the_decomposed_kinds():
    assert LOWERING.function is None
    assert {rule.pattern.kinds for rule in LOWERING.rules} == set(DECOMPOSITIONS) == set(KINDS)


# -- im2col / col2im, the namespace functions ----------------------------------------------
def ref_im2col(x, kernel, stride, pad, dil, layout):
    """Loops: row (c, i, j) of the columns holds tap (i, j) of channel c of every window."""
    n, c = x.shape[:2]
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dil
    oh = (x.shape[2] + sum(pad[0]) - (kh - 1) * dh - 1) // sh + 1
    ow = (x.shape[3] + sum(pad[1]) - (kw - 1) * dw - 1) // sw + 1
    xp = padded(x, pad)
    cols = np.zeros((n, c, kh, kw, oh, ow))
    for i in range(kh):
        for j in range(kw):
            for a in range(oh):
                for b in range(ow):
                    cols[:, :, i, j, a, b] = xp[:, :, a * sh + i * dh, b * sw + j * dw]
    cols = cols.reshape(n, c * kh * kw, oh * ow)
    return cols.transpose(1, 0, 2).reshape(c * kh * kw, n * oh * ow) if layout == "flat" \
        else cols


@examples(30)
@given(conv_cases(), st.sampled_from(["batch", "flat"]), SEEDS)
def test_im2col_and_col2im_are_namespace_functions_and_transposes(case, layout, seed):
    assume(output_shape(case) is not None)
    stride, pad, dil, _ = case["geometry"]
    kernel = case["w_shape"][2:]
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, case["x_shape"]).astype(np.float64)
    window = dict(stride=case["kwargs"]["stride"], padding=case["kwargs"]["padding"],
                  dilation=case["kwargs"]["dilation"])
    cols = E.im2col(x, kernel, layout=layout, **window)
    np.testing.assert_array_equal(cols, ref_im2col(x, kernel, stride, pad, dil, layout))
    node = N.im2col(N.var("x", x.shape, np.float64), kernel, layout=layout, **window)
    assert node.shape == cols.shape
    assert node.op["padding"] == pad and node.op["stride"] == stride
    if layout == "batch":   # <im2col(x), c> == <x, col2im(c)>, exactly for integers
        c = rng.integers(-3, 4, cols.shape).astype(np.float64)
        image = E.col2im(c, x.shape, kernel, **window)
        assert image.shape == x.shape
        assert np.sum(cols * c) == np.sum(x * image)


def test_im2col_and_col2im_arguments_are_checked():
    x = np.zeros((1, 2, 5, 5), np.float32)
    with pytest.raises(ValueError, match=r"im2col: layout must be 'batch' or 'flat', got 'row'"):
        E.im2col(x, 3, layout="row")
    with pytest.raises(ShapeError, match=r"im2col: the image must be 4-D .*\(2, 5, 5\)"):
        E.im2col(x[0], 3)
    with pytest.raises(ShapeError, match=r"im2col: stride must be at least 1"):
        N.im2col(N.var("x", x.shape), 3, stride=0)
    with pytest.raises(ShapeError, match=r"col2im: shape must be a 4-tuple of ints"):
        E.col2im(np.zeros((1, 18, 9), np.float32), (2, 5, 5), 3)
    with pytest.raises(ShapeError, match=r"col2im: the columns has shape \(1, 18, 8\)"):
        E.col2im(np.zeros((1, 18, 8), np.float32), (1, 2, 5, 5), 3)


def test_eager_convolutions_free_their_workspace_without_the_cyclic_collector():
    """Eager mode builds a kernel per call: its columns must go with it (a reference
    cycle would keep them until the cyclic collector runs: 10x the eager peak)."""
    import gc
    import tracemalloc

    x = np.ones((1, 8, 16, 16), np.float32)
    w = np.ones((8, 8, 3, 3), np.float32)
    columns = x.nbytes * 9
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        for _ in range(10):
            y = E.conv2d(x, w, padding=1)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        gc.enable()
    assert held < y.nbytes + columns, (held, y.nbytes, columns)
