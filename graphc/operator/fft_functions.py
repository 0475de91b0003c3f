"""``N.fft``: NumPy's ``numpy.fft`` functions as graph nodes.

Every transform is one ``fft`` node (:mod:`graphc.shape.fft_rules`) whose attributes
say which NumPy function it is, over which axes, of which lengths and normalisation, as
NumPy's own argument rules resolve them; the dtypes are NumPy 2's (float32 in,
complex64 out). ``fftfreq`` and ``rfftfreq`` are constants (their sizes are static);
``fftshift`` and ``ifftshift`` are rolls made of slices and a concatenation.

>>> import graphc.eager as E, numpy as np
>>> E.fft.rfft(np.array([1.0, 0.0, 0.0, 0.0]))
array([1.+0.j, 1.+0.j, 1.+0.j])
"""
from __future__ import annotations

import operator

import numpy as np

from ..shape.axes import normalize_axis
from ..shape.fft_rules import NORMS
from ..type.errors import DTypeError, ShapeError


def _norm(name, norm):
    if norm is None:
        return "backward"
    if norm not in NORMS:
        raise ShapeError(f"fft.{name}: Invalid norm value {norm!r}; should be \"backward\", "
                         "\"ortho\" or \"forward\".")
    return norm


def _no_out(name, out):
    if out is not None:
        raise DTypeError(f"fft.{name}: out= is not supported; graph values are immutable, "
                         "use the result")


def _length(name, n):
    try:
        n = operator.index(n)
    except TypeError:
        raise DTypeError(f"fft.{name}: the length must be an integer known while building, "
                         f"got {n!r}") from None
    if n < 1:
        raise ShapeError(f"fft.{name}: Invalid number of FFT data points ({n}) specified.")
    return n


