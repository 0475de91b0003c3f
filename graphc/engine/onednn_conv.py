"""oneDNN's convolution primitive on channels-last float32 images, through its C API.

oneDNN (the library :mod:`.gemm_libraries` already takes its GEMMs from) ships
just-in-time convolution kernels that read images channels last and never build
im2col's columns ("brgconv" and "jit" implementations for AVX-512 and AVX2). On this
2-core Zen 4 machine they ran ResNet's convolutions 1.3-2x faster than im2col plus a
GEMM (3x3, 64 channels at 56x56: 1330 -> 990 us; 512 at 7x7: 1680 -> 860; regnet's
grouped 320 at 14x14: 228 -> 81). The kernel is HWIO (``kh, kw, C/groups, O``), or
packed in the layout the primitive chooses (:func:`pack`, what graphs use); it and
the bias are the graph's; the scratchpad the primitive needs is the caller's (the
engine's planned workspace), so nothing outside the plan is allocated and two graphs
running at once share nothing.

:func:`primitive` makes (once per geometry, cached) the primitive for a
:class:`Geometry`, or says why not: no oneDNN, or no implementation but oneDNN's
reference loops for it. :class:`BoundConv` binds one to the arrays of a node.

>>> g = Geometry((1, 8, 8, 16), (3, 3, 16, 16), (1, 8, 8, 16), (1, 1), ((1, 1), (1, 1)),
...              (1, 1), 1, "")
>>> p = primitive(g)
>>> isinstance(p, str) or p.implementation != ""
True
"""
from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from .gemm_libraries import chosen, onednn_library

# the C API's constants (oneapi/dnnl/dnnl_types.h, stable across oneDNN 3.x)
_F32, _CPU, _FORWARD_INFERENCE, _CONVOLUTION_DIRECT = 3, 1, 96, 1
_TAG_ANY, _SCRATCHPAD_USER = 1, 1
_ARG_SRC, _ARG_DST, _ARG_WEIGHTS, _ARG_BIAS, _ARG_SCRATCHPAD = 1, 17, 33, 41, 80
_QUERY_IMPLEMENTATION, _QUERY_WEIGHTS, _QUERY_SCRATCHPAD = 8, 131, 136
# oneDNN's eltwise post-op kinds (dnnl_alg_kind_t)
_LINEAR, _LOGISTIC, _CLIP, _SWISH, _HARDSWISH = 0x26, 0x29, 0x2e, 0x2c, 0x34
#: the activations a primitive applies to its result before storing it: name -> the
#: chain of oneDNN eltwise post-ops ``(kind, alpha, beta)`` computing it from the
#: geometry's ``bounds``. oneDNN's own ReLU and clip take ``max(y, lo)``, which turns a
#: NaN into ``lo`` (NumPy keeps it), so ReLU is ``y * clip(inf * y, 0, 1)`` (a
#: hardswish: ``y`` for ``y > 0``, denormals included; ``-0`` below; NaN kept) plus
#: ``0`` (``+0``): NumPy's values for every ``y`` but ``-inf``, which gives NaN, not 0
#: (the one exact chain, an ``elu`` with ``alpha = 0``, computes an exponential and
#: cost mnasnet0_5 20%). ReLU6 then clips to ``(-inf, hi)``, which sends a NaN to
#: ``-inf`` (no other value below 0 is left), and a ``hardswish`` ``y * clip(1e-30 * y +
#: 1, 0, 1)`` sends ``-inf`` back to NaN and keeps every ``0 <= y <= hi``. ``"swish"``
#: ``y * sigmoid(alpha * y)`` (SiLU: ``(1, 0)``) and ``"hardswish"`` ``y * clip(alpha * y
#: + beta, 0, 1)`` (``(1/6, 1/2)``) keep a NaN by their product. ``"sigmoid"`` (oneDNN's
#: ``logistic``) keeps NaN and infinities and is within 4 ulp of the exact value, but
#: for inputs under about -87 (a sigmoid under 1.7e-38), where it gives 0
ACTIVATIONS = {
    "": lambda lo, hi: (),
    "relu": lambda lo, hi: ((_HARDSWISH, np.inf, 0.0), (_LINEAR, 1.0, 0.0)),
    "clip": lambda lo, hi: ((_HARDSWISH, np.inf, 0.0), (_LINEAR, 1.0, 0.0),
                            (_CLIP, -np.inf, hi), (_HARDSWISH, 1e-30, 1.0)),
    "swish": lambda alpha, beta: ((_SWISH, alpha, 0.0),),
    "hardswish": lambda alpha, beta: ((_HARDSWISH, alpha, beta),),
    "sigmoid": lambda alpha, beta: ((_LOGISTIC, 0.0, 0.0),),
}
#: the largest upper bound of a ``"clip"`` (its lower bound is 0)
CLIP_LIMIT = 1e20

