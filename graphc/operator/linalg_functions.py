"""``N.linalg``: NumPy's ``numpy.linalg`` functions as graph nodes.

The factorisations and solvers are kinds of their own (:mod:`graphc.ops.linalg`); a
factorisation with several results is one node whose results are slices of its packed
value (:func:`unpack`); the norms, ``cond``, ``matrix_rank``, ``lstsq`` and the products
are composed of other functions (:mod:`.linalg_norms`, :mod:`.linalg_products`).

Where NumPy's result dtype depends on the values, a graph's cannot: ``eig`` and
``eigvals`` are always complex (NumPy gives real results when every eigenvalue is real).

>>> import graphc.eager as E, numpy as np
>>> E.linalg.inv(np.array([[2.0, 0.0], [0.0, 4.0]]))
array([[0.5 , 0.  ],
       [0.  , 0.25]])
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..shape.linalg_rules import check_matrices, linalg_dtype, parts
from ..type.errors import DTypeError, ShapeError
from ..type.op import Op
from .linalg_norms import NormsMixin
from .linalg_products import ProductsMixin


class QRResult(NamedTuple):
    Q: object
    R: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class EigResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class SlogdetResult(NamedTuple):
    sign: object
    logabsdet: object


def unpack(ns, value, op, shape, dtype) -> dict:
    """The results packed in ``value``, the value (or the gradient) of the factorisation
    ``op`` of an operand of ``shape`` and ``dtype``: name -> a value of ``ns``.

    Example: ``unpack(ns, node, Op.make("qr", mode="reduced"), (5, 3), float32)["R"]``
    """
    dtype = linalg_dtype(f"linalg.{op.kind}", dtype)
    results = {}
    for part in parts(op, shape, dtype):
        piece = ns.getitem(value, (Ellipsis, slice(part.start, part.stop)))
        if part.dtype.kind == "c":
            pairs = ns.reshape(piece, part.shape + (2,))
            piece = ns.add(ns.getitem(pairs, (Ellipsis, 0)),
                           ns.multiply(ns.getitem(pairs, (Ellipsis, 1)), 1j))
        else:
            piece = ns.reshape(piece, part.shape)
        results[part.name] = piece
    return results


def _choice(opname, name, value, allowed):
    if not isinstance(value, str) or value not in allowed:
        raise ShapeError(f"{opname}: {name} must be one of {list(allowed)}, got {value!r}")
    return value


def _flag(opname, name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise DTypeError(f"{opname}: {name} must be True or False, got {value!r}")
    return bool(value)


#: ``pinv``'s default ``rtol``: NumPy's "not given" marker (``None`` means something else)
_UNSET = object()


class LinalgFunctions(NormsMixin, ProductsMixin):
    """``N.linalg`` (``E.linalg`` in eager mode): NumPy's linear algebra."""

    def __init__(self, namespace):
        self._ns = namespace

    # -- helpers -------------------------------------------------------------------
    def _matrices(self, name, a, square=False):
        """``a`` as a value, checked to be a stack of (square) matrices NumPy's linear
        algebra takes."""
        a = self._ns._lift(a)
        check_matrices(f"linalg.{name}", a.shape, square=square)
        linalg_dtype(f"linalg.{name}", a.dtype)
        return a

    def _factor(self, kind, a, **attrs):
        """The results of the factorisation ``kind`` of ``a``: name -> value."""
        op = Op.make(kind, **attrs)
        return unpack(self._ns, self._ns._apply(op, [a]), op, a.shape, a.dtype)

    # -- inverses and solvers ------------------------------------------------------
    def inv(self, a):
        """The inverse of each square matrix; a singular one raises NumPy's
        ``LinAlgError`` when the graph runs.

        Example: ``N.linalg.inv(a)`` for ``a`` of shape ``(..., M, M)``
        """
        return self._ns._op("inv", [self._matrices("inv", a, square=True)], singular="raise")

    def solve(self, a, b):
        """``x`` with ``a @ x == b``: ``b`` is a vector when 1-D, else a stack of
        matrices (NumPy 2); batch axes broadcast.

        Example: ``N.linalg.solve(a, b)`` for ``a`` (M, M) and ``b`` (M,) or (..., M, K)
        """
        a = self._matrices("solve", a, square=True)
        return self._ns._op("solve", [a, self._ns._lift(b)])

    def det(self, a):
        """The determinant of each square matrix. Example: ``N.linalg.det(a)``"""
        return self._ns._op("det", [self._matrices("det", a, square=True)])

    def slogdet(self, a):
        """``(sign, logabsdet)`` of each square matrix's determinant, as NumPy's
        ``SlogdetResult``. Example: ``sign, logdet = N.linalg.slogdet(a)``"""
        a = self._matrices("slogdet", a, square=True)
        results = self._factor("slogdet", a)
        return SlogdetResult(results["sign"], results["logabsdet"])

    def cholesky(self, a, /, *, upper=False):
        """The lower (``upper=True``: upper) Cholesky factor of each Hermitian positive
        definite matrix, read from that triangle; a matrix that is not positive definite
        raises ``LinAlgError`` when the graph runs. Example: ``N.linalg.cholesky(a)``"""
        a = self._matrices("cholesky", a, square=True)
        return self._ns._op("cholesky", [a], upper=_flag("linalg.cholesky", "upper", upper))

    def pinv(self, a, rcond=None, hermitian=False, *, rtol=_UNSET):
        """The Moore-Penrose pseudo-inverse: singular values at most ``rcond`` (a number)
        times the largest are dropped (NumPy's defaults: ``1e-15``, or ``max(M, N) * eps``
        with ``rtol=None``). Example: ``N.linalg.pinv(a)``"""
        a = self._matrices("pinv", a)
        if rcond is not None and rtol is not _UNSET:
            raise ShapeError("linalg.pinv: `rtol` and `rcond` can't be both set.")
        if rcond is None:
            if rtol is _UNSET:
                rcond = 1e-15
            elif rtol is None:
                rcond = max(a.shape[-2:]) * float(np.finfo(linalg_dtype("pinv", a.dtype)).eps)
            else:
                rcond = rtol
        return self._ns._op("pinv", [a], rcond=self._number("pinv", "rcond", rcond),
                            hermitian=_flag("linalg.pinv", "hermitian", hermitian))

    @staticmethod
    def _number(name, what, value):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            raise DTypeError(f"linalg.{name}: {what} must be a number known while building "
                             f"(one for every matrix), got {type(value).__name__}")
        return float(value)

    # -- factorisations ------------------------------------------------------------
    def qr(self, a, mode="reduced"):
        """The QR factorisation of each matrix: ``QRResult(Q, R)`` for ``mode``
        ``"reduced"`` or ``"complete"``, ``R`` alone for ``"r"``, LAPACK's ``(h, tau)``
        for ``"raw"``.

        Example: ``q, r = N.linalg.qr(a)``
        """
        a = self._matrices("qr", a)
        _choice("linalg.qr", "mode", mode, ("reduced", "complete", "r", "raw"))
        if mode == "r":
            return self._ns._op("qr", [a], mode="r")
        results = self._factor("qr", a, mode=mode)
        if mode == "raw":
            return results["h"], results["tau"]
        return QRResult(results["Q"], results["R"])

    def svd(self, a, full_matrices=True, compute_uv=True, hermitian=False):
        """The singular value decomposition ``SVDResult(U, S, Vh)`` of each matrix (``S``
        alone with ``compute_uv=False``), singular values in descending order.

        Example: ``u, s, vh = N.linalg.svd(a, full_matrices=False)``
        """
        a = self._matrices("svd", a, square=bool(hermitian))
        attrs = {name: _flag("linalg.svd", name, value) for name, value in
                 (("full_matrices", full_matrices), ("compute_uv", compute_uv),
                  ("hermitian", hermitian))}
        if not attrs["compute_uv"]:
            return self._ns._op("svd", [a], **attrs)
        results = self._factor("svd", a, **attrs)
        return SVDResult(results["U"], results["S"], results["Vh"])

    def svdvals(self, x, /):
        """The singular values of each matrix, descending. Example: ``N.linalg.svdvals(a)``"""
        return self.svd(x, compute_uv=False)

    def eigh(self, a, UPLO="L"):
        """Eigenvalues (ascending) and eigenvectors of each Hermitian matrix, read from
        its lower (``UPLO="U"``: upper) triangle: ``EighResult``.

        Example: ``w, v = N.linalg.eigh(a)``
        """
        a = self._matrices("eigh", a, square=True)
        uplo = _choice("linalg.eigh", "UPLO", UPLO, ("L", "U"))
        results = self._factor("eigh", a, UPLO=uplo, compute_v=True)
        return EighResult(results["eigenvalues"], results["eigenvectors"])

    def eigvalsh(self, a, UPLO="L"):
        """The eigenvalues (ascending) of each Hermitian matrix. Example:
        ``N.linalg.eigvalsh(a)``"""
        a = self._matrices("eigvalsh", a, square=True)
        uplo = _choice("linalg.eigvalsh", "UPLO", UPLO, ("L", "U"))
        return self._ns._op("eigh", [a], UPLO=uplo, compute_v=False)

    def eig(self, a):
        """Eigenvalues and right eigenvectors of each square matrix, always complex (a
        graph's dtype cannot depend on whether the eigenvalues are real): ``EigResult``.

        Example: ``w, v = N.linalg.eig(a)``
        """
        a = self._matrices("eig", a, square=True)
        results = self._factor("eig", a, compute_v=True)
        return EigResult(results["eigenvalues"], results["eigenvectors"])

    def eigvals(self, a):
        """The eigenvalues of each square matrix, always complex. Example:
        ``N.linalg.eigvals(a)``"""
        return self._ns._op("eig", [self._matrices("eigvals", a, square=True)],
                            compute_v=False)


