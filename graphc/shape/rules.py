"""Shape and dtype inference: one rule per op kind, in one table.

A rule takes the op and its parents (anything with ``.shape`` and ``.dtype``)
and returns ``(shape, dtype)`` or raises a :class:`ShapeError`/:class:`DTypeError`
that names the op. Rules assume the operator layer already normalised
attributes (axes non-negative and sorted, reshape sizes resolved).

>>> import numpy as np
>>> from graphc.type import Op
>>> class A:  # any object with shape and dtype will do
...     def __init__(self, shape, dtype): self.shape, self.dtype = shape, np.dtype(dtype)
>>> infer(Op.make("add"), [A((3, 1), "float32"), A((4,), "int32")])
((3, 4), dtype('float64'))
"""
from __future__ import annotations

import math

import numpy as np

from ..type.errors import DTypeError, ShapeError
from .broadcast import broadcast_shapes, check_broadcast_to
from .dtypes import probe_dtype
from .indexing import key_result_shape

_INTP = np.dtype(np.intp)


def _dtypes(parents) -> tuple:
    return tuple([p.dtype for p in parents])


def declared(op, parents):
    return op["shape"], op["dtype"]


def unary(op, parents):
    return parents[0].shape, probe_dtype(op.kind, _dtypes(parents))


def same(op, parents):
    return parents[0].shape, parents[0].dtype


def astype(op, parents):
    return parents[0].shape, op["dtype"]


def to_format(op, parents):
    """``round_to_format``: the input's shape, the format's compute dtype; real inputs."""
    from ..type.formats import narrow_format

    if parents[0].dtype.kind not in "biuf":
        raise DTypeError(f"round_to_format: expected a real array, got {parents[0].dtype}")
    return parents[0].shape, narrow_format(op["format"]).compute_dtype


def clip(op, parents):
    return parents[0].shape, probe_dtype("clip", _dtypes(parents), (op["lo"], op["hi"]))


def elementwise(op, parents):
    shape = broadcast_shapes(op.kind, *[p.shape for p in parents])
    return shape, probe_dtype(op.kind, _dtypes(parents))


def where(op, parents):
    cond = parents[0]
    if cond.dtype != np.bool_:
        raise DTypeError(f"where: the condition must be boolean, got {cond.dtype}")
    return elementwise(op, parents)


def _reduced_shape(op, shape):
    axes = op["axis"]
    keep = op.get("keepdims", False)
    if axes is None:
        return (1,) * len(shape) if keep else ()
    return tuple(1 if i in axes else d for i, d in enumerate(shape)
                 if keep or i not in axes)


_NO_IDENTITY = {"max": "maximum", "min": "minimum", "argmax": "argmax", "argmin": "argmin"}


def reduction(op, parents):
    (x,) = parents
    axes = op["axis"]
    reduced = range(len(x.shape)) if axes is None else axes
    if op.kind in _NO_IDENTITY and any(x.shape[a] == 0 for a in reduced):
        raise ShapeError(f"{op.kind}: zero-size array (shape {x.shape}) to reduction "
                         f"operation {_NO_IDENTITY[op.kind]}, which has no identity")
    if op.kind in ("argmax", "argmin"):
        if axes is not None and len(axes) != 1:
            raise ShapeError(f"{op.kind}: expected one axis or None, got {axes}")
        return _reduced_shape(op, x.shape), _INTP
    return _reduced_shape(op, x.shape), probe_dtype(op.kind, (x.dtype,))


def _matmul_shape(opname, a, b):
    if not a or not b:
        raise ShapeError(f"{opname}: operands must be at least 1-D, got shapes {a} and {b}")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ShapeError(f"{opname}: contracted dimensions differ: shapes {a} and {b} "
                         f"(expected {a2[-1]} == {b2[-2]})")
    try:
        batch = broadcast_shapes(opname, a2[:-2], b2[:-2])
    except ShapeError:  # name the operands, not just their batch axes
        raise ShapeError(f"{opname}: batch axes of shapes {a} and {b} cannot be broadcast "
                         f"together ({a2[:-2]} vs {b2[:-2]})") from None
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _swap_last_two(shape, flag):
    if not flag:
        return shape
    if len(shape) < 2:
        raise ShapeError(f"matmul: a transposed operand must be at least 2-D, got {shape}")
    return shape[:-2] + (shape[-1], shape[-2])


def matmul(op, parents):
    a, b = parents
    shape = _matmul_shape("matmul", _swap_last_two(a.shape, op.get("trans_a")),
                          _swap_last_two(b.shape, op.get("trans_b")))
    return shape, probe_dtype("matmul", _dtypes(parents))


def dot(op, parents):
    a, b = parents
    if a.shape == () or b.shape == ():
        raise ShapeError("dot: scalar operands are not supported; use multiply")
    if len(b.shape) == 1:
        ok, out = a.shape[-1] == b.shape[0], a.shape[:-1]
    else:
        ok, out = a.shape[-1] == b.shape[-2], a.shape[:-1] + b.shape[:-2] + b.shape[-1:]
    if not ok:
        raise ShapeError(f"dot: shapes {a.shape} and {b.shape} not aligned: "
                         f"last axis of the first must equal the "
                         f"{'only' if len(b.shape) == 1 else 'second-to-last'} axis of the second")
    return out, probe_dtype("matmul", _dtypes(parents))


