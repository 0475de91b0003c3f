"""Each node of a loaded graph rebuilt by the functions that build nodes for users
(``graphc.ndarray``), so that a file's attributes pass exactly the checks a
user's arguments pass: axes in range, shapes and dtypes graphc supports, window
geometry, index bounds of constant indices, and so on.

A node is accepted only when construction, given the node's parents and
attributes, makes the same node again: the same kind, the same parents, the
same attributes with the same types. An attribute in any other form (a list
for a tuple, ``-1`` for an axis construction writes as ``1``, an int where
construction writes a float) is refused, so a loaded graph holds nothing a
user could not have built. Only the kinds the writer produces are accepted:
the optimiser's own (``fused``, ``fma``, ...) and ``delay`` (code) are not.

>>> import numpy as np
>>> from graphc.symbol.node import Node
>>> from graphc.type import Op
>>> x = Node.leaf(Op.make("var", name="x", shape=(2, 3), dtype=np.dtype("float32")))
>>> rebuild("sum", {"axis": (1,), "keepdims": False}, (x,)).shape
(2,)
>>> rebuild("sum", {"axis": (-1,), "keepdims": False}, (x,))
Traceback (most recent call last):
...
graphc.type.errors.GraphError: attribute 'axis' is (-1,); construction makes it (1,)
"""
from __future__ import annotations

import math
import re
import reprlib
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..operator import fft_functions as _fft
from ..operator.lazy import NS, Tensor
from ..operator.linalg_functions import ATTRIBUTES as _LINALG, rebuild as _linalg
from ..shape.axes import as_shape
from ..shape.dtypes import as_dtype
from ..symbol.constants import const_op as _const_op
from ..symbol.node import Node
from ..type.errors import GraphcError, GraphError
from ..type.kinds import KINDS

#: kinds a saved graph never holds: the optimiser makes them (a graph is saved as
#: written), and a delay node wraps Python code
NOT_SAVED = {"delay": "a delay node wraps Python code, and the format never stores code",
             "fma": "made by the optimiser only", "fused_adagrad": "made by the optimiser only",
             "fused": "made by the optimiser only", "im2col": "made by the optimiser only",
             "fused_reduce": "made by the optimiser only",
             "softmax": "made by the optimiser only",
             "col2im": "made by the optimiser only",
             "depthwise_conv2d_nhwc": "made by the optimiser only",
             "conv2d_nhwc": "made by the optimiser only",
             "conv2d_nhwc_pack": "made by the optimiser only",
             "max_pool2d_nhwc": "made by the optimiser only",
             "avg_pool2d_nhwc": "made by the optimiser only",
             "fused_matmul": "made by the optimiser only",
             "loop": "a loop's body is a graph of its own, which the format does not hold "
                     "yet", "loop_part": "a part of a loop's results",
             **{kind: "a collective holds its communicator (a live connection to other "
                      "processes), which no file can: build the graph again on each rank"
                for kind in ("all_reduce", "broadcast", "all_gather")}}
#: nesting of tuples inside one attribute (padding is a tuple of pairs)
MAX_ATTRIBUTE_DEPTH = 4
_INT64 = 1 << 63
_INTP_MAX = np.iinfo(np.intp).max


@dataclass(frozen=True)
class Rebuild:
    """How construction makes a node of one kind: its attribute names (``optional``
    ones may be absent) and ``build(parents, attributes) -> node``."""

    names: tuple[str, ...]
    build: Callable
    optional: tuple[str, ...] = ()


def _plain(kind):
    return Rebuild((), lambda ps, a: NS._op(kind, ps))


def _by_keywords(kind):
    """The kind's public function of the same name, given the attributes as keywords
    (kinds that declare their ``attributes``)."""
    return Rebuild(KINDS[kind].attributes, lambda ps, a: getattr(NS, kind)(*ps, **a))


def _pick(attrs, names):
    return {n: attrs[n] for n in names}


_CONV = ("dilation", "groups", "padding", "stride")
_POOL = ("ceil_mode", "kernel", "padding", "stride")
_AVG = _POOL + ("count_include_pad",)


def _argument_axis(axis):
    """``argmax`` takes one axis (construction stores it as a 1-tuple) or None."""
    return axis[0] if isinstance(axis, tuple) and len(axis) == 1 else axis


def _matmul(ps, a):
    for flag, value in a.items():
        if value is not True:       # the writer stores a flag only when it is set
            raise GraphError(f"matmul: attribute {flag!r} must be true when present, got "
                             f"{shown(value)}")
    return NS._op("matmul", ps, **a)


