"""Depthwise convolutions channels last (graphc.optimiser.channels_last and the
``depthwise_conv2d_nhwc`` op): the op against a float64 loop reference in both its
kernels (bit for bit with each other), its shape errors and gradients, and the
rewrite against unoptimised evaluation on MobileNet-like blocks, with the transposes
it introduces absorbed."""
import hypothesis.strategies as st
import numpy as np
import pytest
from gradcheck import check_gradient, ns_of
from hypothesis import given
from neural_reference import paddings, ref_conv, ref_padding
from numpy.testing import assert_allclose
from opcheck import examples, feeds, make_vars

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.engine.cpu_kernels import GENERATED_KERNELS, KERNELS
from graphc.engine.numba_kernels import available
from graphc.ops.channels_last import NAME
from graphc.optimiser.channels_last import MIN_CHANNELS, MIN_CHANNELS_VECTOR
from graphc.type import Op
from graphc.type.errors import DTypeError, ShapeError

needs_numba = pytest.mark.skipif(available() is not None, reason="Numba is not installed")


@pytest.fixture(autouse=True)
def _convolutions_on_the_gemms(monkeypatch):
    """These are the rewrites around the GEMMs of lowered convolutions, which run where
    oneDNN's convolutions do not (none installed, ``GRAPHC_CONV=gemm``);
    test_conv_nhwc.py covers the graphs with oneDNN's."""
    monkeypatch.setenv("GRAPHC_CONV", "gemm")


def nhwc_op(stride=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1)):
    return Op.make(NAME, stride=stride, padding=padding, dilation=dilation)


def reference(x, w, op):
    """float64 NHWC result through the NCHW loop reference."""
    c = x.shape[3]
    taps = np.transpose(w, (2, 0, 1)).reshape(c, 1, *w.shape[:2])
    out = ref_conv(np.transpose(x, (0, 3, 1, 2)), taps, op["stride"], op["padding"],
                   op["dilation"], c)
    return np.transpose(out, (0, 2, 3, 1))


@st.composite
def nhwc_cases(draw):
    kernel = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    hw = (draw(st.integers(1, 9)), draw(st.integers(1, 9)))
    padding = ref_padding(draw(paddings()), hw, kernel, stride, dilation)
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    if any(h + sum(p) < s for h, p, s in zip(hw, padding, span)):
        hw = tuple(max(h, s) for h, s in zip(hw, span))    # the window fits
    channels = draw(st.sampled_from([1, 3, 16, 17, 64]))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return dict(x=(draw(st.integers(1, 2)),) + hw + (channels,), w=kernel + (channels,),
                op=nhwc_op(stride, padding, dilation), dtype=dtype)


def _arrays(case, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(case["x"]).astype(case["dtype"]),
            rng.standard_normal(case["w"]).astype(case["dtype"]))


def _out(x, w, op):
    node = ns_of(N)._op(NAME, [N.var("x", x.shape, x.dtype), N.var("w", w.shape, w.dtype)],
                        **op.params())
    return np.empty(node.shape, x.dtype)


@examples(40)
@given(nhwc_cases(), st.integers(0, 2**16))
def test_numpy_kernel_matches_the_loop_reference(case, seed):
    x, w = _arrays(case, seed)
    out = _out(x, w, case["op"])
    KERNELS[NAME](case["op"], [x, w], out, None)()
    eps = np.finfo(case["dtype"]).eps
    assert_allclose(out, reference(x, w, case["op"]), rtol=0,
                    atol=30 * eps * np.prod(case["w"][:2]))


@needs_numba
@examples(40)
@given(nhwc_cases(), st.integers(0, 2**16), st.booleans())
def test_generated_kernel_gives_the_numpy_kernels_bits(case, seed, parallel):
    x, w = _arrays(case, seed)
    want, got = _out(x, w, case["op"]), _out(x, w, case["op"])
    KERNELS[NAME](case["op"], [x, w], want, None)()
    run = GENERATED_KERNELS[NAME](case["op"], [x, w], got, None, parallel)
    assert run is not None
    got[...] = np.nan
    run()
    assert got.tobytes() == want.tobytes()


