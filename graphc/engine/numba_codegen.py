"""Python source of the CPU's generated elementwise kernels, compiled by Numba.

The CPU twin of :mod:`.cuda_codegen`: the same kernel description (a single
elementwise op, or a ``fused`` node's program) rendered through the shared
:mod:`.expressions` in the Python dialect, into one loop over the output that
keeps the running value in a register. One pass over memory instead of one NumPy
call per instruction, on every core (``prange``) when the output is large. This
module only writes source text and imports no Numba (:mod:`.numba_kernels`
compiles it), so it is tested without a JIT.

A kernel is specialised on its description, its dtypes, its *rank* (the output's
shape after merging the dimensions every operand walks contiguously: an NCHW
tensor plus a per-channel bias is rank 3, two equal contiguous arrays rank 1) and
which inputs are single elements (read once, before the loop); never on sizes, so
one compilation serves every layer of that structure. Its arguments are the output
and the inputs as arrays of that rank (broadcast inputs with zero strides; single
elements as one-element arrays).

Semantics are NumPy's, as in the CUDA dialect: integer ``+ - *`` wrap (computed in
Numba's 64-bit integers and cast back), ``maximum``/``minimum``/``relu``/``clip``
propagate NaN, ``floor_divide``/``remainder`` follow NumPy's ``divmod``, float
division by zero gives inf/NaN (``error_model="numpy"``), and no multiply-add is
contracted (no fast-math), so arithmetic gives NumPy's bits. Math functions
(``exp``, ``log``, ``tanh``...) call the C library and may differ from NumPy's own
vectorised implementations in the last place.

>>> from graphc.type import Op
>>> print(kernel_source(Op.make("exp"), ["float32"], "float32", 1, ()).split("def serial")[1]
...       .splitlines()[0])
(out, x0):
"""
from __future__ import annotations

import hashlib
import math
import pathlib
import re

import numpy as np

from .expressions import Dialect, program_body, program_lines

#: bumped whenever the generated code changes meaning, so cached kernels are rebuilt
GENERATOR_VERSION = 1

#: dtype -> (Numba spelling, helper suffix, class: f float, i integer, b bool)
NUMBA_TYPES = {"float32": ("float32", "f32", "f"), "float64": ("float64", "f64", "f"),
               "int32": ("int32", "i32", "i"), "int64": ("int64", "i64", "i"),
               "bool": ("bool_", "b", "b")}

#: op kind -> Python expression template per compute class, as ``C_EXPRESSIONS`` in
#: :mod:`.cuda_codegen` (placeholders ``{0}``..., ``{T}`` the compute type, ``{lr}
#: {eps} {lo} {hi}``). Operands are always plain names, so a template may repeat
#: one. Filled by the op definitions (:mod:`graphc.ops`, their ``numba``).
NUMBA_EXPRESSIONS: dict = {}

#: calls LLVM turns into vector instructions; any other function call in a kernel
#: (the C library's ``expf``, ``tanh``...; ``graphc_exp_f64``) runs one element at a time
VECTORISED_CALLS = frozenset({"np.sqrt", "np.abs", "np.floor", "np.ceil", "np.rint",
                              "graphc_max", "graphc_min", "graphc_clip", "graphc_erf_f32",
                              "graphc_exp_f32"})
_CALL = re.compile(r"\b([A-Za-z_][\w.]*)\(")


def numpy_call(name: str, arity: int = 1) -> dict:
    """The float template calling NumPy's function ``name`` (Numba keeps float32 in
    float32).

    >>> numpy_call("arctan2", 2)
    {'f': 'np.arctan2({0}, {1})'}
    """
    return {"f": f"np.{name}(" + ", ".join(f"{{{k}}}" for k in range(arity)) + ")"}


def wrapped(template: str) -> str:
    """An integer template computed in 64 bits and cast back, wrapping as NumPy does:
    ``wrapped("{0} + {1}")``."""
    return "{T}(" + template + ")"


