"""Giving freed heap memory back to the operating system.

A caller typically makes a model's initial weights, hands them to a compiled
graph (``assign`` copies them into its variables) and drops them. glibc's malloc
raises its mmap threshold as large blocks come and go, so those arrays often sit
in the main heap, and freeing them leaves holes that glibc keeps: the process's
resident memory still counts the dropped weights (ResNet50: ~88 MiB of its ~98).
``malloc_trim(0)`` returns every whole free page of the heap. graphc calls it
once at the start of the first run after large assignments (the caller has
dropped its copies by then); elsewhere (not glibc) nothing happens.

>>> release_free_heap() in (True, False)
True
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

#: assigned bytes after which the next run gives the freed heap back
TRIM_AFTER_BYTES = 32 << 20


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, or None on another C library."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_free_heap() -> bool:
    """Return the heap's free pages to the OS (glibc's ``malloc_trim(0)``); whether
    anything was released (False also where the C library has no such call).

    Example: ``release_free_heap()`` after dropping large arrays.
    """
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
