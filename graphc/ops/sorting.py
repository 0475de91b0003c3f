"""The sorting, searching, cumulative and counting kinds. One definition each.

Everything else of NumPy's sorting, searching, counting and order-statistics
functions (``median``, ``unique``, ``nonzero``, ``histogram``, ``isin``...) is
composed from these in :mod:`graphc.operator.sorting`.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["sort"].attributes, DEFINITIONS["cumsum"].onnx_name
(('axis', 'stable'), None)
"""
from __future__ import annotations

from ..algodiff import sorting as grads
from ..engine import sorting_kernels as kernels
from ..onnx import export_sorting as onnx
from ..shape import sorting_rules as shapes
from ..algodiff.rules import DIRECT, HOLOMORPHIC
from .definition import NO_GRADIENT, OpDef, Refused, define

define(
    # sort copies its input into its output, then sorts there: it may take the input's memory
    OpDef("sort", "sorting", 1, "numpy.sort", shape=shapes.sort, kernel=kernels.sort,
          overwrites=(0,), reads_strided=True, grad=grads.sort_grad, onnx=onnx.sort_export,
          attributes=("axis", "stable"), names=("sort",)),
    OpDef("argsort", "sorting", 1, "numpy.argsort", shape=shapes.argsort,
          kernel=kernels.argsort, reads_strided=True, grad=NO_GRADIENT,
          onnx=onnx.argsort_export, attributes=("axis", "stable"), names=("argsort",)),
    # the indices of the k best along an axis, best first (N.top_k takes the values
    # along them: their gradient is take_along_axis's)
    OpDef("top_k", "sorting", 1, None, shape=shapes.top_k, kernel=kernels.top_k,
          reads_strided=True, grad=NO_GRADIENT, onnx=onnx.top_k_export,
          attributes=("k", "axis", "largest"), names=("top_k",)),
    OpDef("cumsum", "sorting", 1, "numpy.cumsum", shape=shapes.cumulative,
          kernel=kernels.cumulative, reads_strided=True, grad=grads.cumsum_grad,
          complex_grad=DIRECT,
          onnx=onnx.cumsum_export, attributes=("axis",), names=("cumsum",)),
    OpDef("cumprod", "sorting", 1, "numpy.cumprod", shape=shapes.cumulative,
          kernel=kernels.cumulative, reads_strided=True, grad=grads.cumprod_grad,
          complex_grad=HOLOMORPHIC,
          onnx=Refused("ONNX has no cumulative product"), attributes=("axis",),
          names=("cumprod",)),
    OpDef("searchsorted", "sorting", 2, "numpy.searchsorted", shape=shapes.searchsorted,
          kernel=kernels.searchsorted, reads_strided=True, grad=NO_GRADIENT,
          onnx=Refused("ONNX has no binary search (searchsorted)"), attributes=("side",),
          names=("searchsorted",)),
    # indices fed at run time may be out of range
    OpDef("take_along_axis", "sorting", 2, "numpy.take_along_axis",
          shape=shapes.take_along_axis, kernel=kernels.take_along_axis, fallible=True,
          reads_strided=True, grad=grads.take_along_axis_grad, complex_grad=DIRECT,
          onnx=onnx.take_along_axis_export, attributes=("axis",), names=("take_along_axis",)),
    # values outside [0, length) are dropped; with weights (parent 1) sums them in float64
    OpDef("bincount", "sorting", None, "numpy.bincount",
          shape=shapes.bincount, kernel=kernels.bincount, reads_strided=True,
          grad=grads.bincount_grad, onnx=onnx.bincount_export, attributes=("length",),
          names=("bincount",)),
)
