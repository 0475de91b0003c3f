"""``N.fft``: every function against ``numpy.fft`` in graph mode (both memory plans) and
eager mode (tests/opcheck.py), over shapes, lengths (cut and zero-padded), axes, norms
and dtypes (complex ones included: they flow through compile, plan and run); the
gradient rule against the adjoint identity ``Re <A x, y> == Re <x, A* y>``; errors.
"""
import warnings

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.algodiff.fft import fft_grad
from graphc.type import Op
from opcheck import check_op, examples, expect_error

DTYPES = (np.float32, np.float64, np.complex64, np.complex128, np.int32)
NORMS = (None, "backward", "ortho", "forward")
TOLERANCE = dict(rtol=1e-5, atol=1e-5)


def signal(seed, shape, dtype):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        return rng.integers(-5, 5, shape).astype(dtype)
    values = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    return values.astype(dtype)


ONE_DIMENSIONAL = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
MANY_DIMENSIONAL = ("fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn")


@pytest.mark.parametrize("name", ONE_DIMENSIONAL)
@examples(15)
@given(seed=st.integers(0, 2**16), dtype=st.sampled_from(DTYPES), data=st.data(),
       shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple))
def test_one_dimensional_transforms_match_numpy(name, seed, dtype, data, shape):
    x = signal(seed, shape, dtype)
    n = data.draw(st.one_of(st.none(), st.integers(1, 7)))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    norm = data.draw(st.sampled_from(NORMS))
    check_op(lambda M, x: getattr(M.fft, name)(x, n=n, axis=axis, norm=norm),
             lambda x: getattr(np.fft, name)(x, n=n, axis=axis, norm=norm), x, **TOLERANCE)


@pytest.mark.parametrize("name", MANY_DIMENSIONAL)
@examples(15)
@given(seed=st.integers(0, 2**16), dtype=st.sampled_from(DTYPES), data=st.data(),
       shape=st.lists(st.integers(1, 4), min_size=2, max_size=3).map(tuple))
def test_many_dimensional_transforms_match_numpy(name, seed, dtype, data, shape):
    x = signal(seed, shape, dtype)
    ndim = len(shape)
    if name.endswith("2"):
        axes = data.draw(st.sampled_from([(-2, -1), (0, 1), (1, 0)]))
    else:
        axes = data.draw(st.one_of(st.none(), st.lists(st.integers(0, ndim - 1), min_size=1,
                                                       max_size=ndim, unique=True)))
    count = 2 if name.endswith("2") and axes is not None else len(axes) if axes else ndim
    s = data.draw(st.one_of(st.none(), st.lists(st.integers(1, 6), min_size=count,
                                                max_size=count)))
    if s is not None and axes is None:
        axes = list(range(ndim - count, ndim))   # NumPy 2 deprecates s without axes
    norm = data.draw(st.sampled_from(NORMS))
    kwargs = dict(s=s, norm=norm) if axes is None else dict(s=s, axes=axes, norm=norm)
    check_op(lambda M, x: getattr(M.fft, name)(x, **kwargs),
             lambda x: getattr(np.fft, name)(x, **kwargs), x, **TOLERANCE)


def test_s_without_axes_takes_the_last_axes_as_numpy_does():
    x = signal(1, (3, 4, 5), np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        check_op(lambda M, x: M.fft.fftn(x, s=(2, 6)), lambda x: np.fft.fftn(x, s=(2, 6)), x,
                 **TOLERANCE)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
@pytest.mark.parametrize("d", [1.0, 0.25])
def test_frequencies_match_numpy(n, d):
    for name in ("fftfreq", "rfftfreq"):
        for M in (N, E):
            value = getattr(M.fft, name)(n, d=d)
            value = graphc.compile([], [value]).run()[0] if M is N else value
            np.testing.assert_array_equal(value, getattr(np.fft, name)(n, d=d), strict=True)


@examples(20)
@given(seed=st.integers(0, 2**16), data=st.data(),
       shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple))
def test_shifts_match_numpy(seed, data, shape):
    x = signal(seed, shape, np.float64)
    axes = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1),
                               st.lists(st.integers(0, len(shape) - 1), unique=True)
                               .map(tuple)))
    for name in ("fftshift", "ifftshift"):
        check_op(lambda M, x: getattr(M.fft, name)(x, axes=axes),
                 lambda x: getattr(np.fft, name)(x, axes=axes), x)


def test_a_round_trip_gives_the_signal_back_in_float32():
    x = signal(3, (4, 6), np.float32)
    v = N.var("x", x.shape)
    back = N.fft.irfft2(N.fft.rfft2(v), s=x.shape)
    spectrum = N.fft.fft(v)
    assert spectrum.dtype == np.complex64 and back.dtype == np.float32
    (value,) = graphc.compile([v], [back], check=True).run(x=x)
    np.testing.assert_allclose(value, x, rtol=1e-5, atol=1e-5)


# -- the gradient rule: the adjoint transform --------------------------------------------
def _inner(u, v):
    return float(np.real(np.sum(np.conj(u) * v)))


@pytest.mark.parametrize("transform", ["fftn", "ifftn", "rfftn", "irfftn", "hfft", "ihfft"])
@examples(20)
@given(seed=st.integers(0, 2**16), data=st.data(), real=st.booleans(),
       shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple))
