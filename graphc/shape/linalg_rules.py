"""Shape and dtype rules of the ``numpy.linalg`` factorisations and solvers, and the
layout of their packed results.

NumPy's linear algebra computes in float32, float64, complex64 or complex128: integers
and booleans become float64, float16 and the long doubles are refused. A factorisation
with several results (``qr``, ``svd``, ``eigh``, ``eig``, ``slogdet``) is one node whose
value packs them along a last axis (:func:`parts`): the operator layer slices each
result out (views, no copy), and the gradient rule slices the packed gradient the same
way, so the factorisation runs once however many of its results are read. Complex
results are stored as pairs of reals (the packed dtype is the real one), since a
factorisation of a complex matrix mixes real and complex results (``svd``'s ``s``).

>>> import numpy as np
>>> linalg_dtype("inv", np.dtype("int32")), linalg_dtype("inv", np.dtype("float32"))
(dtype('float64'), dtype('float32'))
>>> [(p.name, p.shape) for p in parts(op_of("qr", mode="reduced"), (5, 3), np.float64)]
[('Q', (5, 3)), ('R', (3, 3))]
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..type.errors import DTypeError, ShapeError
from ..type.op import Op
from .broadcast import broadcast_shapes


def op_of(kind, **attrs) -> Op:
    """An op of ``kind`` (for examples and tests). Example: ``op_of("qr", mode="r")``"""
    return Op.make(kind, **attrs)


def linalg_dtype(opname: str, *dtypes) -> np.dtype:
    """The dtype NumPy's linear algebra computes in for operands of ``dtypes``.

    Example: ``linalg_dtype("solve", np.dtype("float32"), np.dtype("float64"))`` is float64
    """
    dtype = np.result_type(*dtypes)
    if dtype.kind in "biu":
        return np.dtype(np.float64)
    if dtype not in (np.float32, np.float64, np.complex64, np.complex128):
        raise DTypeError(f"{opname}: array type {dtype} is unsupported in linalg (expected "
                         "float32, float64, complex64, complex128, integers or booleans)")
    return dtype


def real_dtype(dtype) -> np.dtype:
    """The real dtype of the same precision. Example: ``real_dtype(np.complex64)`` is float32"""
    return np.finfo(np.dtype(dtype)).dtype


def complex_dtype(dtype) -> np.dtype:
    """The complex dtype of the same precision. Example: complex64 for float32."""
    return np.result_type(np.dtype(dtype), np.complex64)


def check_matrices(opname: str, shape, square=False) -> tuple:
    """``shape`` as a stack of matrices ``(..., M, N)`` (square when asked): ``(M, N)``.

    Example: ``check_matrices("inv", (4, 3, 3), square=True)`` is ``(3, 3)``
    """
    shape = tuple(shape)
    if len(shape) < 2:
        raise ShapeError(f"{opname}: {len(shape)}-dimensional array given; expected a "
                         "matrix or a stack of matrices (..., M, N) of at least two "
                         "dimensions")
    if square and shape[-1] != shape[-2]:
        raise ShapeError(f"{opname}: the last two dimensions must be square (..., M, M), got "
                         f"shape {shape}")
    return shape[-2:]


class Part(NamedTuple):
    """One result of a packed factorisation: its name, its shape (batch axes included)
    and dtype, and its slots (``start``, ``stop``) along the packed last axis."""

    name: str
    shape: tuple
    dtype: np.dtype
    start: int
    stop: int


def _result_shapes(op, shape, dtype):
    """(name, shape without the batch axes, dtype) of each result, before packing."""
    m, n = shape[-2:]
    k = min(m, n)
    real, cplx = real_dtype(dtype), complex_dtype(dtype)
    kind = op.kind
    if kind == "qr" and op["mode"] == "raw":   # LAPACK's Householder reflectors
        return [("h", (n, m), dtype), ("tau", (k,), dtype)]
    if kind == "qr":
        rows = m if op["mode"] == "complete" else k
        return [("Q", (m, rows), dtype), ("R", (rows, n), dtype)]
    if kind == "svd":
        u_cols, v_rows = (m, n) if op["full_matrices"] else (k, k)
        return [("U", (m, u_cols), dtype), ("S", (k,), real), ("Vh", (v_rows, n), dtype)]
    if kind == "eigh":
        return [("eigenvalues", (n,), real), ("eigenvectors", (n, n), dtype)]
    if kind == "eig":
        return [("eigenvalues", (n,), cplx), ("eigenvectors", (n, n), cplx)]
    if kind == "slogdet":
        return [("sign", (), dtype), ("logabsdet", (), real)]
    raise KeyError(f"linalg: {kind!r} has no packed results")


def parts(op, shape, dtype) -> list:
    """The results packed in the value of ``op`` on a ``(..., M, N)`` operand of the
    computing ``dtype`` (see the module docstring).

    Example: ``parts(op_of("svd", full_matrices=False, compute_uv=True, hermitian=False),
    (2, 4, 3), np.float32)`` gives U (2, 4, 3), S (2, 3), Vh (2, 3, 3)
    """
    batch = tuple(shape[:-2])
    result, start = [], 0
    for name, own, part_dtype in _result_shapes(op, shape, np.dtype(dtype)):
        slots = math.prod(own) * (2 if part_dtype.kind == "c" else 1)
        result.append(Part(name, batch + own, part_dtype, start, start + slots))
        start += slots
    return result


def packed_shape(op, shape, dtype) -> tuple:
    """The shape of the packed value: the batch axes, then every result's slots."""
    return tuple(shape[:-2]) + (parts(op, shape, dtype)[-1].stop,)


