"""NumPy's index helpers (``ix_``, ``diag_indices``, ``tril_indices``,
``mask_indices``), ``select`` and ``choose``, and the index-trick objects
``mgrid``, ``ogrid``, ``r_`` and ``c_`` (``N.r_[a, 0, b]``).

Index arrays of static sizes are constants (int64, as NumPy's); ``choose`` takes a
computed index array too (one gather, which refuses an out-of-range index at run time).

>>> import graphc.eager as E, numpy as np
>>> E.r_[np.array([1, 2]), 0, 3:5].tolist()
[1, 2, 0, 3, 4]
"""
from __future__ import annotations

import operator

import numpy as np

from ..type.errors import DTypeError, IndexOutOfRange, ShapeError
from .namespace import DEFAULT_DTYPE

#: ``choose``'s modes: how an index outside ``[0, n)`` is mapped (``raise``: refused)
CHOOSE_MODES = ("raise", "wrap", "clip")


class IndexFunctions:
    """Index arrays, ``select``, ``choose`` and the index-trick objects."""

    def ix_(self, *args):
        """Open-mesh index arrays from 1-D sequences (masks: their static indices),
        each shaped to broadcast against the others. Example: ``x[N.ix_([0, 2], [1, 3])]``"""
        out = []
        for k, new in enumerate(args):
            if self._is_value(new):
                known = self._known(new)
                if new.dtype == np.bool_:
                    if known is None:
                        raise ShapeError("ix_: a boolean mask computed in the graph gives a "
                                         "data-dependent shape; pass static indices")
                    new = self._constant(np.nonzero(known)[0])
            else:
                new = np.asarray(new)
                if new.size == 0:
                    new = new.astype(np.intp)
                if new.dtype == np.bool_ and new.ndim == 1:
                    new = np.nonzero(new)[0]
                new = self._constant(new)
            if new.ndim != 1:
                raise ShapeError(f"ix_: cross index must be 1 dimensional, got shape "
                                 f"{new.shape}")
            shape = (1,) * k + (new.shape[0],) + (1,) * (len(args) - k - 1)
            out.append(self.reshape(new, shape))
        return tuple(out)

    def diag_indices(self, n, ndim=2):
        """The indices of the main diagonal of an ``n`` x ... x ``n`` array of
        ``ndim`` axes. Example: ``x[N.diag_indices(3)]``"""
        index = self._constant(np.arange(operator.index(n)))
        return (index,) * operator.index(ndim)

    def diag_indices_from(self, arr):
        """``diag_indices`` of a square ``arr`` (all axes of one length).
        Example: ``x[N.diag_indices_from(x)]``"""
        arr = self._lift(arr)
        if arr.ndim < 2:
            raise ShapeError(f"diag_indices_from: input array must be at least 2-d, got shape "
                             f"{arr.shape}")
        if len(set(arr.shape)) != 1:
            raise ShapeError(f"diag_indices_from: all dimensions of input must be of equal "
                             f"length, got shape {arr.shape}")
        return self.diag_indices(arr.shape[0], arr.ndim)

    def _constants(self, arrays):
        return tuple(self._constant(a) for a in arrays)

    def tril_indices(self, n, k=0, m=None):
        """The row and column indices of the lower triangle (diagonal ``k`` and
        below) of an ``n`` x ``m`` array. Example: ``x[N.tril_indices(3)]``"""
        return self._constants(np.tril_indices(operator.index(n), operator.index(k),
                                               None if m is None else operator.index(m)))

    def triu_indices(self, n, k=0, m=None):
        """The row and column indices of the upper triangle (diagonal ``k`` and
        above) of an ``n`` x ``m`` array. Example: ``x[N.triu_indices(3, 1)]``"""
        return self._constants(np.triu_indices(operator.index(n), operator.index(k),
                                               None if m is None else operator.index(m)))

    def _two_d(self, opname, arr):
        arr = self._lift(arr)
        if arr.ndim != 2:
            raise ShapeError(f"{opname}: input array must be 2-d, got shape {arr.shape}")
        return arr

    def tril_indices_from(self, arr, k=0):
        """``tril_indices`` of the 2-D ``arr``'s shape. Example: ``N.tril_indices_from(x)``"""
        rows, cols = self._two_d("tril_indices_from", arr).shape
        return self.tril_indices(rows, k, cols)

    def triu_indices_from(self, arr, k=0):
        """``triu_indices`` of the 2-D ``arr``'s shape. Example: ``N.triu_indices_from(x)``"""
        rows, cols = self._two_d("triu_indices_from", arr).shape
        return self.triu_indices(rows, k, cols)

    def mask_indices(self, n, mask_func, k=0):
        """The indices where ``mask_func(ones((n, n)), k)`` is non-zero (``N.triu``,
        ``N.tril`` or a NumPy function of the same form).

        Example: ``N.mask_indices(3, N.triu, 1)``
        """
        ones = np.ones((operator.index(n), operator.index(n)), dtype=int)
        name = getattr(mask_func, "__name__", "")
        # graphc's own functions stand for NumPy's: the mask is needed while building
        if getattr(mask_func, "__module__", "").startswith("graphc") and hasattr(np, name):
            mask_func = getattr(np, name)
        mask = mask_func(ones, k)
        known = mask if isinstance(mask, np.ndarray) else (
            self._known(mask) if self._is_value(mask) else np.asarray(mask))
        if known is None:
            raise ShapeError("mask_indices: the mask must be known while the graph is built; "
                             "pass a NumPy function such as numpy.triu")
        return self._constants(np.nonzero(known != 0))

    # -- select and choose ---------------------------------------------------------------
    def select(self, condlist, choicelist, default=0):
        """Per element, the choice of the first condition that holds, else
        ``default`` (NumPy's dtype and broadcasting). Example:
        ``N.select([x < 0, x > 1], [-x, x - 1], default=0.0)``"""
        if len(condlist) != len(choicelist):
            raise ShapeError(f"select: list of cases must be same length as list of "
                             f"conditions, got {len(choicelist)} and {len(condlist)}")
        if not condlist:
            raise ShapeError("select with an empty condition list is not possible")
        # NumPy converts choices and default to arrays, but keeps Python numbers weak
        def lifted(value):
            return self._lift(value if self._is_value(value) else np.asarray(value))
        weak = [c if type(c) in (int, float, complex) else lifted(c).dtype
                for c in list(choicelist) + [default]]
        choices, default = [lifted(c) for c in choicelist], lifted(default)
        conds = [lifted(c) for c in condlist]
        for i, cond in enumerate(conds):
            if cond.dtype != np.bool_:
                raise DTypeError(f"select: invalid entry {i} in condlist: should be boolean, "
                                 f"got {cond.dtype}")
        dtype = np.result_type(*weak)
        shapes = [a.shape for a in conds + choices + [default]]
        try:
            shape = np.broadcast_shapes(*shapes)
        except ValueError:
            raise ShapeError(f"select: shape mismatch: conditions and choices of shapes "
                             f"{shapes} cannot be broadcast to a single shape") from None
        result = self.astype(default, dtype)
        for cond, choice in zip(conds[::-1], choices[::-1]):
            result = self.where(cond, self.astype(choice, dtype), result)
        return self.broadcast_to(result, shape)

    def choose(self, a, choices, out=None, mode="raise"):
        """Per element, ``choices[a]``: ``a`` (static or computed) picks among the
        arrays ``choices``, all broadcast together. ``mode``: ``"raise"`` refuses an
        index outside ``[0, n)`` (while building for a known ``a``, else when the
        graph runs), ``"wrap"`` takes it modulo ``n``, ``"clip"`` clips it.

        Example: ``N.choose(labels, [low, mid, high])``
        """
        if out is not None:
            raise TypeError("choose: out= is not supported: graph values are never written "
                            "in place")
        if mode not in CHOOSE_MODES:
            raise ShapeError(f"choose: mode must be one of {CHOOSE_MODES}, got {mode!r}")
        a = self._lift(a if self._is_value(a) else np.asarray(a))
        if a.dtype.kind not in "iub":
            raise DTypeError(f"choose: the index array must be integer, got {a.dtype}")
        if self._is_value(choices) or isinstance(choices, np.ndarray):
            choices = list(self._lift(choices)) if self._is_value(choices) else list(choices)
        choices = [self._lift(c if self._is_value(c) else np.asarray(c)) for c in choices]
        n = len(choices)
        if n == 0:
            raise ShapeError("choose: choices must hold at least one array")
        try:
            shape = np.broadcast_shapes(a.shape, *(c.shape for c in choices))
        except ValueError:
            raise ShapeError(f"choose: shape mismatch: index of shape {a.shape} and choices "
                             f"of shapes {[c.shape for c in choices]} cannot be broadcast to "
                             "a single shape") from None
        dtype = np.result_type(*(c.dtype for c in choices))
        a = self.astype(a, np.int64)
        known = self._known(a)
        if mode == "wrap":
            a = self.mod(a, n)
        elif mode == "clip":
            a = self.clip(a, 0, n - 1)
        elif known is not None:
            if known.size and (known.min() < 0 or known.max() >= n):
                raise IndexOutOfRange(f"choose: invalid entry in choice array: indices must "
                                      f"be in [0, {n}), got {known.min()}..{known.max()}")
        else:
            # a negative index would count from the end in a gather: made out of range
            a = self.where(self.less(a, 0), n, a)
        stacked = self.stack([self.broadcast_to(self.astype(c, dtype), shape) for c in choices])
        grids = np.indices(shape, sparse=True) if shape else ()
        key = (self.broadcast_to(a, shape),) + tuple(self._constant(g) for g in grids)
        return self.getitem(stacked, key)

    # -- index-trick objects -----------------------------------------------------------------
    @property
    def mgrid(self):
        """A dense mesh grid from slices, as ``numpy.mgrid`` (a float step count
        such as ``5j`` makes float32). Example: ``N.mgrid[0:3, 0:4]``"""
        return MeshGrid(self, sparse=False)

    @property
    def ogrid(self):
        """An open mesh grid from slices, as ``numpy.ogrid``. Example: ``N.ogrid[0:3, 0:4]``"""
        return MeshGrid(self, sparse=True)

    @property
    def r_(self):
        """Arrays, numbers and slices joined along the first axis, as ``numpy.r_``.
        Example: ``N.r_[x, 0.0, 1:3]``"""
        return AxisConcatenator(self, axis=0)

    @property
    def c_(self):
        """Arrays, numbers and slices joined as columns, as ``numpy.c_``.
        Example: ``N.c_[x, y]``"""
        return AxisConcatenator(self, axis=-1, ndmin=2, trans1d=0)


