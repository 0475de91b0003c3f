"""The eager tape: ``graphc.eager.grad`` and ``value_and_grad``.

While ``grad(f)(*args)`` runs ``f``, the differentiated arguments are
:class:`Traced` values: a wrapper around a NumPy array that remembers the op
that made it and its parents. The eager namespace computes every op on plain
arrays as usual and, only when one of the parents is ``Traced`` (one type
test per parent: the whole cost outside ``grad``), wraps a float result in a
new ``Traced`` record. The records are the tape; :func:`~.reverse.backward`
walks it with the same rules as the graph, on plain arrays.

``Traced`` behaves like an array inside ``f``: operators, methods, indexing,
``np.exp(t)`` and NumPy functions that graphc has (``np.sum(t, axis=0)``) go
through the eager namespace. Anything else (``np.asarray(t)``, a NumPy
function graphc lacks) raises instead of silently dropping the gradient;
``t.value`` is the plain array, explicitly without gradient.

Example::

    import graphc.eager as E
    loss = lambda w, x: E.mean(E.square(x @ w))
    dw = E.grad(loss)(w, x)
"""
from __future__ import annotations

import itertools
import operator

import numpy as np

from ..operator.elementwise import power_shortcut
from ..type.errors import DTypeError, ShapeError
from .common import carries_gradient
from .reverse import backward, check_loss

#: each grad call traces at its own level, so a tape reached from another call
#: (a gradient of a gradient) is recognised and refused
_levels = itertools.count(1)


