"""CUDA C for the NCHW window nodes: one ``cupy.RawKernel`` source per node.

The GPU engine has no cuDNN (CuPy 14 removed it): the optimiser lowers convolutions
to ``im2col`` + matmul (cuBLAS) and, for gradients, ``col2im``; the poolings and
their backward ops run as they are. This module writes one :class:`RawSource` per
node of these kinds; it imports no CuPy, so the tests compile the same text with gcc.

- **Gather form.** Each thread computes ONE element of the node's output; for
  ``col2im`` and the pooling backward ops, one *input-gradient* cell summing the
  windows that cover it (rather than each window scattering into its cells): no
  atomics, and each sum in a fixed order, so results are deterministic. The order
  is the CPU kernel's (``neural_kernels.py``: kernel taps in row-major order, one
  ``np.add``/``np.maximum`` per tap), so results are bit for bit the CPU's: a sum
  starts at ``0`` (the forward poolings at the first tap covering the whole
  output, which the CPU copies first); average pooling divides by PyTorch's count
  (``count_include_pad``; cells past the padded edge in ``ceil_mode`` never
  count); max pooling ignores padding and is ``np.maximum(acc, x)`` (NaN wins, a
  tie keeps the newer value: the sign of a zero matches); its gradient goes to the
  window's first cell, row-major, equal to the pooled value (or NaN when that is).
  Sums and quotients are ``__fadd_rn``/``__fdiv_rn`` on the GPU (:data:`PRELUDE`),
  never contracted into FMAs; do not compile with ``--use_fast_math``.
- **Constants baked in.** The graph is static, so shapes, strides, padding, kernel
  size, dilation and the ``ceil_mode``/``count_include_pad`` flags are ``const
  long`` values in the source: index arithmetic folds, tap loops unroll, and each
  node gets its own source, named by its SHA-1 (equal nodes share one kernel).

A source is valid CUDA (NVRTC or nvcc) and, with ``__device__`` defined away, C99:
``static __device__ void <name>_one(long i, const T* in0, ..., T* out)`` computes
element ``i``; the ``extern "C" __global__`` wrapper (under ``__CUDACC__`` only)
takes ``i`` from ``blockIdx``/``threadIdx``. Inputs are C-contiguous. Dtypes:
float32, float64; other dtypes and kinds (the direct ``conv2d`` ops, which the
optimiser lowers, and ``lrn``) raise :class:`NotImplementedError`.

>>> from graphc.type import Op
>>> op = Op.make("avg_pool2d", kernel=(3, 3), stride=(2, 2), padding=((1, 1), (1, 1)),
...              ceil_mode=True, count_include_pad=False)
>>> src = window_kernel(op, [(8, 64, 56, 56)], ["float32"], (8, 64, 29, 29), "float32")
>>> src.threads, src.args, src.grid
(430592, ('in0', 'out'), (1682,))
"""
from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from string import Template
from types import SimpleNamespace

import numpy as np

from ..shape.neural import conv_output_size, first_full_tap
from ..shape.rules import infer
from ..type.errors import GraphcError

#: dtype -> C type
C_TYPES = {"float32": "float", "float64": "double"}


