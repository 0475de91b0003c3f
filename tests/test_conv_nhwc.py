"""Convolutions on oneDNN's primitive, channels last (graphc.engine.onednn_conv, the
``conv2d_nhwc`` op, the channels-last rewrite that makes it, and matrix-vector
products on oneDNN next to it): the primitive and both kernels against a float64
loop reference, the shape rule's errors, gradients against finite differences, and
whole graphs against unoptimised evaluation, with biases and activations absorbed."""
import threading

import hypothesis.strategies as st
import numpy as np
import pytest
from gradcheck import check_gradient, ns_of
from hypothesis import given
from numpy.testing import assert_allclose
from opcheck import examples

import graphc
import graphc.ndarray as N
from graphc.engine import onednn_conv
from graphc.engine.cpu_kernels import GENERATED_KERNELS, KERNELS
from graphc.engine.numba_kernels import available
from graphc.engine.onednn_gemv import gemv_kernel
from graphc.ops.conv_nhwc import (MIN_GROUP_CHANNELS, MIN_GROUPED_CHANNELS, MIN_PRODUCT_ROWS,
                                  NAME, geometry, takes, takes_product)
from graphc.type import Op
from graphc.type.errors import DTypeError, ShapeError

needs_onednn = pytest.mark.skipif(available() is not None or onednn_conv.wanted() != "",
                                  reason="no oneDNN convolutions here")


def conv_op(stride=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=1,
            activation="", bounds=(0.0, 0.0), packed=()):
    return Op.make(NAME, stride=stride, padding=padding, dilation=dilation, groups=groups,
                   activation=activation, bounds=bounds, packed=packed)


