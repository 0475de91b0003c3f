"""The parts of complex values: ``real``, ``imag`` and ``conjugate`` (NumPy's
functions) for complex inputs; ``N.real``, ``N.imag``, ``N.conj`` and ``N.angle`` give
real inputs their NumPy meaning without an op. One definition each.

Their gradients are written in reverse mode's convention for complex values (the
cotangent ``dL/dRe z + i dL/dIm z``, :mod:`graphc.algodiff.rules`): ``real(z)``
passes ``g`` on as ``g + 0i``, ``imag(z)`` as ``i g``, ``conj(z)`` as ``conj(g)``.
ONNX has no complex element type.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["imag"].reference
'numpy.imag'
"""
from __future__ import annotations

import numpy as np

from ..algodiff.elementwise import unary_rule
from ..algodiff.rules import DIRECT
from .definition import OpDef, Refused, define

_NO_ONNX = Refused("ONNX has no complex element type")


def _part_shape(op, parents):
    """A complex input's shape, in the real dtype of its precision."""
    return parents[0].shape, np.finfo(parents[0].dtype).dtype


def _kernel(function):
    def build(op, ins, out, ctx):
        def run():
            np.copyto(out, function(ins[0]))
        return run
    return build


#: the cotangent of the complex input, given the part's ``g`` (unary_rule fits the dtype)
_GRADIENTS = {"real": lambda ns, op, z, y, g: g,
              "imag": lambda ns, op, z, y, g: ns.multiply(g, 1j),
              "conjugate": lambda ns, op, z, y, g: ns.conj(g)}

define(*(OpDef(name, "complex", 1, f"numpy.{name}", shape=shape, kernel=_kernel(function),
               reads_strided=True, grad=unary_rule(_GRADIENTS[name]), complex_grad=DIRECT,
               onnx=_NO_ONNX)
         for name, function, shape in (
             ("real", np.real, _part_shape), ("imag", np.imag, _part_shape),
             ("conjugate", np.conjugate, lambda op, parents: (parents[0].shape,
                                                              parents[0].dtype)))))