@dataclass(frozen=True)
class RawSource:
    """One node's kernel: ``cupy.RawKernel(code, name)`` launched with ``grid`` blocks
    of ``block`` threads on the pointers named by ``args`` (the node's parents in
    order, then its output), covering ``threads`` work items (one per output element)."""

    name: str
    code: str
    threads: int
    args: tuple
    block: int = 256

    @property
    def grid(self) -> tuple:
        return (max(1, -(-self.threads // self.block)),)


_MATCH = "(v == m || (v != v && m != m))"  # the pooled value, a NaN matching a NaN

# one element of the output, its indices decoded from i (row-major)
_PIXEL = "long w = i % W, t = i / W; long h = t % H; t /= H; long c = t % C, n = t / C;\n"
_OUT_PIXEL = ("long ow = i % OW, t = i / OW; long oh = t % OH; t /= OH; "
              "long c = t % C, n = t / C;\n")

# the windows (oh, ow) whose tap (ki, kj) lands on the pixel (h, w), taps row-major
_COVERING = """for (long ki = 0; ki < KH; ++ki) {
  long a = h + PT - ki * DH;
  if (a < 0 || a % SH != 0 || a / SH >= OH) continue;
  long oh = a / SH;
  for (long kj = 0; kj < KW; ++kj) {
    long b = w + PL - kj * DW;
    if (b < 0 || b % SW != 0 || b / SW >= OW) continue;
    long ow = b / SW;
    $BODY
  }
}
"""

# the cells of window (oh, ow) that are not padding, in the CPU kernel's tap order:
# the first tap that covers every output (FIRST, or -1), then the others row-major
_WINDOW = """long h0 = oh * SH - PT, w0 = ow * SW - PL;
for (long q = 0; q < KH * KW; ++q) {
  long tap = FIRST < 0 ? q : (q == 0 ? FIRST : q - (q <= FIRST));
  long hh = h0 + tap / KW, ww = w0 + tap % KW;
  if (hh < 0 || hh >= H || ww < 0 || ww >= W) continue;
  ${T} v = x[hh * W + ww];
  $BODY
}
"""

# the divisor of window (oh, ow): clipped to the padded input, or to the input
_COUNT = """long hs = oh * SH - PT, he = hs + KH < H + PB ? hs + KH : H + PB;
long ws = ow * SW - PL, we = ws + KW < W + PR ? ws + KW : W + PR;
if (!INCLUDE_PAD) { hs = hs < 0 ? 0 : hs; he = he < H ? he : H;
                    ws = ws < 0 ? 0 : ws; we = we < W ? we : W; }
${T} count = (${T})((he - hs) * (we - ws));
"""

_BODIES = {
    "im2col": """long ow = i % OW, t = i / OW; long oh = t % OH; t /= OH;
long n = 0, kj, ki, c;
if (FLAT) { n = t % N; t /= N; }
kj = t % KW; t /= KW; ki = t % KH; t /= KH; c = t % C;
if (!FLAT) n = t / C;
long h = oh * SH - PT + ki * DH, w = ow * SW - PL + kj * DW;
out[i] = h >= 0 && h < H && w >= 0 && w < W ? in0[((n * C + c) * H + h) * W + w] : (${T})0;
""",
    "col2im": _PIXEL + "${T} acc = 0;\n" + _COVERING.replace(
        "$BODY", "acc = ${ADD}(acc, in0[(((n * C + c) * KH + ki) * KW + kj) * (OH * OW) + oh * OW"
        " + ow]);")
    + "out[i] = acc;\n",
    "max_pool2d": _OUT_PIXEL + "const ${T}* x = in0 + (n * C + c) * H * W;\n"
    + "${T} acc = 0; int have = 0;\n" + _WINDOW.replace(
        "$BODY", "acc = have && (acc > v || acc != acc) ? acc : v; have = 1;")
    + "out[i] = acc;\n",
    "avg_pool2d": _OUT_PIXEL + "const ${T}* x = in0 + (n * C + c) * H * W;\n${T} acc = 0;\n"
    + _WINDOW.replace("$BODY", "acc = q == 0 && FIRST >= 0 ? v : ${ADD}(acc, v);")
    + _COUNT + "out[i] = ${DIV}(acc, count);\n",
    "avg_pool2d_backward": _PIXEL + "const ${T}* g = in0 + (n * C + c) * OH * OW;\n"
    + "${T} acc = 0;\n" + _COVERING.replace(
        "$BODY", "{\n" + _COUNT + "acc = ${ADD}(acc, ${DIV}(g[oh * OW + ow], count)); }")
    + "out[i] = acc;\n",
    # the tap (ki, kj) takes window (oh, ow)'s gradient when its cell matches the
    # pooled value and no earlier non-padding tap of the window does
    "max_pool2d_backward": _PIXEL + """long plane = (n * C + c) * OH * OW;
const ${T}* x = in0 + (n * C + c) * H * W; const ${T}* y = in1 + plane;
const ${T}* g = in2 + plane;
${T} acc = 0;
""" + _COVERING.replace("$BODY", """${T} m = y[oh * OW + ow], v = x[h * W + w];
    if (!""" + _MATCH + """) continue;
    long h0 = oh * SH - PT, w0 = ow * SW - PL;
    int first = 1;
    for (long tap = 0; first && tap < ki * KW + kj; ++tap) {
      long hh = h0 + tap / KW, ww = w0 + tap % KW;
      if (hh < 0 || hh >= H || ww < 0 || ww >= W) continue;
      v = x[hh * W + ww];
      first = !""" + _MATCH + """;
    }
    if (first) acc = ${ADD}(acc, g[oh * OW + ow]);""") + "out[i] = acc;\n",
}
#: the kinds :func:`window_kernel` generates
KINDS = tuple(_BODIES)
_ARITY = {"max_pool2d_backward": 3}

#: sums and quotients as single IEEE operations: on the GPU intrinsics that nvcc never
#: contracts (it folds ``acc + g / 2`` into ``fma(g, 0.5, acc)``: one rounding, not two)
PRELUDE = """#ifndef GRAPHC_WINDOW_PRELUDE
#define GRAPHC_WINDOW_PRELUDE
#ifdef __CUDACC__
#define graphc_add_f32 __fadd_rn
#define graphc_add_f64 __dadd_rn
#define graphc_div_f32 __fdiv_rn
#define graphc_div_f64 __ddiv_rn
#else
#define graphc_add_f32(a, b) ((a) + (b))
#define graphc_add_f64(a, b) ((a) + (b))
#define graphc_div_f32(a, b) ((a) / (b))
#define graphc_div_f64(a, b) ((a) / (b))
#endif
#endif
"""
_WRAPPER = PRELUDE + """
static __device__ void ${name}_one(long i, $params) {
$consts$body}
#ifdef __CUDACC__
extern "C" __global__ void ${name}($params) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < $threads) ${name}_one(i, $names);
}
#endif
"""


def _geometry(op, image, out_hw) -> dict:
    """The constants a kind's body may use, for ``image`` (N, C, H, W)."""
    n, c, h, w = image
    (kh, kw), (sh, sw), ((pt, pb), (pl, pr)) = op["kernel"], op["stride"], op["padding"]
    dh, dw = op.get("dilation", (1, 1))
    geometry = dict(N=n, C=c, H=h, W=w, OH=out_hw[0], OW=out_hw[1], KH=kh, KW=kw, SH=sh,
                    SW=sw, PT=pt, PB=pb, PL=pl, PR=pr, DH=dh, DW=dw,
                    FLAT=int(op.get("layout") == "flat"),
                    INCLUDE_PAD=int(bool(op.get("count_include_pad", True))))
    return dict(geometry, FIRST=first_full_tap(op, (h, w), out_hw))  # forward poolings


@functools.lru_cache(maxsize=4096)
def _generate(op, in_shapes: tuple, dtype: str, out_shape: tuple) -> RawSource:
    kind = op.kind
    if kind in ("im2col", "col2im"):
        image = in_shapes[0] if kind == "im2col" else out_shape
        out_hw = tuple(conv_output_size(s, k, st, p, d) for s, k, st, p, d in zip(
            image[2:], op["kernel"], op["stride"], op["padding"], op["dilation"]))
    else:
        image = out_shape if kind.endswith("backward") else in_shapes[0]
        pooled = in_shapes[-1] if kind.endswith("backward") else out_shape
        out_hw = tuple(pooled[2:])
    geometry = _geometry(op, image, out_hw)
    ctype = C_TYPES[dtype]
    suffix = "f32" if dtype == "float32" else "f64"
    body = Template(_BODIES[kind]).substitute(T=ctype, ADD=f"graphc_add_{suffix}",
                                              DIV=f"graphc_div_{suffix}")
    used = [k for k in geometry if re.search(rf"\b{k}\b", body)]
    consts = "const long " + ", ".join(f"{k} = {geometry[k]}" for k in used) + ";\n"
    names = tuple(f"in{k}" for k in range(len(in_shapes))) + ("out",)
    params = ", ".join([f"const {ctype}* {a}" for a in names[:-1]] + [f"{ctype}* out"])
    threads = int(np.prod(out_shape, dtype=np.int64))
    fields = dict(params=params, consts=consts, body=body, threads=f"{threads}L",
                  names=", ".join(names))
    digest = hashlib.sha1(Template(_WRAPPER).substitute(name="@", **fields).encode())
    name = f"graphc_{kind}_{digest.hexdigest()[:16]}"
    return RawSource(name, Template(_WRAPPER).substitute(name=name, **fields), threads, names)


def window_kernel(op, in_shapes, in_dtypes, out_shape, out_dtype) -> RawSource:
    """The RawKernel source computing the window node ``op`` from C-contiguous inputs
    of ``in_shapes``/``in_dtypes`` into an output of ``out_shape``/``out_dtype``.
    Equal arguments give an equal source and name. :class:`NotImplementedError` names
    an unsupported kind or dtype; a :class:`ValueError` says when the shapes are not
    those graphc infers for ``op``.

    >>> from graphc.type import Op
    >>> op = Op.make("max_pool2d", kernel=(2, 2), stride=(2, 2), padding=((0, 0), (0, 0)),
    ...              ceil_mode=False)
    >>> src = window_kernel(op, [(1, 1, 4, 4)], ["float32"], (1, 1, 2, 2), "float32")
    >>> src.name.startswith("graphc_max_pool2d_"), src.threads, src.args
    (True, 4, ('in0', 'out'))
    >>> print(src.code[src.code.index("static"):].splitlines()[0])
    static __device__ void graphc_max_pool2d_..._one(long i, const float* in0, float* out) {
    """
    kind = op.kind
    dtypes = [np.dtype(d).name for d in list(in_dtypes) + [out_dtype]]
    def refuse(dtype, why):
        return NotImplementedError(f"cuda_window: {kind} on {dtype} is not supported ({why})")
    if kind not in _BODIES:
        raise refuse(dtypes[-1], f"window kinds: {', '.join(KINDS)}")
    bad = [d for d in dtypes if d not in C_TYPES]
    if bad or len(set(dtypes)) != 1:
        raise refuse(bad[0] if bad else "/".join(dtypes),
                     f"dtypes: {' or '.join(C_TYPES)}, one for all arrays")
    in_shapes = tuple(tuple(int(d) for d in s) for s in in_shapes)
    out_shape = tuple(int(d) for d in out_shape)
    if len(in_shapes) != _ARITY.get(kind, 1):
        raise ValueError(f"cuda_window: {kind} takes {_ARITY.get(kind, 1)} inputs, "
                         f"got {len(in_shapes)}")
    parents = [SimpleNamespace(shape=s, dtype=np.dtype(dtypes[0])) for s in in_shapes]
    try:
        inferred = tuple(infer(op, parents)[0])
    except GraphcError as e:
        raise ValueError(f"cuda_window: {e}") from None
    if inferred != out_shape:
        raise ValueError(f"cuda_window: {kind} of inputs {list(in_shapes)} has shape "
                         f"{inferred}, not {out_shape}")
    return _generate(op, in_shapes, dtypes[0], out_shape)


def supported(op, in_shapes, in_dtypes, out_shape, out_dtype) -> bool:
    """Whether :func:`window_kernel` generates a source for these arguments.

    >>> from graphc.type import Op
    >>> op = Op.make("avg_pool2d", kernel=(2, 2), stride=(2, 2), padding=((0, 0), (0, 0)),
    ...              ceil_mode=False, count_include_pad=True)
    >>> [supported(op, [(1, 2, 4, 4)], [d], (1, 2, 2, 2), d) for d in ["float64", "float16"]]
    [True, False]
    """
    try:
        window_kernel(op, in_shapes, in_dtypes, out_shape, out_dtype)
    except (NotImplementedError, ValueError, KeyError, TypeError):
        return False
    return True
