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
from dataclasses import dataclass
from typing import Callable

from ..type.errors import DeviceError

#: device name -> what it needs, in words (for errors and docs)
DEVICES = {"cpu": "NumPy", "cuda": "CuPy (pip install 'graphc[gpu]' for cupy-cuda12x, or "
                                   "cupy-cuda13x for a CUDA 13 driver) and an NVIDIA GPU"}


def check_device(device: str) -> str:
    """``device`` if it is known (``"cpu"`` or ``"cuda"``), else :class:`DeviceError`."""
    if device not in DEVICES:
        raise DeviceError(f"compile: unknown device {device!r}; expected one of "
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
    :class:`~.cuda_window.RawSource`)."""
    xp: object
    elementwise: Callable
    raw: Callable


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
    return Backend(cupy, elementwise, raw)


def make_program(device: str, graph, live, plan, seed=None, scratch_slots: int = 1,
                 kernels: str = "numpy"):
    """The program that runs a planned graph on ``device`` (``kernels``: the CPU's
    choice of NumPy or generated kernels; the device always generates its own)."""
    if check_device(device) == "cpu":
        from .cpu import CpuProgram
        return CpuProgram(graph, live, plan, seed, scratch_slots, kernels)
    backend = cuda_backend()      # says first what is missing, if anything
    from .device import DeviceProgram
    return DeviceProgram(graph, live, plan, backend, seed)
