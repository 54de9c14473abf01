"""A background thread that proves an execution's owner is alive (design.md §4.6).

It sets ``heartbeat_at`` every interval while the child runs. A failed beat is reported
once and retried at the next tick: a database hiccup must not stop supervision, and a
stale heartbeat is exactly what a reaper should see if the hiccup lasts. With a
``fence`` (``exec/fence.py``), each successful beat renews it: an owner whose beats stop
has its process tree killed before its lease lapses.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

from lirun.exec.fence import Fence
from lirun.exec.warnings import warn_once_per_type

__all__ = ["Heartbeat"]


class Heartbeat:
    """``with Heartbeat(lambda: store.heartbeat(run_id), interval): ...``.

    ``beat`` runs in the thread; the Store's connector is lock-guarded, so sharing the
    execution's handle is safe. ``beats`` counts successful beats (tests read it).
    """

    def __init__(
        self,
        beat: Callable[[], None],
        interval: float,
        *,
        on_error: Callable[[BaseException], None] | None = None,
        fence: Fence | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"heartbeat interval must be positive, got {interval!r}")
        self._beat = beat
        self.interval = interval
        self._on_error = on_error or warn_once_per_type(
            "heartbeat failed ({exc}); will keep trying"
        )
        self.fence = fence  # fed after each beat: the beat renews the owner's lease
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.beats = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="lirun-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Heartbeat:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            started = time.monotonic()
            try:
                self._beat()
            except Exception as exc:
                self._on_error(exc)
            else:
                self.beats += 1
                if self.fence is not None:
                    self.fence.renewed(started)