#: entries of an encoded index key: tag -> length (the tag, then ints)
_KEY_LENGTHS = {"i": 2, "s": 4, "n": 1, "a": 2}


def _decode_key(key, parents, arrays_allowed, first=1):
    """An encoded index key (graphc.shape.indexing) as the key a user would write
    (its index arrays are the parents from ``first``)."""
    if not isinstance(key, tuple):
        raise GraphError(f"the key must be a tuple of entries, got {shown(key)}")
    user, shape, axis = [], parents[0].shape, 0
    for entry in key:
        if not isinstance(entry, tuple) or not entry or entry[0] not in _KEY_LENGTHS or \
                len(entry) != _KEY_LENGTHS[entry[0]] or \
                any(type(v) is not int for v in entry[1:]):
            forms = "('i', int), ('s', start, stop, step), ('n',)" + (
                ", ('a', parent)" if arrays_allowed else "")
            raise GraphError(f"the key entry {shown(entry)} is not one of {forms}")
        tag = entry[0]
        dim = shape[axis] if axis < len(shape) else 0
        axis += tag != "n"
        if tag == "i":
            user.append(entry[1])
        elif tag == "n":
            user.append(None)
        elif tag == "s":
            start, stop, step = entry[1:]
            if step == 0:
                raise GraphError(f"the key entry {shown(entry)} has a zero step")
            # the slice whose indices(dim) is (start, stop, step): slice.indices writes
            # "before index 0" as -1, which a slice spells as anything below -dim; a
            # form indices() never gives is re-encoded differently, and refused
            user.append(slice(*(v if v >= 0 else v - dim for v in (start, stop)), step))
        elif not arrays_allowed or not first <= entry[1] < len(parents):
            raise GraphError(f"the key entry {shown(entry)} names no index parent "
                             f"({first} to {len(parents) - 1})")
        else:
            user.append(parents[entry[1]])
    return tuple(user)


def _repeat(ps, a):
    # construction stores one count; given counts per element, it would build an
    # index array as long as their sum, before anything could compare
    if type(a["repeats"]) is not int:
        raise GraphError(f"repeat: attribute 'repeats' is {shown(a['repeats'])}; "
                         "construction makes it one int")
    return NS.repeat(*ps, a["repeats"], axis=a["axis"])


def _slice(ps, a):
    return NS.getitem(ps[0], _decode_key(a["key"], ps, arrays_allowed=False))


def _gather(ps, a):
    return NS.getitem(ps[0], _decode_key(a["key"], ps, arrays_allowed=True))


def _scatter(ps, a):
    if len(ps) < 2:
        raise GraphError(f"scatter: needs the array and the values as parents, got {len(ps)}")
    return NS._updated(ps[0], _decode_key(a["key"], ps, True, first=2), ps[1], a["mode"])


