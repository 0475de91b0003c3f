"""CUDA C for elementwise nodes: one ``cupy.ElementwiseKernel`` per node.

The GPU engine runs every elementwise node as ONE kernel launch, and that matters
most for the optimiser's ``fused`` nodes: on the CPU a fused program is a loop of
NumPy calls over one buffer, on the GPU it becomes one kernel whose body keeps the
running value (the accumulator) in a register, so a chain of k ops costs one launch
and one pass over memory instead of k. This module only writes the source
(:class:`KernelSource`: CuPy's ``in_params``, ``out_params``, ``operation``, a
``name``, and the :data:`PRELUDE` to pass as ``preamble``); it imports no CuPy, so
it is tested on the CPU by compiling the same C with gcc.

Covered (:data:`C_EXPRESSIONS`): every kind of the ``unary``, ``binary``,
``ternary`` and ``fused`` families, with NumPy's semantics: ``maximum``/``minimum``
(and ``relu``, ``clip``) propagate NaN; integer ``+ - *`` wrap as NumPy's do;
``floor_divide``/``remainder`` follow NumPy's ``divmod``; multiplications are
``__fmul_rn``/``__dmul_rn`` on the GPU so nvcc never contracts ``a*b + c`` into an
FMA that NumPy does not do (``fma`` is two roundings, as on the CPU); scalars baked
from attributes (``fused_adagrad``'s ``lr``/``eps``, ``clip``'s bounds) are printed
round-trip exactly in the dtype NumPy computes in. Each instruction computes in the
output dtype, as the CPU's ``out=`` calls do (fusion only absorbs a parent of the
node's own dtype, so every instruction yields the fused dtype; other inputs, a
``where`` condition or a bool operand say, are cast), except comparisons (in their
operands' common dtype) and logical ops (on truth values). Division and square root
must stay IEEE (CuPy's default; no ``--use_fast_math``). Dtypes: float32, float64,
int32, int64 and bool. Out of scope, refused with :class:`NotImplementedError`:
float16 and other dtypes, and integer ``floor_divide``/``remainder``/``power``/
``reciprocal`` (integer division). Casting a NaN or out-of-range float to an integer
(``astype``) is undefined in NumPy as in C: NumPy on x86 gives INT_MIN, CUDA saturates.

>>> from graphc.type import Op
>>> elementwise_kernel(Op.make("exp"), ["float32"], "float32").operation
'out = expf(x0);'
"""
from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ..shape.rules import infer
from ..type.errors import GraphcError
from .expressions import Dialect, program_body, program_lines

#: helpers the operations use; valid C99 (after <math.h>, <stdbool.h>) and CUDA C++
PRELUDE = r"""
#ifdef __CUDACC__
#define GRAPHC_FN static __device__ __forceinline__
#define graphc_mul_f32(a, b) __fmul_rn((a), (b))
#define graphc_mul_f64(a, b) __dmul_rn((a), (b))
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fc00000)
#endif
#else
#define GRAPHC_FN static inline
#define graphc_mul_f32(a, b) ((a) * (b))
#define graphc_mul_f64(a, b) ((a) * (b))
#endif
/* NumPy's maximum/minimum: NaN in either operand gives NaN (fmaxf would drop it);
   np.clip with scalar bounds keeps x where it equals a bound (-0.0 stays -0.0) */
#define GRAPHC_MINMAX(T, S) \
GRAPHC_FN T graphc_max_##S(T a, T b) { return (a > b || a != a) ? a : b; } \
GRAPHC_FN T graphc_min_##S(T a, T b) { return (a < b || a != a) ? a : b; } \
GRAPHC_FN T graphc_clip_##S(T x, T lo, T hi) { x = x < lo ? lo : x; return x > hi ? hi : x; }
GRAPHC_MINMAX(float, f32) GRAPHC_MINMAX(double, f64) GRAPHC_MINMAX(int, i32)
GRAPHC_MINMAX(long long, i64) GRAPHC_MINMAX(bool, b)
/* NumPy's npy_divmod, npy_floor_divide and npy_remainder for floats */
#define GRAPHC_DIVMOD(T, S, M) \
GRAPHC_FN T graphc_divmod_##S(T a, T b, T *modulus) { \
    T mod = fmod##M(a, b), div, floordiv; \
    div = (a - mod) / b; \
    if (mod) { if ((b < 0) != (mod < 0)) { mod += b; div -= (T)1; } } \
    else { mod = copysign##M((T)0, b); } \
    if (div) { floordiv = floor##M(div); if (div - floordiv > (T)0.5) floordiv += (T)1; } \
    else { floordiv = copysign##M((T)0, a / b); } \
    *modulus = mod; return floordiv; } \
GRAPHC_FN T graphc_floor_divide_##S(T a, T b) { \
    T mod; return b ? graphc_divmod_##S(a, b, &mod) : a / b; } \
GRAPHC_FN T graphc_remainder_##S(T a, T b) { \
    T mod; if (!b) return fmod##M(a, b); graphc_divmod_##S(a, b, &mod); return mod; }
GRAPHC_DIVMOD(float, f32, f) GRAPHC_DIVMOD(double, f64, )
"""

