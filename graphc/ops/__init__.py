"""The op definitions: every op kind declared once, next to the others of its
family, its facts filed into each layer's table (see :mod:`.definition`).

Families: :mod:`.creation` (leaves, creation, random draws, delay), :mod:`.sorting`,
:mod:`.linalg` (numpy.linalg and numpy.fft),
:mod:`.elementwise`, :mod:`.reductions` (with the linear-algebra products),
:mod:`.shaping`, :mod:`.neural` (and :mod:`.channels_last`, the optimiser's channels-last
depthwise convolution; :mod:`.conv_nhwc`, its convolutions on oneDNN; :mod:`.pool_nhwc`,
its poolings; :mod:`.fused_matmul`, its GEMM with an elementwise epilogue;
:mod:`.softmax`, the optimiser's one-node softmax). Adding an op kind is one definition in its
family's module (and a kernel or shape rule in its layer when no existing one
serves).

>>> from graphc.type.kinds import KINDS
>>> set(DEFINITIONS) == set(KINDS)
True
"""
from . import (control, creation, elementwise, formats, linalg, neural, reductions,  # noqa: F401
               channels_last, conv_nhwc, fused_matmul, pool_nhwc, softmax,
               bitcast, collectives, complex_parts, detection, shaping, sorting,
               resampling, boxes)
from .definition import DEFINITIONS, LEAF, NO_GRADIENT, OpDef, Refused, define

__all__ = ["DEFINITIONS", "OpDef", "define", "NO_GRADIENT", "Refused", "LEAF"]
