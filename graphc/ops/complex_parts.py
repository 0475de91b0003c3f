"""The parts of complex values: ``real``, ``imag`` and ``conjugate`` (NumPy's
functions) for complex inputs; ``N.real``, ``N.imag``, ``N.conj`` and ``N.angle`` give
real inputs their NumPy meaning without an op. One definition each.

Reverse mode refuses paths through complex values (:mod:`graphc.algodiff.reverse`),
so these carry no gradient rule yet; ONNX has no complex element type.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["imag"].reference
'numpy.imag'
"""
from __future__ import annotations

import numpy as np

from .definition import NO_GRADIENT, OpDef, Refused, define

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


define(*(OpDef(name, "complex", 1, f"numpy.{name}", shape=shape, kernel=_kernel(function),
               reads_strided=True, grad=NO_GRADIENT, onnx=_NO_ONNX)
         for name, function, shape in (
             ("real", np.real, _part_shape), ("imag", np.imag, _part_shape),
             ("conjugate", np.conjugate, lambda op, parents: (parents[0].shape,
                                                              parents[0].dtype)))))