class FFTFunctions:
    """``N.fft`` (``E.fft`` in eager mode): NumPy's discrete Fourier transforms."""

    def __init__(self, namespace):
        self._ns = namespace

    # -- the one kind ----------------------------------------------------------------
    def _transform(self, name, transform, a, axes, lengths, norm):
        return self._ns._op("fft", [a], transform=transform, axes=tuple(axes),
                            lengths=tuple(lengths), norm=_norm(name, norm))

    def _one(self, name, transform, a, n, axis, norm, out, half_input=False):
        """A one-dimensional transform along ``axis`` of length ``n``."""
        _no_out(name, out)
        a = self._ns._lift(a)
        if a.ndim == 0:
            raise ShapeError(f"fft.{name}: a 0-d array has no axis to transform")
        axis = normalize_axis(f"fft.{name}", axis, a.ndim)
        if n is None:
            n = 2 * (a.shape[axis] - 1) if half_input else a.shape[axis]
        return self._transform(name, transform, a, [axis], [_length(name, n)], norm)

    def _many(self, name, transform, a, s, axes, norm, out, half_input=False):
        """A transform over several axes, with NumPy's rules for ``s`` and ``axes``."""
        _no_out(name, out)
        a = self._ns._lift(a)
        shapeless = s is None
        if axes is None:
            axes = list(range(a.ndim)) if shapeless else list(range(-len(s), 0))
        else:
            axes = [axes] if isinstance(axes, int) else list(axes)
        axes = [normalize_axis(f"fft.{name}", ax, a.ndim) for ax in axes]
        s = [a.shape[ax] for ax in axes] if shapeless else list(s)
        if len(s) != len(axes):
            raise ShapeError(f"fft.{name}: Shape and axes have different lengths: s={s}, "
                             f"axes={axes}")
        if not axes:
            raise ShapeError(f"fft.{name}: no axes to transform (shape {a.shape})")
        if half_input and shapeless:
            s[-1] = (a.shape[axes[-1]] - 1) * 2
        s = [a.shape[ax] if n == -1 else _length(name, n) for n, ax in zip(s, axes)]
        return self._transform(name, transform, a, axes, s, norm)

    # -- one dimension ----------------------------------------------------------------
    def fft(self, a, n=None, axis=-1, norm=None, out=None):
        """The discrete Fourier transform along ``axis`` (cut or zero-padded to ``n``).
        Example: ``N.fft.fft(x)``"""
        return self._one("fft", "fftn", a, n, axis, norm, out)

    def ifft(self, a, n=None, axis=-1, norm=None, out=None):
        """The inverse discrete Fourier transform along ``axis``. Example:
        ``N.fft.ifft(X)``"""
        return self._one("ifft", "ifftn", a, n, axis, norm, out)

    def rfft(self, a, n=None, axis=-1, norm=None, out=None):
        """The transform of a real signal: ``n // 2 + 1`` frequencies. Example:
        ``N.fft.rfft(x)``"""
        return self._one("rfft", "rfftn", a, n, axis, norm, out)

    def irfft(self, a, n=None, axis=-1, norm=None, out=None):
        """The real signal of length ``n`` (default ``2 * (m - 1)``) whose ``rfft`` is
        ``a``. Example: ``N.fft.irfft(X, n=8)``"""
        return self._one("irfft", "irfftn", a, n, axis, norm, out, half_input=True)

    def hfft(self, a, n=None, axis=-1, norm=None, out=None):
        """The transform of a signal with Hermitian symmetry (given as half of it): real,
        of length ``n`` (default ``2 * (m - 1)``). Example: ``N.fft.hfft(h)``"""
        return self._one("hfft", "hfft", a, n, axis, norm, out, half_input=True)

    def ihfft(self, a, n=None, axis=-1, norm=None, out=None):
        """The inverse of ``hfft``: half of a Hermitian spectrum. Example:
        ``N.fft.ihfft(x)``"""
        return self._one("ihfft", "ihfft", a, n, axis, norm, out)

    # -- two and n dimensions ---------------------------------------------------------
    def fft2(self, a, s=None, axes=(-2, -1), norm=None, out=None):
        """The transform over two axes. Example: ``N.fft.fft2(image)``"""
        return self._many("fft2", "fftn", a, s, axes, norm, out)

    def ifft2(self, a, s=None, axes=(-2, -1), norm=None, out=None):
        """The inverse transform over two axes. Example: ``N.fft.ifft2(X)``"""
        return self._many("ifft2", "ifftn", a, s, axes, norm, out)

    def rfft2(self, a, s=None, axes=(-2, -1), norm=None, out=None):
        """The real-input transform over two axes. Example: ``N.fft.rfft2(image)``"""
        return self._many("rfft2", "rfftn", a, s, axes, norm, out)

    def irfft2(self, a, s=None, axes=(-2, -1), norm=None, out=None):
        """The inverse of ``rfft2``. Example: ``N.fft.irfft2(X, s=image_shape)``"""
        return self._many("irfft2", "irfftn", a, s, axes, norm, out, half_input=True)

    def fftn(self, a, s=None, axes=None, norm=None, out=None):
        """The transform over ``axes`` (default: all, or the last ``len(s)``). Example:
        ``N.fft.fftn(volume)``"""
        return self._many("fftn", "fftn", a, s, axes, norm, out)

    def ifftn(self, a, s=None, axes=None, norm=None, out=None):
        """The inverse transform over ``axes``. Example: ``N.fft.ifftn(X)``"""
        return self._many("ifftn", "ifftn", a, s, axes, norm, out)

    def rfftn(self, a, s=None, axes=None, norm=None, out=None):
        """The real-input transform over ``axes`` (the last one halved). Example:
        ``N.fft.rfftn(volume)``"""
        return self._many("rfftn", "rfftn", a, s, axes, norm, out)

    def irfftn(self, a, s=None, axes=None, norm=None, out=None):
        """The inverse of ``rfftn``. Example: ``N.fft.irfftn(X, s=volume_shape)``"""
        return self._many("irfftn", "irfftn", a, s, axes, norm, out, half_input=True)

    # -- helpers ----------------------------------------------------------------------
    def fftfreq(self, n, d=1.0, device=None):
        """The sample frequencies of a length-``n`` transform with spacing ``d`` (a
        constant). Example: ``N.fft.fftfreq(8, d=0.1)``"""
        return self._ns._lift(np.fft.fftfreq(_length("fftfreq", n), d=self._spacing(d)))

    def rfftfreq(self, n, d=1.0, device=None):
        """The sample frequencies of ``rfft`` (a constant). Example:
        ``N.fft.rfftfreq(8)``"""
        return self._ns._lift(np.fft.rfftfreq(_length("rfftfreq", n), d=self._spacing(d)))

    def _spacing(self, d):
        known = self._ns._known(d) if self._ns._is_value(d) else np.asarray(d)
        if known is None:
            raise DTypeError("fft.fftfreq: the spacing d must be known while building (a "
                             "number or a constant)")
        return known

    def _roll_half(self, name, x, axes, inverse):
        ns = self._ns
        x = ns._lift(x)
        if axes is None:
            axes = tuple(range(x.ndim))
        elif isinstance(axes, int):
            axes = (axes,)
        for axis in axes:
            axis = normalize_axis(f"fft.{name}", axis, x.ndim)
            n = x.shape[axis]
            shift = (n - n // 2) if inverse else n // 2     # elements moved to the front
            if n < 2 or shift % n == 0:
                continue
            head = [slice(None)] * x.ndim
            tail = [slice(None)] * x.ndim
            head[axis], tail[axis] = slice(n - shift, None), slice(0, n - shift)
            x = ns.concatenate([ns.getitem(x, tuple(head)), ns.getitem(x, tuple(tail))],
                               axis=axis)
        return x

    def fftshift(self, x, axes=None):
        """The zero frequency moved to the middle (a roll by half along ``axes``).
        Example: ``N.fft.fftshift(N.fft.fft(x))``"""
        return self._roll_half("fftshift", x, axes, inverse=False)

    def ifftshift(self, x, axes=None):
        """The inverse of ``fftshift``. Example: ``N.fft.ifftshift(centred)``"""
        return self._roll_half("ifftshift", x, axes, inverse=True)


#: the attributes of the ``fft`` kind, for loading a saved graph (:func:`rebuild`)
ATTRIBUTES = ("axes", "lengths", "norm", "transform")


def rebuild(ns, parents, attrs):
    """An ``fft`` node made again from a saved graph's (untrusted) attributes, their
    types checked here and their values by the shape rule.

    Example: ``rebuild(NS, [x], {"transform": "fftn", "axes": (0,), "lengths": (8,),
    "norm": "backward"})``
    """
    from ..shape.fft_rules import TRANSFORMS
    if set(attrs) != set(ATTRIBUTES):
        raise ShapeError(f"fft: attributes {sorted(attrs)}, expected {list(ATTRIBUTES)}")
    for key in ("axes", "lengths"):
        value = attrs[key]
        if not isinstance(value, tuple) or not all(type(v) is int for v in value):
            raise ShapeError(f"fft: {key} must be a tuple of ints, got {value!r}")
    if attrs["transform"] not in TRANSFORMS:
        raise ShapeError(f"fft: unknown transform {attrs['transform']!r}")
    _norm(attrs["transform"], attrs["norm"])
    (x,) = parents
    return ns._op("fft", [ns._lift(x)], **attrs)