def einsum(op, parents):
    inputs, output = op["subscripts"].split("->")
    sizes: dict[str, int] = {}
    for spec, p in zip(inputs.split(","), parents):
        if len(spec) != len(p.shape):
            raise ShapeError(f"einsum: subscripts {spec!r} name {len(spec)} axes but the "
                             f"operand has shape {p.shape}")
        for letter, d in zip(spec, p.shape):
            if sizes.setdefault(letter, d) != d:
                raise ShapeError(f"einsum: axis {letter!r} has sizes {sizes[letter]} and {d} "
                                 f"in {op['subscripts']!r}")
    return tuple(sizes[c] for c in output), probe_dtype("matmul", _dtypes(parents))


def reshape(op, parents):
    (x,) = parents
    shape = op["shape"]
    if math.prod(shape) != math.prod(x.shape):
        raise ShapeError(f"reshape: cannot reshape array of shape {x.shape} into shape {shape}")
    return shape, x.dtype


def transpose(op, parents):
    (x,) = parents
    axes = op["axes"]
    if sorted(axes) != list(range(len(x.shape))):
        raise ShapeError(f"transpose: axes {axes} are not a permutation of the "
                         f"{len(x.shape)} axes of shape {x.shape}")
    return tuple(x.shape[a] for a in axes), x.dtype


def broadcast_to(op, parents):
    check_broadcast_to("broadcast_to", parents[0].shape, op["shape"])
    return op["shape"], parents[0].dtype


def concatenate(op, parents):
    if not parents:
        raise ShapeError("concatenate: need at least one array to concatenate")
    axis, first = op["axis"], parents[0].shape
    for p in parents[1:]:
        if len(p.shape) != len(first) or any(
                a != b for i, (a, b) in enumerate(zip(p.shape, first)) if i != axis):
            shapes = ", ".join(str(q.shape) for q in parents)
            raise ShapeError(f"concatenate: all input dimensions except axis {axis} must "
                             f"match exactly, got shapes {shapes}")
    shape = first[:axis] + (sum(p.shape[axis] for p in parents),) + first[axis + 1:]
    return shape, np.result_type(*_dtypes(parents))


def _integer_indices(opname, parents):
    for p in parents:
        if p.dtype.kind not in "iu":
            raise DTypeError(f"{opname}: index arrays must be integer, got {p.dtype}")


def slice_(op, parents):
    return key_result_shape("getitem", op["key"], parents[0].shape, {}), parents[0].dtype


def gather(op, parents):
    _integer_indices("getitem", parents[1:])
    shapes = {i: p.shape for i, p in enumerate(parents) if i}
    return key_result_shape("getitem", op["key"], parents[0].shape, shapes), parents[0].dtype


def scatter(op, parents):
    """``x`` with the cells of ``x[key]`` updated from ``values`` (parent 1, which must
    broadcast to the cells' shape, in ``x``'s dtype); index arrays from parent 2."""
    x, values = parents[0], parents[1]
    _integer_indices("scatter", parents[2:])
    shapes = {i: p.shape for i, p in enumerate(parents) if i >= 2}
    cells = key_result_shape("scatter", op["key"], x.shape, shapes)
    try:
        check_broadcast_to("scatter", values.shape, cells)
    except ShapeError:
        raise ShapeError(f"scatter: could not broadcast values of shape {values.shape} into "
                         f"the indexed cells of shape {cells} (array shape {x.shape})") from None
    if values.dtype != x.dtype:
        raise DTypeError(f"scatter: values of dtype {values.dtype} into an array of dtype "
                         f"{x.dtype}; cast them first")
    return x.shape, x.dtype


def take(op, parents):
    x, idx = parents
    _integer_indices("take", [idx])
    axis = op["axis"]
    return x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype


def pad(op, parents):
    (x,) = parents
    widths = op["pad_width"]
    return tuple(d + lo + hi for d, (lo, hi) in zip(x.shape, widths)), x.dtype


def tile(op, parents):
    (x,) = parents
    return tuple(d * r for d, r in zip(x.shape, op["reps"])), x.dtype


def repeat(op, parents):
    (x,) = parents
    axis = op["axis"]
    return x.shape[:axis] + (x.shape[axis] * op["repeats"],) + x.shape[axis + 1:], x.dtype


def one_hot(op, parents):
    _integer_indices("one_hot", parents)
    return parents[0].shape + (op["depth"],), op["dtype"]


def delay(op, parents):
    return op["shape"], op["dtype"]


def fma(op, parents):
    shape = broadcast_shapes("fma", *[p.shape for p in parents])
    a, b, c = _dtypes(parents)
    return shape, probe_dtype("add", (probe_dtype("multiply", (a, b)), c))


#: kind -> rule, filled by the op definitions (:mod:`graphc.ops`)
RULES: dict = {}


def infer(op, parents) -> tuple[tuple[int, ...], np.dtype]:
    """The ``(shape, dtype)`` of ``op`` applied to ``parents``."""
    return RULES[op.kind](op, parents)