@st.composite
def conv_cases(draw):
    k = draw(st.sampled_from([1, 3, 5]))
    stride, dilation = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = (draw(st.integers(0, k // 2 + 1)), draw(st.integers(0, k // 2 + 1)))
    span = (k - 1) * dilation + 1
    h = draw(st.integers(max(1, span - sum(pads)), 9))
    w = draw(st.integers(max(1, span - sum(pads)), 9))
    groups = draw(st.sampled_from([1, 1, 2, 4]))
    cg = draw(st.sampled_from([3, 8, 12, 16] if groups == 1 else [4, 8, 12, 16]))
    og = draw(st.sampled_from([1, 4, 8, 17]))
    activation = draw(st.sampled_from(sorted(onednn_conv.ACTIVATIONS)))
    bounds = {"clip": (0.0, 1.0), "swish": (1.0, 0.0), "hardswish": (1 / 6, 0.5)}
    op = conv_op((stride, stride), (pads, pads[::-1]), (dilation, dilation), groups,
                 activation, bounds.get(activation, (0.0, 0.0)))
    return dict(x=(draw(st.integers(1, 2)), h, w, cg * groups), w=(k, k, cg, og * groups),
                op=op, residual=draw(st.booleans()))


def _arrays(case, seed, dtype=np.float32):
    """The image, kernel, bias and (a case with a residual) the residual."""
    rng = np.random.default_rng(seed)
    o = case["w"][3]
    shapes = [case["x"], case["w"], (o,)] + ([_shape(case)] if case["residual"] else [])
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _shape(case):
    node = ns_of(N)._op(NAME, [N.var("x", case["x"]), N.var("w", case["w"]),
                              N.var("b", (case["w"][3],))], **case["op"].params())
    return node.shape


def _reference(case, x, w, b, r=None):
    g = geometry(case["op"], x.shape, w.shape, _shape(case), r is not None)
    return onednn_conv.reference(g, x, w, b, r)


@examples(30)
@given(conv_cases(), st.integers(0, 2**16))
def test_numpy_kernel_matches_the_loop_reference(case, seed):
    arrays = _arrays(case, seed)
    out = np.empty(_shape(case), np.float32)
    KERNELS[NAME](case["op"], arrays, out, None)()
    assert_allclose(out, _reference(case, *arrays), rtol=1e-5, atol=1e-4)


@needs_onednn
@examples(30)
@given(conv_cases(), st.integers(0, 2**16), st.booleans())
def test_onednn_kernel_matches_the_loop_reference(case, seed, parallel):
    arrays = _arrays(case, seed)
    x, w = arrays[:2]
    out = np.full(_shape(case), np.nan, np.float32)
    run = GENERATED_KERNELS[NAME](case["op"], arrays, out, None, parallel)
    assert run is not None, onednn_conv.primitive(geometry(case["op"], x.shape, w.shape,
                                                           out.shape, len(arrays) == 4))
    copies = [a.copy() for a in arrays]
    for _ in range(2):      # a residual is copied in again on each run
        run()
        assert_allclose(out, _reference(case, *arrays), rtol=1e-5, atol=1e-4)
    for given_, kept in zip(arrays, copies):     # the inputs are only read
        assert given_.tobytes() == kept.tobytes()


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 1e-30, -3.0, 3.0,
                    5.9999995, 6.0, 6.0000005, 1e19, -1e19, 3e38, -3e38], np.float32)


@needs_onednn
@pytest.mark.parametrize("activation,bounds", [
    ("relu", (0.0, 0.0)), ("clip", (0.0, 6.0)), ("hardswish", (1 / 6, 0.5)),
    ("swish", (1.0, 0.0)), ("sigmoid", (0.0, 0.0))])
def test_activations_keep_numpy_values_nan_included(activation, bounds):
    """Pre-activations of every kind (NaN, infinities, zeros of both signs, denormals,
    the clip's bound and its neighbours) through a depthwise convolution by ones: the
    primitive's activation gives NumPy's values, NaN where NumPy has NaN (oneDNN's own
    ReLU and clip give 0), but for the stated exceptions: ReLU and ReLU6 of ``-inf``
    are NaN, not 0; a sigmoid below 1.7e-38 (of an input under -87) is 0. SiLU's
    and the sigmoid's exponentials are oneDNN's approximations (the sigmoid's within 4
    ulp on this Zen 4; checked to 1e-6, as oneDNN's code differs between ISAs)."""
    c = 16
    values = SPECIAL if activation != "sigmoid" else np.concatenate(
        [SPECIAL, np.array([-17.0, 17.0, -87.0, -88.5, -100.0], np.float32)])
    x = np.repeat(values[None, :, None, None], c, axis=3).reshape(1, 1, values.size, c)
    op = conv_op((1, 1), ((0, 0), (0, 0)), (1, 1), c, activation, bounds)
    w, b = np.ones((1, 1, 1, c), np.float32), np.zeros(c, np.float32)
    out = np.empty_like(x)
    GENERATED_KERNELS[NAME](op, [x, w, b], out, None, False)()
    with np.errstate(all="ignore"):
        want = onednn_conv.activate(x.copy(), activation, bounds)
    exception = (x == -np.inf) & (activation in ("relu", "clip"))
    assert np.isnan(out[exception]).all()
    if activation == "sigmoid":
        # inputs below about -87: 0 or the tiny value (oneDNN's code differs by ISA)
        flushed = np.abs(want) < 1.7e-38
        assert ((out[flushed] >= 0) & (out[flushed] <= want[flushed] * (1 + 1e-6))).all()
        assert x[flushed].max() < -86.9
        exception |= flushed
    same = ~exception
    assert (np.isnan(out) == np.isnan(want))[same].all()
    tolerance = {"swish": 1e-6, "sigmoid": 1e-6}.get(activation, 0.0)
    assert_allclose(out[same], want[same], rtol=tolerance, atol=0.0)


@needs_onednn
def test_a_nan_reaches_the_output_through_an_absorbed_relu():
    """A NaN in the image: the convolution's ReLU keeps it in the cells whose window
    reads it, as NumPy does (oneDNN's own ReLU made them 0); so does a clip (ReLU6,
    also as ONNX's ``Clip`` imports it), a pass of its own."""
    rng = np.random.default_rng(3)
    x = N.var("x", (1, 16, 6, 6))
    w = N.const(rng.standard_normal((16, 16, 3, 3)).astype(np.float32))
    image = rng.standard_normal((1, 16, 6, 6)).astype(np.float32)
    image[0, 2, 3, 3] = np.nan
    for activate, absorbed in ((N.relu, True), (lambda y: N.clip(y, 0.0, 6.0), False),
                               (lambda y: N.minimum(N.maximum(y, 0.0), 6.0), False)):
        y = activate(N.conv2d(x, w, padding=1))
        fast = graphc.compile([x], [y], kernels="generated")
        kinds = [n.op.kind for n in fast.liveness.steps]
        assert kinds.count(NAME) == 1 and (len(kinds) == 3) == absorbed, kinds
        got = fast.run(x=image)[0]
        want = graphc.compile([x], [y], optimise=False, kernels="numpy").run(x=image)[0]
        assert np.isnan(got).sum() == np.isnan(want).sum() == 16 * 9
        assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@needs_onednn
def test_onednn_kernel_declines_what_it_cannot_read():
    op = conv_op()
    x, w, b = np.ones((1, 4, 4, 8), np.float32), np.ones((3, 3, 8, 8), np.float32), \
        np.ones(8, np.float32)
    out = np.zeros((1, 4, 4, 8), np.float32)
    strided = np.ones((1, 4, 8, 8), np.float32)[:, :, ::2]
    assert GENERATED_KERNELS[NAME](op, [strided, w, b], out, None, True) is None
    doubles = [a.astype(np.float64) for a in (x, w, b, out)]
    assert GENERATED_KERNELS[NAME](op, doubles[:3], doubles[3], None, True) is None


@pytest.mark.parametrize("x_shape,w_shape,b_shape,dtype,error,words", [
    ((1, 4, 4), (3, 3, 4, 8), (8,), np.float32, ShapeError, "4-D (N, H, W, C)"),
    ((1, 4, 4, 8), (3, 3, 8, 8), (4,), np.float32, ShapeError, "one per output channel"),
    ((1, 2, 2, 8), (5, 5, 8, 8), (8,), np.float32, ShapeError, "larger than the padded"),
    ((1, 4, 4, 8), (3, 3, 8, 8), (8,), np.int32, DTypeError, "floating-point"),
])
def test_shape_rule_names_the_op_and_what_it_expected(x_shape, w_shape, b_shape, dtype, error,
                                                      words):
    parents = [N.var(n, s, dtype) for n, s in zip("xwb", (x_shape, w_shape, b_shape))]
    with pytest.raises(error, match=NAME) as raised:
        ns_of(N)._op(NAME, parents, **conv_op().params())
    assert words in str(raised.value)


@pytest.mark.parametrize("activation,bounds,groups,residual", [
    ("", (0.0, 0.0), 1, False), ("relu", (0.0, 0.0), 2, False), ("clip", (-0.3, 0.4), 1, False),
    ("relu", (0.0, 0.0), 1, True)])
def test_gradients_match_finite_differences(activation, bounds, groups, residual):
    rng = np.random.default_rng(5)
    op = conv_op((2, 1), ((1, 0), (0, 1)), (1, 1), groups, activation, bounds)

    def fn(M, x, w, b, *r):
        return ns_of(M)._op(NAME, [x, w, b, *r], **op.params())
    arrays = [rng.standard_normal((1, 5, 4, 4)), rng.standard_normal((3, 2, 4 // groups, 4)),
              rng.standard_normal(4)] + ([rng.standard_normal((1, 2, 4, 4))] if residual else [])
    check_gradient(fn, *arrays)


# -- the rewrite -------------------------------------------------------------------------------
def _block_arrays(rng):
    return [rng.standard_normal(s).astype(np.float32) * scale for s, scale in [
        ((1, 16, 9, 9), 1.0), ((32, 16, 3, 3), 0.2), ((32, 1, 1), 0.1), ((32, 16, 3, 3), 0.2),
        ((32, 1, 1), 0.1), ((24, 32, 1, 1), 0.2)]]


def _compile_block(arrays, **options):
    x = N.var("x", arrays[0].shape)
    consts = [N.const(a) for a in arrays[1:]]
    w3 = consts[4]
    h = N.relu(N.conv2d(x, consts[0], padding=1) + consts[1])
    h = N.clip(N.conv2d(h, consts[2], stride=2, padding=1, groups=2) + consts[3], 0.0, 6.0)
    y = N.conv2d(h, w3) + N.conv2d(x, N.const(arrays[5][:, :16].copy()), stride=2)
    return graphc.compile(inputs=[x], outputs=[y], **options)


@needs_onednn
def test_a_block_runs_on_onednn_with_biases_and_activations_absorbed():
    """Biases, the ReLU and the two branches' sum join the convolutions; the ReLU6 stays
    a pass of its own (see conv_activations.PLAIN)."""
    arrays = _block_arrays(np.random.default_rng(0))
    fast = _compile_block(arrays, kernels="generated", check=True)
    plain = _compile_block(arrays, optimise=False, kernels="numpy")
    steps = [n.op.kind for n in fast.liveness.steps]
    convs = [n for n in fast.liveness.steps if n.op.kind == NAME]
    assert "conv2d" not in steps and "relu" not in steps and "add" not in steps, steps
    assert sorted(c.op["activation"] for c in convs) == ["", "", "", "relu"]
    assert sorted(len(c.parents) for c in convs) == [3, 3, 3, 4]    # the sum in one
    x = arrays[0]
    kept = x.copy()
    got, want = fast.run(x=x)[0], plain.run(x=x)[0]
    assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert x.tobytes() == kept.tobytes()


@needs_onednn
def test_mobile_blocks_stay_channels_last_between_the_boundaries():
    """Inverted residual blocks (1x1, depthwise, 1x1, residual sum), every convolution
    on oneDNN with its bias inside, the block's sum in the last one: one transpose in,
    none between; each ReLU6 a pass of its own (see conv_activations.PLAIN)."""
    from test_channels_last import block_arrays, inverted_residual
    rng = np.random.default_rng(3)
    blocks = [block_arrays(rng, hw=6)[1:] for _ in range(3)]
    x = rng.standard_normal((1, 16, 6, 6)).astype(np.float32)

    def build(M, xv):
        for weights in blocks:
            xv = inverted_residual(M, xv, *[N.const(a) for a in weights])
        return M.mean(xv, axis=(2, 3))
    xv = N.var("x", x.shape)
    fast = graphc.compile(inputs=[xv], outputs=[build(N, xv)], kernels="generated")
    plain = graphc.compile(inputs=[xv], outputs=[build(N, xv)], optimise=False)
    steps = [n.op.kind for n in fast.liveness.steps]
    assert steps.count(NAME) == 9 and "depthwise_conv2d_nhwc" not in steps, steps
    assert steps.count("transpose") <= 1 and "add" not in steps, steps
    summed = [n for n in fast.liveness.steps if n.op.kind == NAME and len(n.parents) == 4]
    assert len(summed) == 3, steps
    assert_allclose(fast.run(x=x)[0], plain.run(x=x)[0], rtol=1e-4, atol=1e-5)


@needs_onednn
def test_the_source_graph_holds_packed_kernels_once_and_gives_their_bits():
    from graphc.symbol.node import Deferred
    arrays = _block_arrays(np.random.default_rng(6))
    x = N.var("x", arrays[0].shape)
    kernel = N.const(arrays[1].copy())
    y = N.relu(N.conv2d(x, kernel, padding=1))
    first = graphc.compile(inputs=[x], outputs=[y], kernels="generated")
    assert type(kernel._value) is Deferred          # the compiled graph holds it packed
    assert kernel.value.tobytes() == arrays[1].tobytes() and not kernel.value.flags.writeable
    second = graphc.compile(inputs=[x], outputs=[y], kernels="generated")
    plain = graphc.compile(inputs=[x], outputs=[y], optimise=False)
    for exe in (first, second):
        assert_allclose(exe.run(x=arrays[0])[0], plain.run(x=arrays[0])[0], rtol=1e-4,
                        atol=1e-4)
    shared = N.const(arrays[1].copy())              # read by a convolution and a product
    both = graphc.compile(inputs=[x], outputs=[N.conv2d(x, shared, padding=1),
                                               N.sum(x) * shared], kernels="generated")
    assert type(shared._value) is not Deferred
    assert_allclose(both.run(x=arrays[0])[1], arrays[0].sum(dtype=np.float64) * arrays[1],
                    rtol=1e-4)


@needs_onednn
@pytest.mark.parametrize("rows_shape,transposed", [((2, 12, 32), False), ((20, 32), True)])
def test_a_product_by_a_constant_runs_as_a_one_by_one_convolution(rows_shape, transposed):
    """``relu(x @ W + b)`` with ``W`` constant and 16 rows or more: one ``conv2d_nhwc``
    with ``W`` packed, its bias and ReLU inside; the source graph holds ``W`` once (a
    function of the packed array, the same bits, through the folded transpose for
    ``W.T``); values are the unoptimised graph's."""
    from graphc.symbol.node import Deferred
    rng = np.random.default_rng(31)
    weights = rng.standard_normal((48, 32) if transposed else (32, 48)).astype(np.float32)
    x, w = N.var("x", rows_shape), N.const(weights.copy())
    b = N.const(rng.standard_normal(48).astype(np.float32))
    y = N.relu(N.matmul(x, w.T if transposed else w) + b)
    fast = graphc.compile([x], [y], kernels="generated", check=True)
    kinds = [n.op.kind for n in fast.liveness.steps]
    assert kinds.count(NAME) == 1, kinds
    assert not {"matmul", "fused_matmul", "relu", "add"} & set(kinds), kinds
    (conv,) = [n for n in fast.liveness.steps if n.op.kind == NAME]
    assert conv.op["activation"] == "relu" and conv.op["packed"] == (1, 1, 32, 48)
    # held as the unpack of the packed array (and, for ``W.T``, transposed back)
    assert type(w._value) is Deferred and w.value.tobytes() == weights.tobytes()
    plain = graphc.compile([x], [y], optimise=False, kernels="numpy")
    given_ = rng.standard_normal(rows_shape).astype(np.float32)
    assert_allclose(fast.run(x=given_)[0], plain.run(x=given_)[0], rtol=1e-4, atol=1e-4)


@needs_onednn
def test_only_a_bias_per_column_moves_into_a_product():
    """``x @ W + c`` with ``c`` of shape ``(N, 1)`` (one value per row, rows == columns)
    stays an addition after the product; one of shape ``(N,)`` joins it."""
    rng = np.random.default_rng(43)
    x = N.var("x", (32, 16))
    w = N.const(rng.standard_normal((16, 32)).astype(np.float32))
    given_ = rng.standard_normal((32, 16)).astype(np.float32)
    for shape, joined in (((32, 1), False), ((32,), True)):
        y = N.matmul(x, w) + N.const(rng.standard_normal(shape).astype(np.float32))
        fast = graphc.compile([x], [y], kernels="generated", check=True)
        kinds = [n.op.kind for n in fast.liveness.steps]
        assert kinds.count(NAME) == 1 and ("add" not in kinds) == joined, kinds
        want = graphc.compile([x], [y], optimise=False, kernels="numpy").run(x=given_)[0]
        assert_allclose(fast.run(x=given_)[0], want, rtol=1e-4, atol=1e-4)


@needs_onednn
def test_what_the_product_rewrite_takes():
    w = N.const(np.ones((32, 8), np.float32))
    assert takes_product(N.matmul(N.var("x", (MIN_PRODUCT_ROWS, 32)), w))
    assert not takes_product(N.matmul(N.var("x", (MIN_PRODUCT_ROWS - 1, 32)), w))  # a GEMV
    assert not takes_product(N.matmul(N.var("x", (16, 32)), N.var("v", (32, 8))))
    doubles = N.var("x", (16, 32), np.float64)
    assert not takes_product(N.matmul(doubles, N.const(np.ones((32, 8)))))
    assert not takes_product(N.matmul(N.var("x", (16, 4)), N.const(np.ones((4, 8), np.float32))))


@needs_onednn
def test_an_inception_block_joins_its_branches_channels_last():
    rng = np.random.default_rng(7)
    x = N.var("x", (1, 16, 8, 8))
    w = [N.const(rng.standard_normal(s).astype(np.float32) * 0.2)
         for s in [(16, 16, 3, 3), (8, 16, 1, 1), (16, 24, 3, 3)]]
    joined = N.concatenate([N.relu(N.conv2d(x, w[0], padding=1)), N.conv2d(x, w[1])], axis=1)
    y = N.conv2d(joined, w[2], padding=1)
    fast = graphc.compile(inputs=[x], outputs=[y], kernels="generated")
    plain = graphc.compile(inputs=[x], outputs=[y], optimise=False)
    steps = [n.op.kind for n in fast.liveness.steps]
    assert steps.count("transpose") == 2, steps   # in and out
    # read only by the next convolution, the branches are never joined: it is split
    # over them (optimiser/split_concat.py)
    assert steps.count(NAME) == 4 and "concatenate" not in steps, steps
    image = rng.standard_normal((1, 16, 8, 8)).astype(np.float32)
    assert_allclose(fast.run(x=image)[0], plain.run(x=image)[0], rtol=1e-4, atol=1e-4)


@needs_onednn
@pytest.mark.parametrize("activation", ["swish", "hardswish"])
def test_silu_and_hardswish_join_the_convolution(activation):
    rng = np.random.default_rng(8)
    x = N.var("x", (1, 16, 7, 7))
    w = N.const(rng.standard_normal((24, 16, 3, 3)).astype(np.float32) * 0.2)
    b = N.const(rng.standard_normal((24, 1, 1)).astype(np.float32))
    y = N.conv2d(x, w, padding=1) + b
    if activation == "swish":
        out = y * N.sigmoid(y)
    else:
        out = y * N.clip(y * (1 / 6) + 0.5, 0.0, 1.0)
    fast = graphc.compile(inputs=[x], outputs=[out], kernels="generated")
    plain = graphc.compile(inputs=[x], outputs=[out], optimise=False)
    convs = [n for n in fast.liveness.steps if n.op.kind == NAME]
    assert [c.op["activation"] for c in convs] == [activation]
    assert {n.op.kind for n in fast.liveness.steps} <= {NAME, "transpose"}
    image = rng.standard_normal((1, 16, 7, 7)).astype(np.float32)
    assert_allclose(fast.run(x=image)[0], plain.run(x=image)[0], rtol=1e-4, atol=1e-4)


def _squeeze_excite(batch, groups=1):
    """A squeeze-and-excitation block (EfficientNet's): the image's channels scaled by a
    gate computed from their means, then a 1x1 projection."""
    rng = np.random.default_rng(11)
    x = N.var("x", (batch, 32, 12, 12))
    c = [N.const(rng.standard_normal(s).astype(np.float32) * 0.3) for s in
         [(32, 32, 3, 3), (8, 32, 1, 1), (32, 8, 1, 1), (16, 32 // groups, 1, 1)]]
    h = N.relu(N.conv2d(x, c[0], padding=1))
    gate = N.sigmoid(N.conv2d(N.relu(N.conv2d(N.mean(h, axis=(2, 3), keepdims=True), c[1])),
                              c[2]))
    return x, N.conv2d(h * gate, c[3], groups=groups)


def _basic_block(rng, reused: bool):
    """ResNet's basic block on an intermediate value ``x``: ``relu(conv(relu(conv(x) +
    b1)) + b2 + x)``; with ``reused`` the block's input is read again afterwards."""
    image = N.var("image", (1, 16, 8, 8))
    c = [N.const(rng.standard_normal(s).astype(np.float32) * 0.2) for s in
         [(16, 16, 3, 3), (16, 16, 3, 3), (16, 1, 1), (16, 16, 3, 3), (16, 1, 1)]]
    x = N.relu(N.conv2d(image, c[0], padding=1))
    h = N.relu(N.conv2d(x, c[1], padding=1) + c[2])
    y = N.relu(N.conv2d(h, c[3], padding=1) + c[4] + x)
    return image, (y * x if reused else y)


@needs_onednn
@pytest.mark.parametrize("reused", [False, True])
def test_a_residual_sum_joins_the_convolution_in_place(reused):
    """The block's sum and its ReLU join the second convolution (oneDNN's sum post-op):
    no add or ReLU step is left, the result is planned over the residual's memory
    where the residual dies there (copied in first where it is read again), and the
    values are the unoptimised graph's."""
    image, y = _basic_block(np.random.default_rng(21), reused)
    fast = graphc.compile([image], [y], kernels="generated", check=True)
    steps = fast.liveness.steps
    kinds = [n.op.kind for n in steps]
    assert "relu" not in kinds and "add" not in kinds, kinds
    (summed,) = [n for n in steps if n.op.kind == NAME and len(n.parents) == 4]
    assert summed.op["activation"] == "relu"
    assert (id(summed) in fast.plan.aliases) != reused
    plain = graphc.compile([image], [y], optimise=False, kernels="numpy")
    for seed in (22, 23):
        given_ = np.random.default_rng(seed).standard_normal(image.shape).astype(np.float32)
        assert_allclose(fast.run(image=given_)[0], plain.run(image=given_)[0],
                        rtol=1e-4, atol=1e-4)


def test_residual_operand_errors_name_the_op():
    x, w, b = N.var("x", (1, 4, 4, 8)), N.var("w", (3, 3, 8, 8)), N.var("b", (8,))
    with pytest.raises(ShapeError) as raised:
        ns_of(N)._op(NAME, [x, w, b, N.var("r", (1, 4, 4, 4))], **conv_op().params())
    assert "conv2d_nhwc: the residual must have the result's shape (1, 4, 4, 8)" in \
        str(raised.value)


@needs_onednn
@pytest.mark.parametrize("batch,groups,moved", [(1, 1, True), (2, 1, False), (1, 2, False)])
def test_a_channel_gate_moves_onto_the_next_kernel(batch, groups, moved):
    """One image, one group: the gate scales the projection's kernel (made each run,
    32 x 16 products) instead of the 12 x 12 x 32 image; otherwise the image is scaled.
    Either way the values are the unoptimised graph's; the gate's sigmoid is the
    expanding convolution's activation."""
    x, y = _squeeze_excite(batch, groups)
    fast = graphc.compile([x], [y], kernels="generated", check=True)
    big = [n for n in fast.liveness.steps if n.op.kind == "multiply" and n.size >= 12 * 12 * 32]
    assert (not big) == moved, [(n.op.kind, n.shape) for n in fast.liveness.steps]
    kinds = [n.op.get("activation") or n.op.kind for n in fast.liveness.steps]
    assert "sigmoid" in kinds and not any(n.op.kind == "sigmoid" for n in fast.liveness.steps)
    plain = graphc.compile([x], [y], optimise=False, kernels="numpy")
    for seed in (12, 13):       # the kernel is made again on each run, from its gate
        image = np.random.default_rng(seed).standard_normal(x.shape).astype(np.float32)
        kept = image.copy()
        assert_allclose(fast.run(x=image)[0], plain.run(x=image)[0], rtol=1e-4, atol=1e-4)
        assert image.tobytes() == kept.tobytes()


@needs_onednn
def test_graphc_conv_gemm_keeps_convolutions_on_the_gemms(monkeypatch):
    monkeypatch.setenv("GRAPHC_CONV", "gemm")
    arrays = _block_arrays(np.random.default_rng(1))
    steps = [n.op.kind for n in _compile_block(arrays, kernels="generated").liveness.steps]
    assert NAME not in steps
    monkeypatch.setenv("GRAPHC_CONV", "winograd")
    with pytest.raises(ValueError, match="GRAPHC_CONV"):
        onednn_conv.wanted()


@needs_onednn
def test_what_the_rewrite_takes():
    image = N.var("x", (1, 3, 16, 16))
    stem = N.conv2d(image, N.const(np.ones((8, 3, 3, 3), np.float32)), padding=1)
    assert MIN_GROUP_CHANNELS == 3 and takes(stem)              # an image's channels
    pair = N.var("p", (1, 2, 8, 8))
    assert not takes(N.conv2d(pair, N.const(np.ones((8, 2, 3, 3), np.float32))))
    depthwise = N.var("d", (1, 4, 8, 8))                         # but one per group
    assert takes(N.conv2d(depthwise, N.const(np.ones((4, 1, 3, 3), np.float32)), groups=4))
    gray = N.var("g", (1, 1, 8, 8))                               # one channel is no group
    assert not takes(N.conv2d(gray, N.const(np.ones((8, 1, 3, 3), np.float32))))
    wide = N.var("y", (1, 16, 8, 8))
    assert takes(N.conv2d(wide, N.const(np.ones((8, 16, 3, 3), np.float32))))
    assert not takes(N.conv2d(wide, N.var("w", (8, 16, 3, 3))))  # a kernel that changes
    doubles = N.var("z", (1, 16, 8, 8), np.float64)
    assert not takes(N.conv2d(doubles, N.const(np.ones((8, 16, 3, 3)))))
    assert MIN_GROUPED_CHANNELS == 4                              # ResNeXt's groups of 4
    assert takes(N.conv2d(wide, N.const(np.ones((8, 4, 3, 3), np.float32)), groups=4))
    assert not takes(N.conv2d(wide, N.const(np.ones((8, 2, 3, 3), np.float32)), groups=8))


@needs_onednn
def test_graphs_on_several_threads_at_once_stay_right():
    arrays = _block_arrays(np.random.default_rng(2))
    plain = _compile_block(arrays, optimise=False, kernels="numpy")
    graphs = [_compile_block(arrays, kernels="generated") for _ in range(2)]
    inputs = [np.random.default_rng(10 + i).standard_normal(arrays[0].shape).astype(np.float32)
              for i in range(6)]
    wants = [plain.run(x=x)[0].copy() for x in inputs]
    errors = []

    def work(graph):
        for x, want in zip(inputs * 3, wants * 3):
            got = graph.run(x=x)[0]
            if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
                errors.append(float(np.abs(got - want).max()))
    threads = [threading.Thread(target=work, args=(g,)) for g in graphs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def _block_runs_on_onednn():
    arrays = _block_arrays(np.random.default_rng(9))
    _compile_block(arrays, kernels="generated").run(x=arrays[0])


# -- matrix-vector products next to them -------------------------------------------------------
@needs_onednn
@pytest.mark.parametrize("m,k,n,transposed", [(1, 64, 40, False), (1, 33, 7, True),
                                               (9, 20, 1, False), (1, 1, 1, False)])
def test_matrix_vector_products_on_onednn(m, k, n, transposed):
    _block_runs_on_onednn()         # GEMVs go to oneDNN once a process binds a convolution
    assert onednn_conv.in_use()
    rng = np.random.default_rng(4)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = (np.ascontiguousarray(rng.standard_normal((n, k)).astype(np.float32)).T if transposed
         else rng.standard_normal((k, n)).astype(np.float32))
    out = np.full((m, n), np.nan, np.float32)
    kernel = gemv_kernel(a, b, out, threads=2)
    assert kernel is not None
    kernel()
    assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert gemv_kernel(a.astype(np.float64), b.astype(np.float64),
                       out.astype(np.float64), threads=2) is None