_Dims = ctypes.c_int64 * 12
_Handle = ctypes.c_void_p


class _Arg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", _Handle)]


@dataclass(frozen=True)
class Geometry:
    """One convolution as the primitive sees it: ``image`` ``(N, H, W, C)``, ``kernel``
    ``(kh, kw, C / groups, O)``, ``out`` ``(N, OH, OW, O)``, then ``stride``,
    ``padding`` ``((top, bottom), (left, right))``, ``dilation`` (1: none),
    ``groups``, ``activation`` (a key of :data:`ACTIVATIONS`) and the ``bounds`` of
    a clip; always a bias. ``packed``: the kernel in the layout the primitive chooses
    (:func:`pack`), not HWIO. ``residual``: the result adds what ``out`` holds before
    the activation (oneDNN's ``sum`` post-op: a residual block's sum, in place)."""

    image: tuple
    kernel: tuple
    out: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int
    activation: str
    bounds: tuple = (0.0, 0.0)
    packed: bool = False
    residual: bool = False


class _Library:
    """The loaded library, its CPU engine, and one stream per thread."""

    def __init__(self, path: str):
        self.dll = dll = ctypes.CDLL(path)
        # the OpenMP runtime oneDNN's build threads with (GNU's, which Numba's "omp"
        # layer shares): a primitive runs on the calling thread's team
        self.omp = ctypes.CDLL("libgomp.so.1")
        dll.dnnl_primitive_desc_query_md.restype = _Handle
        dll.dnnl_memory_desc_get_size.restype = ctypes.c_size_t
        self.engine = _Handle()
        self.check(dll.dnnl_engine_create(ctypes.byref(self.engine), _CPU, 0), "engine")
        self.streams = threading.local()
        #: the calls a bound primitive makes each run
        self.execute, self.team = dll.dnnl_primitive_execute, self.omp.omp_get_max_threads

    @staticmethod
    def check(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"oneDNN convolution: {what} failed (dnnl status {status})")

    def stream(self) -> _Handle:
        stream = getattr(self.streams, "stream", None)
        if stream is None:
            stream = _Handle()
            self.check(self.dll.dnnl_stream_create(ctypes.byref(stream), self.engine, 1),
                       "stream")
            self.streams.stream = stream
        return stream

    def strided(self, dims, strides) -> _Handle:
        """A float32 memory descriptor of ``dims`` with ``strides`` in elements."""
        md = _Handle()
        self.check(self.dll.dnnl_memory_desc_create_with_strides(
            ctypes.byref(md), len(dims), _Dims(*dims), _F32, _Dims(*strides)), "descriptor")
        return md

    def memory(self, md, address: int) -> _Handle:
        memory = _Handle()
        self.check(self.dll.dnnl_memory_create(ctypes.byref(memory), md, self.engine,
                                               _Handle(address)), "memory")
        return memory


@lru_cache(maxsize=1)
def _library():
    # Numba's start sets OpenMP's wait policy in the environment, which the runtime
    # reads once, when it loads (with oneDNN): so Numba first
    from .numba_kernels import available
    available()
    path = onednn_library()
    return None if path.startswith("no ") else _Library(path)