class Traced:
    """An array recorded on the eager tape (only exists while ``grad`` runs ``f``)."""

    __slots__ = ("value", "op", "parents", "level")
    __array_priority__ = 1000
    #: the eager namespace, set by graphc.eager (this layer may not import it)
    ns = None

    def __init__(self, value, op, parents, level):
        self.value, self.op, self.parents, self.level = value, op, parents, level

    # -- array facts ----------------------------------------------------------------
    shape = property(lambda self: self.value.shape)
    dtype = property(lambda self: self.value.dtype)
    ndim = property(lambda self: self.value.ndim)
    size = property(lambda self: self.value.size)
    nbytes = property(lambda self: self.value.nbytes)
    where = None

    def label(self):
        return f"traced {self.op.kind if self.op is not None else 'argument'}"

    def __repr__(self):
        return f"Traced({self.value!r})"

    def __len__(self):
        return len(self.value)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __float__(self):
        return float(self.value)

    def __bool__(self):
        return bool(self.value)

    def item(self, *args):
        """The element as a Python number (no gradient)."""
        return self.value.item(*args)

    __hash__ = object.__hash__  # identity, although == is elementwise

    # -- NumPy interoperability -------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError("a value traced by graphc.eager.grad cannot become a NumPy array: "
                        "its gradient would be lost; use graphc.eager functions on it, or "
                        "its .value (a plain array, with no gradient)")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = _UFUNCS.get(ufunc.__name__)
        if method != "__call__" or name is None or kwargs:
            raise TypeError(f"numpy.{ufunc.__name__} ({method}) on a value traced by "
                            "graphc.eager.grad: use the graphc.eager function of the same name")
        return getattr(self.ns, name)(*inputs)

    def __array_function__(self, func, types, args, kwargs):
        name = func.__name__
        if name in _FACTS:
            return _FACTS[name](*args, **kwargs)
        function = getattr(self.ns, name, None)
        if function is None or name.startswith("_"):
            raise TypeError(f"numpy.{name} on a value traced by graphc.eager.grad: graphc "
                            "has no function of that name, so its gradient is unknown")
        return function(*args, **kwargs)

    # -- operators --------------------------------------------------------------------
    def __add__(self, o): return self.ns.add(self, o)
    def __radd__(self, o): return self.ns.add(o, self)
    def __sub__(self, o): return self.ns.subtract(self, o)
    def __rsub__(self, o): return self.ns.subtract(o, self)
    def __mul__(self, o): return self.ns.multiply(self, o)
    def __rmul__(self, o): return self.ns.multiply(o, self)
    def __truediv__(self, o): return self.ns.divide(self, o)
    def __rtruediv__(self, o): return self.ns.divide(o, self)
    def __floordiv__(self, o): return self.ns.floor_divide(self, o)
    def __rfloordiv__(self, o): return self.ns.floor_divide(o, self)
    def __mod__(self, o): return self.ns.remainder(self, o)
    def __rmod__(self, o): return self.ns.remainder(o, self)
    def __pow__(self, o):
        shortcut = power_shortcut(self.dtype, o)     # NumPy's own ** shortcuts, bit for bit
        return getattr(self.ns, shortcut)(self) if shortcut else self.ns.power(self, o)
    def __rpow__(self, o): return self.ns.power(o, self)
    def __matmul__(self, o): return self.ns.matmul(self, o)
    def __rmatmul__(self, o): return self.ns.matmul(o, self)
    def __neg__(self): return self.ns.negative(self)
    def __pos__(self): return self
    def __abs__(self): return self.ns.absolute(self)
    def __lt__(self, o): return self.ns.less(self, o)
    def __le__(self, o): return self.ns.less_equal(self, o)
    def __gt__(self, o): return self.ns.greater(self, o)
    def __ge__(self, o): return self.ns.greater_equal(self, o)
    def __eq__(self, o): return self.ns.equal(self, o)
    def __ne__(self, o): return self.ns.not_equal(self, o)
    def __getitem__(self, key): return self.ns.getitem(self, key)

    def __setitem__(self, key, value):
        raise TypeError("values traced by graphc.eager.grad are immutable: build the new "
                        "value with E.where, E.concatenate or E.pad instead")

    # -- methods, as on ndarray ---------------------------------------------------------
    @property
    def T(self): return self.ns.transpose(self)

    def reshape(self, *shape):
        return self.ns.reshape(self, shape[0] if len(shape) == 1 else shape)

    def transpose(self, *axes):
        return self.ns.transpose(self, axes[0] if len(axes) == 1 else (axes or None))

    def astype(self, dtype): return self.ns.astype(self, dtype)
    def copy(self): return self.ns.copy(self)
    def ravel(self): return self.ns.ravel(self)
    def flatten(self): return self.ns.ravel(self)
    def squeeze(self, axis=None): return self.ns.squeeze(self, axis)
    def swapaxes(self, a, b): return self.ns.swapaxes(self, a, b)
    def clip(self, a_min=None, a_max=None): return self.ns.clip(self, a_min, a_max)
    def dot(self, o): return self.ns.dot(self, o)
    def take(self, indices, axis=None): return self.ns.take(self, indices, axis)
    def repeat(self, repeats, axis=None): return self.ns.repeat(self, repeats, axis)
    def sum(self, axis=None, keepdims=False): return self.ns.sum(self, axis, keepdims)
    def prod(self, axis=None, keepdims=False): return self.ns.prod(self, axis, keepdims)
    def mean(self, axis=None, keepdims=False): return self.ns.mean(self, axis, keepdims)
    def max(self, axis=None, keepdims=False): return self.ns.max(self, axis, keepdims)
    def min(self, axis=None, keepdims=False): return self.ns.min(self, axis, keepdims)
    def argmax(self, axis=None, keepdims=False): return self.ns.argmax(self, axis, keepdims)
    def argmin(self, axis=None, keepdims=False): return self.ns.argmin(self, axis, keepdims)

    def var(self, axis=None, ddof=0, keepdims=False):
        return self.ns.variance(self, axis, ddof, keepdims)

    def std(self, axis=None, ddof=0, keepdims=False):
        return self.ns.std(self, axis, ddof, keepdims)


#: NumPy functions that only read array facts
_FACTS = {"shape": lambda a: np.shape(a.value if isinstance(a, Traced) else a),
          "ndim": lambda a: np.ndim(a.value if isinstance(a, Traced) else a),
          "size": lambda a, axis=None: np.size(a.value if isinstance(a, Traced) else a, axis)}
_UFUNCS: dict = {}


def bind(namespace, ufunc_names):
    """Make :class:`Traced` compute with ``namespace`` (the eager one); called by
    ``graphc.eager``, which this layer may not import. ``ufunc_names`` maps NumPy
    ufunc names to namespace function names."""
    Traced.ns = namespace
    _UFUNCS.clear()
    _UFUNCS.update(ufunc_names)


def record(compute, op, parents):
    """``op`` on ``parents`` (some of them :class:`Traced`) computed by
    ``compute(op, plain_arrays)``; a float result is recorded on the tape.

    Example: the eager namespace's ``_apply`` calls ``record(self._apply, op, parents)``.
    """
    values = [p.value if p.__class__ is Traced else p for p in parents]
    out = compute(op, values)
    if not carries_gradient(out.dtype):
        return out
    level = max(p.level for p in parents if p.__class__ is Traced)
    return Traced(out, op, tuple(parents), level)


