"""Explicit float32 vectors for generated Numba kernels: a value of 16 or 8 lanes that
LLVM keeps in one vector register, and the few operations a kernel needs on it.

Why: Numba has no ``restrict``. In a loop that stores results through one array and
reads taps through another, LLVM must assume every store may change the taps, so it
reloads them for every result it computes; a depthwise convolution then spends its
time on loads. Taps held in these values live in registers for a whole row of cells
(the channels-last depthwise kernels of :mod:`.numba_depthwise_vectors`: 2-3x faster).

The arithmetic is IEEE float32, each operation rounded once, no contraction into fused
multiply-adds and no reordering: lane by lane, the bits of the same scalar code.

Loads and stores take a C-contiguous 1-D float32 array and an element offset; they do
no bounds check (the caller's loop bounds are the check), and need no alignment.

>>> import numpy as np
>>> from numba import njit
>>> @njit
... def axpy16(a, x, y, out):             # out[:16] = y[:16] + a[:16] * x[:16]
...     store16(out, 0, muladd(load16(y, 0), load16(a, 0), load16(x, 0)))
>>> a, x, y = (np.arange(16, dtype=np.float32) for _ in range(3))
>>> out = np.empty(16, np.float32); axpy16(a, x, y, out); out[:4]
array([ 0.,  2.,  6., 12.], dtype=float32)
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic, models, register_model

__all__ = ["F32Vector", "f32x16", "f32x8", "load16", "store16", "zero16", "load8", "store8",
           "zero8", "muladd"]


class F32Vector(types.Type):
    """The Numba type of ``lanes`` float32 values in one LLVM vector."""

    def __init__(self, lanes: int):
        self.lanes = lanes
        super().__init__(name=f"f32x{lanes}")


f32x16, f32x8 = F32Vector(16), F32Vector(8)


@register_model(F32Vector)
class _VectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.VectorType(ir.FloatType(), fe_type.lanes))


def _flat_float32(array) -> bool:
    return (isinstance(array, types.Array) and array.dtype == types.float32
            and array.ndim == 1 and array.layout == "C")


def _address(context, builder, sig, args, lanes: int):
    """A pointer to ``lanes`` float32 at element ``args[1]`` of the array ``args[0]``."""
    array = context.make_array(sig.args[0])(context, builder, args[0])
    index = context.cast(builder, args[1], sig.args[1], types.intp)
    element = builder.gep(array.data, [index])
    return builder.bitcast(element, ir.VectorType(ir.FloatType(), lanes).as_pointer())


def _load(vector):
    def load(typingctx, array, index):
        if not (_flat_float32(array) and isinstance(index, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            return builder.load(_address(context, builder, sig, args, vector.lanes), align=4)
        return vector(array, index), codegen
    load.__doc__ = (f"``{vector.lanes}`` float32 of a flat float32 ``array`` from element "
                    "``index`` on, as one vector.")
    return intrinsic(load)


def _store(vector):
    def store(typingctx, array, index, value):
        if not (_flat_float32(array) and isinstance(index, types.Integer)
                and value == vector):
            return None

        def codegen(context, builder, sig, args):
            builder.store(args[2], _address(context, builder, sig, args, vector.lanes),
                          align=4)
            return context.get_dummy_value()
        return types.none(array, index, value), codegen
    store.__doc__ = (f"Write the {vector.lanes} lanes of ``value`` to a flat float32 "
                     "``array`` from element ``index`` on.")
    return intrinsic(store)


def _zero(vector):
    def zero(typingctx):
        def codegen(context, builder, sig, args):
            return ir.Constant(ir.VectorType(ir.FloatType(), vector.lanes), None)
        return vector(), codegen
    zero.__doc__ = f"{vector.lanes} lanes of +0.0."
    return intrinsic(zero)


@intrinsic
def muladd(typingctx, acc, a, b):
    """``acc + a * b`` lane by lane, the product rounded before the sum (no FMA)."""
    if not (isinstance(acc, F32Vector) and acc == a == b):
        return None

    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], builder.fmul(args[1], args[2]))
    return acc(acc, a, b), codegen


load16, store16, zero16 = _load(f32x16), _store(f32x16), _zero(f32x16)
load8, store8, zero8 = _load(f32x8), _store(f32x8), _zero(f32x8)