#: dtype -> (C type, helper suffix {s}, class: f float, i integer, b bool)
C_TYPES = {"float32": ("float", "f32", "f"), "float64": ("double", "f64", "f"),
           "int32": ("int", "i32", "i"), "int64": ("long long", "i64", "i"),
           "bool": ("bool", "b", "b")}
_UNSIGNED = {"int32": "unsigned int", "int64": "unsigned long long"}


def math_call(name: str) -> dict:
    """The template of a ``<math.h>`` function for floats: ``expf`` for float32,
    ``exp`` for float64.

    >>> math_call("atan2")
    {'f': 'atan2{m}({0}, {1})'}
    """
    arity = _ARITY.get(name, 1)
    return {"f": name + "{m}(" + ", ".join(f"{{{k}}}" for k in range(arity)) + ")"}


_ARITY = {"atan2": 2, "hypot": 2, "pow": 2}
#: integer ``+ - *`` wrap around, as in NumPy (computed unsigned): ``wrapping("+")``
WRAP = "({T})(({U}){0} {op} ({U}){1})"
#: the operand unchanged, for every compute class
SAME = {c: "{0}" for c in "fib"}
#: integers and booleans unchanged (floor, ceil, round of an exact value)
IDENTITY_EXACT = {"i": "{0}", "b": "{0}"}


def wrapping(operator: str) -> str:
    """The integer template of a wrapping ``+``, ``-`` or ``*``."""
    return WRAP.replace("{op}", operator)


def every_class(template: str) -> dict:
    """``template`` for floats, integers and booleans alike."""
    return {c: template for c in "fib"}


#: op kind -> C expression template per compute class ("f", "i", "b"); placeholders:
#: {0} {1} {2} operands (already of the compute type), {T} its C type, {U} the
#: unsigned type of an integer, {m} "f" for float32 math, {s} the helper suffix,
#: {lr} {eps} {lo} {hi} literals of the op's attributes. A missing class is
#: unsupported. Filled by the op definitions (:mod:`graphc.ops`, their ``expr``).
C_EXPRESSIONS: dict = {}


@dataclass(frozen=True)
class KernelSource:
    """The arguments of ``cupy.ElementwiseKernel(in_params, out_params, operation,
    name, preamble=preamble)`` for one node."""

    in_params: str
    out_params: str
    operation: str
    name: str
    preamble: str = PRELUDE