# -- the rules ----------------------------------------------------------------------
def _name(op) -> str:
    """The public name of ``op``'s kind in errors (``linalg.inv``)."""
    return f"linalg.{op.kind}"


def _square(op, parents):
    (a,) = parents
    check_matrices(_name(op), a.shape, square=True)
    return a, linalg_dtype(_name(op), a.dtype)


def inv(op, parents):
    a, dtype = _square(op, parents)
    return tuple(a.shape), dtype


def cholesky(op, parents):
    return inv(op, parents)


def det(op, parents):
    a, dtype = _square(op, parents)
    return tuple(a.shape[:-2]), dtype


def pinv(op, parents):
    (a,) = parents
    m, n = check_matrices(_name(op), a.shape)
    return tuple(a.shape[:-2]) + (n, m), linalg_dtype(_name(op), a.dtype)


def solve(op, parents):
    """NumPy 2's rule: ``b`` is a vector only when 1-D, else a stack of matrices."""
    a, b = parents
    name = _name(op)
    (m, _), dtype = check_matrices(name, a.shape, square=True), \
        linalg_dtype(name, a.dtype, b.dtype)
    if len(b.shape) == 1:
        if b.shape[0] != m:
            raise ShapeError(f"{name}: b of shape {b.shape} does not match a of shape "
                             f"{a.shape} (expected {m} elements)")
        return tuple(a.shape[:-1]), dtype
    if len(b.shape) < 2 or b.shape[-2] != m:
        raise ShapeError(f"{name}: b of shape {b.shape} does not match a of shape "
                         f"{a.shape}: expected a vector of {m} or a stack of matrices "
                         f"(..., {m}, K)")
    try:
        batch = broadcast_shapes(name, tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    except ShapeError:
        raise ShapeError(f"{name}: the batch axes of a of shape {a.shape} and b of shape "
                         f"{b.shape} do not broadcast together") from None
    return batch + tuple(b.shape[-2:]), dtype


def packed(op, parents):
    """``qr``, ``svd``, ``eigh``, ``eig`` and ``slogdet``: the packed value, or the one
    result asked for (``mode="r"``, ``compute_uv=False``, ``compute_v=False``)."""
    (a,) = parents
    square = op.kind in ("eigh", "eig", "slogdet")
    check_matrices(_name(op), a.shape, square=square)
    dtype = linalg_dtype(_name(op), a.dtype)
    single = single_result(op)
    if single is not None:
        (part,) = [p for p in parts(_full(op), a.shape, dtype) if p.name == single]
        return part.shape, part.dtype
    return packed_shape(op, a.shape, dtype), real_dtype(dtype)


def single_result(op):
    """The name of the only result ``op`` computes, or ``None`` where it packs several."""
    if op.kind == "qr" and op["mode"] == "r":
        return "R"
    if op.kind == "svd" and not op["compute_uv"]:
        return "S"
    if op.kind in ("eigh", "eig") and not op["compute_v"]:
        return "eigenvalues"
    return None


def _full(op):
    """``op`` computing all its results (for the layout of one of them)."""
    if op.kind == "qr":
        return op_of("qr", mode="reduced")
    if op.kind == "svd":
        return op_of("svd", full_matrices=op["full_matrices"], compute_uv=True,
                     hermitian=op["hermitian"])
    return op
