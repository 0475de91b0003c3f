"""Interrupts that arrive while a run is writing state.

Python calls a signal's handler (``KeyboardInterrupt`` for Ctrl-C, often
``SystemExit`` for a scheduler's SIGTERM) between any two bytecodes of the main
thread. An exception raised there in the middle of a run's commit would leave
some variables new and others old, or one weight array torn between the chunks
of a streamed kernel; raised just before the clean-up of a failed run it would
skip the clean-up.

So a run installs :class:`InterruptGuard` handlers for the usual asynchronous
signals. Each calls the user's own handler at once (so a handler that only logs
behaves as before) but keeps the exception it raises instead of letting it
unwind the run. While the guard is not *holding*, it also cancels the steps not
yet started, and the run raises the exception at the next safe point (between
two kernels, or when the parallel engine has drained); while it holds (feeding,
putting state back, committing), the exception waits until the holding ends.

Only the main thread receives signals in Python, so elsewhere this does nothing.

>>> import signal, os
>>> def too_late(signum, frame): raise TimeoutError("too late")
>>> previous = signal.signal(signal.SIGALRM, too_late)
>>> with held_interrupts():
...     os.kill(os.getpid(), signal.SIGALRM)   # arrives now, raised after the block
...     done = True
Traceback (most recent call last):
TimeoutError: too late
>>> done
True
>>> _ = signal.signal(signal.SIGALRM, previous)
"""
from __future__ import annotations

import signal
import threading

try:        # the C module under ``signal``: 10-30x cheaper calls (no enum conversions)
    import _signal as _calls
except ImportError:    # pragma: no cover - other Pythons
    _calls = signal

#: signals a user may have bound to a Python handler that raises (Ctrl-C, a
#: scheduler's SIGTERM, a SIGALRM timeout)
HELD_SIGNALS = tuple(int(getattr(signal, name)) for name in
                     ("SIGINT", "SIGTERM", "SIGALRM", "SIGHUP", "SIGUSR1", "SIGUSR2")
                     if hasattr(signal, name))


class InterruptGuard:
    """Context manager: inside it, what a signal handler raises is kept in
    :attr:`raised` rather than raised where the signal arrived. ``holding=False``
    also calls :attr:`cancel` (set by whoever runs the steps) with it.

    >>> import signal, os
    >>> with InterruptGuard(holding=False) as guard:
    ...     os.kill(os.getpid(), signal.SIGINT)      # Ctrl-C
    ...     kept = guard.raised
    >>> type(kept).__name__
    'KeyboardInterrupt'
    """

    __slots__ = ("holding", "raised", "cancel", "_saved")

    def __init__(self, holding: bool = True) -> None:
        self.holding = holding
        self.raised: BaseException | None = None
        self.cancel = None          # callable(exception): stop the steps not started
        self._saved: list = []

    def __enter__(self) -> "InterruptGuard":
        if threading.current_thread() is not threading.main_thread():
            return self
        try:
            for signum in HELD_SIGNALS:
                handler = _calls.getsignal(signum)
                if callable(handler):     # SIG_DFL / SIG_IGN / None: no Python handler
                    self._saved.append((signum, handler))
                    _calls.signal(signum, self._handle)
        except BaseException:
            self._restore()
            raise
        return self

    def _handle(self, signum, frame) -> None:
        for saved, handler in self._saved:
            if saved == signum:
                break
        else:
            return
        try:
            handler(signum, frame)
        except BaseException as error:   # noqa: BLE001 - raised at a safe point
            if self.raised is None:
                self.raised = error
            if not self.holding and self.cancel is not None:
                self.cancel(error)

    def check(self) -> None:
        """Raise what a handler raised, if anything (a safe point)."""
        raised, self.raised = self.raised, None
        if raised is not None:
            raise raised

    def _restore(self) -> None:
        for signum, handler in self._saved:
            _calls.signal(signum, handler)
        self._saved = []

    def __exit__(self, *exc) -> None:
        """Put the caller's handlers back (again: a no-op)."""
        self._restore()


class held_interrupts(InterruptGuard):
    """An :class:`InterruptGuard` that holds throughout and raises what a handler
    raised when the block ends (unless the block itself raised)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(holding=True)

    def __exit__(self, kind, value, traceback) -> None:
        self._restore()
        if kind is None:
            self.check()