def literal(value, dtype) -> str:
    """``value`` as a C literal of ``dtype``, exact (NumPy's rounding to ``dtype`` first).

    >>> literal(0.1, "float32"), literal(-2, "int64"), literal(float("-inf"), "float64")
    ('0.10000000149011612f', '(-2LL)', '(-(double)INFINITY)')
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return "true" if value else "false"
    if dtype.kind in "iu":
        v, suffix = int(value), "LL" if dtype.itemsize == 8 else ""
        if v == np.iinfo(dtype).min:
            return f"({v + 1}{suffix} - 1)"
        return f"{v}{suffix}" if v >= 0 else f"({v}{suffix})"
    with np.errstate(all="ignore"):
        v = float(dtype.type(value))
    cast = "" if dtype == np.float32 else "(double)"
    if math.isnan(v):
        return f"{cast}NAN"
    if math.isinf(v):
        return f"({'-' if v < 0 else ''}{cast}INFINITY)"
    text = repr(v) + ("f" if dtype == np.float32 else "")
    return f"({text})" if text.startswith("-") else text


def _extra(compute) -> dict:
    return {"U": _UNSIGNED.get(compute, ""), "m": "f" if compute == "float32" else "",
            "s": C_TYPES[compute][1]}


#: the C dialect of the shared kernel description (:mod:`.expressions`)
DIALECT = Dialect("cuda_codegen", C_EXPRESSIONS, C_TYPES, "(({T}){x})", literal, _extra,
                  assign="acc = {e};", save="{T} r{k} = acc;")


@functools.lru_cache(maxsize=4096)
def _generate(op, in_dtypes: tuple, out: str) -> KernelSource:
    names = [f"x{k}" for k in range(len(in_dtypes))]
    if op.kind == "fused":
        operation = "\n".join([f"{C_TYPES[out][0]} acc;"]
                              + program_body(DIALECT, op, names, in_dtypes, out)
                              + ["out = acc;"])
    else:
        operation = f"out = {program_lines(DIALECT, op, names, in_dtypes, out)[0]};"
    in_params = ", ".join(f"{d} {n}" for d, n in zip(in_dtypes, names))
    out_params = f"{out} out"
    digest = hashlib.sha1(f"{in_params}|{out_params}|{operation}".encode()).hexdigest()
    return KernelSource(in_params, out_params, operation, f"graphc_{op.kind}_{digest[:16]}")


def elementwise_kernel(op, in_dtypes, out_dtype) -> KernelSource:
    """The CuPy ElementwiseKernel source computing ``op`` on inputs of ``in_dtypes``
    into an output of ``out_dtype`` (broadcasting is CuPy's). Equal arguments give
    an equal source and name. :class:`NotImplementedError` names an unsupported
    kind or dtype.

    >>> from graphc.type import Op
    >>> src = elementwise_kernel(Op.make("maximum"), ["float64", "float64"], "float64")
    >>> src.in_params, src.out_params, src.operation
    ('float64 x0, float64 x1', 'float64 out', 'out = graphc_max_f64(x0, x1);')
    >>> fused = Op.make("fused", program=((Op.make("multiply"), (("in", 0), ("in", 1))),
    ...                                   (Op.make("exp"), (("acc",),))))
    >>> print(elementwise_kernel(fused, ["float32", "float32"], "float32").operation)
    float acc;
    acc = graphc_mul_f32(x0, x1);
    acc = expf(acc);
    out = acc;
    """
    in_names = tuple(DIALECT.dtype_name(op.kind, d) for d in in_dtypes)
    return _generate(op, in_names, DIALECT.dtype_name(op.kind, out_dtype))


def supported(op, dtypes, out_dtype=None) -> bool:
    """Whether :func:`elementwise_kernel` can generate ``op`` for input ``dtypes``
    (``out_dtype`` defaults to the op's inferred result dtype).

    >>> from graphc.type import Op
    >>> supported(Op.make("exp"), ["float32"]), supported(Op.make("exp"), ["float16"])
    (True, False)
    >>> supported(Op.make("floor_divide"), ["int32", "int32"])
    False
    """
    try:
        if out_dtype is None:
            out_dtype = infer(op, [SimpleNamespace(shape=(), dtype=np.dtype(d))
                                      for d in dtypes])[1]
        elementwise_kernel(op, dtypes, out_dtype)
    except (NotImplementedError, GraphcError, KeyError, TypeError, ValueError):
        return False
    return True
