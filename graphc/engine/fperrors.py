"""Floating-point conditions of a run's commit phase, reported after it.

NumPy acts on an overflow or an invalid operation as ``np.errstate`` says: warn,
call a handler, or raise ``FloatingPointError`` from inside the kernel. Raised in
the steps that write variables (or as a warning turned into an error by a
warnings filter), that would stop a run half-way through its writes. So those
steps run with every condition recorded instead, and once the last write is
done the conditions are reported the way the caller's ``np.errstate`` asks,
except that ``"raise"`` becomes a ``RuntimeWarning``: the run has succeeded and
its updates are applied, so it must not raise.

>>> import numpy as np, warnings
>>> conditions = DeferredFloatErrors()
>>> with conditions.recording():
...     _ = np.float32(3e38) * np.float32(10)
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     conditions.report()
>>> str(caught[0].message)
'overflow encountered in a step that writes a variable (reported after the run committed)'
"""
from __future__ import annotations

import threading
import warnings

import numpy as np


#: the condition NumPy names in an error callback -> its ``np.geterr()`` key
_SETTING = {"divide by zero": "divide", "overflow": "over", "underflow": "under",
            "invalid value": "invalid"}


class DeferredFloatErrors:
    """Floating-point conditions seen while :meth:`recording` (on any thread),
    reported once by :meth:`report`."""

    def __init__(self) -> None:
        self._seen: list[str] = []
        self._lock = threading.Lock()

    def _record(self, condition: str, flag: int) -> None:
        with self._lock:
            if condition not in self._seen:
                self._seen.append(condition)

    def recording(self):
        """A context in which NumPy records every condition here, acting on none."""
        return np.errstate(all="call", call=self._record)

    def report(self, settings: dict | None = None) -> None:
        """Act on the recorded conditions as ``settings`` (``np.geterr()`` of the
        caller, by default the current one) says, then forget them."""
        if not self._seen:
            return
        settings = settings or np.geterr()
        with self._lock:
            seen, self._seen = self._seen, []
        for condition in seen:
            mode = settings.get(_SETTING.get(condition, condition), "warn")
            if mode == "ignore":
                continue
            if mode in ("call", "log") and np.geterrcall() is not None:
                handler = np.geterrcall()
                if mode == "call":
                    handler(condition, 0)
                else:
                    handler.write(f"Warning: {condition} encountered in a step that "
                                  "writes a variable\n")
                continue
            warnings.warn(f"{condition} encountered in a step that writes a variable "
                          "(reported after the run committed)", RuntimeWarning, stacklevel=4)
