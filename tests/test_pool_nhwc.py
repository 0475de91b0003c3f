"""Poolings channels last (the ``max_pool2d_nhwc`` and ``avg_pool2d_nhwc`` ops and the
channels-last rewrite that makes them): both kernels against the NCHW poolings'
NumPy kernels (hypothesis over windows, strides, padding, ceil mode, NaNs), bit for
bit with each other, shape errors, gradients against finite differences, and graphs
against unoptimised evaluation with no transpose left around a pooling between
channels-last convolutions."""
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
from graphc.type import Op
from graphc.type.errors import DTypeError, ShapeError

needs_numba = pytest.mark.skipif(available() is not None, reason="Numba is not installed")
needs_onednn = pytest.mark.skipif(available() is not None or onednn_conv.wanted() != "",
                                  reason="no oneDNN convolutions here")
KINDS = {"max_pool2d": "max_pool2d_nhwc", "avg_pool2d": "avg_pool2d_nhwc"}


def pool_op(kind, kernel=(3, 3), stride=(2, 2), padding=((1, 1), (1, 1)), ceil_mode=False,
            count_include_pad=True):
    attrs = dict(kernel=kernel, stride=stride, padding=padding, ceil_mode=ceil_mode)
    if kind.startswith("avg"):
        attrs["count_include_pad"] = count_include_pad
    return Op.make(kind, **attrs)


@st.composite
def pool_cases(draw):
    kind = draw(st.sampled_from(sorted(KINDS)))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = ((draw(st.integers(0, kh - 1)), draw(st.integers(0, kh - 1))),
               (draw(st.integers(0, kw - 1)), draw(st.integers(0, kw - 1))))
    h, w = draw(st.integers(kh, 9)), draw(st.integers(kw, 9))
    shape = (draw(st.integers(1, 2)), draw(st.sampled_from([1, 3, 8, 19])), h, w)
    op = pool_op(kind, (kh, kw), stride, padding, draw(st.booleans()), draw(st.booleans()))
    return kind, op, shape


def _nhwc_op(op):
    return Op.make(KINDS[op.kind], **op.params())


def _out_shape(op, shape):
    node = ns_of(N)._op(op.kind, [N.var("x", shape)], **op.params())
    return node.shape


def _image(shape, seed, dtype, nans: bool):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    if nans:
        x.reshape(-1)[rng.integers(0, x.size, 2)] = np.nan
    return x


def _nchw(op, x):
    """The NCHW pooling's NumPy kernel on ``x`` (NCHW)."""
    out = np.empty(_out_shape(op, x.shape), x.dtype)
    with np.errstate(invalid="ignore"):
        KERNELS[op.kind](op, [x], out, None)()
    return out


def _run(table, op, x_nhwc, *extra):
    n, h, w, c = x_nhwc.shape
    on, oc, oh, ow = _out_shape(op, (n, c, h, w))
    out = np.full((on, oh, ow, oc), 7.0, x_nhwc.dtype)
    run = table[KINDS[op.kind]](_nhwc_op(op), [x_nhwc], out, None, *extra)
    assert run is not None
    kept = x_nhwc.copy()
    with np.errstate(invalid="ignore"):
        run()
    assert x_nhwc.tobytes() == kept.tobytes()       # the input is only read
    return out


@examples(40)
@given(pool_cases(), st.integers(0, 2**16), st.sampled_from([np.float32, np.float64]),
       st.booleans())
def test_numpy_kernel_matches_the_nchw_pooling(case, seed, dtype, nans):
    kind, op, shape = case
    x = _image(shape, seed, dtype, nans)
    got = _run(KERNELS, op, np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
    want = _nchw(op, x).transpose(0, 2, 3, 1)
    assert (np.isnan(got) == np.isnan(want)).all()
    if kind == "max_pool2d":       # a maximum is a maximum in any order
        assert np.array_equal(got, want, equal_nan=True)
    else:
        assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-13)


@needs_numba
@examples(40)
@given(pool_cases(), st.integers(0, 2**16), st.sampled_from([np.float32, np.float64]),
       st.booleans(), st.booleans())
def test_generated_kernel_gives_the_numpy_kernels_bits(case, seed, dtype, nans, parallel):
    _, op, shape = case
    x = np.ascontiguousarray(_image(shape, seed, dtype, nans).transpose(0, 2, 3, 1))
    got = _run(GENERATED_KERNELS, op, x, parallel)
    want = _run(KERNELS, op, x)
    assert got.tobytes() == want.tobytes()


