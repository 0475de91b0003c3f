"""Explicit float32 vectors for generated Numba kernels: a value of 16 or 8 lanes that
LLVM keeps in one vector register, and the few operations a kernel needs on it.

Why: Numba has no ``restrict``. In a loop that stores results through one array and
reads taps through another, LLVM must assume every store may change the taps, so it
reloads them for every result it computes; a depthwise convolution then spends its
time on loads. Taps held in these values live in registers for a whole row of cells
(the channels-last depthwise kernels of :mod:`.numba_depthwise_vectors`: 2-3x faster),
and so do the sums of a GEMM tile (:mod:`.numba_shallow_gemm`).

``muladd`` rounds the product before the sum, each operation once, no reordering: lane
by lane, the bits of the same scalar code. ``fmadd`` may fuse them into one rounding
(for sums whose order is not a contract anyway, as a GEMM's).

Loads and stores take either a C-contiguous 1-D float32 array (``load16``...) or a raw
address (``load16a``..., the GEMM blocks' operands), and an element offset; they do no
bounds check (the caller's loop bounds are the check), and need no alignment.

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
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

__all__ = ["F32Vector", "f32x16", "f32x8", "load16", "store16", "zero16", "load8", "store8",
           "zero8", "muladd", "fmadd", "load16a", "load8a", "store16a", "store8a",
           "splat16a", "splat8a", "load1a", "store1a"]


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


def _pointer(builder, element, lanes: int):
    """``element`` (a float32 pointer) as a pointer to ``lanes`` float32 (1: a scalar)."""
    if lanes == 1:
        return element
    return builder.bitcast(element, ir.VectorType(ir.FloatType(), lanes).as_pointer())


def _address(context, builder, sig, args, lanes: int):
    """A pointer to ``lanes`` float32 at element ``args[1]`` of the array ``args[0]``."""
    array = context.make_array(sig.args[0])(context, builder, args[0])
    index = context.cast(builder, args[1], sig.args[1], types.intp)
    return _pointer(builder, builder.gep(array.data, [index]), lanes)


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


# -- the same through raw addresses (the GEMM blocks of :mod:`.numba_gemm` hold addresses) ---
def _integers(*values) -> bool:
    return all(isinstance(v, types.Integer) for v in values)


def _element(context, builder, sig, args, lanes: int):
    """A pointer to ``lanes`` float32 (1: a scalar) ``args[1]`` elements past the integer
    address ``args[0]``."""
    address, index = (context.cast(builder, v, t, types.intp)
                      for v, t in zip(args[:2], sig.args[:2]))
    element = builder.gep(builder.inttoptr(address, ir.FloatType().as_pointer()), [index])
    return _pointer(builder, element, lanes)


def _value_type(lanes: int):
    return types.float32 if lanes == 1 else F32Vector(lanes)


def _load_address(lanes: int):
    value = _value_type(lanes)

    def load(typingctx, address, index):
        if not _integers(address, index):
            return None

        def codegen(context, builder, sig, args):
            return builder.load(_element(context, builder, sig, args, lanes), align=4)
        return value(address, index), codegen
    load.__doc__ = f"``{lanes}`` float32 from element ``index`` past ``address``."
    return intrinsic(load)


def _store_address(lanes: int):
    value_type = _value_type(lanes)

    def store(typingctx, address, index, value):
        if not (_integers(address, index) and value == value_type):
            return None

        def codegen(context, builder, sig, args):
            builder.store(args[2], _element(context, builder, sig, args, lanes), align=4)
            return context.get_dummy_value()
        return types.none(address, index, value), codegen
    store.__doc__ = f"Write ``value`` ({lanes} float32) from element ``index`` past ``address``."
    return intrinsic(store)


def _splat_address(vector):
    def splat(typingctx, address, index):
        if not _integers(address, index):
            return None

        def codegen(context, builder, sig, args):
            value = builder.load(_element(context, builder, sig, args, 1), align=4)
            vty = ir.VectorType(ir.FloatType(), vector.lanes)
            one = builder.insert_element(ir.Constant(vty, ir.Undefined), value,
                                         ir.Constant(ir.IntType(32), 0))
            return builder.shuffle_vector(one, ir.Constant(vty, ir.Undefined),
                                          ir.Constant(ir.VectorType(ir.IntType(32),
                                                                    vector.lanes), None))
        return vector(address, index), codegen
    splat.__doc__ = (f"The float32 at element ``index`` past ``address`` in all "
                     f"{vector.lanes} lanes.")
    return intrinsic(splat)


@intrinsic
def fmadd(typingctx, a, b, acc):
    """``a * b + acc`` lane by lane, fused into one rounding where the machine has FMA
    (LLVM's ``fmuladd``): for sums whose order is not a contract, as BLAS's."""
    if not (isinstance(acc, F32Vector) and acc == a == b):
        return None

    def codegen(context, builder, sig, args):
        lanes = sig.args[0].lanes
        vty = ir.VectorType(ir.FloatType(), lanes)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vty, [vty] * 3),
                                            f"llvm.fmuladd.v{lanes}f32")
        return builder.call(fn, list(args))
    return acc(a, b, acc), codegen


load16a, load8a, load1a = _load_address(16), _load_address(8), _load_address(1)
store16a, store8a, store1a = _store_address(16), _store_address(8), _store_address(1)
splat16a, splat8a = _splat_address(f32x16), _splat_address(f32x8)
