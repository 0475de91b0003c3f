"""A CPU stand-in for CuPy's ElementwiseKernel: a generated ``KernelSource`` is
wrapped in a C loop (the per-element body CuPy would run), compiled with gcc
(once per source, new ones batched into one call) and called through ctypes.
Shared by the code-generator tests and the device-program tests.

With ``GRAPHC_TEST_GPU=1`` (on a machine with CuPy and an NVIDIA GPU) the same
helpers launch the sources on the GPU instead, through the very backend
``compile(device="cuda")`` uses (``graphc.engine.devices.cuda_backend``), so every
test written against them checks the real kernels, with the same comparisons.
"""
from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from graphc.engine.cuda_codegen import C_TYPES, PRELUDE, KernelSource

GCC, NVCC = shutil.which("gcc"), shutil.which("nvcc")
#: launch the sources on the GPU through CuPy instead of compiling them with gcc
GPU = os.environ.get("GRAPHC_TEST_GPU") == "1"


@functools.lru_cache(maxsize=None)
def gpu_backend():
    """The backend ``device="cuda"`` uses (CuPy; its absence is an error, not a skip:
    ``GRAPHC_TEST_GPU=1`` asks for the GPU)."""
    from graphc.engine.devices import cuda_backend
    return cuda_backend()


def gpu_kernels():
    """``(elementwise, raw)`` runners of sources on the GPU, or ``None`` off it."""
    return (gpu_backend().elementwise, gpu_backend().raw) if GPU else None

_BUILD = tempfile.TemporaryDirectory(prefix="graphc_cuda_codegen_")
_FUNCTIONS: dict[str, tuple] = {}   # kernel name -> (source, ctypes function)
SEEN: dict[str, KernelSource] = {}  # every kernel generated here, for the nvcc check


def _params(text):
    return [tuple(p.split()) for p in text.split(", ")] if text else []


def _wrap(src: KernelSource, cuda: bool) -> str:
    """The kernel's per-element body as a C loop or a CUDA ``__global__`` function."""
    ins, ((out_dtype, _),) = _params(src.in_params), _params(src.out_params)
    args = "".join(f"const {C_TYPES[d][0]}* p{k}, " for k, (d, _) in enumerate(ins))
    loads = "".join(f"{C_TYPES[d][0]} {name} = p{k}[i]; " for k, (d, name) in enumerate(ins))
    body = f"{loads}{C_TYPES[out_dtype][0]} out;\n{src.operation}\npout[i] = out;"
    signature = f"void {src.name}(long n, {args}{C_TYPES[out_dtype][0]}* pout)"
    if cuda:
        return (f'extern "C" __global__ {signature} {{\n'
                f"long i = blockIdx.x * (long)blockDim.x + threadIdx.x;\n"
                f"if (i < n) {{\n{body}\n}}\n}}\n")
    return f"{signature} {{\nfor (long i = 0; i < n; ++i) {{\n{body}\n}}\n}}\n"


def _compile(sources, seen, functions, stem, c_text, symbol, arity):
    """Compile ``sources`` not compiled yet (all in one gcc call) and return their
    ctypes functions: ``c_text(new sources)`` is the C file, ``symbol(name)`` the
    function to call, ``arity(source)`` its pointer arguments (after ``n``)."""
    if GPU:       # the GPU compiles each source when it is launched (run_kernel, run_raw)
        seen.update((src.name, src) for src in sources)
        return [None] * len(sources)
    if GCC is None:
        pytest.skip("gcc is not installed")
    new = {}
    for src in sources:
        seen[src.name] = src
        known = functions.get(src.name)
        assert known is None or known[0] == src, f"two sources named {src.name}"
        if known is None:
            new[src.name] = src
    if new:
        path = f"{_BUILD.name}/{stem}{len(functions)}"
        with open(path + ".c", "w") as f:
            f.write(c_text(list(new.values())))
        subprocess.run([GCC, "-O1", "-shared", "-fPIC", "-ffp-contract=off", "-w",
                        "-o", path + ".so", path + ".c", "-lm"], check=True)
        lib = ctypes.CDLL(path + ".so")
        for name, src in new.items():
            fn = getattr(lib, symbol(name))
            fn.restype = None
            fn.argtypes = [ctypes.c_long] + [ctypes.c_void_p] * arity(src)
            functions[name] = (src, fn)
    return [functions[s.name][1] for s in sources]


def load(sources):
    """The ctypes functions of elementwise ``sources`` (each compiled once)."""
    return _compile(sources, SEEN, _FUNCTIONS, "k",
                    lambda new: ("#include <math.h>\n#include <stdbool.h>\n" + PRELUDE + "\n"
                                 + "\n".join(_wrap(s, cuda=False) for s in new)),
                    lambda name: name, lambda s: len(_params(s.in_params)) + 1)


def run_kernel(src: KernelSource, inputs, shape) -> np.ndarray:
    """The kernel on NumPy ``inputs`` broadcast to ``shape`` (CuPy's job on the GPU)."""
    arrays = [np.ascontiguousarray(np.broadcast_to(np.asarray(a), shape)) for a in inputs]
    assert [a.dtype.name for a in arrays] == [d for d, _ in _params(src.in_params)]
    out = np.empty(shape, _params(src.out_params)[0][0])
    if GPU:
        SEEN[src.name] = src
        cp = gpu_backend().xp
        device_out = cp.empty(shape, out.dtype)
        gpu_backend().elementwise(src)(*[cp.asarray(a) for a in arrays], device_out)
        return cp.asnumpy(device_out)
    (fn,) = load([src])
    fn(out.size, *[a.ctypes.data for a in arrays], out.ctypes.data)
    return out


# -- raw (window) kernels: the ``<name>_one`` body looped over the work items -------------
RAW_SEEN: dict = {}          # every raw source compiled here, for the nvcc checks
_RAW_FUNCTIONS: dict = {}    # name -> (source, ctypes function)


def _raw_loops(new) -> str:
    loops = []
    for s in new:
        params = ", ".join(f"const void* {a}" for a in s.args[:-1])
        loops.append(f"void {s.name}_loop(long n, {params}, void* out) {{\n"
                     f"  for (long i = 0; i < n; ++i) {s.name}_one(i, {', '.join(s.args)});"
                     "\n}\n")
    return "#define __device__\n" + "".join(s.code for s in new) + "".join(loops)


def load_raw(sources):
    """The ctypes functions running each raw source's ``<name>_one`` over its work
    items (each compiled once)."""
    return _compile(sources, RAW_SEEN, _RAW_FUNCTIONS, "window", _raw_loops,
                    lambda name: name + "_loop", lambda s: len(s.args))


def run_raw(src, inputs, out):
    """The raw kernel ``src`` on C-contiguous NumPy ``inputs``, writing ``out``."""
    arrays = [np.ascontiguousarray(a) for a in inputs]
    if GPU:
        RAW_SEEN[src.name] = src
        cp = gpu_backend().xp
        device_out = cp.asarray(out)        # what the kernel leaves unwritten shows
        gpu_backend().raw(src)(*[cp.asarray(a) for a in arrays], device_out)
        out[...] = cp.asnumpy(device_out)
        return
    (fn,) = load_raw([src])
    fn(src.threads, *[a.ctypes.data for a in arrays], out.ctypes.data)
