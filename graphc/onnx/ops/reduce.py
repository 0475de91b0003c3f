"""Converters of ONNX's reductions (ReduceSum, ReduceMean, ArgMax, ...)."""
from __future__ import annotations
