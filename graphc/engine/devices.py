"""The devices a graph can be compiled for, and what each one needs.

``"cpu"`` runs on NumPy (always there). ``"cuda"`` runs on an NVIDIA GPU through
CuPy, which is imported only when that device is asked for, so a CPU install
never needs it; both ``cupy-cuda12x`` (the ``gpu`` extra) and ``cupy-cuda13x``
provide the ``cupy`` module. What cannot be used is said plainly: no CuPy, a
CuPy that finds no GPU, or an unknown device name.

>>> check_device("cpu")
'cpu'
>>> check_device("tpu")
Traceback (most recent call last):
...
graphc.type.errors.DeviceError: compile: unknown device 'tpu'; expected one of ['cpu', 'cuda']
"""
from __future__ import annotations

import importlib
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ..type.errors import DeviceError

#: device name -> what it needs, in words (for errors and docs)
DEVICES = {"cpu": "NumPy", "cuda": "CuPy (pip install 'graphc[gpu]' for cupy-cuda12x, or "
                                   "cupy-cuda13x for a CUDA 13 driver) and an NVIDIA GPU"}


#: the views a device graph reads (``compile(views=True)``): reshapes of contiguous
#: values only, contiguous themselves, since the raw kernels read contiguous memory
DEVICE_VIEWS = frozenset({"reshape"})

#: the environment variable giving ``compile``'s default device (``"cpu"`` without it):
#: ``GRAPHC_DEVICE=cuda python -m pytest`` runs every graph the suite compiles on the GPU
DEVICE_VARIABLE = "GRAPHC_DEVICE"


def check_device(device: Optional[str]) -> str:
    """``device`` if it is known (``"cpu"`` or ``"cuda"``), else :class:`DeviceError`;
    ``None`` is ``$GRAPHC_DEVICE``, else ``"cpu"``.

    Example: ``check_device(None)`` is ``"cpu"`` unless ``$GRAPHC_DEVICE`` says otherwise
    """
    if device is None:
        device = os.environ.get(DEVICE_VARIABLE) or "cpu"
        where = f" (from ${DEVICE_VARIABLE})"
    else:
        where = ""
    if device not in DEVICES:
        raise DeviceError(f"compile: unknown device {device!r}{where}; expected one of "
                          f"{sorted(DEVICES)}")
    return device


def import_cupy(importer=importlib.import_module):
    """The ``cupy`` module with at least one usable GPU, or :class:`DeviceError`
    saying what is missing. ``importer`` is for tests.

    Example: ``cp = import_cupy()``
    """
    try:
        cupy = importer("cupy")
    except ImportError as exc:
        raise DeviceError(f"compile(device='cuda'): CuPy is not installed ({exc}); it needs "
                          f"{DEVICES['cuda']}") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA raises its own error types when no driver is found
        raise DeviceError(f"compile(device='cuda'): CuPy {getattr(cupy, '__version__', '?')} "
                          f"found no usable CUDA driver or GPU: {exc}") from None
    if count < 1:
        raise DeviceError(f"compile(device='cuda'): CuPy {getattr(cupy, '__version__', '?')} "
                          "sees no GPU (device count 0)")
    return cupy


@dataclass(frozen=True)
class Backend:
    """What a device program needs of a device library: the array module ``xp`` and
    two factories turning generated sources into callables ``kernel(*ins, out)``:
    ``elementwise`` (a :class:`~.cuda_codegen.KernelSource`) and ``raw`` (a
    :class:`~.cuda_window.RawSource`); ``rng(seed)``: the random generator the
    random ops draw from, in the device's memory (``None``: NumPy's, on the host
    arrays a stand-in ``xp`` makes); ``capture(kernels) -> (launch, held_bytes)``
    records kernels into one replayable graph (:mod:`.cuda_graphs`); ``tf32()``: a
    context in which float32 matrix products may use TF32 tensor cores (``None``
    where the device library has no such switch); ``reduction``: a factory like
    ``elementwise`` for a :class:`~.cuda_reduce.ReductionSource`."""
    xp: object
    elementwise: Callable
    raw: Callable
    rng: Optional[Callable] = None
    capture: Optional[Callable] = None
    tf32: Optional[Callable] = None
    reduction: Optional[Callable] = None


def cupy_tf32(cupy):
    """A context factory letting CuPy's float32 matrix products (cuBLAS) run on TF32
    tensor cores, or ``None`` where this CuPy has no compute-type switch. CuPy reads
    its ``CUPY_TF32`` variable once at import; its per-dtype compute type can be set
    at any time, which is what this toggles around each product."""
    linalg = getattr(getattr(cupy, "_core", None), "_routines_linalg", None)
    get = getattr(linalg, "get_compute_type", None)
    put = getattr(linalg, "set_compute_type", None)
    tf32 = getattr(linalg, "COMPUTE_TYPE_TF32", None)
    if get is None or put is None or tf32 is None:
        return None
    float32 = np.dtype(np.float32)

    @contextmanager
    def scope():
        before = get(float32)
        put(float32, tf32)
        try:
            yield
        finally:
            put(float32, before)
    return scope


def cuda_backend() -> Backend:
    """The :class:`Backend` of ``device="cuda"``: CuPy, ``cupy.ElementwiseKernel`` and
    ``cupy.RawKernel`` launched over the source's grid (CuPy caches compiled kernels
    by source)."""
    cupy = import_cupy()

    def elementwise(source):
        return cupy.ElementwiseKernel(source.in_params, source.out_params, source.operation,
                                      source.name, preamble=source.preamble)

    def raw(source):
        kernel = cupy.RawKernel(source.code, source.name)
        return lambda *arrays: kernel(source.grid, (source.block,), arrays)
    def reduction(source):
        kernel = cupy.ReductionKernel(source.in_params, source.out_params, source.map_expr,
                                      source.reduce_expr, source.post_map_expr, source.identity,
                                      source.name, reduce_type=source.reduce_type,
                                      preamble=source.preamble)
        return lambda *arrays: kernel(*arrays[:-1], out=arrays[-1], axis=source.axis,
                                      keepdims=source.keepdims)

    # CuPy's Generator (XORWOW bit generator) draws into device arrays with
    # ``random(dtype=, out=)`` and ``standard_normal(dtype=, out=)``, as NumPy's does
    # into host ones, so the random ops' kernels run unchanged on the device
    from .cuda_graphs import cupy_capture
    return Backend(cupy, elementwise, raw, rng=lambda seed: cupy.random.default_rng(seed),
                   capture=cupy_capture(cupy), tf32=cupy_tf32(cupy), reduction=reduction)


def make_program(device: Optional[str], graph, live, plan, seed=None, scratch_slots: int = 1,
                 kernels: str = "numpy", capture: bool = False, tf32: bool = False):
    """The program that runs a planned graph on ``device`` (``kernels``: the CPU's
    choice of NumPy or generated kernels; the device always generates its own;
    ``capture`` and ``tf32``: the device's options, see ``graphc.compile``)."""
    if check_device(device) == "cpu":
        if capture or tf32:
            raise DeviceError(f"compile: {'capture' if capture else 'tf32'}=True is an option "
                              "of device='cuda'; the CPU has no CUDA graphs or TF32")
        from .cpu import CpuProgram
        return CpuProgram(graph, live, plan, seed, scratch_slots, kernels)
    backend = cuda_backend()      # says first what is missing, if anything
    from .device import DeviceProgram
    return DeviceProgram(graph, live, plan, backend, seed, capture=capture, tf32=tf32)
