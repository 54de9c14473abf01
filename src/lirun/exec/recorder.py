"""A serial background writer, so reading a child's pipes never waits on the database.

Messages and engine-uid updates arrive in stream order and are written in that order by
one thread. ``flush`` waits until everything submitted is written: teardown reads the
messages back (the evidence gate), so it flushes first.

Memory is bounded: a stream faster than the database waits for room (and so does the
child, on its pipe) once :data:`MAX_PENDING` writes or :data:`MAX_PENDING_BYTES` of
declared payload are queued, so what is pending never grows with the stream.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from types import TracebackType

from lirun.exec.warnings import warn_once_per_type

__all__ = ["Recorder"]

_Write = tuple[Callable[[], object], int]  # the write and the bytes it holds
# Backpressure: a stream faster than the database waits here (and so does the child, on
# its pipe) instead of growing an unbounded queue. A few hundred writes absorb a burst;
# ten thousand 20 KB tool results once queued 200 MB behind a slow database.
MAX_PENDING = 256
# And by size, for writes that say theirs: one write larger than this still goes, alone.
MAX_PENDING_BYTES = 8 * 1024 * 1024


class Recorder:
    """``with Recorder() as rec: rec.submit(lambda: store.append_message(...), size=n)``.

    A failed write is reported (once per kind of error) and skipped: losing one message
    row must not stop supervision. ``failures`` counts them.
    """

    def __init__(self, *, on_error: Callable[[BaseException], None] | None = None) -> None:
        # None is the stop mark.
        self._queue: queue.Queue[_Write | None] = queue.Queue(maxsize=MAX_PENDING)
        self._on_error = on_error or warn_once_per_type("could not record a stream message ({exc})")
        self._thread: threading.Thread | None = None
        self._room = threading.Condition()
        self._pending_bytes = 0
        self.failures = 0
        self.written = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="lirun-recorder", daemon=True)
        self._thread.start()

    def submit(self, write: Callable[[], object], *, size: int = 0) -> None:
        """Queue ``write``; ``size`` is what it holds (a message's length), counted against
        :data:`MAX_PENDING_BYTES`. Blocks while the queue is full."""
        if self._thread is None:
            raise RuntimeError("Recorder.submit before start()")
        if size > 0:
            with self._room:
                self._room.wait_for(self._has_room_for(size))
                self._pending_bytes += size
        self._queue.put((write, max(size, 0)))

    def _has_room_for(self, size: int) -> Callable[[], bool]:
        def room() -> bool:
            pending = self._pending_bytes
            return pending == 0 or pending + size <= MAX_PENDING_BYTES

        return room

    @property
    def pending_bytes(self) -> int:
        return self._pending_bytes

    def flush(self) -> None:
        """Block until every submitted write has run."""
        if self._thread is not None:
            self._queue.join()

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
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
            if item is None:
                self._queue.task_done()
                return
            write, size = item
            try:
                write()
                self.written += 1
            except Exception as exc:
                self.failures += 1
                self._on_error(exc)
            finally:
                if size:
                    with self._room:
                        self._pending_bytes -= size
                        self._room.notify_all()
                self._queue.task_done()
