"""Which workers are live: a heartbeat within the worker's lease. Its own small module
so ``li submit`` can tell whether any worker will run what it queued without loading the
worker's run path (``schedules.worker`` re-exports both names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lirun.store import Store
from lirun.store.rows import WorkerRow


@dataclass(frozen=True)
class LiveWorker:
    """A worker whose heartbeat is within its lease, and how old that heartbeat is."""

    worker: WorkerRow
    heartbeat_age: float

    def as_dict(self) -> dict[str, Any]:
        """The worker's row with ``heartbeat_age``, as ``li worker status --json`` shows it."""
        return {**self.worker.as_dict(), "heartbeat_age": self.heartbeat_age}


def live_workers(store: Store, now: float) -> list[LiveWorker]:
    """Workers whose heartbeat is within their lease, with ``heartbeat_age``."""
    found = []
    for worker in store.workers.list_live(since=now - 3600):
        age = now - worker.heartbeat_at
        if age <= (worker.lease_seconds or 60.0):
            found.append(LiveWorker(worker, round(age, 3)))
    return found