@needs_numba
def test_generated_kernel_declines_what_it_cannot_read():
    op = nhwc_op()
    x, w = np.ones((1, 4, 4, 8), np.float32), np.ones((3, 3, 8), np.float32)
    out = np.zeros((1, 4, 4, 8), np.float32)
    strided = np.ones((1, 4, 8, 8), np.float32)[:, :, ::2]
    assert GENERATED_KERNELS[NAME](op, [strided, w], out, None, True) is None
    halves = [a.astype(np.float16) for a in (x, w, out)]
    assert GENERATED_KERNELS[NAME](op, halves[:2], halves[2], None, True) is None


@pytest.mark.parametrize("x_shape,w_shape,dtypes,error,words", [
    ((1, 4, 4), (3, 3, 4), (np.float32,) * 2, ShapeError, "4-D (N, H, W, C)"),
    ((1, 4, 4, 8), (3, 3, 4), (np.float32,) * 2, ShapeError, "(kh, kw, C)"),
    ((1, 4, 4, 8), (3, 8), (np.float32,) * 2, ShapeError, "(kh, kw, C)"),
    ((1, 2, 2, 8), (5, 5, 8), (np.float32,) * 2, ShapeError, "larger than the padded"),
    ((1, 4, 4, 8), (3, 3, 8), (np.int32, np.int32), DTypeError, "floating-point"),
    ((1, 4, 4, 8), (3, 3, 8), (np.float32, np.float64), DTypeError, "same dtype"),
])
def test_shape_rule_names_the_op_and_what_it_expected(x_shape, w_shape, dtypes, error, words):
    x, w = N.var("x", x_shape, dtypes[0]), N.var("w", w_shape, dtypes[1])
    with pytest.raises(error, match=NAME) as raised:
        ns_of(N)._op(NAME, [x, w], **nhwc_op().params())
    assert words in str(raised.value)


@pytest.mark.parametrize("stride,padding,dilation", [
    ((1, 1), ((1, 1), (1, 1)), (1, 1)), ((2, 1), ((0, 1), (2, 0)), (1, 2))])
def test_gradients_match_finite_differences(stride, padding, dilation):
    rng = np.random.default_rng(3)
    op = nhwc_op(stride, padding, dilation)

    def fn(M, x, w):
        return ns_of(M)._op(NAME, [x, w], **op.params())
    check_gradient(fn, rng.standard_normal((2, 5, 4, 3)), rng.standard_normal((3, 3, 3)))


# -- the rewrite -------------------------------------------------------------------------------
def _steps(executable):
    return [n.op.kind for n in executable.liveness.steps]


def boundary_transposes_only(executable, residual=True) -> bool:
    """No transpose left but at the graph's NCHW boundary: where a residual sum reads
    the user's image, one of that input to channels last, read in place (a view), and
    one of an output back to NCHW."""
    transposes = [n for n in executable.liveness.steps if n.op.kind == "transpose"]
    outputs = {id(n) for n in executable.graph.outputs}
    inputs = [t for t in transposes if id(t) not in outputs]
    if not residual:
        return not inputs and len(transposes) <= 1
    return (len(inputs) <= 1 and len(transposes) - len(inputs) <= 1
            and all(t.parents[0].op.kind == "var" and id(t) in executable.liveness.views
                    for t in inputs))