def literal(value, dtype) -> str:
    """``value`` as an exact Python literal of ``dtype`` (NumPy's rounding first).

    >>> literal(0.1, "float32"), literal(-2, "int64"), literal(float("inf"), "float64")
    ('float32(0.10000000149011612)', 'int64(-2)', 'float64(np.inf)')
    """
    dtype = np.dtype(dtype)
    spelling = NUMBA_TYPES[dtype.name][0]
    if dtype.kind == "b":
        return "True" if value else "False"
    if dtype.kind in "iu":
        v = int(value)
        return f"{spelling}({v + 1} - 1)" if v == np.iinfo(dtype).min else f"{spelling}({v})"
    with np.errstate(all="ignore"):
        v = float(dtype.type(value))
    if math.isnan(v):
        return f"{spelling}(np.nan)"
    if math.isinf(v):
        return f"{spelling}({'-' if v < 0 else ''}np.inf)"
    return f"{spelling}({v!r})"


#: templates spell a helper of :mod:`.numba_prelude` per compute dtype with ``{S}``
#: (``graphc_exp_{S}``: ``graphc_exp_f32`` on float32)
DIALECT = Dialect("numba_codegen", NUMBA_EXPRESSIONS, NUMBA_TYPES, "{T}({x})", literal,
                  lambda compute: {"S": NUMBA_TYPES[compute][1]})

#: a digest of :mod:`.numba_prelude`'s text, in every kernel's header: a kernel module
#: inlines the helpers it calls into its own disk cache, which Numba keys on that
#: module's text only, so an edited helper must change the text of its callers
PRELUDE_DIGEST = hashlib.sha1(
    (pathlib.Path(__file__).with_name("numba_prelude.py")).read_bytes()).hexdigest()[:12]
#: the same for :mod:`.numba_vectors`, in the kernels built on its vector values
VECTORS_DIGEST = hashlib.sha1(
    (pathlib.Path(__file__).with_name("numba_vectors.py")).read_bytes()).hexdigest()[:12]


def vectorises(lines) -> bool:
    """Whether every call in these expressions has a vector form (see
    :data:`VECTORISED_CALLS`): a kernel that does runs several elements per
    instruction, one that does not calls the C library element by element."""
    return all(name in VECTORISED_CALLS or name in NUMBA_TYPES_SPELLED
               for text in lines for name in _CALL.findall(text))


NUMBA_TYPES_SPELLED = frozenset(t[0] for t in NUMBA_TYPES.values())


def _loops(rank: int, parallel: bool):
    """The loop header lines over an output of ``rank`` (outer dimensions flattened
    into one ``prange``) and the index expression of an element."""
    loop = "prange" if parallel else "range"
    sizes = [f"n{d}" for d in range(rank)]
    lines = [f"    {', '.join(sizes)}{',' if rank == 1 else ''} = out.shape"]
    if rank == 1:
        return lines + [f"    for i0 in {loop}(n0):"], "i0", 2
    # unravel the flat outer index (a prange index may not be reassigned): i_d is
    # o // m_d % n_d, m_d the product of the outer sizes after d
    for d in range(rank - 2):
        lines.append(f"    m{d} = {' * '.join(sizes[d + 1:-1])}")
    lines.append(f"    for o in {loop}({' * '.join(sizes[:-1])}):")
    for d in range(rank - 1):
        whole = "o" if d == rank - 2 else f"o // m{d}"
        lines.append(f"        i{d} = {whole}" + ("" if d == 0 else f" % n{d}"))
    last = rank - 1
    lines.append(f"        for i{last} in range(n{last}):")
    return lines, ", ".join(f"i{d}" for d in range(rank)), 3