def test_the_gradient_is_the_adjoint_transform(transform, seed, data, real, shape):
    ndim = len(shape)
    if transform in ("hfft", "ihfft"):
        axes = (data.draw(st.integers(0, ndim - 1)),)
    else:
        axes = tuple(data.draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim,
                                        unique=True)))
    lengths = tuple(data.draw(st.integers(1, 7)) for _ in axes)
    norm = data.draw(st.sampled_from(NORMS[1:]))
    real = real or transform in ("rfftn", "ihfft")
    x = signal(seed, shape, np.float64 if real else np.complex128)
    op = Op.make("fft", transform=transform, axes=axes, lengths=lengths, norm=norm)
    y = E._NS._apply(op, [x])
    g = signal(seed + 1, y.shape, y.dtype)
    (adjoint,) = fft_grad(E._NS, op, [x], y, g)
    assert adjoint.shape == x.shape and adjoint.dtype == x.dtype
    np.testing.assert_allclose(_inner(y, g), _inner(x, adjoint), rtol=1e-9, atol=1e-9)


# -- errors -------------------------------------------------------------------------------
def test_errors_name_the_function():
    x = N.var("x", (4,))
    with pytest.raises(graphc.ShapeError, match="fft.fft: Invalid number of FFT data points"):
        N.fft.fft(x, n=0)
    with pytest.raises(graphc.ShapeError, match="fft.irfft: Invalid number of FFT data points"):
        N.fft.irfft(N.var("y", (1,), np.complex64))
    with pytest.raises(graphc.ShapeError, match="Invalid norm value"):
        N.fft.fft(x, norm="unitary")
    with pytest.raises(graphc.DTypeError, match="out= is not supported"):
        N.fft.fft(x, out=np.empty(4, np.complex64))
    with pytest.raises(graphc.ShapeError, match="Shape and axes have different lengths"):
        N.fft.fftn(N.var("z", (2, 3)), s=(2, 3), axes=(0,))
    expect_error(lambda M, x: M.fft.rfft(x), [np.ones(4, np.complex64)], graphc.DTypeError)
    with pytest.raises(graphc.ShapeError, match="axis"):
        N.fft.fft(x, axis=1)


def test_rebuild_checks_saved_attributes():
    from graphc.operator import NS
    from graphc.operator.fft_functions import rebuild

    x = N.var("x", (4, 6))
    node = N.fft.rfft2(x, s=(3, 8), norm="ortho")
    again = rebuild(NS, [x], node.op.params())
    assert (again.op, again.parents, again.shape) == (node.op, node.parents, node.shape)
    bad = dict(node.op.params())
    for key, value, error in (("axes", ("0",), "tuple of ints"),
                              ("transform", "dct", "unknown transform"),
                              ("norm", "unitary", "Invalid norm"),
                              ("lengths", (0, 8), "Invalid number of FFT data points")):
        with pytest.raises(graphc.ShapeError, match=error):
            rebuild(NS, [x], {**bad, key: value})


def test_a_gradient_flows_through_a_round_trip_of_spectra():
    """irfft(rfft(x)) is x: its gradient is the incoming one (tests/test_complex_grad.py
    checks chains against finite differences)."""
    x = N.var("x", (8,))
    (dx,) = N.grad(N.sum(N.fft.irfft(N.fft.rfft(x)) * np.arange(8.0)), [x])
    np.testing.assert_allclose(graphc.compile([x], dx).run(x=np.ones(8, np.float32)),
                               np.arange(8.0), atol=1e-5)
    round_trip = E.grad(lambda a: E.sum(E.fft.irfft(E.fft.rfft(a)) * a))(np.ones(8))
    np.testing.assert_allclose(round_trip, np.full(8, 2.0))
    # a complex value off the path to the loss is fine
    grads = E.grad(lambda a: (E.fft.rfft(a), E.sum(a * a))[1])(np.ones(3))
    np.testing.assert_array_equal(grads, [2.0, 2.0, 2.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_parts_of_a_spectrum_are_numpys(dtype):
    """real, imag, conj, angle, iscomplex and isreal of complex values, in graph mode
    (both memory plans), eager mode and after save/load."""
    signal = np.random.default_rng(3).standard_normal((3, 8)).astype(dtype)
    z = np.fft.fft(signal)
    functions = {"real": lambda ns, v: ns.real(v), "imag": lambda ns, v: ns.imag(v),
                 "conj": lambda ns, v: ns.conj(v),
                 "angle": lambda ns, v: ns.angle(v, deg=True),
                 "iscomplex": lambda ns, v: ns.iscomplex(v),
                 "isreal": lambda ns, v: ns.isreal(v)}
    x = N.var("x", signal.shape, dtype)
    spectrum = N.fft.fft(x)
    outputs = [f(N, spectrum) for f in functions.values()]
    for plan in ("offsets", "blocks"):
        got = graphc.compile([x], outputs, plan=plan).run(signal)
        for name, value in zip(functions, got):
            want = {"angle": np.angle(z, deg=True)}.get(name, None)
            want = getattr(np, name)(z) if want is None else want
            np.testing.assert_allclose(value, want, rtol=1e-6, atol=1e-6)
            assert value.dtype == want.dtype, name
            np.testing.assert_allclose(functions[name](E, np.fft.fft(signal)), want,
                                       rtol=1e-6, atol=1e-6)
    assert N.imag(x).shape == signal.shape and N.real(x) is x


def test_parts_of_complex_values_survive_save_and_load(tmp_path):
    x = N.var("x", (6,), np.float64)
    z = N.fft.rfft(x)
    g = graphc.compile([x], [N.real(z), N.imag(z), N.conj(z)])
    g.save(tmp_path / "g.npz")
    data = np.arange(6.0)
    for a, b in zip(graphc.load(tmp_path / "g.npz").run(data), g.run(data)):
        np.testing.assert_array_equal(a, b)