def _table() -> dict[str, Rebuild]:
    table = {k: _plain(k) for k, v in KINDS.items()
             if v.family in ("unary", "binary", "ternary") and k not in NOT_SAVED}
    table.update({k: _by_keywords(k) for k, v in KINDS.items() if v.attributes})
    table.update({
        "real": Rebuild((), lambda ps, a: NS.real(*ps)),
        "imag": Rebuild((), lambda ps, a: NS.imag(*ps)),
        "conjugate": Rebuild((), lambda ps, a: NS.conjugate(*ps)),
        # its public function returns (selected, count); the node is the first
        "non_max_suppression": Rebuild(KINDS["non_max_suppression"].attributes,
                                       lambda ps, a: NS.non_max_suppression(*ps, **a)[0]),
        # its public function takes the levels' features first, as a list
        "roi_align_levels": Rebuild(KINDS["roi_align_levels"].attributes,
                                    lambda ps, a: NS.roi_align_levels(list(ps[3:]), *ps[:3],
                                                                      **a)),
        # its public function returns (values, indices); the node is the indices
        "top_k": Rebuild(KINDS["top_k"].attributes, lambda ps, a: NS.top_k(*ps, **a)[1]),
        "var": Rebuild(("dtype", "name", "shape"),
                       lambda ps, a: NS.variable(a["name"], a["shape"], a["dtype"])),
        "fill": Rebuild(("dtype", "shape", "value"),
                        lambda ps, a: NS.full(a["shape"], a["value"], a["dtype"])),
        "random_uniform": Rebuild(("dtype", "high", "low", "shape"), lambda ps, a:
                                  NS.random.uniform(a["low"], a["high"], a["shape"], a["dtype"])),
        "random_normal": Rebuild(("dtype", "loc", "scale", "shape"), lambda ps, a:
                                 NS.random.normal(a["loc"], a["scale"], a["shape"], a["dtype"])),
        "random_bernoulli": Rebuild(("dtype", "p", "shape"), lambda ps, a:
                                    NS.random.bernoulli(a["p"], a["shape"], a["dtype"])),
        "astype": Rebuild(("dtype",), lambda ps, a: NS.astype(*ps, a["dtype"])),
        "clip": Rebuild(("dtype", "hi", "lo"), lambda ps, a: NS.clip(*ps, a["lo"], a["hi"])),
        "matmul": Rebuild((), _matmul, optional=("trans_a", "trans_b")),
        "dot": Rebuild((), lambda ps, a: NS.dot(*ps)),
        "einsum": Rebuild(("subscripts",), lambda ps, a: NS.einsum(a["subscripts"], *ps)),
        "reshape": Rebuild(("shape",), lambda ps, a: NS.reshape(*ps, a["shape"])),
        "transpose": Rebuild(("axes",), lambda ps, a: NS.transpose(*ps, a["axes"])),
        "broadcast_to": Rebuild(("shape",), lambda ps, a: NS.broadcast_to(*ps, a["shape"])),
        "concatenate": Rebuild(("axis",), lambda ps, a: NS.concatenate(ps, a["axis"])),
        "slice": Rebuild(("key",), _slice),
        "gather": Rebuild(("key",), _gather),
        "scatter": Rebuild(("key", "mode"), _scatter),
        # every other Generator method: _rebuild takes only the known method names
        "random_draw": Rebuild(("array_params", "dtype", "method", "params", "shape"),
                               lambda ps, a: NS.random._rebuild(ps, a)),
        "take": Rebuild(("axis",), lambda ps, a: NS.take(*ps, axis=a["axis"])),
        "pad": Rebuild(("pad_width", "value"),
                       lambda ps, a: NS.pad(*ps, a["pad_width"], constant_values=a["value"])),
        "tile": Rebuild(("reps",), lambda ps, a: NS.tile(*ps, a["reps"])),
        "repeat": Rebuild(("axis", "repeats"), _repeat),
        "flip": Rebuild(("axis",), lambda ps, a: NS.flip(*ps, axis=a["axis"])),
        "one_hot": Rebuild(("depth", "dtype"),
                           lambda ps, a: NS.one_hot(*ps, a["depth"], a["dtype"])),
        "conv2d": Rebuild(_CONV, lambda ps, a: NS.conv2d(*ps, **_pick(a, _CONV))),
        "conv2d_backward_input": Rebuild(_CONV + ("shape",), lambda ps, a:
                                         NS.conv2d_backward_input(*ps, a["shape"],
                                                                  **_pick(a, _CONV))),
        "conv2d_backward_kernel": Rebuild(_CONV + ("shape",), lambda ps, a:
                                          NS.conv2d_backward_kernel(*ps, a["shape"],
                                                                    **_pick(a, _CONV))),
        "max_pool2d": Rebuild(_POOL, lambda ps, a: NS.max_pool2d(*ps, **_pick(a, _POOL))),
        "max_pool2d_backward": Rebuild(_POOL, lambda ps, a:
                                       NS.max_pool2d_backward(*ps, **_pick(a, _POOL))),
        "avg_pool2d": Rebuild(_AVG, lambda ps, a: NS.avg_pool2d(*ps, **_pick(a, _AVG))),
        "avg_pool2d_backward": Rebuild(_AVG + ("shape",), lambda ps, a:
                                       NS.avg_pool2d_backward(*ps, a["shape"],
                                                              **_pick(a, _AVG))),
        "lrn": Rebuild(("alpha", "beta", "k", "size"), lambda ps, a: NS.lrn(*ps, **a)),
        "lrn_backward": Rebuild(("alpha", "beta", "k", "size"),
                                lambda ps, a: NS.lrn_backward(*ps, **a)),
    })
    # numpy.linalg's factorisations and numpy.fft's transforms: their own makers
    table.update({k: Rebuild(names, lambda ps, a, k=k: _linalg(NS, k, ps, a))
                  for k, names in _LINALG.items()})
    table["fft"] = Rebuild(_fft.ATTRIBUTES, lambda ps, a: _fft.rebuild(NS, ps, a))
    for name in ("sum", "prod", "max", "min", "mean", "any", "all"):
        table[name] = Rebuild(("axis", "keepdims"), lambda ps, a, f=getattr(NS, name): f(
            *ps, axis=a["axis"], keepdims=a["keepdims"]))
    for name in ("argmax", "argmin"):
        table[name] = Rebuild(("axis", "keepdims"), lambda ps, a, f=getattr(NS, name): f(
            *ps, axis=_argument_axis(a["axis"]), keepdims=a["keepdims"]))
    return table