def inverted_residual(M, x, expand, b1, taps, b2, project, *, stride=1, kernel=3,
                      activation="relu6"):
    """A MobileNetV2 block: 1x1 expand, bias, activation, depthwise, bias, activation,
    1x1 project, and the residual sum where the shapes allow."""
    def act(v):
        if activation == "relu6":
            return M.clip(v, 0.0, 6.0)
        return M.multiply(v, M.divide(1.0, M.add(1.0, M.exp(M.negative(v)))))   # SiLU
    c = taps.shape[0]
    h = act(M.add(M.conv2d(x, expand), b1))
    h = act(M.add(M.conv2d(h, taps, stride=stride, padding=kernel // 2, groups=c), b2))
    y = M.conv2d(h, project)
    return M.add(y, x) if y.shape == x.shape else y


def block_arrays(rng, n=1, c=16, hidden=MIN_CHANNELS, hw=7, kernel=3, dtype=np.float32):
    return [rng.standard_normal(s).astype(dtype) * scale for s, scale in [
        ((n, c, hw, hw), 1.0), ((hidden, c, 1, 1), 0.3), ((hidden, 1, 1), 0.1),
        ((hidden, 1, kernel, kernel), 0.3), ((hidden, 1, 1), 0.1), ((c, hidden, 1, 1), 0.3)]]


def compile_both(fn, arrays, constants=()):
    """``fn`` compiled with generated kernels (the rewrite runs) and unoptimised on the
    NumPy kernels, arrays at the positions ``constants`` given as constants."""
    def build():
        xs = make_vars(arrays)
        inputs = [N.const(a) if i in constants else v
                  for i, (a, v) in enumerate(zip(arrays, xs))]
        return [v for i, v in enumerate(xs) if i not in constants], fn(N, *inputs)
    fast = graphc.compile(*build(), kernels="generated", check=True)
    plain = graphc.compile(*build(), optimise=False, kernels="numpy")
    given = {k: v for i, (k, v) in enumerate(feeds(arrays).items()) if i not in constants}
    return fast, plain, given


@needs_numba
@pytest.mark.parametrize("n,stride,kernel,activation,hw", [
    (1, 1, 3, "relu6", 7), (2, 2, 3, "relu6", 8), (1, 1, 5, "silu", 6), (1, 2, 5, "silu", 9)])
def test_inverted_residual_runs_channels_last_without_transposes(n, stride, kernel,
                                                                 activation, hw):
    arrays = block_arrays(np.random.default_rng(0), n=n, hw=hw, kernel=kernel)

    def fn(M, *xs):
        return M.mean(inverted_residual(M, *xs, stride=stride, kernel=kernel,
                                        activation=activation), axis=(2, 3))
    fast, plain, given = compile_both(fn, arrays, constants=range(1, 6))
    steps = _steps(fast)
    assert "depthwise_conv2d_nhwc" in steps and "conv2d" not in steps
    assert boundary_transposes_only(fast, residual=hw == 7 or stride == 1), steps
    for got, want in zip(fast.run(**given), plain.run(**given)):
        assert_allclose(got, want, rtol=2e-5, atol=2e-6)


@needs_numba
def test_a_chain_of_blocks_stays_channels_last():
    rng = np.random.default_rng(1)
    blocks = [block_arrays(rng, hw=6)[1:] for _ in range(3)]
    x = rng.standard_normal((1, 16, 6, 6)).astype(np.float32)

    def fn(M, x):
        for weights in blocks:
            x = inverted_residual(M, x, *[N.const(a) if M is N else a for a in weights])
        return M.reshape(M.mean(x, axis=(2, 3), keepdims=True), (1, 16))
    fast, plain, given = compile_both(fn, [x])
    steps = _steps(fast)
    assert steps.count("depthwise_conv2d_nhwc") == 3 and boundary_transposes_only(fast), steps
    assert_allclose(fast.run(**given)[0], plain.run(**given)[0], rtol=2e-5, atol=2e-6)


@needs_numba
def test_squeeze_and_excite_passes_the_transposes_on():
    """MobileNetV3's block: a per-channel scale from the global mean of the depthwise
    result multiplies it before the projection."""
    rng = np.random.default_rng(2)
    arrays = block_arrays(rng) + [rng.standard_normal((8, MIN_CHANNELS, 1, 1)).astype(
        np.float32) * 0.3, rng.standard_normal((MIN_CHANNELS, 8, 1, 1)).astype(np.float32)]

    def fn(M, x, expand, b1, taps, b2, project, squeeze, excite):
        h = M.maximum(M.add(M.conv2d(x, expand), b1), 0.0)
        h = M.add(M.conv2d(h, taps, padding=1, groups=MIN_CHANNELS), b2)
        s = M.conv2d(M.maximum(M.conv2d(M.mean(h, axis=(2, 3), keepdims=True), squeeze),
                               0.0), excite)
        h = M.multiply(h, M.clip(M.add(M.multiply(s, 1 / 6), 0.5), 0.0, 1.0))
        return M.add(M.conv2d(h, project), x)
    fast, plain, given = compile_both(fn, arrays, constants=range(1, 8))
    assert boundary_transposes_only(fast), _steps(fast)
    assert_allclose(fast.run(**given)[0], plain.run(**given)[0], rtol=2e-5, atol=2e-6)


WIDTHS = [  # dtype, window, channels, the image's producer, converted
    (np.float32, 3, MIN_CHANNELS_VECTOR[3, 3] - 1, "pointwise", False),
    (np.float32, 3, MIN_CHANNELS_VECTOR[3, 3], "pointwise", True),
    (np.float32, 5, MIN_CHANNELS_VECTOR[5, 5], "pointwise", True),
    (np.float32, 3, MIN_CHANNELS_VECTOR[3, 3], "input", False),     # would transpose it
    (np.float32, 3, MIN_CHANNELS_VECTOR[3, 3], "shared", False),    # another reader
    (np.float32, 7, MIN_CHANNELS - 1, "pointwise", False),
    (np.float32, 7, MIN_CHANNELS, "input", True), (np.float32, 3, MIN_CHANNELS, "shared", True),
    (np.float64, 3, MIN_CHANNELS - 1, "pointwise", False),
    (np.float64, 3, MIN_CHANNELS, "input", True)]


@needs_numba
@pytest.mark.parametrize("dtype,kernel,channels,producer,converted", WIDTHS)
def test_only_wide_depthwise_convolutions_go_channels_last(dtype, kernel, channels, producer,
                                                         converted):
    """From :data:`MIN_CHANNELS` channels always; from :data:`MIN_CHANNELS_VECTOR` (float32
    windows with a vector kernel) where a 1x1 convolution read by nothing else can write
    the image channels last."""
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((1, 8, 5, 5)).astype(dtype),
              rng.standard_normal((channels, 8, 1, 1)).astype(dtype) * 0.3,
              rng.standard_normal((channels, 1, kernel, kernel)).astype(dtype)]

    def fn(M, x, w1, w):
        image = x if producer == "input" else M.relu(M.conv2d(x, w1))
        if producer == "input":      # the same channels straight from the user's image
            image = M.concatenate([x] * (channels // 8) + [x[:, :channels % 8]], axis=1)
        y = M.conv2d(image, w, padding=kernel // 2, groups=channels)
        return M.add(y, image) if producer == "shared" else y
    fast, plain, given = compile_both(fn, arrays)
    assert ("depthwise_conv2d_nhwc" in _steps(fast)) == converted
    # the user's image and the result are NCHW: a transpose each way where converted
    assert_allclose(fast.run(**given)[0], plain.run(**given)[0], rtol=1e-5, atol=1e-6)


def test_the_vector_windows_are_the_engines():
    from graphc.engine.numba_depthwise_vectors import WINDOWS
    assert set(MIN_CHANNELS_VECTOR) == WINDOWS


@needs_numba
@examples(15)
@given(st.integers(0, 2**16), st.sampled_from([1, 2]), st.integers(1, 3), st.integers(1, 2),
       st.sampled_from([np.float32, np.float64]), st.booleans())
def test_rewritten_graphs_agree_with_unoptimised_ones(seed, stride, pad, dilation, dtype,
                                                      bias_first):
    rng = np.random.default_rng(seed)
    c = MIN_CHANNELS
    arrays = [rng.standard_normal(s).astype(dtype) for s in
              [(1, c, 6, 5), (c, 1, 3, 3), (c, 1, 1), (8, c, 1, 1)]]

    def fn(M, x, w, b, project):
        h = M.add(x, b) if bias_first else M.tanh(x)
        h = M.conv2d(h, w, stride=stride, padding=pad, dilation=dilation, groups=c)
        return [M.conv2d(M.maximum(h, 0.0), project), M.sum(h, axis=(2, 3))]
    fast, plain, given = compile_both(fn, arrays)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for got, want in zip(fast.run(**given), plain.run(**given)):
        assert_allclose(got, want, rtol=tol, atol=tol)


@needs_numba
def test_training_through_a_depthwise_convolution():
    """The forward convolution channels last, its gradients in NCHW: both agree with
    the NumPy kernels' unoptimised step."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, MIN_CHANNELS, 6, 6)).astype(np.float32)
    w0 = rng.standard_normal((MIN_CHANNELS, 1, 3, 3)).astype(np.float32) * 0.3

    def step(kernels, optimise):
        xv, w = N.var("x", x.shape), N.var("w", w0.shape)
        loss = N.sum(N.square(N.maximum(N.conv2d(xv, w, padding=1, groups=MIN_CHANNELS),
                                        0.0)))
        (g,) = N.grad(loss, [w])
        exe = graphc.compile([xv, w], [loss], {w: w - 0.01 * g}, kernels=kernels,
                             optimise=optimise)
        exe.assign(w=w0)
        return [exe.run(x=x)[0] for _ in range(3)] + [exe.value("w")], exe
    (fast, exe), (plain, _) = step("generated", True), step("numpy", False)
    assert "depthwise_conv2d_nhwc" in _steps(exe)
    for got, want in zip(fast, plain):
        assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_the_numpy_kernels_graph_is_left_as_written():
    arrays = block_arrays(np.random.default_rng(6))
    xs = make_vars(arrays)
    exe = graphc.compile(xs, inverted_residual(N, *xs), kernels="numpy")
    assert "depthwise_conv2d_nhwc" not in _steps(exe)


def test_a_saved_graph_never_holds_the_op():
    from graphc.graph.rebuild import NOT_SAVED
    assert "optimiser" in NOT_SAVED[NAME]
    assert not hasattr(N, NAME) and not hasattr(E, NAME)


# -- the transposes between the layouts --------------------------------------------------------
@needs_numba
@examples(20)
@given(st.sampled_from([(0, 2, 3, 1), (0, 3, 1, 2), (0, 1, 3, 2)]),
       st.tuples(st.integers(1, 2), st.integers(16, 48), st.integers(16, 48), st.integers(16, 48)),
       st.sampled_from([np.float32, np.float64]), st.booleans(), st.booleans())
def test_layout_transposes_copy_exactly(axes, shape, dtype, strided, parallel):
    """The generated copy of a transpose between NCHW and channels last gives NumPy's
    array bit for bit, from a contiguous or a strided (sliced) input; small results stay
    on NumPy's ``copyto``, and so do other axes but where no run of the view is
    contiguous (a sliced input on the threads: the strided copy, exact too)."""
    rng = np.random.default_rng(sum(shape))
    source = rng.standard_normal(shape[:-1] + (shape[-1] * (2 if strided else 1),)).astype(dtype)
    x = source[..., ::2] if strided else source
    op = Op.make("transpose", axes=axes)
    out = np.full(tuple(x.shape[a] for a in axes), np.nan, dtype)
    run = GENERATED_KERNELS["transpose"](op, [x], out, None, parallel)
    other = axes == (0, 1, 3, 2)
    if out.size < (1 << 15) or (other and not (strided and parallel)):
        assert run is None
        return
    run()
    assert out.tobytes() == np.ascontiguousarray(x.transpose(axes)).tobytes()
