"""CUDA C for ``fused_reduce`` nodes: one ``cupy.ReductionKernel`` per node.

A ``fused_reduce`` node (:mod:`.fused_reduce`) is a reduction (sum, mean, max, min,
prod over some axes) of an elementwise program of its inputs. On the GPU it is one
reduction kernel whose *map* step is the program, generated exactly as the
elementwise node of the same program (:func:`.cuda_codegen.elementwise_kernel`),
wrapped as a device function: the elementwise value is never stored, and the
launch is one. CuPy broadcasts the inputs to the node's full shape and reduces
over the node's axes into its output. Max and min propagate NaN as NumPy's do; a
mean divides the sum once by the count of reduced elements. Sums are reduced in a
tree, so they differ from NumPy's pairwise order in the last places.

This module writes source only (no CuPy import), so it is tested on the CPU.

>>> import numpy as np
>>> from graphc.type import Op
>>> op = Op.make("fused_reduce", program=((Op.make("exp"), (("in", 0),)),), reduce="max",
...              axis=(1,), keepdims=False, full=(2, 3), shape=(2,), dtype=np.dtype("float32"))
>>> src = reduction_kernel(op, ["float32"])
>>> src.in_params, src.out_params, src.reduce_expr, src.identity
('float32 x0', 'float32 graphc_out', '(a > b || a != a) ? a : b', '(-INFINITY)')
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from .cuda_codegen import C_TYPES, KernelSource, elementwise_kernel, literal
from .fused_reduce import program_op, reduced_axes


@dataclass(frozen=True)
class ReductionSource:
    """The arguments of ``cupy.ReductionKernel(in_params, out_params, map_expr,
    reduce_expr, post_map_expr, identity, name, reduce_type=..., preamble=...)`` for
    one node, and ``map``: the elementwise source of its program (what a stand-in
    backend runs before reducing with NumPy); ``reduce``: the reduction's name;
    ``axis`` and ``keepdims``: the call's."""

    in_params: str
    out_params: str
    map_expr: str
    reduce_expr: str
    post_map_expr: str
    identity: Optional[str]
    name: str
    reduce_type: str
    preamble: str
    map: KernelSource
    reduce: str
    axis: tuple
    keepdims: bool


#: reduction -> (how two partial results combine, the identity's value or None for
#: the dtype's extreme)
_COMBINE = {"sum": ("a + b", 0), "mean": ("a + b", 0), "prod": ("a * b", 1),
            "max": ("(a > b || a != a) ? a : b", "lowest"),
            "min": ("(a < b || a != a) ? a : b", "highest")}


def _identity(value, dtype: np.dtype) -> str:
    if value == "lowest":
        value = -np.inf if dtype.kind == "f" else (np.iinfo(dtype).min if dtype.kind in "iu"
                                                   else False)
    elif value == "highest":
        value = np.inf if dtype.kind == "f" else (np.iinfo(dtype).max if dtype.kind in "iu"
                                                  else True)
    return literal(value, dtype)


def reduction_kernel(op, in_dtypes) -> ReductionSource:
    """The ReductionKernel source of a ``fused_reduce`` ``op`` on inputs of
    ``in_dtypes``; :class:`NotImplementedError` where the program's elementwise
    kernel cannot be generated (see :func:`.cuda_codegen.supported`)."""
    dtype = np.dtype(op["dtype"])
    source = elementwise_kernel(program_op(op), [np.dtype(d).name for d in in_dtypes],
                                dtype.name)
    c_type = C_TYPES[dtype.name][0]
    params = [p.split() for p in source.in_params.split(", ")]
    arguments = ", ".join(f"{C_TYPES[d][0]} {n}" for d, n in params)
    function = f"{source.name}_map"
    preamble = (f"{source.preamble}\nstatic __device__ {c_type} {function}({arguments}) {{\n"
                f"{c_type} out;\n{source.operation}\nreturn out;\n}}\n")
    combine, identity = _COMBINE[op["reduce"]]
    # CuPy rewrites identifiers matching the output's name inside these expressions
    # (even inside longer names): the output gets one no expression contains
    post = (f"graphc_out = a / ({c_type})(_in_ind.size() / _out_ind.size())"
            if op["reduce"] == "mean" else "graphc_out = a")
    return ReductionSource(
        in_params=source.in_params, out_params=f"{dtype.name} graphc_out",
        map_expr=f"{function}({', '.join(n for _, n in params)})", reduce_expr=combine,
        post_map_expr=post, identity=_identity(identity, dtype),
        name=f"{source.name}_{op['reduce']}", reduce_type=c_type, preamble=preamble,
        map=source, reduce=op["reduce"], axis=reduced_axes(op), keepdims=bool(op["keepdims"]))


#: the fewest elements of the trailing axes for which the first stage pays (one block
#: per partial result); fewer (batch norm over 1x1 maps) reduce in one stage
TWO_STAGE_MIN = 64


def reduction_stages(op) -> tuple:
    """``(inner, outer)``: the reduced axes of a ``fused_reduce`` ``op`` split into the
    trailing run of reduced axes and the rest. A reduction over axes ``(0, 2, 3)`` of
    an NCHW value (batch norm's statistics) has only C outputs, and CuPy reduces each
    output in one thread block: C blocks for N*H*W elements each. Reducing first over
    the contiguous trailing axes (N*C outputs), then over the rest, fills the GPU;
    ``outer`` is empty where one stage does (trailing axes of fewer than
    :data:`TWO_STAGE_MIN` elements).

    >>> import numpy as np
    >>> from graphc.type import Op
    >>> op = Op.make("fused_reduce", program=((Op.make("exp"), (("in", 0),)),), reduce="sum",
    ...              axis=(0, 2, 3), keepdims=True, full=(32, 64, 56, 56), shape=(1, 64, 1, 1),
    ...              dtype=np.dtype("float32"))
    >>> reduction_stages(op)
    ((2, 3), (0,))
    """
    axes = sorted(reduced_axes(op))
    inner = []
    for axis in reversed(axes):
        if axis != len(op["full"]) - 1 - len(inner):
            break
        inner.insert(0, axis)
    outer = tuple(a for a in axes if a not in inner)
    inner_count = int(np.prod([op["full"][a] for a in inner])) if inner else 0
    # the last axis kept, or trailing axes too short to fill a block: one stage
    if not inner or not outer or inner_count < TWO_STAGE_MIN:
        return tuple(axes), ()
    return tuple(inner), outer


def first_stage(source: ReductionSource, op) -> tuple:
    """The first stage of a two-stage reduction (:func:`reduction_stages`): its source
    (the same kernel over the inner axes only; a mean divides by their count, so the
    second stage's mean of equal-sized means is the whole mean) and the shape of the
    partial results."""
    inner, _ = reduction_stages(op)
    keep = bool(op["keepdims"])
    shape = tuple(1 if a in inner else n for a, n in enumerate(op["full"])
                  if keep or a not in inner)
    return replace(source, axis=inner, keepdims=keep), shape
