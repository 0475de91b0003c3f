"""Converters of ONNX's reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin,
ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare,
ArgMax/ArgMin, CumSum and CumProd.

The ``Reduce*`` operators take their axes as an attribute until the opset where
they became an input (13 for ReduceSum, 18 for the others, which also added
``noop_with_empty_axes``); no axes mean every axis. The result keeps the input's
dtype (NumPy widens integer sums; ONNX does not). A reduction over a zero-size
axis gives the operation's identity (0 for sums, 1 for products, the lowest value
of the dtype for a maximum, -inf for the logarithmic ones).

>>> import numpy as np
>>> from graphc.onnx.context import NodeContext
>>> from graphc.onnx.registry import CONVERTERS
>>> spec = CONVERTERS["ReduceMax"]
>>> node = NodeContext.for_test("ReduceMax", []).node
>>> x = np.array([[1.0, 5.0], [3.0, 2.0]])
>>> spec.fn(NodeContext(node, 18, [x, np.array([1])], {"keepdims": 0}, spec))
array([5., 3.])
>>> spec.fn(NodeContext(node, 13, [x], {"axes": [0]}, spec))
array([[3., 5.]])
"""
from __future__ import annotations

import numpy as np

from ..registry import converter

#: the first opset where each reduction takes its axes as an input (others: 18)
_AXES_INPUT_SINCE = {"ReduceSum": 13}


