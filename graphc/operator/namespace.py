"""The NumPy-named array functions, written once against a tiny backend
interface so the same code builds graph nodes (:mod:`graphc.ndarray`) or
computes at once (:mod:`graphc.eager`).

A backend provides four hooks:

- ``_apply(op, parents)``: the value of ``op`` on ``parents`` (a node, or an array);
- ``_constant(array)``: an array as a value of this backend;
- ``_is_value(x)``: whether ``x`` already is such a value;
- ``_known(x)``: the concrete array behind ``x`` when known while building
  (constants, eager arrays), else ``None``; used for early bounds checks.

Everything else (NumPy's signatures, argument normalisation, composite
functions such as ``var`` or ``logsumexp``) lives in the mixins and is shared.
"""
from __future__ import annotations

import functools
import numbers

import numpy as np

from ..shape.axes import as_shape
from ..shape.dtypes import as_dtype
from ..symbol.node import locate
from ..type.errors import DTypeError, GraphcError
from ..type.op import Op

#: Default dtype of variables and of creation functions without a dtype.
DEFAULT_DTYPE = np.dtype("float32")


def is_python_scalar(x) -> bool:
    """Python numbers are NumPy 2 "weak" scalars: they take the other operand's dtype."""
    return isinstance(x, (bool, int, float, complex, numbers.Number)) and not isinstance(
        x, np.generic)


class Backend:
    """Hooks every namespace implements (see the module docstring)."""

    def _apply(self, op: Op, parents):
        raise NotImplementedError

    def _constant(self, array: np.ndarray, name=None):
        raise NotImplementedError

    def variable(self, name: str, shape, dtype=None):
        raise NotImplementedError

    def _is_value(self, x) -> bool:
        raise NotImplementedError

    def _known(self, x):
        raise NotImplementedError

    def _assign(self, opname: str, target, value):
        """Make ``target`` (an array a NumPy function writes into) hold ``value``."""
        raise NotImplementedError

    # -- coercion shared by every function -----------------------------------
    def _lift(self, x, like=None):
        """``x`` as a value of this backend. A Python scalar takes ``like``'s dtype
        by NumPy's promotion (``float32 array + 0.5`` stays float32)."""
        if self._is_value(x):
            return x
        hook = getattr(type(x), "__graphc_value__", None)
        if hook is not None:          # an object that knows its value here (graphc.State)
            return hook(x, self)
        if is_python_scalar(x):
            dtype = np.result_type(like.dtype, x) if like is not None else np.asarray(x).dtype
            return self._constant(np.asarray(x, dtype=dtype))
        array = np.asarray(x)
        as_dtype("array argument", array.dtype)
        return self._constant(array)

    def _lift_all(self, *args):
        """Lift several operands; scalars follow the first operand that is an array."""
        like = next((a for a in args if not is_python_scalar(a)), None)
        if like is not None and not self._is_value(like):
            like = self._lift(like)
        return [self._lift(a, like) for a in args]

    def _op(self, kind: str, parents, **attrs):
        return self._apply(Op.make(kind, **attrs), list(parents))

    @staticmethod
    def _shape(opname, shape):
        return as_shape(opname, shape)

    @staticmethod
    def _dtype(opname, dtype, default=DEFAULT_DTYPE):
        return default if dtype is None else as_dtype(opname, dtype)

    @staticmethod
    def _require_float(opname, x):
        if x.dtype.kind not in "fc":
            raise DTypeError(f"{opname}: expected a floating-point array, got {x.dtype}")


def with_location(function):
    """``function`` with the user's source line as the location of the errors it
    raises (unless a call inside gave them one).

    Shape and dtype rules locate their errors when a node is built; this covers the
    errors the functions raise themselves while normalising arguments (a bad axis,
    a reshape of the wrong size, arrays that cannot be stacked). Wrapping twice
    wraps once.

    Example: ``ElementwiseMixin.exp = with_location(unary_function("exp", "exp"))``
    """
    if getattr(function, "_graphc_locates", False):
        return function

    @functools.wraps(function)
    def located(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except GraphcError as exc:
            if exc.location is not None:
                raise
            # a fresh traceback from here, as if raised by the user's call
            raise locate(exc).with_traceback(None) from None
    located._graphc_locates = True
    return located


def _locate_errors(cls, private=()) -> None:
    """Wrap every public function of ``cls`` (and the ``private`` ones the operators
    of arrays call) with :func:`with_location`."""
    for name in [n for n in dir(cls) if not n.startswith("_")] + list(private):
        if callable(getattr(cls, name)):
            setattr(cls, name, with_location(getattr(cls, name)))


# The mixins import this module's helpers (is_python_scalar), so they are imported
# below them; graphc/operator/__init__.py imports this module first.
from .arrays import ArrayMixin  # noqa: E402
from .boxes import BoxMixin  # noqa: E402
from .creation import CreationMixin, RandomFunctions  # noqa: E402
from .elementwise import ElementwiseMixin  # noqa: E402
from .fft_functions import FFTFunctions  # noqa: E402
from .linalg import LinalgMixin  # noqa: E402
from .linalg_functions import LinalgFunctions  # noqa: E402
from .loops import LoopMixin  # noqa: E402
from .mathematics import MathMixin  # noqa: E402
from .neural import NeuralMixin  # noqa: E402
from .reductions import ReductionMixin  # noqa: E402
from .resampling import ResampleMixin  # noqa: E402
from .shaping import ShapingMixin  # noqa: E402
from .sorting import SortingMixin  # noqa: E402
from .updates import UpdateMixin  # noqa: E402


class Namespace(ElementwiseMixin, ReductionMixin, LinalgMixin, ShapingMixin, CreationMixin,
                NeuralMixin, ResampleMixin, BoxMixin, ArrayMixin, MathMixin, SortingMixin,
                UpdateMixin, LoopMixin, Backend):
    """Every NumPy-named function of graphc, for one backend (a subclass gives the
    hooks: :class:`~graphc.operator.lazy.LazyNamespace`, ``graphc.eager``'s).

    >>> "reshape" in dir(Namespace) and "concatenate" in dir(Namespace)
    True
    """

    def __init__(self):
        for name, submodule in SUBMODULES.items():
            setattr(self, name, submodule(self))


#: the submodules (``N.random``, ``N.linalg``, ``N.fft``): name -> the class of each
SUBMODULES = {"random": RandomFunctions, "linalg": LinalgFunctions, "fft": FFTFunctions}


_locate_errors(Namespace, private=["_logical_or_bitwise"])
for _submodule in SUBMODULES.values():
    _locate_errors(_submodule)