@needs_numba
def test_generated_kernel_declines_what_it_cannot_read():
    op = _nhwc_op(pool_op("max_pool2d"))
    x = np.ones((1, 6, 6, 8), np.float32)
    out = np.zeros((1, 3, 3, 8), np.float32)
    build = GENERATED_KERNELS["max_pool2d_nhwc"]
    assert build(op, [x], out, None, False) is not None
    assert build(op, [np.ones((1, 6, 12, 8), np.float32)[:, :, ::2]], out, None, False) is None
    assert build(op, [x.astype(np.float16)], out.astype(np.float16), None, False) is None


@pytest.mark.parametrize("shape,dtype,error,words", [
    ((1, 6, 6), np.float32, ShapeError, "max_pool2d_nhwc: the input must be 4-D"),
    ((1, 2, 2, 4), np.float32, ShapeError, "max_pool2d_nhwc: padding"),
    ((1, 6, 6, 4), np.int32, DTypeError, "max_pool2d_nhwc")])
def test_shape_rule_names_the_op_and_what_it_expected(shape, dtype, error, words):
    op = pool_op("max_pool2d", kernel=(2, 2), padding=((2, 2), (2, 2)) if shape[1] == 2
                 else ((1, 1), (1, 1)))
    with pytest.raises(error) as raised:
        ns_of(N)._op("max_pool2d_nhwc", [N.var("x", shape, dtype)], **op.params())
    assert words in str(raised.value)


@pytest.mark.parametrize("kind,count_include_pad", [
    ("max_pool2d", True), ("avg_pool2d", True), ("avg_pool2d", False)])
def test_gradients_match_finite_differences(kind, count_include_pad):
    rng = np.random.default_rng(7)
    op = _nhwc_op(pool_op(kind, (3, 2), (2, 1), ((1, 1), (0, 1)), True, count_include_pad))

    def fn(M, x):
        return ns_of(M)._op(op.kind, [x], **op.params())
    # distinct values, so a max window's winner does not change under the probe
    x = rng.permutation(96).reshape(1, 6, 4, 4) / 7.0
    check_gradient(fn, x)


# -- the rewrite -------------------------------------------------------------------------------
def _inception_like(rng):
    """A convolution, a max pool of its output and an average pool, each into a 1x1
    convolution, joined: GoogLeNet's pool branch."""
    x = N.var("x", (1, 16, 11, 11))
    c = [N.const(rng.standard_normal(s).astype(np.float32) * 0.2)
         for s in [(32, 16, 3, 3), (16, 32, 1, 1), (16, 32, 1, 1)]]
    h = N.relu(N.conv2d(x, c[0], padding=1))
    a = N.conv2d(N.max_pool2d(h, 3, stride=2, padding=1), c[1])
    b = N.conv2d(N.avg_pool2d(h, 3, stride=2, padding=1, ceil_mode=True), c[2])
    return x, N.relu(N.concatenate([a, b], axis=1))


@needs_onednn
def test_pools_between_onednn_convolutions_need_no_transpose():
    x, y = _inception_like(np.random.default_rng(0))
    fast = graphc.compile([x], [y], kernels="generated", check=True)
    plain = graphc.compile([x], [y], optimise=False, kernels="numpy")
    kinds = [n.op.kind for n in fast.liveness.steps]
    assert {"max_pool2d_nhwc", "avg_pool2d_nhwc"} <= set(kinds), kinds
    assert kinds.count("transpose") == 2, kinds     # the image in, the result out
    image = np.random.default_rng(1).standard_normal((1, 16, 11, 11)).astype(np.float32)
    image[0, 5, 4, 4] = np.nan
    got, want = fast.run(x=image)[0], plain.run(x=image)[0]
    assert (np.isnan(got) == np.isnan(want)).all() and np.isnan(got).any()
    assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@needs_numba
def test_a_pool_of_an_nchw_image_stays_nchw(monkeypatch):
    """Without channels-last convolutions around it (``GRAPHC_CONV=gemm``, no depthwise
    one), a pooling stays the NCHW kind: nothing would take the transposes away."""
    monkeypatch.setenv("GRAPHC_CONV", "gemm")
    x, y = _inception_like(np.random.default_rng(2))
    fast = graphc.compile([x], [y], kernels="generated")
    kinds = {n.op.kind for n in fast.liveness.steps}
    assert not {"max_pool2d_nhwc", "avg_pool2d_nhwc"} & kinds
    image = np.random.default_rng(3).standard_normal((1, 16, 11, 11)).astype(np.float32)
    want = graphc.compile([x], [y], optimise=False, kernels="numpy").run(x=image)[0]
    assert_allclose(fast.run(x=image)[0], want, rtol=1e-4, atol=1e-4)