def _tape_value(node):
    return node.value if node.__class__ is Traced else node


def _argnums(argnums, n_args):
    single = isinstance(argnums, int) or (hasattr(argnums, "__index__")
                                          and not isinstance(argnums, (tuple, list)))
    nums = (argnums,) if single else tuple(argnums)
    resolved = []
    for a in nums:
        a = operator.index(a)
        if not -n_args <= a < n_args:
            raise ShapeError(f"grad: argnums {argnums!r} names argument {a}, but the function "
                             f"was called with {n_args} positional arguments")
        resolved.append(a % n_args)
    return single, tuple(resolved)


def _value_and_grad(f, argnums, args, kwargs):
    single, nums = _argnums(argnums, len(args))
    if any(isinstance(a, Traced) for a in args) or any(
            isinstance(v, Traced) for v in kwargs.values()):
        raise NotImplementedError(_NESTED)
    level = next(_levels)
    args = list(args)
    leaves = []
    for i in nums:
        value = np.asarray(args[i])
        if not carries_gradient(value.dtype):
            raise DTypeError(f"grad: argument {i} has dtype {value.dtype}; gradients are taken "
                             "with respect to floating-point (real or complex) arrays (pass a "
                             "float array)")
        leaf = Traced(value, None, (), level)
        leaves.append(leaf)
        args[i] = leaf
    out = f(*args, **kwargs)
    if isinstance(out, Traced):
        if out.level != level:
            raise NotImplementedError(_NESTED)
        root, value = out, out.value
    else:
        root = value = np.asarray(out)
    seed = check_loss(Traced.ns, value, None, f"returned by {getattr(f, '__name__', 'f')}")
    grads = [None] * len(leaves)
    if isinstance(root, Traced):
        grads = backward(Traced.ns, root, leaves, seed, _checked_parents(level), _tape_value)
    results, seen = [], set()
    for leaf, g in zip(leaves, grads):
        if g is None:
            g = np.zeros(leaf.shape, leaf.dtype)
        elif id(g) in seen or g is seed:  # one array for two results: give each its own
            g = g.copy()
        seen.add(id(g))
        results.append(g)
    return value, results[0] if single else tuple(results)


_NESTED = ("graphc.eager.grad inside another graphc.eager.grad (differentiating a gradient) "
           "is not supported: build the function with graphc.ndarray and apply N.grad twice")


def _checked_parents(level):
    def parents_of(node):
        if node.__class__ is not Traced:
            return ()
        if node.level != level:
            raise NotImplementedError(_NESTED)
        return node.parents
    return parents_of


def value_and_grad(f, argnums=0):
    """A function returning ``(f(*args), gradient)``: the scalar value of ``f`` and
    its gradient with respect to the positional arguments ``argnums`` (an int:
    one array; a tuple: a tuple of arrays, each of its argument's shape and dtype;
    ``dL/dRe + i dL/dIm`` for a complex argument).

    Example::

        loss, (dw, db) = E.value_and_grad(loss_fn, argnums=(0, 1))(w, b, x)
    """
    if not callable(f):
        raise TypeError(f"value_and_grad: f must be callable, got {f!r}")

    def value_and_gradient(*args, **kwargs):
        return _value_and_grad(f, argnums, args, kwargs)

    value_and_gradient.__name__ = f"value_and_grad({getattr(f, '__name__', 'f')})"
    return value_and_gradient


def grad(f, argnums=0):
    """A function returning the gradient of the scalar ``f(*args)`` with respect to
    the positional arguments ``argnums`` (see :func:`value_and_grad`).

    Example: ``E.grad(lambda x: E.sum(E.sin(x)))(np.zeros(3))`` is ``cos(0)`` = ones.
    """
    if not callable(f):
        raise TypeError(f"grad: f must be callable, got {f!r}")

    def gradient(*args, **kwargs):
        return _value_and_grad(f, argnums, args, kwargs)[1]

    gradient.__name__ = f"grad({getattr(f, '__name__', 'f')})"
    return gradient


__all__ = ["Traced", "bind", "record", "grad", "value_and_grad"]