#: kind -> how construction makes it; every kind but ``const`` and :data:`NOT_SAVED`
REBUILD = _table()


# -- what NumPy's kernels accept, which construction does not check ---------------------
def _random_dtype(kind, a, ps):
    if a["dtype"] not in (np.float32, np.float64):
        raise GraphError(f"{kind}: numpy.random draws float32 or float64 only, got dtype "
                         f"{a['dtype']}")


def _pad_value(kind, a, ps):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            np.empty(1, ps[0].dtype).fill(a["value"])      # what the kernel does
    except (TypeError, ValueError, OverflowError, Warning) as exc:
        raise GraphError(f"pad: the value {shown(a['value'])} cannot fill an array of dtype "
                         f"{ps[0].dtype}: {exc}") from None


def _constant_labels(kind, a, ps):
    # construction checks constant indices of take and gather, not these
    labels, depth = ps[0].value, a["depth"]
    if labels is not None and labels.size and (labels.min() < 0 or labels.max() >= depth):
        bad = labels[(labels < 0) | (labels >= depth)].flat[0]
        raise GraphError(f"one_hot: constant label {bad} is out of range for depth {depth}")


RUNTIME_CHECKS = {"random_uniform": _random_dtype, "random_normal": _random_dtype,
                  "random_bernoulli": _random_dtype, "pad": _pad_value,
                  "one_hot": _constant_labels}


# -- the pieces -------------------------------------------------------------------------
def decode(value, depth: int = 0):
    """An attribute value as the writer encodes it (JSON), decoded; anything else is a
    :class:`GraphError`. Example: ``decode({"t": [1, 2]}) == (1, 2)``"""
    if value is None or isinstance(value, (bool, str, float)):
        return value
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise GraphError(f"the integer {value} does not fit in 64 bits")
        return value
    if isinstance(value, dict) and len(value) == 1:
        (tag, inner), = value.items()
        if tag == "t" and isinstance(inner, list):
            if depth >= MAX_ATTRIBUTE_DEPTH:
                raise GraphError(f"tuples nest deeper than {MAX_ATTRIBUTE_DEPTH} levels")
            return tuple(decode(v, depth + 1) for v in inner)
        if tag == "dtype" and isinstance(inner, str):
            if not re.fullmatch(r"[<>|=]?[biufc][0-9]{1,2}", inner):
                raise GraphError(f"{shown(inner)} is not a boolean, integer, float or "
                                 "complex dtype")
            try:
                return as_dtype("load", inner)
            except TypeError as exc:       # as DTypeError, or numpy's own for "f3"
                raise GraphError(str(exc)) from None
        if tag == "complex" and isinstance(inner, list) and len(inner) == 2 and all(
                type(v) in (int, float) for v in inner):
            return complex(*inner)
    raise GraphError(f"{shown(value)} is not an attribute value the writer produces (a "
                     "number, string, null, or {\"t\": [...]}, {\"dtype\": ...}, "
                     "{\"complex\": [re, im]})")


def checked_leaf(kind: str, attrs: dict) -> tuple:
    """The declared ``(shape, dtype)`` of a ``const``, in construction's form."""
    if set(attrs) != {"digest", "dtype", "shape"}:
        raise GraphError(f"a const has the attributes digest, dtype and shape; got "
                         f"{sorted(attrs)}")
    shape, dtype = _located(lambda: (as_shape(kind, attrs["shape"]), as_dtype(kind,
                                                                             attrs["dtype"])))
    for name, value in (("shape", shape), ("dtype", dtype)):
        if not same(attrs[name], value):
            raise GraphError(f"attribute {name!r} is {shown(attrs[name])}; construction makes it "
                             f"{value!r}")
    if not isinstance(attrs["digest"], str):
        raise GraphError(f"attribute 'digest' must be a string, got {shown(attrs['digest'])}")
    check_shape(kind, shape, dtype)
    return shape, dtype


def const_op(array: np.ndarray):
    """The op construction makes for ``array``: its digest computed from its content
    (a digest stored in a file is never trusted: common-subexpression elimination
    merges constants by it)."""
    return _const_op(array)


