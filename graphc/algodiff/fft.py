"""The gradient rule of the ``fft`` kind: the adjoint transform.

With the cotangent of a complex value ``z`` taken as ``dL/dRe z + i dL/dIm z``, the
gradient through a linear map is its adjoint: ``fftn``'s is ``ifftn`` with the
opposite normalisation (``backward`` <-> ``forward``, ``ortho`` its own), and so on.
Half spectra need the factor-of-two care: ``irfftn`` uses each bin strictly between
the zero frequency and the Nyquist one twice (with its mirror), so its adjoint doubles
those bins of ``rfftn``'s result; ``rfftn``'s adjoint halves them before ``irfftn``.
The result is then cut or zero-padded back to the input's shape (the transform padded
or cut the input to its lengths), and a real input keeps the real part.

The rule is checked against the adjoint identity and, in chains from real values
through spectra back to a real loss, against finite differences (tests/test_numpy_fft.py,
tests/test_complex_grad.py).

>>> import numpy as np, graphc.eager as E
>>> from graphc.type.op import Op
>>> op = Op.make("fft", transform="fftn", axes=(0,), lengths=(4,), norm="backward")
>>> x = np.arange(4.0) + 0j
>>> fft_grad(E._NS, op, [x], np.fft.fft(x), np.ones(4, complex))[0]
array([4.+0.j, 0.+0.j, 0.+0.j, 0.+0.j])
"""
from __future__ import annotations

import numpy as np

from .common import cast_to, wants

_SWAPPED = {"backward": "forward", "forward": "backward", "ortho": "ortho"}
#: transform -> (its adjoint, the weights of the half-spectrum bins applied: "double"
#: after the adjoint, "halve" before it, or None)
_ADJOINTS = {"fftn": ("ifftn", None), "ifftn": ("fftn", None),
             "rfftn": ("irfftn", "halve"), "irfftn": ("rfftn", "double"),
             "hfft": ("ihfft", "double"), "ihfft": ("hfft", "halve")}


def _bin_weights(n, bins, factor, dtype):
    """``factor`` on the bins a length-``n`` real signal's half spectrum (``bins`` of
    them) holds twice (all but the zero frequency and, for even ``n``, the Nyquist)."""
    weights = np.ones(bins, dtype)
    weights[1:(n + 1) // 2] = factor
    return weights


def _weighted(ns, value, axis, n, factor):
    bins = value.shape[axis]
    shape = [1] * value.ndim
    shape[axis] = bins
    real = np.finfo(value.dtype).dtype
    return ns.multiply(value, ns._lift(_bin_weights(n, bins, factor, real).reshape(shape)))


def _fit_shape(ns, value, shape):
    """``value`` cut or zero-padded, axis by axis, to ``shape``."""
    if tuple(value.shape) != tuple(shape):
        key = tuple(slice(0, min(have, want)) for have, want in zip(value.shape, shape))
        value = ns.getitem(value, key)
        widths = [(0, want - have) for have, want in zip(value.shape, shape)]
        value = ns.pad(value, widths)
    return value


def fft_grad(ns, op, inputs, output, g, needs=None):
    """The adjoint transform of ``g`` (see the module docstring)."""
    (x,) = inputs
    if not wants(needs, 0):
        return [None]
    transform, axes, lengths, norm = op["transform"], op["axes"], op["lengths"], op["norm"]
    adjoint, weights = _ADJOINTS[transform]
    last, n = axes[-1], lengths[-1]
    if weights == "halve":
        g = _weighted(ns, g, last, n, 0.5)
    grad = ns._op("fft", [g], transform=adjoint, axes=axes, lengths=lengths,
                  norm=_SWAPPED[norm])
    if weights == "double":
        grad = _weighted(ns, grad, last, n, 2.0)
    # the adjoint's result has the transform's lengths (a half spectrum where the input
    # was one); the input was cut or padded to them
    grad = _fit_shape(ns, grad, x.shape)
    return [cast_to(ns, grad, x.dtype)]     # a real input keeps the real part