def _strided_reads(strided, rank: int, index: str, pad: str) -> tuple:
    """Lines reading inputs through a flat base: the row's start before the inner loop,
    the element inside it. A 2-D view with unit inner stride read as ``x[i0, i1]``
    (Numba's layout "A") keeps LLVM from vectorising; read as ``x[start + i1]`` with an
    unsigned index (no negative-index wrap-around test) it vectorises."""
    outer, inner = [], []
    variables = index.split(", ")
    for k, unit in strided:
        start = " + ".join(f"{v} * t{k}[{d}]" for d, v in enumerate(variables[:-1])) or "0"
        outer.append(f"{pad[:-4]}b{k} = {start}")
        last = variables[-1] if unit else f"{variables[-1]} * t{k}[{rank - 1}]"
        inner.append(f"{pad}a{k} = x{k}[np.uint64(b{k} + {last})]")
    return outer, inner


def kernel_body(op, in_dtypes, out_dtype, rank: int, scalars, parallel: bool,
                rows=(), strided=(), aliased=()) -> list:
    """The lines of one kernel function (see :func:`kernel_source`)."""
    names = [f"a{k}" for k in range(len(in_dtypes))]
    body = program_body(DIALECT, op, names, in_dtypes, out_dtype)
    flat = {k for k, _ in strided}
    args = ", ".join(["out"] + [f"x{k}" for k in range(len(in_dtypes))]
                     + [f"t{k}" for k, _ in strided])
    header, index, depth = _loops(rank, parallel)
    pad = "    " * depth
    rows = tuple(k for k in rows if k not in scalars) if rank > 1 else ()
    lines = [f"def {'parallel' if parallel else 'serial'}({args}):"]
    lines += [f"    a{k} = x{k}[0]" for k in scalars]
    lines += header[:-1]
    # an input constant along the innermost dimension (a per-channel bias) is read once
    # per row: left in the inner loop, its zero stride keeps LLVM from vectorising it
    outer = ", ".join(index.split(", ")[:-1] + ["0"])
    lines += [f"{pad[:-4]}a{k} = x{k}[{outer}]" for k in rows]
    starts, reads = _strided_reads(strided, rank, index, pad)
    lines += starts
    lines.append(header[-1])
    lines += [f"{pad}a{k} = {'out' if k in aliased else f'x{k}'}[{index}]"
              for k in range(len(in_dtypes)) if k not in scalars and k not in rows
              and k not in flat]
    lines += reads
    lines += [pad + statement for statement in body]
    lines.append(f"{pad}out[{index}] = acc")
    return lines


def kernel_source(op, in_dtypes, out_dtype, rank: int, scalars, rows=(), strided=(),
                  aliased=()) -> str:
    """A module of two kernels computing ``op`` (a fused program or one elementwise
    op): ``serial(out, x0, ...)`` and ``parallel(...)``, the same loop over an
    output of ``rank`` dimensions with the outer ones split across threads.
    ``scalars`` are the positions of single-element inputs, ``rows`` those constant
    along the innermost dimension (read once per row), ``strided`` ``(position,
    unit)`` pairs of inputs passed as a flat array and a tuple of element strides
    (``unit``: the innermost stride is 1), after the other inputs. ``aliased`` inputs
    are the output's own memory (the kernel computes in place): they are read through
    ``out``, since LLVM, unable to prove that two arrays do not overlap, checks at run
    time and runs its scalar loop when they do (an in-place ``exp`` 7.8x slower).
    :class:`NotImplementedError` names an unsupported kind or dtype.

    >>> from graphc.type import Op
    >>> body = kernel_body(Op.make("add"), ["float32"] * 2, "float32", 2, (), False, (1,))
    >>> print("\\n".join(body[1:]))
        n0, n1 = out.shape
        for o in range(n0):
            i0 = o
            a1 = x1[i0, 0]
            for i1 in range(n1):
                a0 = x0[i0, i1]
                acc = a0 + a1
                out[i0, i1] = acc
    """
    in_dtypes = [DIALECT.dtype_name(op.kind, d) for d in in_dtypes]
    out_dtype = DIALECT.dtype_name(op.kind, out_dtype)
    scalars, rows, strided = tuple(sorted(scalars)), tuple(sorted(rows)), tuple(sorted(strided))
    aliased = tuple(sorted(aliased))
    header = [f"# graphc generated kernel, generator version {GENERATOR_VERSION}, "
              f"prelude {PRELUDE_DIGEST}",
              "import math", "import numpy as np", "from numba import njit, prange",
              "from graphc.engine.numba_prelude import *", ""]
    functions = []
    for parallel in (False, True):
        functions.append(f"@njit(parallel={parallel}, error_model='numpy', nogil=True, "
                         "cache=True)")
        functions += kernel_body(op, in_dtypes, out_dtype, rank, scalars, parallel,
                                 rows, strided, aliased) + [""]
    return "\n".join(header + functions)


