"""``import graphc.eager as E``: the same functions as :mod:`graphc.ndarray`,
evaluated at once on NumPy arrays with the CPU engine's kernels. It is the
"without graph" baseline: every call allocates its result, nothing is planned.

``E.grad(f)`` and ``E.value_and_grad(f)`` differentiate a function written
with these functions (reverse mode, on a tape: see :mod:`graphc.algodiff.tape`).

>>> import graphc.eager as E, numpy as np
>>> E.sum(E.exp(np.zeros((2, 3))), axis=1)
array([3., 3.])
>>> E.grad(lambda x: E.sum(E.square(x)))(np.array([1.0, 2.0]))
array([2., 4.])
"""
import numpy as _np

from .algodiff import tape as _tape
from .algodiff.tape import Traced as _Traced, grad, value_and_grad
from .engine.cpu import RunContext as _RunContext
from .engine.cpu_kernels import build_kernel as _build_kernel
from .operator import public_functions as _public
from .operator.public_names import named_functions as _named_functions
from .operator.loops import run_loop as _run_loop
from .operator.namespace import Namespace as _Namespace
from .shape.rules import infer as _infer
from .symbol.node import locate as _locate
from .type.errors import GraphcError as _GraphcError


class EagerNamespace(_Namespace):
    """Functions that compute immediately and return NumPy arrays."""

    def __init__(self):
        super().__init__()
        self.context = _RunContext()
        self.random.seed = self.context.seed

    def _apply(self, op, parents):
        for p in parents:  # the only cost of the tape outside grad: one test per parent
            if p.__class__ is _Traced:
                return _tape.record(self._apply, op, parents)
        try:
            shape, dtype = _infer(op, parents)
        except _GraphcError as exc:
            raise _locate(exc).with_traceback(None) from None
        out = _np.empty(shape, dtype)
        _build_kernel(op, parents, out, self.context)()
        return out

    def _constant(self, array, name=None):
        return _np.asarray(array)

    def _is_value(self, x):
        return isinstance(x, (_np.ndarray, _Traced))

    def _known(self, x):
        if isinstance(x, _np.ndarray):
            return x
        return x.value if isinstance(x, _Traced) else None

    def _assign(self, opname, target, value):
        if not isinstance(target, _np.ndarray):
            raise TypeError(f"{opname}: the array to write into must be a NumPy array, got "
                            f"{type(target).__name__}")
        _np.copyto(target, self._in_place(opname, target, value))

    def _loop(self, name, step, init, xs, length, start=0, reverse=False, cond=None):
        return _run_loop(self, name, step, init, xs, length, start, reverse, cond)

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


def _ufunc_names():
    from .operator.generated import UFUNC_NAMES  # NumPy ufunc name -> namespace function

    return dict(UFUNC_NAMES)


_tape.bind(_NS, _ufunc_names())
globals().update(_named_functions(_NS, "E."))   # argument errors name E.exp, not a helper
random = _NS.random
__all__ = sorted(list(_public(_NS)) + ["evaluate", "grad", "value_and_grad"])