def rebuild(kind: str, attrs: dict, parents: tuple) -> Node:
    """The node construction makes of ``kind`` with ``attrs`` on ``parents``; a
    :class:`GraphError` saying what differs when that is not this node.
    The node returned is a stand-in (its parents are not ``parents``): take its
    ``op``, ``shape`` and ``dtype``."""
    if kind in NOT_SAVED:
        raise GraphError(f"operation kind {kind!r} cannot be loaded: {NOT_SAVED[kind]}")
    recipe = REBUILD.get(kind)
    if recipe is None:
        raise GraphError(f"operation kind {kind!r} cannot be loaded")
    arity = KINDS[kind].arity
    if arity is not None and len(parents) != arity:
        raise GraphError(f"{kind} takes {arity} parent(s), got {len(parents)}")
    missing = sorted(set(recipe.names) - set(attrs))
    extra = sorted(set(attrs) - set(recipe.names) - set(recipe.optional))
    if missing or extra:
        expected = ", ".join(recipe.names) or "none"
        if recipe.optional:
            expected += f" (optional: {', '.join(recipe.optional)})"
        found = "; ".join(part for part in (
            "missing " + ", ".join(missing) if missing else "",
            "unexpected " + ", ".join(extra) if extra else "") if part)
        raise GraphError(f"{kind} has the attributes {expected}; {found}")
    stand_ins = {}
    for p in parents:
        if id(p) not in stand_ins:
            stand_ins[id(p)] = Tensor(p.op, (), p.shape, p.dtype, value=p.value, where="load")
    local = tuple(stand_ins[id(p)] for p in parents)
    built = _located(lambda: recipe.build(local, dict(attrs)))
    _compare(kind, attrs, local, built)
    check_shape(kind, built.shape, built.dtype)
    if kind in RUNTIME_CHECKS:
        RUNTIME_CHECKS[kind](kind, attrs, parents)
    return built


def check_shape(kind: str, shape: tuple, dtype: np.dtype) -> int:
    """The bytes of a value of ``shape`` and ``dtype``; a :class:`GraphError` when a
    dimension is negative or NumPy could not allocate such an array at all."""
    if any(d < 0 for d in shape):
        raise GraphError(f"{kind} would make shape {shape}, with a negative dimension")
    extent = dtype.itemsize
    for d in shape:
        extent *= max(d, 1)
    if extent > _INTP_MAX:
        raise GraphError(f"{kind} would make shape {shape} dtype {dtype}, larger than any "
                         "array NumPy can hold")
    return math.prod(shape) * dtype.itemsize


def same(a, b) -> bool:
    """Equal with the same types throughout (``1``, ``1.0`` and ``True`` differ, as in
    :class:`~graphc.type.op.Op`); NaN equals NaN. Example: ``same((1,), (1,))``"""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, (float, complex)):
        return a == b or (a != a and b != b)
    return a == b


def _compare(kind, attrs, parents, built):
    if not isinstance(built, Node) or built.op.kind != kind:
        made = built.op.kind if isinstance(built, Node) else type(built).__name__
        what = "one of its parents unchanged" if any(built is p for p in parents) else \
            f"a {made} node"
        raise GraphError(f"construction makes {what} from these attributes, not a {kind} "
                         "node")
    if len(built.parents) != len(parents) or any(
            p is not q for p, q in zip(built.parents, parents)):
        raise GraphError(f"construction makes this {kind} node from other parents (with "
                         "these attributes it inserts nodes between)")
    rebuilt = built.op.params()
    for name in sorted(set(rebuilt) | set(attrs)):
        if name not in attrs:
            raise GraphError(f"attribute {name!r} is missing; construction makes it "
                             f"{rebuilt[name]!r}")
        if name not in rebuilt:
            raise GraphError(f"attribute {shown(name)} is not one construction makes here")
        if not same(attrs[name], rebuilt[name]):
            raise GraphError(f"attribute {name!r} is {shown(attrs[name])}; construction "
                             f"makes it {shown(rebuilt[name])}")


def _located(make):
    """``make()``, its errors as a GraphError (without the caller's line, which says
    nothing about the file)."""
    try:
        return make()
    except GraphError:
        raise
    except GraphcError as exc:
        raise GraphError(exc.message) from None
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError) as exc:
        raise GraphError(f"{type(exc).__name__}: {exc}") from None


def _abbreviating_repr() -> reprlib.Repr:
    short = reprlib.Repr()
    short.maxlevel, short.maxtuple, short.maxlist, short.maxdict = 5, 10, 10, 6
    short.maxstring = short.maxother = short.maxlong = 80
    return short


_SHOWN = _abbreviating_repr()


def shown(value) -> str:
    """``repr(value)`` abbreviated, for error messages: a value from a file may be
    nested too deep for ``repr`` or be megabytes long. Example: ``shown([[[[[[1]]]]]])``"""
    return _SHOWN.repr(value)
