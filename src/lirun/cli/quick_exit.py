"""How ``li`` ends after a supervised execution: at once, without the interpreter's teardown.

When ``li run`` (``li agent``, ``li show run``) has its exit code, everything that must
outlive it is done: the outcome is written and the database closed (its last checkpoint
made), what the run left running was ended, its cgroup removed and the guard told. What is
left is the interpreter's teardown, which frees every module's objects one by one: some
15 ms of CPU after ``li run -- true`` (several times that on a busy machine) that nobody
needs. :func:`end` runs the ``atexit`` handlers, flushes stdout and stderr and ends the
process with ``os._exit``. It returns (the ordinary exit follows) when a thread other than
a daemon still runs (the interpreter would wait for it; a daemon thread it would not) or
a stream cannot be flushed (the ordinary exit reports that as it always did).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

__all__ = ["end"]


def end(code: int) -> None:
    """End this process now with ``code``, unless the ordinary exit has work to do."""
    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    if not _flushed():
        return
    atexit._run_exitfuncs()  # logging's flush, and any handler a library registered
    _flushed()  # what they wrote
    os._exit(code)


def _flushed() -> bool:
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return False
    return True