def _lowest(dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return False
    return np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf


def _highest(dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return True
    return np.iinfo(dtype).max if dtype.kind in "iu" else np.inf


def _reduce_axes(ctx, rank: int) -> tuple:
    """The sorted axes the node reduces: every axis when none are given, none
    (an elementwise result) when they are empty and ``noop_with_empty_axes`` is set."""
    op = ctx.node.op_type
    since = _AXES_INPUT_SINCE.get(op, 18)
    if ctx.opset >= since:
        if ctx.has_attr("axes"):
            raise ctx.invalid(f"from opset {since} the axes of {op} are its second input, "
                              "not an attribute")
        axes = ctx.constant(1, optional=True)
        noop = bool(ctx.attr("noop_with_empty_axes"))
    else:
        if ctx.has_input(1):
            raise ctx.invalid(f"before opset {since} the axes of {op} are an attribute, not "
                              f"an input (the model's opset is {ctx.opset})")
        if ctx.has_attr("noop_with_empty_axes"):
            raise ctx.invalid(f"noop_with_empty_axes exists only from opset {since} "
                              f"(the model's opset is {ctx.opset})")
        axes, noop = ctx.attr("axes"), False
    axes = [] if axes is None else np.asarray(axes).reshape(-1).tolist()
    if not axes:
        return () if noop else tuple(range(rank))
    normal = []
    for axis in axes:
        if not isinstance(axis, int) or not -rank <= axis < rank:
            raise ctx.invalid(f"axis {axis} is out of range for an input of rank {rank} "
                              f"(expected {-rank} <= axis < {rank})")
        normal.append(axis % rank)
    if len(set(normal)) != len(normal):
        raise ctx.invalid(f"axes {axes} repeat an axis (input of rank {rank})")
    return tuple(sorted(normal))


def _cast(ns, value, dtype):
    return value if value.dtype == dtype else ns.astype(value, dtype)


def _float(ns, x):
    """``x`` in a floating-point dtype (integers in float64) for log, exp and sqrt."""
    return x if x.dtype.kind == "f" else ns.astype(x, np.float64)


# Each entry: the value over non-empty axes (ns, x, axes, keepdims), and the identity
# over an empty set for a dtype. Results are cast back to the input's dtype.
def _max(ns, x, axes, keep):
    return ns.any(x, axes, keep) if x.dtype == np.bool_ else ns.max(x, axes, keep)


def _min(ns, x, axes, keep):
    return ns.all(x, axes, keep) if x.dtype == np.bool_ else ns.min(x, axes, keep)


def _mean(ns, x, axes, keep):
    if x.dtype.kind == "f":
        return ns.mean(x, axes, keep)
    # np.mean(dtype=int): the true quotient of the integer sum, truncated toward zero
    count = int(np.prod([x.shape[a] for a in axes]))
    return ns.divide(ns.astype(ns.sum(x, axes, keep), np.float64), float(count))


_REDUCTIONS = {
    "ReduceSum": (lambda ns, x, a, k: ns.sum(x, a, k), lambda dtype: 0),
    "ReduceMean": (_mean, lambda dtype: np.nan),
    "ReduceMax": (_max, _lowest),
    "ReduceMin": (_min, _highest),
    "ReduceProd": (lambda ns, x, a, k: ns.prod(x, a, k), lambda dtype: 1),
    "ReduceL1": (lambda ns, x, a, k: ns.sum(ns.absolute(x), a, k), lambda dtype: 0),
    "ReduceL2": (lambda ns, x, a, k: ns.sqrt(_float(ns, ns.sum(ns.square(x), a, k))),
                 lambda dtype: 0),
    "ReduceSumSquare": (lambda ns, x, a, k: ns.sum(ns.square(x), a, k), lambda dtype: 0),
    "ReduceLogSum": (lambda ns, x, a, k: ns.log(_float(ns, ns.sum(x, a, k))), _lowest),
    "ReduceLogSumExp": (lambda ns, x, a, k: ns.logsumexp(_float(ns, x), a, k), _lowest),
}


@converter(*_REDUCTIONS, attrs={"axes": None, "keepdims": 1, "noop_with_empty_axes": 0})
def reduce(ctx):
    x, ns, shape, dtype = ctx.input(0), ctx.ns, ctx.shape(0), ctx.dtype(0)
    axes = _reduce_axes(ctx, len(shape))
    keep = bool(ctx.attr("keepdims"))
    compute, identity = _REDUCTIONS[ctx.node.op_type]
    if any(shape[a] == 0 for a in axes):
        out = tuple(1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes)
        fill = identity(dtype)
        if dtype.kind in "iu" and isinstance(fill, float):  # NaN or inf: no such integer
            fill = 0 if np.isnan(fill) else (_lowest(dtype) if fill < 0 else _highest(dtype))
        return ns.full(out, fill, dtype)
    return _cast(ns, compute(ns, x, axes, keep), dtype)


# -- ArgMax / ArgMin -----------------------------------------------------------------------
@converter("ArgMax", "ArgMin", attrs={"axis": 0, "keepdims": 1, "select_last_index": 0})
def arg_reduce(ctx):
    x, ns, shape = ctx.input(0), ctx.ns, ctx.shape(0)
    op, rank, axis = ctx.node.op_type, len(shape), ctx.attr("axis")
    if ctx.opset < 12 and ctx.has_attr("select_last_index"):
        raise ctx.invalid(f"select_last_index exists only from opset 12 (the model's opset "
                          f"is {ctx.opset})")
    if not -rank <= axis < max(rank, 1):
        raise ctx.invalid(f"axis {axis} is out of range for an input of shape {shape} "
                          f"(expected {-rank} <= axis < {rank})")
    if rank == 0:
        raise ctx.invalid(f"{op} needs an input of rank >= 1, got a scalar")
    axis %= rank
    if shape[axis] == 0:
        raise ctx.invalid(f"{op} over axis {axis} of size 0 (input shape {shape}) has no "
                          "element to choose")
    arg = ns.argmax if op == "ArgMax" else ns.argmin
    keep = bool(ctx.attr("keepdims"))
    if ctx.attr("select_last_index"):
        # the last extremum is the first one of the reversed axis
        first = ns.astype(arg(ns.flip(x, axis), axis, keep), np.int64)
        return ns.subtract(np.int64(shape[axis] - 1), first)
    return ns.astype(arg(x, axis, keep), np.int64)


# -- CumSum and CumProd ---------------------------------------------------------------------
def _shifted(ns, y, axis: int, k: int, fill=0):
    """``y`` moved ``k`` places along ``axis``, ``fill`` coming in at the start."""
    n = y.shape[axis]
    head = tuple(slice(None) if i != axis else slice(0, n - k) for i in range(y.ndim))
    widths = tuple((k, 0) if i == axis else (0, 0) for i in range(y.ndim))
    return ns.pad(ns.getitem(y, head), widths, constant_values=fill)


def _scan(ctx, combine, identity):
    """The inclusive (or ``exclusive``, ``reverse``) scan of input 0 along the axis
    input by ``combine``, whose neutral element is ``identity``."""
    x, ns, shape = ctx.input(0), ctx.ns, ctx.shape(0)
    axis_value = ctx.constant(1)
    if axis_value.size != 1 or axis_value.dtype.kind not in "iu":
        raise ctx.invalid(f"the axis input must be one integer, got {axis_value!r}")
    rank, axis = len(shape), int(axis_value.reshape(-1)[0])
    if not -rank <= axis < rank:
        raise ctx.invalid(f"axis {axis} is out of range for an input of shape {shape} "
                          f"(expected {-rank} <= axis < {rank})")
    axis %= rank
    n, y = shape[axis], x
    if n == 0:
        return y
    if ctx.attr("reverse"):
        y = ns.flip(y, axis)
    if ctx.attr("exclusive"):
        y = _shifted(ns, y, axis, 1, identity)
    # Hillis-Steele scan: log2(n) shifted combinations, each element-for-element exact
    # for integers (graphc has no sequential scan op)
    k = 1
    while k < n:
        y = combine(y, _shifted(ns, y, axis, k, identity))
        k *= 2
    if ctx.attr("reverse"):
        y = ns.flip(y, axis)
    return _cast(ns, y, ctx.dtype(0))


@converter("CumSum", attrs={"exclusive": 0, "reverse": 0})
def cumsum(ctx):
    return _scan(ctx, ctx.ns.add, 0)


@converter("CumProd", attrs={"exclusive": 0, "reverse": 0})
def cumprod(ctx):
    return _scan(ctx, ctx.ns.multiply, 1)


# -- TopK ---------------------------------------------------------------------------------
@converter("TopK", attrs={"k": None, "axis": -1, "largest": 1, "sorted": 1})
def top_k(ctx):
    x, ns, shape = ctx.input(0), ctx.ns, ctx.shape(0)
    rank, axis = len(shape), ctx.attr("axis")
    if ctx.opset < 10:
        k = ctx.attr("k")
        if k is None:
            raise ctx.invalid("attribute 'k' is required before opset 10")
    else:
        if ctx.has_attr("k"):
            raise ctx.invalid("from opset 10 k is the second input, not an attribute")
        k_value = ctx.constant(1)
        if k_value.shape != (1,) or k_value.dtype.kind not in "iu":
            raise ctx.invalid(f"input 1 (k) must be a 1-D tensor of one integer, got "
                              f"{k_value!r}")
        k = int(k_value.reshape(-1)[0])
    if ctx.opset < 11 and (ctx.has_attr("largest") or ctx.has_attr("sorted")):
        raise ctx.invalid(f"'largest' and 'sorted' exist only from opset 11 (the model's "
                          f"opset is {ctx.opset})")
    if rank == 0 or not -rank <= axis < rank:
        raise ctx.invalid(f"axis {axis} is out of range for an input of shape {shape}")
    axis %= rank
    n = shape[axis]
    if not 0 <= k <= n:
        raise ctx.invalid(f"k = {k} must be in [0, {n}] (the size of axis {axis} of the "
                          f"input, shape {shape})")
    # graphc's top_k ranks as ONNX's TopK does (equal values in index order); sorted=0
    # allows any order, and the sorted one is such an order
    values, indices = ns.top_k(x, k, axis=axis, largest=bool(ctx.attr("largest")))
    return values, _cast(ns, indices, np.dtype(np.int64))