def source_key(source: str) -> str:
    """A short name for a kernel's source (its file name in the disk cache)."""
    return hashlib.sha1(source.encode()).hexdigest()[:20]


# -- a reduction fused with its elementwise program -------------------------------------------
#: reduction -> (the accumulator's first value, how a value ``acc`` joins it, the result
#: from ``total``; ``{E}`` the program's dtype spelled). Sums and products accumulate in
#: float64, as :func:`graphc.engine.numba_reduce.sum_abd` does; maxima and minima stay
#: in the program's dtype and propagate NaN (``graphc_max``), so they are exact.
REDUCERS = {"sum": ("0.0", "total += acc", "total"),
            "mean": ("0.0", "total += acc", "total / divisor"),
            "prod": ("1.0", "total *= acc", "total"),
            "max": ("{E}(-np.inf)", "total = graphc_max(total, acc)", "total"),
            "min": ("{E}(np.inf)", "total = graphc_min(total, acc)", "total")}
#: reductions whose accumulation may be reordered into vector lanes (``reassoc`` on the
#: kernel: sums within a tolerance, as ``sum_abd``'s); maxima and minima stay exact
REORDERED = frozenset({"sum", "mean", "prod"})


def reduce_kernel_body(op, in_dtypes, dtype, reduce, roles: str, spans,
                       parallel: bool) -> list:
    """The lines of one fused-reduction kernel (see :func:`reduce_kernel_source`)."""
    if reduce not in REDUCERS or NUMBA_TYPES[dtype][2] != "f":
        raise NotImplementedError(f"numba_codegen: fused {reduce} on {dtype} is not supported "
                                  "(float32 and float64 sums, means, products, maxima and "
                                  "minima)")
    names = [f"a{k}" for k in range(len(in_dtypes))]
    body = program_body(DIALECT, op, names, in_dtypes, dtype)
    init, update, finish = REDUCERS[reduce]
    kept, reduced = roles.count("k"), roles.count("r")
    # the loop variable of each dimension: i<n> the n-th kept one, j<n> the n-th reduced
    variables, counts = [], {"k": 0, "r": 0}
    for role in roles:
        variables.append(f"{'i' if role == 'k' else 'j'}{counts[role]}")
        counts[role] += 1
    args = ", ".join(["out", "sizes", "divisor"] + [f"x{k}" for k in range(len(in_dtypes))])
    lines = [f"def {'parallel' if parallel else 'serial'}({args}):"]
    lines += [f"    a{k} = x{k}[0]" for k, span in enumerate(spans) if span is None]
    # ``size<d>``, not ``r<d>``: the program's registers are ``r<k>``
    lines += [f"    size{d} = sizes[{d}]" for d in range(reduced)]
    if kept:
        # every output element is one thread's: its reduction runs whole, in order
        sizes = [f"k{d}" for d in range(kept)]
        lines.append(f"    {', '.join(sizes)}{',' if kept == 1 else ''} = out.shape")
        lines += [f"    m{d} = {' * '.join(sizes[d + 1:])}" for d in range(kept - 1)]
        lines.append(f"    for o in {'prange' if parallel else 'range'}({' * '.join(sizes)}):")
        lines += [f"        i{d} = " + _unravel(d, kept) for d in range(kept)]
        pad, out_index = "        ", ", ".join(f"i{d}" for d in range(kept))
    else:
        pad, out_index = "    ", "0"
    lines.append(f"{pad}total = {init.format(E=NUMBA_TYPES[dtype][0])}")
    # a whole-array sum splits its outer reduced loop across threads (Numba's prange
    # reduction of ``total``); a whole-array maximum or minimum runs on one thread
    outer = "prange" if parallel and not kept else "range"
    for d in range(reduced):
        lines.append(f"{pad}{'    ' * d}for j{d} in {outer if d == 0 else 'range'}(size{d}):")
    inner = pad + "    " * reduced
    for k, span in enumerate(spans):
        if span is not None:
            index = ", ".join(v if f else "0" for v, f in zip(variables, span))
            lines.append(f"{inner}a{k} = x{k}[{index}]")
    lines += [inner + statement for statement in body]
    lines.append(f"{inner}{update}")
    lines.append(f"{pad}out[{out_index}] = {finish}")
    return lines


