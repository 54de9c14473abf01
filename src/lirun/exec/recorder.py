"""A serial background writer, so reading a child's pipes never waits on the database.

Messages and engine-uid updates arrive in stream order and are written in that order by
one thread. ``flush`` waits until everything submitted is written: teardown reads the
messages back (the evidence gate), so it flushes first.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from types import TracebackType

from lirun.exec.warnings import warn_once_per_type

__all__ = ["Recorder"]

_STOP = object()
# Backpressure: a stream faster than the database waits here (and so does the child, on
# its pipe) instead of growing an unbounded queue.
MAX_PENDING = 10_000


class Recorder:
    """``with Recorder() as rec: rec.submit(lambda: store.append_message(...))``.

    A failed write is reported (once per kind of error) and skipped: losing one message
    row must not stop supervision. ``failures`` counts them.
    """

    def __init__(self, *, on_error: Callable[[BaseException], None] | None = None) -> None:
        self._queue: queue.Queue[object] = queue.Queue(maxsize=MAX_PENDING)
        self._on_error = on_error or warn_once_per_type("could not record a stream message ({exc})")
        self._thread: threading.Thread | None = None
        self.failures = 0
        self.written = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="lirun-recorder", daemon=True)
        self._thread.start()

    def submit(self, write: Callable[[], object]) -> None:
        if self._thread is None:
            raise RuntimeError("Recorder.submit before start()")
        self._queue.put(write)

    def flush(self) -> None:
        """Block until every submitted write has run."""
        if self._thread is not None:
            self._queue.join()

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Recorder:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                item()  # type: ignore[operator]
                self.written += 1
            except Exception as exc:
                self.failures += 1
                self._on_error(exc)
            finally:
                self._queue.task_done()
