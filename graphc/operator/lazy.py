"""The lazy array type and the namespace that builds graph nodes.

``Tensor`` is a :class:`~graphc.symbol.Node` that behaves like a NumPy array
while the graph is built: operators, methods, indexing and NumPy ufuncs
(``np.exp(t)``) all add nodes. Nothing is computed until the graph runs.

>>> import graphc.ndarray as N
>>> x = N.var("x", (2, 3))
>>> y = (x * 2.0 + 1.0).sum(axis=1)
>>> y.shape, y.dtype, y.op.kind
((2,), dtype('float32'), 'sum')
"""
from __future__ import annotations

import numpy as np

from ..shape.axes import as_shape
from ..shape.dtypes import as_dtype
from ..symbol.constants import const_op, immutable
from ..symbol.node import Node, locate
from ..type.errors import DTypeError, GraphcError
from ..type.op import Op
from .elementwise import power_shortcut
from .generated import UFUNC_NAMES
from .dispatch import numpy_function
from .loops import build_loop
from .namespace import DEFAULT_DTYPE, Namespace
from .updates import At

#: the op of a constant node (it lives in the symbol layer, below the optimiser)
_const_op = const_op


class LazyNamespace(Namespace):
    """Functions that build :class:`Tensor` nodes (the ``graphc.ndarray`` module)."""

    def _apply(self, op, parents):
        return Tensor.apply(op, parents)

    def _constant(self, array, name=None):
        array = np.asarray(array)
        # a read-only array that owns its data is taken as a promise that it stays as
        # it is, so large weights are adopted without a copy, as is a read-only view of
        # immutable bytes (ONNX initializers); anything else is copied
        if not immutable(array):
            array = np.array(array, copy=True)
            array.flags.writeable = False
        as_dtype("const", array.dtype)
        return Tensor.leaf(_const_op(array), value=array, name=name)

    def _is_value(self, x):
        return isinstance(x, Node)

    def _known(self, x):
        return x.value if isinstance(x, Node) else None

    def _assign(self, opname, target, value):
        if not isinstance(target, Tensor):
            raise TypeError(f"{opname}: the array to write into must be a graph value, got "
                            f"{type(target).__name__}; graphc.ndarray never writes into NumPy "
                            "arrays")
        target.become(self._in_place(opname, target, value))

    def _loop(self, name, step, init, xs, length, start=0, reverse=False, cond=None):
        return build_loop(self, name, step, init, xs, length, start, reverse, cond)

    def variable(self, name: str, shape=(), dtype=None):
        """A named input of the graph with a static shape (float32 by default).

        Example: ``N.var("x", (64, 784))``
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"var: the name must be a non-empty string, got {name!r}")
        dtype = DEFAULT_DTYPE if dtype is None else as_dtype("var", dtype)
        op = Op.make("var", name=name, shape=as_shape("var", shape), dtype=dtype)
        return Tensor.leaf(op, name=name)


NS = LazyNamespace()

# NumPy ufunc name -> graphc function, for np.exp(tensor) and ndarray + tensor
_UFUNCS = UFUNC_NAMES   # filled as graphc.ops defines the elementwise kinds


def _bitwise(kind):
    return lambda a, b: NS._logical_or_bitwise(kind, a, b)


def _invert(x):
    return ~x if isinstance(x, Tensor) else ~NS._lift(x)


#: ufuncs behind ndarray's ``&``, ``|``, ``^``, ``~`` (``bool_array & tensor``)
_BITWISE_UFUNCS = {"bitwise_and": _bitwise("logical_and"), "bitwise_or": _bitwise("logical_or"),
                   "bitwise_xor": _bitwise("logical_xor"), "invert": _invert}


class Tensor(Node):
    """A lazy array: a graph node with NumPy's operators, methods and indexing."""

    __slots__ = ()
    __array_priority__ = 1000

    # -- NumPy interoperability ------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = _UFUNCS.get(ufunc.__name__)
        bitwise = _BITWISE_UFUNCS.get(ufunc.__name__)
        if method == "__call__" and bitwise is not None and not kwargs:
            return bitwise(*inputs)
        if method != "__call__" or name is None or kwargs:
            raise TypeError(f"numpy.{ufunc.__name__} ({method}) cannot take a lazy graphc "
                            "value; use the graphc.ndarray function of the same name")
        return getattr(NS, name)(*inputs)

    def __array__(self, dtype=None, copy=None):
        raise TypeError(f"{self.label()} is a lazy graphc value with no data yet: compile the "
                        "graph with graphc.compile(...) and run it to get NumPy arrays")

    def __bool__(self):
        raise TypeError(f"the truth value of lazy graphc value {self.label()} is unknown while "
                        "the graph is built; use N.where for data-dependent choices")

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d lazy array")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    __hash__ = Node.__hash__  # identity, although == is elementwise as in NumPy

    # -- operators ---------------------------------------------------------------
    def __add__(self, o): return NS.add(self, o)
    def __radd__(self, o): return NS.add(o, self)
    def __sub__(self, o): return NS.subtract(self, o)
    def __rsub__(self, o): return NS.subtract(o, self)
    def __mul__(self, o): return NS.multiply(self, o)
    def __rmul__(self, o): return NS.multiply(o, self)
    def __truediv__(self, o): return NS.divide(self, o)
    def __rtruediv__(self, o): return NS.divide(o, self)
    def __floordiv__(self, o): return NS.floor_divide(self, o)
    def __rfloordiv__(self, o): return NS.floor_divide(o, self)
    def __mod__(self, o): return NS.remainder(self, o)
    def __rmod__(self, o): return NS.remainder(o, self)
    def __pow__(self, o):
        shortcut = power_shortcut(self.dtype, o)
        return getattr(NS, shortcut)(self) if shortcut else NS.power(self, o)
    def __rpow__(self, o): return NS.power(o, self)
    def __matmul__(self, o): return NS.matmul(self, o)
    def __rmatmul__(self, o): return NS.matmul(o, self)
    def __neg__(self): return NS.negative(self)
    def __pos__(self): return self
    def __abs__(self): return NS.absolute(self)
    def __lt__(self, o): return NS.less(self, o)
    def __le__(self, o): return NS.less_equal(self, o)
    def __gt__(self, o): return NS.greater(self, o)
    def __ge__(self, o): return NS.greater_equal(self, o)
    def __eq__(self, o): return NS.equal(self, o)
    def __ne__(self, o): return NS.not_equal(self, o)
    def __and__(self, o): return NS._logical_or_bitwise("logical_and", self, o)
    def __rand__(self, o): return NS._logical_or_bitwise("logical_and", o, self)
    def __or__(self, o): return NS._logical_or_bitwise("logical_or", self, o)
    def __ror__(self, o): return NS._logical_or_bitwise("logical_or", o, self)
    def __xor__(self, o): return NS._logical_or_bitwise("logical_xor", self, o)
    def __rxor__(self, o): return NS._logical_or_bitwise("logical_xor", o, self)
    def __lshift__(self, o): return NS.left_shift(self, o)
    def __rlshift__(self, o): return NS.left_shift(o, self)
    def __rshift__(self, o): return NS.right_shift(self, o)
    def __rrshift__(self, o): return NS.right_shift(o, self)

    def __invert__(self): return NS.invert(self)

    def __getitem__(self, key): return NS.getitem(self, key)

    def __setitem__(self, key, value):
        """``a[key] = value``: ``a`` now denotes the updated array (a ``scatter`` node;
        nodes built on ``a`` before keep its old value)."""
        self.become(NS._updated(self, key, value, "set", "setitem"))

    @property
    def at(self):
        """JAX's functional updates: ``x.at[key].set(v)``, ``.add(v)``, ``.multiply(v)``,
        ``.min(v)``, ``.max(v)``, ... each a new value (``x`` is unchanged)."""
        return At(NS, self)

    def fill(self, value):
        """Every cell set to ``value``, in place (``ndarray.fill``)."""
        self.become(NS.full(self.shape, value, self.dtype))

    # -- NumPy's functions (np.sum(t), np.concatenate([t, u]), np.linalg.inv(t)) --
    def __array_function__(self, func, types, args, kwargs):
        return numpy_function(NS, func, args, kwargs)

    # -- methods, as on ndarray --------------------------------------------------
    @property
    def T(self): return NS.transpose(self)

    def reshape(self, *shape):
        return NS.reshape(self, shape[0] if len(shape) == 1 else shape)

    def transpose(self, *axes):
        return NS.transpose(self, axes[0] if len(axes) == 1 else (axes or None))

    def astype(self, dtype): return NS.astype(self, dtype)
    # ndarray.view(dtype) of an equal item size; view() alone is the value itself
    def view(self, dtype=None): return self if dtype is None else NS.bitcast(self, dtype)
    def copy(self): return NS.copy(self)
    def ravel(self): return NS.ravel(self)
    def flatten(self): return NS.ravel(self)
    def squeeze(self, axis=None): return NS.squeeze(self, axis)
    def swapaxes(self, a, b): return NS.swapaxes(self, a, b)
    def clip(self, a_min=None, a_max=None): return NS.clip(self, a_min, a_max)
    def dot(self, o): return NS.dot(self, o)
    def take(self, indices, axis=None): return NS.take(self, indices, axis)
    def repeat(self, repeats, axis=None): return NS.repeat(self, repeats, axis)
    # reductions take NumPy's positional order: (axis, dtype, out, keepdims)
    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        return NS.sum(self, axis, keepdims, dtype=dtype) if _no_out("sum", out) else None

    def prod(self, axis=None, dtype=None, out=None, keepdims=False):
        return NS.prod(self, axis, keepdims, dtype=dtype) if _no_out("prod", out) else None

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        return NS.mean(self, axis, keepdims, dtype=dtype) if _no_out("mean", out) else None

    def max(self, axis=None, out=None, keepdims=False):
        return NS.max(self, axis, keepdims) if _no_out("max", out) else None

    def min(self, axis=None, out=None, keepdims=False):
        return NS.min(self, axis, keepdims) if _no_out("min", out) else None

    def any(self, axis=None, out=None, keepdims=False):
        return NS.any(self, axis, keepdims) if _no_out("any", out) else None

    def all(self, axis=None, out=None, keepdims=False):
        return NS.all(self, axis, keepdims) if _no_out("all", out) else None

    def argmax(self, axis=None, out=None, keepdims=False):
        return NS.argmax(self, axis, keepdims) if _no_out("argmax", out) else None

    def argmin(self, axis=None, out=None, keepdims=False):
        return NS.argmin(self, axis, keepdims) if _no_out("argmin", out) else None

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return NS.variance(self, axis, ddof, keepdims, dtype=dtype) if _no_out("var", out) \
            else None

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return NS.std(self, axis, ddof, keepdims, dtype=dtype) if _no_out("std", out) else None

    def cumsum(self, axis=None, dtype=None, out=None):
        return NS.cumsum(self, axis, dtype) if _no_out("cumsum", out) else None

    def cumprod(self, axis=None, dtype=None, out=None):
        return NS.cumprod(self, axis, dtype) if _no_out("cumprod", out) else None

    def trace(self, offset=0, axis1=0, axis2=1, dtype=None, out=None):
        return NS.trace(self, offset, axis1, axis2, dtype) if _no_out("trace", out) else None

    def round(self, decimals=0, out=None):
        return NS.round(self, decimals) if _no_out("round", out) else None

    def diagonal(self, offset=0, axis1=0, axis2=1):
        return NS.diagonal(self, offset, axis1, axis2)

    def argsort(self, axis=-1, kind=None, order=None):
        return NS.argsort(self, axis, kind=kind, order=order)

    def argpartition(self, kth, axis=-1, kind="introselect", order=None):
        return NS.argpartition(self, kth, axis, kind=kind, order=order)

    def searchsorted(self, v, side="left", sorter=None):
        return NS.searchsorted(self, v, side, sorter)

    def compress(self, condition, axis=None, out=None):
        return NS.compress(condition, self, axis) if _no_out("compress", out) else None

    def nonzero(self, *, size=None, fill_value=None):
        return NS.nonzero(self, size=size, fill_value=fill_value)

    def conj(self): return NS.conj(self)
    def conjugate(self): return NS.conj(self)

    @property
    def real(self): return NS.real(self)

    @property
    def imag(self): return NS.imag(self)

    @property
    def itemsize(self) -> int: return self.dtype.itemsize

    # -- ndarray's methods that write into the array: it denotes the new value --------
    def sort(self, axis=-1, kind=None, order=None):
        """Sorted in place (``ndarray.sort``): ``a`` denotes the sorted array."""
        self.become(NS.sort(self, axis, kind=kind, order=order))

    def partition(self, kth, axis=-1, kind="introselect", order=None):
        """Partitioned in place (``ndarray.partition``)."""
        self.become(NS.partition(self, kth, axis, kind=kind, order=order))

    def put(self, indices, values, mode="raise"):
        """``a.flat[indices] = values`` in place (``ndarray.put``)."""
        NS.put(self, indices, values, mode)

    # -- ndarray's methods that need the data ------------------------------------
    def _no_data(self, name):
        raise TypeError(f"{name}() of lazy graphc value {self.label()}: it has no data while "
                        "the graph is built; run the compiled graph and call it on the result")

    def item(self, *args): self._no_data("item")
    def tolist(self): self._no_data("tolist")
    def tobytes(self, order="C"): self._no_data("tobytes")