def _unravel(d: int, kept: int) -> str:
    """The index of kept dimension ``d`` in the flat output index ``o`` (a prange index
    may not be reassigned): ``o // m_d % k_d``, ``m_d`` the product of the later sizes."""
    if kept == 1:
        return "o"
    if d == 0:
        return "o // m0"
    if d == kept - 1:
        return f"o % k{d}"
    return f"o // m{d} % k{d}"


def reduce_kernel_source(op, in_dtypes, dtype, reduce, roles: str, spans) -> str:
    """A module of two kernels computing ``reduce`` (a :data:`REDUCERS` kind) of the
    elementwise ``op`` (a fused program or one op) computed in ``dtype``:
    ``serial(out, sizes, divisor, x0, ...)`` and ``parallel(...)``. ``roles`` says
    which dimensions (in memory order, :func:`graphc.engine.fused_reduce.reduce_geometry`)
    are kept (``"k"``) or reduced (``"r"``); ``out`` has the kept ones, ``sizes`` the
    reduced ones' sizes, ``divisor`` a mean's count; input ``k`` has size 1 where
    ``spans[k]`` says it does not span a dimension (``None``: a one-element array).
    One loop per output element accumulates the program over its reduced cells in
    memory order; ``parallel`` splits the output elements across threads (a
    whole-array sum, its outer reduced loop). Specialised on the description, dtypes,
    roles and spans, never on sizes.

    >>> from graphc.type import Op
    >>> body = reduce_kernel_body(Op.make("exp"), ["float32"], "float32", "sum", "kr",
    ...                           [(True, True)], parallel=False)
    >>> print("\\n".join(body[1:]))
        size0 = sizes[0]
        k0, = out.shape
        for o in range(k0):
            i0 = o
            total = 0.0
            for j0 in range(size0):
                a0 = x0[i0, j0]
                acc = graphc_exp_f32(a0)
                total += acc
            out[i0] = total
    """
    in_dtypes = [DIALECT.dtype_name(op.kind, d) for d in in_dtypes]
    dtype = DIALECT.dtype_name(op.kind, dtype)
    spans = [None if s is None else tuple(bool(f) for f in s) for s in spans]
    header = [f"# graphc generated fused reduction, generator version {GENERATOR_VERSION}, "
              f"prelude {PRELUDE_DIGEST}",
              "import math", "import numpy as np", "from numba import njit, prange",
              "from graphc.engine.numba_prelude import *", ""]
    fastmath = ", fastmath={'reassoc'}" if reduce in REORDERED else ""
    functions = []
    # a whole-array maximum or minimum has nothing to split: one function
    splits = "k" in roles or reduce in REORDERED
    for parallel in (False, True) if splits else (False,):
        functions.append(f"@njit(parallel={parallel}, error_model='numpy', nogil=True, "
                         f"cache=True{fastmath})")
        functions += reduce_kernel_body(op, in_dtypes, dtype, reduce, roles, spans,
                                        parallel) + [""]
    if not splits:
        functions.append("parallel = serial")
    return "\n".join(header + functions)