class MeshGrid:
    """``N.mgrid`` and ``N.ogrid``: ``numpy``'s grids of static slices, as constants."""

    def __init__(self, namespace, sparse):
        self._ns, self._sparse = namespace, sparse

    def __getitem__(self, key):
        grid = (np.ogrid if self._sparse else np.mgrid)[key]
        as_graphc = [g.astype(DEFAULT_DTYPE) if g.dtype == np.float64 else g
                     for g in (grid if isinstance(grid, tuple) else [grid])]
        if isinstance(grid, tuple):
            return tuple(self._ns._constant(g) for g in as_graphc)
        return self._ns._constant(as_graphc[0])

    def __repr__(self):
        return "N.ogrid" if self._sparse else "N.mgrid"


class AxisConcatenator:
    """``N.r_`` and ``N.c_``: NumPy's ``AxisConcatenator`` on graph values. A string
    first entry (``"0,2,1"``: axis, ndmin, trans1d) changes how the rest join."""

    def __init__(self, namespace, axis=0, ndmin=1, trans1d=-1):
        self._ns, self._axis, self._ndmin, self._trans1d = namespace, axis, ndmin, trans1d

    def __repr__(self):
        return "N.c_" if self._trans1d == 0 else "N.r_"

    def _directive(self, item, k):
        if k != 0:
            raise ShapeError("r_: special directives must be the first entry")
        if item in ("r", "c"):
            raise ShapeError("r_: the matrix directives 'r' and 'c' make numpy.matrix "
                             "objects, which graphc does not have")
        try:
            numbers = [int(v) for v in item.split(",")]
        except ValueError:
            raise ShapeError(f"r_: unknown special directive {item!r}") from None
        if len(numbers) > 3:
            raise ShapeError(f"r_: unknown special directive {item!r}")
        self._axis = numbers[0]
        if len(numbers) > 1:
            self._ndmin = numbers[1]
        if len(numbers) > 2:
            self._trans1d = numbers[2]

    def _array(self, value, ndim):
        ns, ndmin, trans1d = self._ns, self._ndmin, self._trans1d
        value = ns.array(value, ndmin=ndmin)
        if trans1d != -1 and ndim < ndmin:
            k2, k1 = ndmin - ndim, trans1d
            if k1 < 0:
                k1 += k2 + 1
            axes = list(range(ndmin))
            value = ns.transpose(value, axes[:k1] + axes[k2:] + axes[k1:k2])
        return value

    def __getitem__(self, key):
        ns = self._ns
        saved = (self._axis, self._ndmin, self._trans1d)
        try:
            key = key if isinstance(key, tuple) else (key,)
            objs, kinds = [], []
            for k, item in enumerate(key):
                if isinstance(item, str):
                    self._directive(item, k)
                    continue
                if isinstance(item, slice):
                    value = ns._constant(np.r_[item])
                    if self._ndmin > 1:
                        value = ns.array(value, ndmin=self._ndmin)
                        if self._trans1d != -1:
                            value = ns.swapaxes(value, -1, self._trans1d)
                    objs.append(value)
                    kinds.append(value.dtype)
                elif type(item) in np.ScalarType:
                    objs.append(ns.array(np.asarray(item), ndmin=self._ndmin))
                    kinds.append(item)
                else:
                    ndim = item.ndim if ns._is_value(item) else np.ndim(item)
                    value = self._array(item, ndim)
                    objs.append(value)
                    kinds.append(value.dtype)
            if not objs:
                raise ShapeError("r_: need at least one array to concatenate")
            dtype = np.result_type(*kinds)
            return ns.concatenate([ns.astype(o, dtype) for o in objs], axis=self._axis)
        finally:
            self._axis, self._ndmin, self._trans1d = saved