def _no_out(name, out) -> bool:
    """Methods take ``out=None`` only: a graph value is never written into."""
    if out is not None:
        raise TypeError(f"{name}: out= is not supported on lazy graphc values; use the "
                        "returned value")
    return True


def _in_place(operator_name):
    """``a op= b``: ``a`` denotes ``a op b`` from now on, in ``a``'s shape and dtype
    (NumPy's ``same_kind`` casting), so every name of ``a`` sees the new value."""
    def update(self, other):
        method = getattr(self, f"__{operator_name}__", None)
        new = NotImplemented if method is None else method(other)
        if new is NotImplemented:
            return NotImplemented
        self.become(NS._in_place(f"__i{operator_name}__", self, new))
        return self
    update.__name__ = f"__i{operator_name}__"
    return update


for _operator_name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul",
                       "and", "or", "xor", "lshift", "rshift"):
    setattr(Tensor, f"__i{_operator_name}__", _in_place(_operator_name))


def public_functions(namespace) -> dict:
    """The public functions of a namespace instance, by name (for module export)."""
    names = [n for n in dir(namespace) if not n.startswith("_")]
    return {n: getattr(namespace, n) for n in names}


__all__ = ["Tensor", "LazyNamespace", "Namespace", "NS", "public_functions", "GraphcError"]
