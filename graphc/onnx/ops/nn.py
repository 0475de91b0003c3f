"""Converters of ONNX's neural-network operators: Conv, pooling, normalisation,
Gemm/MatMul, Softmax."""
from __future__ import annotations