def _descriptors(lib: _Library, g: Geometry):
    """(image, kernel, bias, result) descriptors: NCHW dims over channels-last strides,
    the kernel HWIO (per group, ``hwigo``), or any layout where ``g`` is packed."""
    n, h, w, c = g.image
    kh, kw, cg, o = g.kernel
    _, oh, ow, _ = g.out
    image = lib.strided((n, c, h, w), (h * w * c, 1, w * c, c))
    result = lib.strided((n, o, oh, ow), (oh * ow * o, 1, ow * o, o))
    dims = (o, cg, kh, kw) if g.groups == 1 else (g.groups, o // g.groups, cg, kh, kw)
    if g.packed:
        kernel = _Handle()
        lib.check(lib.dll.dnnl_memory_desc_create_with_tag(
            ctypes.byref(kernel), len(dims), _Dims(*dims), _F32, _TAG_ANY), "descriptor")
    elif g.groups == 1:
        kernel = lib.strided(dims, (1, o, kw * cg * o, cg * o))
    else:
        og = o // g.groups
        kernel = lib.strided(dims, (og, 1, o, kw * cg * o, cg * o))
    return image, kernel, lib.strided((o,), (1,)), result


def _attributes(lib: _Library, activation: str, bounds, residual: bool) -> _Handle:
    dll = lib.dll
    attr = _Handle()
    lib.check(dll.dnnl_primitive_attr_create(ctypes.byref(attr)), "attributes")
    lib.check(dll.dnnl_primitive_attr_set_scratchpad_mode(attr, _SCRATCHPAD_USER),
              "scratchpad")
    chain = ACTIVATIONS[activation](*bounds)
    if chain or residual:
        post = _Handle()
        lib.check(dll.dnnl_post_ops_create(ctypes.byref(post)), "post-ops")
        if residual:        # first: the activation applies to the sum
            lib.check(dll.dnnl_post_ops_append_sum(post, ctypes.c_float(1.0), 0, 0), "sum")
        for kind, alpha, beta in chain:
            lib.check(dll.dnnl_post_ops_append_eltwise(post, kind, ctypes.c_float(alpha),
                                                       ctypes.c_float(beta)), "activation")
        lib.check(dll.dnnl_primitive_attr_set_post_ops(attr, post), "post-ops")
        dll.dnnl_post_ops_destroy(post)
    return attr


@dataclass(frozen=True)
class Primitive:
    """A convolution primitive: its handle, its descriptors (image, kernel, bias,
    result, scratchpad), the scratchpad's bytes and oneDNN's name of the
    implementation it chose."""

    handle: _Handle
    descriptors: tuple
    scratch_bytes: int
    implementation: str


def wanted() -> str:
    """Why convolutions do not run on oneDNN (a sentence starting "no "), or ``""``:
    ``$GRAPHC_CONV=gemm`` keeps them on im2col and the GEMMs, and oneDNN must be
    installed and not turned off (``$GRAPHC_GEMM=openblas``).

    >>> wanted() == "" or wanted().startswith("no ")
    True
    """
    choice = os.environ.get("GRAPHC_CONV", "").strip().lower()
    if choice not in ("", "onednn", "gemm"):
        raise ValueError(f"GRAPHC_CONV={choice!r}: expected onednn or gemm")
    if choice == "gemm":
        return "no oneDNN convolutions: GRAPHC_CONV=gemm"
    if _library() is None:
        return f"no oneDNN convolutions: {onednn_library()}"
    return "" if chosen() == "onednn" else "no oneDNN convolutions: GRAPHC_GEMM=openblas"


def primitive(g: Geometry):
    """The :class:`Primitive` for ``g``, or a sentence starting "no " saying why there is
    none: no oneDNN (or not wanted, :func:`wanted`), or only its reference implementation
    (slower than the GEMMs)."""
    return wanted() or _primitive(g)


@lru_cache(maxsize=None)
def _primitive(g: Geometry):
    if g.activation == "clip" and not (g.bounds[0] == 0.0 and 0.0 < g.bounds[1] <= CLIP_LIMIT):
        return f"no oneDNN chain of post-ops clips to {g.bounds} keeping NaN"
    lib = _library()
    dll = lib.dll
    image, kernel, bias, result = _descriptors(lib, g)
    (top, bottom), (left, right) = g.padding
    desc = _Handle()
    status = dll.dnnl_convolution_forward_primitive_desc_create(
        ctypes.byref(desc), lib.engine, _FORWARD_INFERENCE, _CONVOLUTION_DIRECT, image,
        kernel, bias, result, _Dims(*g.stride), _Dims(*(d - 1 for d in g.dilation)),
        _Dims(top, left), _Dims(bottom, right),
        _attributes(lib, g.activation, g.bounds, g.residual))
    if status != 0:
        return f"no oneDNN convolution for {g} (dnnl status {status})"
    name = ctypes.c_char_p()
    lib.check(dll.dnnl_primitive_desc_query(desc, _QUERY_IMPLEMENTATION, 0,
                                            ctypes.byref(name)), "query")
    implementation = name.value.decode()
    if implementation.startswith("ref"):
        return f"no oneDNN convolution for {g} but its reference loops"
    scratch = _Handle(dll.dnnl_primitive_desc_query_md(desc, _QUERY_SCRATCHPAD, 0))
    if g.packed:         # the layout it chose
        kernel = _Handle(dll.dnnl_primitive_desc_query_md(desc, _QUERY_WEIGHTS, 0))
    handle = _Handle()
    lib.check(dll.dnnl_primitive_create(ctypes.byref(handle), desc), "primitive")
    return Primitive(handle, (image, kernel, bias, result, scratch),
                     int(dll.dnnl_memory_desc_get_size(scratch)), implementation)


def _layout_of(g: Geometry):
    """The primitive of ``g`` without its activation (the one :func:`pack` lays a kernel
    out for: a ReLU after it does not change the layout, :func:`same_layout`)."""
    return primitive(replace(g, activation="", bounds=(0.0, 0.0), packed=True))


def packed_elements(g: Geometry) -> int:
    """The float32 elements of ``g``'s kernel packed (:func:`pack`), padding included.

    Example: ``packed_elements(g) >= math.prod(g.kernel)``"""
    p = _layout_of(g)
    if isinstance(p, str):
        raise ValueError(f"conv2d_nhwc: {p}")
    return -(-int(_library().dll.dnnl_memory_desc_get_size(p.descriptors[1])) // 4)


def same_layout(g: Geometry) -> bool:
    """Whether the packed primitive of ``g`` reads the layout :func:`pack` makes."""
    p, q = primitive(replace(g, packed=True)), _layout_of(g)
    if isinstance(p, str) or isinstance(q, str):
        return False
    return bool(_library().dll.dnnl_memory_desc_equal(p.descriptors[1], q.descriptors[1]))


def _reorder(source_md, source, target_md, target) -> None:
    lib = _library()
    dll = lib.dll
    desc, handle = _Handle(), _Handle()
    lib.check(dll.dnnl_reorder_primitive_desc_create(
        ctypes.byref(desc), source_md, lib.engine, target_md, lib.engine, None), "reorder")
    lib.check(dll.dnnl_primitive_create(ctypes.byref(handle), desc), "reorder")
    memories = [lib.memory(source_md, source.ctypes.data),
                lib.memory(target_md, target.ctypes.data)]
    args = (_Arg * 2)(_Arg(_ARG_SRC, memories[0]), _Arg(_ARG_DST, memories[1]))
    stream = lib.stream()
    try:
        lib.check(dll.dnnl_primitive_execute(handle, stream, 2, args), "reorder")
        lib.check(dll.dnnl_stream_wait(stream), "reorder")
    finally:
        for memory in memories:
            dll.dnnl_memory_destroy(memory)
        dll.dnnl_primitive_destroy(handle)
        dll.dnnl_primitive_desc_destroy(desc)


def _oihw(lib: _Library, g: Geometry) -> _Handle:
    """The descriptor of ``g``'s kernel as a conv2d's: ``(O, C/groups, kh, kw)``, C order."""
    kh, kw, cg, o = g.kernel
    if g.groups == 1:
        return lib.strided((o, cg, kh, kw), (cg * kh * kw, kh * kw, kw, 1))
    og = o // g.groups
    return lib.strided((g.groups, og, cg, kh, kw),
                       (og * cg * kh * kw, cg * kh * kw, kh * kw, kw, 1))


def pack(g: Geometry, kernel: np.ndarray, out: np.ndarray = None) -> np.ndarray:
    """A conv2d's float32 ``kernel`` ``(O, C/groups, kh, kw)`` for ``g``, laid out as its
    primitive chose (:func:`packed_elements` elements, into ``out`` if given): blocked
    so that the primitive reads whole vectors of it, which ran ResNet's deep 1x1
    convolutions with their weights coming from memory 2x faster than HWIO (256 ->
    1024 channels at 14x14: 1210 -> 630 us).

    >>> g = Geometry((1, 4, 4, 8), (1, 1, 8, 16), (1, 4, 4, 16), (1, 1), ((0, 0), (0, 0)),
    ...              (1, 1), 1, "")
    >>> w = np.arange(128, dtype=np.float32).reshape(16, 8, 1, 1)
    >>> wanted() != "" or np.array_equal(unpack(g, pack(g, w)), w)
    True
    """
    lib = _library()
    out = np.empty(packed_elements(g), np.float32) if out is None else out
    out[...] = 0            # the layout's padding
    _reorder(_oihw(lib, g), np.ascontiguousarray(kernel, np.float32),
             _layout_of(g).descriptors[1], out)
    return out


def unpack(g: Geometry, packed: np.ndarray, out: np.ndarray = None) -> np.ndarray:
    """The conv2d kernel ``(O, C/groups, kh, kw)`` of ``g`` from its :func:`pack` ed
    layout (into ``out`` if given): the same bits."""
    kh, kw, cg, o = g.kernel
    lib = _library()
    out = np.empty((o, cg, kh, kw), np.float32) if out is None else out
    _reorder(_layout_of(g).descriptors[1], np.ascontiguousarray(packed), _oihw(lib, g), out)
    return out


#: whether a primitive was bound to a graph's arrays in this process (see :func:`in_use`)
_bound: list = []


def in_use() -> bool:
    """Whether this process has bound a convolution primitive (:class:`BoundConv`):
    then its graphs' matrix-vector products run on oneDNN too (:mod:`.onednn_gemv`),
    so that OpenBLAS's pool does not wake beside the primitives' team; elsewhere they
    stay on OpenBLAS's GEMV, a little faster alone (1 x 1024 x 1000: 32 against 45 us).

    >>> in_use() in (True, False)
    True
    """
    return bool(_bound)


def available(g: Geometry) -> bool:
    """Whether oneDNN has a fast primitive for ``g`` (see :func:`primitive`).

    Example: ``if available(g): kernel = BoundConv(primitive(g), x, w, b, y, scratch)``"""
    return not isinstance(primitive(g), str)


class BoundConv:
    """A primitive bound to a node's arrays (float32, C-contiguous): calling it computes
    ``out`` from ``image``, ``kernel``, ``bias`` on the calling thread's OpenMP team of
    ``threads``, using ``scratch`` (a uint8 array of at least ``scratch_bytes``). With a
    ``residual`` (a primitive of a geometry with ``residual``), ``out`` first takes its
    values, unless it is the residual's own memory (planned in place).

    Example: ``BoundConv(primitive(g), x, w, b, y, scratch, threads=2)()``"""

    def __init__(self, p: Primitive, image, kernel, bias, out, scratch, threads: int,
                 residual=None):
        lib = _library()
        self._residual = None
        if residual is not None and not (residual.shape == out.shape
                                         and residual.strides == out.strides
                                         and residual.ctypes.data == out.ctypes.data):
            self._residual = (residual, out)
        arrays = (image, kernel, bias, out, scratch)
        self._arrays = arrays          # the memories point into them: keep them alive
        memories = [lib.memory(md, a.ctypes.data) for md, a in zip(p.descriptors, arrays)]
        roles = (_ARG_SRC, _ARG_WEIGHTS, _ARG_BIAS, _ARG_DST, _ARG_SCRATCHPAD)
        self._args = (_Arg * 5)(*(_Arg(r, m) for r, m in zip(roles, memories)))
        self._memories = memories
        self._handle, self._lib, self._threads = p.handle, lib, threads
        if not _bound:
            _bound.append(True)

    def __call__(self) -> None:
        # a mobile network's step of a few microseconds: its Python is kept to one
        # frame and two foreign calls (1.5-4% of mnasnet0_5's and mobilenet_v3_small's
        # kernels' time against three frames)
        if self._residual is not None:
            np.copyto(self._residual[1], self._residual[0])
        lib = self._lib
        threads = lib.team()
        if threads != self._threads:
            return self._resized(threads)
        stream = getattr(lib.streams, "stream", None) or lib.stream()
        status = lib.execute(self._handle, stream, 5, self._args)
        if status:
            lib.check(status, "execution")

    def _resized(self, threads: int) -> None:
        omp = self._lib.omp
        omp.omp_set_num_threads(self._threads)
        try:
            self._lib.check(self._lib.execute(self._handle, self._lib.stream(), 5, self._args),
                            "execution")
        finally:
            omp.omp_set_num_threads(threads)

    def __del__(self):
        for memory in getattr(self, "_memories", ()):
            self._lib.dll.dnnl_memory_destroy(memory)


def reference(g: Geometry, image, kernel, bias, residual=None) -> np.ndarray:
    """The convolution of ``g`` by loops over taps in float64, plus the ``residual``
    (with ``g.residual``), then the activation (tests' reference).

    >>> g = Geometry((1, 3, 3, 1), (3, 3, 1, 1), (1, 1, 1, 1), (1, 1), ((0, 0), (0, 0)),
    ...              (1, 1), 1, "")
    >>> y = reference(g, np.ones((1, 3, 3, 1)), np.ones((3, 3, 1, 1)), np.ones(1))
    >>> float(y[0, 0, 0, 0])
    10.0
    """
    n, h, w, c = g.image
    kh, kw, cg, o = g.kernel
    _, oh, ow, _ = g.out
    (top, bottom), (left, right) = g.padding
    padded = np.zeros((n, h + top + bottom, w + left + right, c))
    padded[:, top:top + h, left:left + w] = image
    out = np.zeros(g.out) + np.asarray(bias, np.float64)
    og = o // g.groups
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * g.dilation[0], i * g.dilation[0] + (oh - 1) * g.stride[0] + 1,
                         g.stride[0])
            cols = slice(j * g.dilation[1], j * g.dilation[1] + (ow - 1) * g.stride[1] + 1,
                         g.stride[1])
            window = padded[:, rows, cols]
            for k in range(g.groups):
                out[..., k * og:(k + 1) * og] += (window[..., k * cg:(k + 1) * cg]
                                                  @ kernel[i, j, :, k * og:(k + 1) * og])
    if g.residual:
        out += residual
    return activate(out, g.activation, g.bounds)


def activate(y: np.ndarray, activation: str, bounds) -> np.ndarray:
    """``y`` with the :data:`ACTIVATIONS` entry ``activation`` applied (in place where
    it can: a new array for the gated ones), as the primitive applies it.

    >>> np.round(activate(np.array([-1.0, 2.0]), "hardswish", (1 / 6, 0.5)), 6).tolist()
    [-0.333333, 1.666667]
    """
    alpha, beta = bounds
    if activation == "relu":
        return np.maximum(y, 0, out=y)
    if activation == "clip":
        return np.clip(y, alpha, beta, out=y)
    if activation == "swish":
        return y / (1 + np.exp(-alpha * y))
    if activation == "hardswish":
        return y * np.clip(alpha * y + beta, 0, 1)
    if activation == "sigmoid":
        with np.errstate(over="ignore"):        # exp(88.8+) is inf: the sigmoid is 0
            return 1 / (1 + np.exp(-y))
    return y


__all__ = ["ACTIVATIONS", "Geometry", "wanted", "in_use", "packed_elements", "same_layout",
           "pack", "unpack", "activate", "Primitive", "primitive", "available", "BoundConv",
           "reference"]
