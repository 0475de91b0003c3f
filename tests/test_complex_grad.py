"""Gradients through complex values: a real loss of real variables through spectra,
eigenvalues and complex arithmetic, checked in graph and eager mode against central
finite differences (tests/gradcheck.py); complex variables, whose gradient is
``dL/dRe + i dL/dIm`` (PyTorch's convention); every kind that serves complex values,
checked one by one; and the kinds that do not, refused by name."""
import warnings

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings
from numpy.testing import assert_allclose

import graphc
import graphc.eager as E
import graphc.ndarray as N
from graphc.algodiff.rules import COMPLEX_GRADIENTS
from graphc.ops import DEFINITIONS
from gradcheck import check_gradient, smooth

_RNG = np.random.default_rng(11)
FILTER = _RNG.standard_normal(8) + 1j * _RNG.standard_normal(8)
WEIGHTS = _RNG.standard_normal((3, 3))


def _spectrum(M, x):
    return M.fft.fft(x)


#: name -> (function of a real array to a real array, the array's shape)
CHAINS = {
    "power spectrum": (lambda M, x: M.abs(_spectrum(M, x)) ** 2, (8,)),
    "filter by FFT": (lambda M, x: M.real(M.fft.ifft(_spectrum(M, x) * FILTER)) ** 3, (8,)),
    "rfft magnitudes": (lambda M, x: M.abs(M.fft.rfft2(x, norm="ortho")), (3, 6)),
    "irfft round trip": (lambda M, x: M.fft.irfft(M.fft.rfft(x), n=7) * x, (7,)),
    "phase": (lambda M, x: M.sin(M.angle(_spectrum(M, x) + 0.3)), (8,)),
    "imaginary part": (lambda M, x: M.imag(M.exp(_spectrum(M, x) * 0.1j)), (8,)),
    "conjugate": (lambda M, x: M.real(M.conj(_spectrum(M, x)) * FILTER), (8,)),
    "analytic functions": (lambda M, x: M.real(M.sqrt(_spectrum(M, x) + 5)
                                               * M.log(_spectrum(M, x) + 7)
                                               / (_spectrum(M, x) + 9)), (8,)),
    "complex power": (lambda M, x: M.imag((_spectrum(M, x) + 4) ** (x[0] + 1.5)), (8,)),
    "mixed real and complex": (lambda M, x: M.real(x * _spectrum(M, x) - x[::-1]), (8,)),
    "complex matrices": (lambda M, x: M.real(M.linalg.inv(
        M.reshape(_spectrum(M, x), (2, 4)) @ M.reshape(_spectrum(M, x), (4, 2))
        + M.eye(2) * 30)), (8,)),
    "complex solve and det": (lambda M, x: M.abs(M.linalg.det(M.reshape(
        _spectrum(M, x)[:4], (2, 2)))) + M.imag(M.sum(M.linalg.solve(
            M.reshape(_spectrum(M, x)[4:], (2, 2)), FILTER[:2]))), (8,)),
    "reductions and indexing": (lambda M, x: M.real(M.cumsum(M.prod(M.reshape(
        _spectrum(M, x) / 4, (4, 2)), axis=1))[1:] * M.mean(_spectrum(M, x)[::2])), (8,)),
    "where and concatenate": (lambda M, x: M.abs(M.concatenate(
        [M.where(x > 0, _spectrum(M, x), 0), M.flip(_spectrum(M, x))]) ** 2), (8,)),
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_real_to_complex_to_real_chains_match_finite_differences(name):
    fn, shape = CHAINS[name]
    check_gradient(fn, smooth(np.random.default_rng(3), shape), optimised=True)


#: eig's loss must not depend on the eigenvectors' phases (NumPy's are arbitrary)
EIG_LOSSES = {
    "eigenvalue moduli": lambda M, a: M.abs(M.linalg.eigvals(a)),
    "eigenvalues' parts": lambda M, a: M.real(M.linalg.eigvals(a))
    + M.imag(M.linalg.eig(a)[0]) ** 2,
    "eigenvector moduli": lambda M, a: M.abs(M.linalg.eig(a)[1]) ** 2 * WEIGHTS,
    "both": lambda M, a: M.abs(M.linalg.eig(a)[1]) * WEIGHTS
    + M.abs(M.linalg.eig(a)[0])[:, None],
}


@pytest.mark.parametrize("name", sorted(EIG_LOSSES))
@pytest.mark.parametrize("seed", [1, 2, 5])
def test_eig_gradients_match_finite_differences(name, seed):
    a = np.random.default_rng(seed).standard_normal((3, 3))
    check_gradient(EIG_LOSSES[name], a, rtol=1e-4, atol=1e-6)


def test_eigvals_of_a_stack_of_matrices():
    a = np.random.default_rng(4).standard_normal((2, 3, 3))
    check_gradient(lambda M, a: M.abs(M.linalg.eigvals(a)) ** 2, a, rtol=1e-4)


def _unary_kinds():
    return sorted(kind for kind, d in DEFINITIONS.items()
                  if kind in COMPLEX_GRADIENTS and d.family == "unary" and d.names
                  and kind != "astype")


@pytest.mark.parametrize("kind", _unary_kinds())
def test_each_unary_kind_serves_complex_values(kind):
    """f(x + iy) for real x, y in the kind's smooth interval (a small imaginary part
    keeps clear of branch cuts); both parts of the result weigh in the loss."""
    d = DEFINITIONS[kind]
    rng = np.random.default_rng(len(kind))
    low, high = d.smooth_on
    x = rng.uniform(low, high, 5)
    y = rng.uniform(0.1, 0.4, 5)

    def fn(M, x, y):
        w = getattr(M, d.names[0])(x + y * 1j)
        assert w.dtype.kind in "fc"
        return M.real(w) + 0.7 * M.imag(w)

    check_gradient(fn, x, y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["add", "subtract", "multiply", "divide", "power"])
def test_each_binary_kind_serves_complex_values(kind):
    rng = np.random.default_rng(len(kind))
    parts = [rng.uniform(0.5, 1.5, 4), rng.uniform(0.1, 0.4, 4),
             rng.uniform(0.5, 1.5, 4), rng.uniform(-0.4, 0.4, 4)]

    def fn(M, a, b, c, d):
        w = getattr(M, kind)(a + b * 1j, c + d * 1j)
        return M.real(w) - 0.3 * M.imag(w)

    check_gradient(fn, *parts)


@settings(max_examples=25, deadline=None)
@given(transform=st.sampled_from(["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]),
       size=st.integers(1, 7), n=st.none() | st.integers(1, 9),
       norm=st.sampled_from([None, "ortho", "forward"]), seed=st.integers(0, 99))
def test_every_transform_in_a_chain(transform, size, n, norm, seed):
    """Lengths cut or pad the signal; half spectra count their mirrored bins twice."""
    complex_input = transform in ("irfft", "hfft", "ifft")
    if transform in ("irfft", "hfft") and (n or 2 * (size - 1)) < 1:
        return

    def fn(M, x):
        signal = x * (1 + 0.5j) + 0.25j if complex_input else x
        spectrum = getattr(M.fft, transform)(signal, n=n, norm=norm)
        return M.abs(spectrum + 0.1) ** 2 if spectrum.dtype.kind == "c" else spectrum * x[0]

    check_gradient(fn, smooth(np.random.default_rng(seed), (size,)), rtol=1e-4, atol=1e-6)


def test_a_complex_variable_gets_the_steepest_ascent_direction():
    """d/dz of sum |z - c|^2 is 2 (z - c) in the convention: a step against it fits z."""
    rng = np.random.default_rng(0)
    c = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    z0 = np.zeros(4, np.complex128)

    def loss(M, z):
        return M.sum(M.abs(z - c) ** 2)

    z = N.var("z", (4,), np.complex128)
    dz = N.grad(loss(N, z), z)
    assert dz.dtype == np.complex128
    assert_allclose(graphc.compile([z], dz).run(z=z0), 2 * (z0 - c))
    assert_allclose(E.grad(lambda v: loss(E, v))(z0), 2 * (z0 - c))
    step = graphc.compile([z], [loss(N, z)], updates={z: z - 0.25 * dz})
    step.assign(z=z0)
    for _ in range(30):
        step.run()
    assert_allclose(step.value("z"), c, atol=1e-6)


def test_complex64_values_keep_their_precision():
    x = N.var("x", (8,), np.float32)
    g = N.grad(N.sum(N.abs(N.fft.fft(x)) ** 2), x)
    out = graphc.compile([x], g).run(x=np.arange(8, dtype=np.float32))
    assert out.dtype == np.float32
    assert_allclose(out, 16 * np.arange(8), rtol=1e-5, atol=1e-4)   # Parseval: n |x|^2


def test_no_complex_warning_on_the_way_back():
    """Complex cotangents reach real values by their real part, explicitly."""
    fn = CHAINS["conjugate"][0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        E.grad(lambda v: E.sum(fn(E, v)))(np.ones(8))
        x = N.var("x", (8,), np.float64)
        graphc.compile([x], N.grad(N.sum(fn(N, x)), x)).run(x=np.ones(8))


@pytest.mark.parametrize("kind, build", [
    ("max", lambda M, x: M.max(M.fft.fft(x))),
    ("sort", lambda M, x: M.sort(M.fft.fft(x))[0]),
])
def test_a_kind_with_no_complex_derivative_is_refused_by_name(kind, build):
    x = N.var("x", (4,))
    with pytest.raises(graphc.GraphError, match=f"through {kind} on complex values"):
        N.grad(N.real(build(N, x)), x)
    with pytest.raises(graphc.GraphError, match=f"through {kind} on complex values"):
        E.grad(lambda a: E.real(build(E, a)))(np.ones(4))
