"""The shape and indexing kinds: reshapes and permutations, joins, slices, advanced
indexing, padding, tiling, repetition, flips, one-hot. One definition each.

>>> from graphc.ops import DEFINITIONS
>>> DEFINITIONS["reshape"].overwrites, DEFINITIONS["take"].fallible
('any', True)
"""
from __future__ import annotations

import numpy as np

from ..algodiff import shaping as grads
from ..algodiff.rules import DIRECT, HOLOMORPHIC
from ..engine import cpu_kernels as kernels
from ..engine import update_kernels as updates
from ..onnx import export_shape as onnx
from ..shape import rules as shapes
from ..type.kinds import ANY
from .definition import NO_GRADIENT, OpDef, define


def shape_op(name, arity, reference, *, grad, names=None, **facts) -> OpDef:
    """A kind of the ``shape`` family: its shape rule, kernel and exporter are the
    ones named after it (``shapes.<name>``, ``kernels.<name>``, ``<name>_export``).

    Example: ``shape_op("tile", 1, "numpy.tile", grad=grads.tile_grad)``
    """
    attr = "slice_" if name == "slice" else name
    defaults = {"shape": lambda: getattr(shapes, attr), "kernel": lambda: getattr(kernels, attr),
                "onnx": lambda: getattr(onnx, f"{name}_export")}
    for key, default in defaults.items():
        if key not in facts:
            facts[key] = default()
    # every shape kernel indexes or copies its inputs when it runs (tile's and repeat's
    # build-time reshapes only insert axes of length 1: views whatever the strides)
    facts.setdefault("reads_strided", True)
    # re-indexing: the rules move cotangents, complex ones included, as they are
    facts.setdefault("complex_grad", DIRECT)
    return OpDef(name, "shape", arity, reference, grad=grad,
                 names=(name,) if names is None else names, **facts)


#: the transposes between NCHW and channels last, which a generated copy does in a
#: third to a half of NumPy's time (1x3x224x224 to channels last: 57 against 179 us;
#: 1x32x32x144 back: 46 against 91); other permutations (5-D windows) were not faster
#: that way, but are where their contiguous runs are short by the strided copy
_LAYOUT_AXES = frozenset({(0, 2, 3, 1), (0, 3, 1, 2)})


def _generated_transpose(op, ins, out, ctx, parallel: bool):
    """A generated copy from the transposed view (``None``: NumPy's ``copyto`` serves):
    float32/float64, a large enough image; a layout change by the elementwise copy,
    another permutation by :mod:`~graphc.engine.numba_strided_copy` where its runs are
    short."""
    from ..engine.numba_kernels import generated_kernel
    from ..engine.strategy import PARALLEL_MIN
    from ..type.op import Op
    axes = tuple(op["axes"])
    if (out.dtype not in (np.float32, np.float64) or ins[0].dtype != out.dtype
            or not out.flags.c_contiguous or out.size < PARALLEL_MIN):
        return None
    if axes not in _LAYOUT_AXES:
        return _strided_copy(ins[0].transpose(axes), out, parallel)
    return generated_kernel(Op.make("copy"), [ins[0].transpose(axes)], out, parallel)


def _generated_reshape(op, ins, out, ctx, parallel: bool):
    """The copy a reshape of a strided view makes (MobileViT's patches: a reshape of a
    permuted image), generated where its contiguous runs are short (``None``: NumPy's
    ``copyto`` serves)."""
    from ..engine.strategy import PARALLEL_MIN
    x = ins[0]
    if x.flags.c_contiguous or not out.flags.c_contiguous or out.size < PARALLEL_MIN:
        return None
    return _strided_copy(x, out.reshape(x.shape), parallel)


def _strided_copy(view, out, parallel: bool):
    from ..engine.numba_strided_copy import strided_copy
    return strided_copy(view, out, parallel)


def _transposed_back(op, result):
    """The array ``transpose`` of ``op`` made ``result`` from (``OpKind.relayout``)."""
    return np.ascontiguousarray(np.transpose(result, np.argsort(op["axes"])))


define(
    # reshape only reinterprets memory, so its result may simply be its parent's
    shape_op("reshape", 1, "numpy.reshape", overwrites=ANY, grad=grads.reshape_grad,
             generated=_generated_reshape),
    # a folded transpose of a constant (a product's ``W.T``) lays it out anew: the source
    # may then hold ``W`` as the transpose back (graphc.held_once)
    shape_op("transpose", 1, "numpy.transpose", grad=grads.transpose_grad,
             relayout=_transposed_back, generated=_generated_transpose),
    shape_op("broadcast_to", 1, "numpy.broadcast_to", grad=grads.broadcast_to_grad),
    shape_op("concatenate", None, "numpy.concatenate", grad=grads.concatenate_grad),
    shape_op("slice", 1, "numpy.ndarray.__getitem__", grad=grads.slice_grad,
             names=("getitem",)),
    # index arrays fed at run time may be out of range
    shape_op("gather", None, "numpy.ndarray.__getitem__", fallible=True,
             grad=grads.gather_grad, names=("getitem",)),
    # x with the cells of a key updated; index arrays fed at run time may be out of range
    shape_op("scatter", None, "numpy.ufunc.at", overwrites=(0,), fallible=True,
             complex_grad=HOLOMORPHIC,
             kernel=updates.scatter, grad=grads.scatter_grad, names=()),
    shape_op("take", 2, "numpy.take", fallible=True, grad=grads.take_grad),
    shape_op("pad", 1, "numpy.pad", grad=grads.pad_grad),
    shape_op("tile", 1, "numpy.tile", grad=grads.tile_grad),
    shape_op("repeat", 1, "numpy.repeat", grad=grads.repeat_grad),
    shape_op("flip", 1, "numpy.flip", shape=shapes.same, grad=grads.flip_grad),
    shape_op("one_hot", 1, None, fallible=True, grad=NO_GRADIENT),   # labels out of range
)