#: the attributes of each linalg kind, for loading a saved graph (:func:`rebuild`)
ATTRIBUTES = {"inv": ("singular",), "solve": (), "det": (), "cholesky": ("upper",),
              "pinv": ("hermitian", "rcond"), "slogdet": (), "qr": ("mode",),
              "svd": ("compute_uv", "full_matrices", "hermitian"),
              "eigh": ("UPLO", "compute_v"), "eig": ("compute_v",)}


def rebuild(ns, kind, parents, attrs):
    """A node of the linalg ``kind`` made again from a saved graph's (untrusted)
    attributes, each checked as the public functions check it.

    Example: ``rebuild(NS, "qr", [a], {"mode": "reduced"})``
    """
    name = f"linalg.{kind}"
    checks = {"singular": lambda v: _choice(name, "singular", v, ("raise", "nan")),
              "upper": lambda v: _flag(name, "upper", v),
              "hermitian": lambda v: _flag(name, "hermitian", v),
              "compute_uv": lambda v: _flag(name, "compute_uv", v),
              "full_matrices": lambda v: _flag(name, "full_matrices", v),
              "compute_v": lambda v: _flag(name, "compute_v", v),
              "rcond": lambda v: LinalgFunctions._number(kind, "rcond", v),
              "mode": lambda v: _choice(name, "mode", v, ("reduced", "complete", "r", "raw")),
              "UPLO": lambda v: _choice(name, "UPLO", v, ("L", "U"))}
    checked = {key: checks[key](value) for key, value in attrs.items()}
    if set(checked) != set(ATTRIBUTES[kind]):
        raise ShapeError(f"{name}: attributes {sorted(checked)}, expected "
                         f"{list(ATTRIBUTES[kind])}")
    square = kind not in ("pinv", "qr", "svd") or checked.get("hermitian", False)
    lifted = [ns.linalg._matrices(kind, parents[0], square=square)] + list(parents[1:])
    return ns._op(kind, lifted, **checked)
