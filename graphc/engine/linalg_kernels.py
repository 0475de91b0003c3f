"""CPU kernels of the ``numpy.linalg`` kinds: each calls NumPy's (LAPACK's) function and
writes its result into the planned memory; factorisations with several results write
them packed along the last axis (:func:`graphc.shape.linalg_rules.parts`).

NumPy's errors (a singular matrix, one that is not positive definite, a factorisation
that does not converge: ``numpy.linalg.LinAlgError``) propagate out of the run, so
every kind here is ``fallible``.

>>> import numpy as np
>>> from graphc.type.op import Op
>>> a = np.array([[2.0, 0.0], [0.0, 4.0]]); out = np.empty((2, 2))
>>> inv(Op.make("inv", singular="raise"), [a], out, None)(); out
array([[0.5 , 0.  ],
       [0.  , 0.25]])
"""
from __future__ import annotations

import numpy as np

from ..shape.linalg_rules import linalg_dtype, parts, single_result


def _operand(op, x, *others):
    """``x`` in the dtype NumPy's linalg computes in (integers become float64)."""
    dtype = linalg_dtype(op.kind, x.dtype, *(o.dtype for o in others))
    return x if x.dtype == dtype else x.astype(dtype)


def _writer(compute):
    """A kernel builder whose kernel stores ``compute(op, *ins)`` into ``out``."""
    def builder(op, ins, out, ctx):
        def run():
            out[...] = compute(op, *ins)
        return run
    builder.__name__ = compute.__name__
    return builder


@_writer
def inv(op, a):
    a = _operand(op, a)
    if op["singular"] == "raise":
        return np.linalg.inv(a)
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        # NumPy's own gufunc with errors ignored (``cond``): NaN for each singular matrix
        result = np.full(a.shape, np.nan, a.dtype)
        for index in np.ndindex(a.shape[:-2]):
            try:
                result[index] = np.linalg.inv(a[index])
            except np.linalg.LinAlgError:
                pass
        return result


@_writer
def det(op, a):
    return np.linalg.det(_operand(op, a))


@_writer
def cholesky(op, a):
    return np.linalg.cholesky(_operand(op, a), upper=op["upper"])


@_writer
def pinv(op, a):
    return np.linalg.pinv(_operand(op, a), rcond=op["rcond"], hermitian=op["hermitian"])


@_writer
def solve(op, a, b):
    return np.linalg.solve(_operand(op, a, b), _operand(op, b, a))


def _results(op, a):
    """Every result of the factorisation ``op`` of ``a``, in the order of its parts."""
    kind = op.kind
    if kind == "qr":
        return np.linalg.qr(a, mode=op["mode"])
    if kind == "svd":
        return np.linalg.svd(a, full_matrices=op["full_matrices"],
                             compute_uv=op["compute_uv"], hermitian=op["hermitian"])
    if kind == "eigh":
        return np.linalg.eigh(a, UPLO=op["UPLO"]) if op["compute_v"] else \
            np.linalg.eigvalsh(a, UPLO=op["UPLO"])
    if kind == "eig":
        # complex always: NumPy's dtype depends on the values (real when every
        # eigenvalue is), a graph's cannot
        results = np.linalg.eig(a) if op["compute_v"] else (np.linalg.eigvals(a),)
        cplx = np.result_type(a.dtype, np.complex64)
        return tuple(r.astype(cplx, copy=False) for r in results)
    if kind == "slogdet":
        return np.linalg.slogdet(a)
    raise KeyError(kind)


def packed(op, ins, out, ctx):
    """The kernel of ``qr``, ``svd``, ``eigh``, ``eig`` and ``slogdet``."""
    (a,) = ins
    layout = None if single_result(op) is not None else \
        parts(op, a.shape, linalg_dtype(op.kind, a.dtype))
    batch = a.shape[:-2]

    def run():
        results = _results(op, _operand(op, a))
        if layout is None:
            out[...] = results[0] if isinstance(results, tuple) else results
            return
        for part, value in zip(layout, results):
            value = np.asarray(value)
            if value.dtype.kind == "c":
                value = np.stack([value.real, value.imag], axis=-1)
            out[..., part.start:part.stop] = value.reshape(batch + (part.stop - part.start,))
    return run
