"""``import graphc.eager as E``: the same functions as :mod:`graphc.ndarray`,
evaluated at once on NumPy arrays with the CPU engine's kernels. It is the
"without graph" baseline: every call allocates its result, nothing is planned.

>>> import graphc.eager as E, numpy as np
>>> E.sum(E.exp(np.zeros((2, 3))), axis=1)
array([3., 3.])
"""
import numpy as _np

from .engine.cpu import RunContext as _RunContext
from .engine.cpu_kernels import build_kernel as _build_kernel
from .operator import public_functions as _public
from .operator.lazy import Namespace as _Namespace
from .shape.rules import infer as _infer
from .symbol.node import user_location as _user_location
from .type.errors import GraphcError as _GraphcError


class EagerNamespace(_Namespace):
    """Functions that compute immediately and return NumPy arrays."""

    def __init__(self):
        super().__init__()
        self.context = _RunContext()
        self.random.seed = self.context.seed

    def _apply(self, op, parents):
        try:
            shape, dtype = _infer(op, parents)
        except _GraphcError as exc:
            raise type(exc)(f"{exc} (at {_user_location()})") from None
        out = _np.empty(shape, dtype)
        _build_kernel(op, parents, out, self.context)()
        return out

    def _constant(self, array, name=None):
        return _np.asarray(array)

    def _is_value(self, x):
        return isinstance(x, _np.ndarray)

    def _known(self, x):
        return x if isinstance(x, _np.ndarray) else None

    def variable(self, name, shape=(), dtype=None):
        raise TypeError("var: named variables exist only in graph mode (graphc.ndarray); "
                        "in eager mode pass NumPy arrays directly")


_NS = EagerNamespace()


def evaluate(op, arrays):
    """The value of ``op`` on NumPy ``arrays``, computed by the CPU kernels
    (the optimiser folds constants with it, so folding changes no bits).

    Example: ``E.evaluate(Op.make("exp"), [np.zeros(3)])``
    """
    shape, dtype = _infer(op, arrays)
    out = _np.empty(shape, dtype)
    _build_kernel(op, list(arrays), out, _NS.context)()
    return out

globals().update(_public(_NS))
random = _NS.random
__all__ = sorted(list(_public(_NS)) + ["evaluate"])
