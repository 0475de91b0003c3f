"""Running test code in several threads at once, so that races show."""
import sys
import threading


def in_threads(work, count: int) -> list:
    """Call ``work(t)`` for ``t`` in ``range(count)``, each in its own thread, all
    started together and switching as often as the interpreter can; returns the
    exceptions they raised (empty when none did)."""
    errors, start = [], threading.Barrier(count)

    def run(t):
        try:
            start.wait()
            work(t)
        except BaseException as error:        # noqa: BLE001 (handed to the caller)
            errors.append(error)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(count)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    return errors
