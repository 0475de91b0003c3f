"""Bilinear upsampling (the feature pyramid's and Mask R-CNN's mask head's): the kinds
``upsample_bilinear2d`` and its backward ``upsample_bilinear2d_backward``, every fact of
each here (shape rule, kernel, gradient, export), as ``upsample_nearest2d``'s are in
:mod:`.neural`. ``N.upsample_bilinear2d`` and ``N.upsample_bilinear2d_backward`` are
methods of :class:`~graphc.operator.resampling.ResampleMixin`.

The semantics are PyTorch's ``interpolate(mode="bilinear")`` (no antialias). Bilinear
interpolation is separable, so the op is ``A_h @ x @ A_w.T`` per image with one
interpolation matrix per axis (:func:`interpolation_matrix`, the only statement of the
geometry), and the backward kind, its transpose, is ``A_h.T @ g @ A_w``.

>>> import graphc.eager as E, numpy as np
>>> E.upsample_bilinear2d(np.array([[[[0.0, 1.0]]]]), size=(1, 4))
array([[[[0.  , 0.25, 0.75, 1.  ]]]])
"""
from __future__ import annotations

import numpy as np

from ..shape import neural as shapes
from ..type.errors import ShapeError
from .definition import define
from .neural import neural

FORWARD, BACKWARD = "upsample_bilinear2d", "upsample_bilinear2d_backward"


# -- geometry ---------------------------------------------------------------------------------
def interpolation_matrix(size: int, out_size: int, align_corners: bool) -> np.ndarray:
    """The (out_size, size) float64 matrix of one axis: row ``o`` holds the weights of
    the (at most two) input cells output cell ``o`` interpolates, PyTorch's source
    index rule (``align_corners``: corners meet corners; else pixel centres meet
    pixel centres, clamped at 0; one output cell reads the first when aligned).

    >>> interpolation_matrix(2, 3, True)
    array([[1. , 0. ],
           [0.5, 0.5],
           [0. , 1. ]])
    """
    dst = np.arange(out_size, dtype=np.float64)
    if align_corners:
        src = dst * ((size - 1) / (out_size - 1)) if out_size > 1 else np.zeros(out_size)
    else:
        src = np.maximum((dst + 0.5) * (size / out_size) - 0.5, 0.0)
    low = np.floor(src).astype(np.intp)
    high = np.minimum(low + 1, size - 1)
    frac = src - low
    matrix = np.zeros((out_size, size))
    # at the last cell both neighbours are one cell, whose weights add up
    np.add.at(matrix, (np.arange(out_size), low), 1.0 - frac)
    np.add.at(matrix, (np.arange(out_size), high), frac)
    return matrix


# -- shape rules ------------------------------------------------------------------------------
def _spatial_pair(opname, name, value):
    """An attribute pair of positive ints, checked again (a graph may come from a file)."""
    if (not isinstance(value, tuple) or len(value) != 2
            or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in value)):
        raise ShapeError(f"{opname}: {name} must be two positive ints, got {value!r}")
    return value


def _image(opname, what, parents, op):
    """(n, c, h, w) of the one parent, floating-point and at least 1x1."""
    shapes.float_input(opname, parents)
    n, c, h, w = shapes.nchw(opname, what, parents[0].shape)
    if h < 1 or w < 1:
        raise ShapeError(f"{opname}: {what} has shape {parents[0].shape}, whose spatial shape "
                         f"{(h, w)} is empty; bilinear interpolation needs at least one "
                         "cell per axis")
    if not isinstance(op["align_corners"], bool):
        raise ShapeError(f"{opname}: align_corners must be True or False, got "
                         f"{op['align_corners']!r}")
    return n, c, h, w


def _forward_rule(op, parents):
    n, c, _, _ = _image(FORWARD, "the input", parents, op)
    return (n, c) + _spatial_pair(FORWARD, "size", op["size"]), parents[0].dtype


def _backward_rule(op, parents):
    n, c, _, _ = _image(BACKWARD, "the gradient", parents, op)
    return (n, c) + _spatial_pair(BACKWARD, "input_size", op["input_size"]), parents[0].dtype


# -- kernels ----------------------------------------------------------------------------------
def _like(array, matrix):
    """``matrix`` in ``array``'s dtype and array module: the device program hands CuPy
    arrays to these kernels, and a product cannot mix them with NumPy's."""
    result = np.empty_like(array, shape=matrix.shape)
    host = np.ascontiguousarray(matrix, dtype=array.dtype)
    if hasattr(result, "set"):
        result.set(host)
    else:
        result[...] = host
    return result


def _separable(x, out, rows, columns):
    """The kernel writing ``rows @ x @ columns.T`` per image of ``x`` into ``out``,
    through a temporary of its own (``out`` may be a view of a shared buffer)."""
    n, c, h, w = x.shape
    rows, columns_t = _like(x, rows), _like(x, columns.T)
    half = np.empty_like(x, shape=(n, c, h, columns_t.shape[1]))
    # all images' rows as one matrix: one GEMM, not one per image
    flat, flat_half = x, half
    if x.flags.c_contiguous:
        flat, flat_half = x.reshape(-1, w), half.reshape(-1, half.shape[-1])

    def bilinear():
        np.matmul(flat, columns_t, out=flat_half)
        np.matmul(rows, half, out=out)
    return bilinear


def _matrices(op, in_hw, out_hw):
    return [interpolation_matrix(i, o, op["align_corners"]) for i, o in zip(in_hw, out_hw)]


def _forward_kernel(op, ins, out, ctx):
    (x,) = ins
    a_h, a_w = _matrices(op, x.shape[2:], out.shape[2:])
    return _separable(x, out, a_h, a_w)


def _backward_kernel(op, ins, out, ctx):
    (g,) = ins
    a_h, a_w = _matrices(op, out.shape[2:], g.shape[2:])
    return _separable(g, out, a_h.T, a_w.T)


# -- gradients: both kinds are linear, each the other's transpose -----------------------------
def _forward_grad(ns, op, inputs, output, g, needs=None):
    return [ns.upsample_bilinear2d_backward(g, inputs[0].shape[2:],
                                            align_corners=op["align_corners"])]


def _backward_grad(ns, op, inputs, output, g, needs=None):
    return [ns.upsample_bilinear2d(g, size=inputs[0].shape[2:],
                                   align_corners=op["align_corners"])]


# -- ONNX -------------------------------------------------------------------------------------
def _export(ctx, op, ins, out):
    """``Resize`` (linear) to the output's sizes. Without aligned corners the mode is
    ``half_pixel``, not ``pytorch_half_pixel``: that one reads cell 0 for a 1-cell
    output where PyTorch reads the centre; onnxruntime clamps the coordinates into the
    image, as PyTorch does (tests/test_resampling_ops.py compares them)."""
    (x,) = ins
    sizes = ctx.ints(tuple(x.shape[:2]) + tuple(op["size"]))
    mode = "align_corners" if op["align_corners"] else "half_pixel"
    return ctx.op("Resize", [x.name, "", "", sizes], out=out.name, mode="linear",
                  coordinate_transformation_mode=mode)


define(
    neural(FORWARD, 1, shape=_forward_rule, kernel=_forward_kernel, grad=_forward_grad,
           attributes=("size", "align_corners"), onnx_export=_export),
    neural(BACKWARD, 1, shape=_backward_rule, kernel=_backward_kernel, grad=_backward_grad,
           attributes=("input_size", "align_corners")),
)
