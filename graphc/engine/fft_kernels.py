"""The CPU kernel of the ``fft`` kind: NumPy's transform (pocketfft) written into the
planned memory.

>>> import numpy as np
>>> from graphc.type.op import Op
>>> out = np.empty(3, np.complex128)
>>> op = Op.make("fft", transform="rfftn", axes=(0,), lengths=(4,), norm="backward")
>>> fft(op, [np.array([1.0, 0.0, 0.0, 0.0])], out, None)(); out
array([1.+0.j, 1.+0.j, 1.+0.j])
"""
from __future__ import annotations

import numpy as np


def fft(op, ins, out, ctx):
    (x,) = ins
    transform, axes, lengths, norm = op["transform"], op["axes"], op["lengths"], op["norm"]
    function = getattr(np.fft, transform)
    if transform in ("hfft", "ihfft"):      # one-dimensional only
        def run():
            out[...] = function(x, n=lengths[0], axis=axes[0], norm=norm)
    else:
        def run():
            out[...] = function(x, s=lengths, axes=axes, norm=norm)
    return run
