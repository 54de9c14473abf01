"""Live updates: ONE watcher per server reads the history's new rows and pushes them to
every browser over Server-Sent Events; browsers never make the server poll for them.

The watcher sleeps on the same wake-ups as ``li wait`` (``wait/wake.py``): LISTEN on
PostgreSQL (every transition is announced), the change token and a directory watch on
SQLite. After each wake-up it reads the rows after its cursor, once, for everyone.

The cursor is the history's sequence number (migration 0007). On PostgreSQL a number is
taken at insert and a later one can commit first, so the cursor is a low-water mark: it
passes a missing number only when that number arrives or after ``GAP_WAIT_SECONDS``
(a rolled-back write leaves a hole for ever). Events carry the low-water mark as their
id, so a browser that reconnects with ``Last-Event-ID`` is sent everything it might have
missed (and perhaps a few it saw; pages treat an event as "look again").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lirun.errors import LirunError
from lirun.schedules.worker import live_workers
from lirun.store import open_store
from lirun.store.rows import HistoryEventRow
from lirun.wait.wake import make_waker

GAP_WAIT_SECONDS = 2.0
IDLE_WAIT_SECONDS = 1.0
GAP_RECHECK_SECONDS = 0.1
BATCH = 500
QUEUE_LIMIT = 1000
# One watcher per server: it can look at SQLite's change token far more often than the
# many waiters of `li wait` do (a look costs microseconds).
SQLITE_CHECK_SECONDS = 0.005
# Workers come and go without a transition (a worker killed -9 just stops its heartbeat):
# the watcher looks at which are live this often and tells browsers when that changes.
WORKERS_CHECK_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Change:
    """One history row as browsers receive it; ``cursor`` is the low-water mark after it."""

    seq: int
    cursor: int
    entity_type: str
    entity_id: str
    status: str
    previous_status: str | None
    reason_code: str | None
    at: float | None
    parent_id: str | None = None

    def to_sse(self) -> str:
        data = {
            "seq": self.seq,
            "type": self.entity_type,
            "id": self.entity_id,
            "status": self.status,
            "previous_status": self.previous_status,
            "reason_code": self.reason_code,
            "at": self.at,
            "parent": self.parent_id,
        }
        return f"id: {self.cursor}\nevent: transition\ndata: {json.dumps(data)}\n\n"


@dataclass(frozen=True, slots=True)
class Notice:
    """The watcher's own state for browsers: ``stale`` (it cannot read the database: the
    page may be out of date), ``recovered`` (it can again: look again) or ``workers``
    (the set of live workers changed)."""

    kind: str

    def to_sse(self) -> str:
        return f"event: {self.kind}\ndata: {{}}\n\n"


@dataclass(frozen=True, slots=True)
class TeamNotice:
    """A team has new messages (they make no history row): pages showing it look again."""

    team_id: str

    def to_sse(self) -> str:
        return f"event: team\ndata: {json.dumps({'id': self.team_id})}\n\n"


Item = Change | Notice | TeamNotice | None


class SeqTracker:
    """The low-water mark over sequence numbers seen (pure: fed rows and the time)."""

    def __init__(self, cursor: int, gap_wait: float = GAP_WAIT_SECONDS) -> None:
        self.cursor = cursor
        self._above: set[int] = set()
        self._gap_since: float | None = None
        self._gap_wait = gap_wait

    @property
    def waiting(self) -> bool:
        """True while a missing number holds the cursor back."""
        return bool(self._above)

    def accept(self, seqs: Iterable[int], now: float) -> list[int]:
        """The new numbers among ``seqs`` (in order); the cursor advances past what is
        contiguous, and past a gap older than ``gap_wait``."""
        fresh = sorted(s for s in set(seqs) if s > self.cursor and s not in self._above)
        self._above.update(fresh)
        self.advance(now)
        return fresh

    def advance(self, now: float) -> None:
        while self._above:
            if self.cursor + 1 in self._above:
                self._above.discard(self.cursor + 1)
                self.cursor += 1
                self._gap_since = None
                continue
            if self._gap_since is None:
                self._gap_since = now
            if now - self._gap_since < self._gap_wait:
                return
            self.cursor = min(self._above) - 1  # give up on the hole
            self._gap_since = None


def change_of(row: HistoryEventRow, cursor: int) -> Change:
    return Change(
        seq=int(row.seq),
        cursor=cursor,
        entity_type=row.entity_type,
        entity_id=row.entity_id,
        status=row.status,
        previous_status=row.previous_status,
        reason_code=row.reason_code,
        at=row.created_at,
        parent_id=row.parent_id,
    )


class _Everything:
    """The watcher's interest: every id."""

    def __contains__(self, item: object) -> bool:
        return True

    def __iter__(self) -> Any:
        return iter(())

    def __len__(self) -> int:
        return 0


class Hub:
    """The one watcher (a thread with its own Store) and the browsers subscribed to it."""

    def __init__(self, db_url: str | None) -> None:
        self._url = db_url
        self._subscribers: set[asyncio.Queue[Item]] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.cursor = 0
        self.ready = threading.Event()
        self.error: str | None = None
        self._live_workers: frozenset[str] | None = None
        self._team_counts: dict[str, int] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._thread = threading.Thread(target=self._run, name="lirun-ui-watcher", daemon=True)
        self._thread.start()
        self.ready.wait(10)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            subscribers = list(self._subscribers)
        for queue in subscribers:
            self._deliver(queue, None)

    def end_streams(self) -> None:
        """End every browser's stream now (on the event loop's thread: server shutdown)."""
        with self._lock:
            subscribers = list(self._subscribers)
            self._subscribers.clear()
        for queue in subscribers:
            with contextlib.suppress(asyncio.QueueEmpty):
                while queue.qsize() >= QUEUE_LIMIT:
                    queue.get_nowait()
            queue.put_nowait(None)

    def subscribe(self) -> asyncio.Queue[Item]:
        queue: asyncio.Queue[Item] = asyncio.Queue(QUEUE_LIMIT)
        with self._lock:
            self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Item]) -> None:
        with self._lock:
            self._subscribers.discard(queue)

    def _deliver(self, queue: asyncio.Queue[Item], change: Item) -> None:
        def put() -> None:
            try:
                queue.put_nowait(change)
            except asyncio.QueueFull:  # a stalled browser: end its stream, it reconnects
                self.unsubscribe(queue)
                with contextlib.suppress(asyncio.QueueEmpty):
                    queue.get_nowait()
                queue.put_nowait(None)

        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(put)

    def publish(self, changes: list[Change] | list[Notice] | list[TeamNotice]) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for change in changes:
            for queue in subscribers:
                self._deliver(queue, change)

    def _run(self) -> None:
        try:
            # Read-only: a read fails at once when the server is away (a writer's reads
            # wait out an outage), so browsers hear "stale" promptly.
            store = open_store(self._url, readonly=True)
        except LirunError as exc:
            self.error = str(exc)
            self.ready.set()
            return
        try:
            waker = make_waker(
                store.connector,
                _Everything,
                terminal_only=False,
                check_seconds=SQLITE_CHECK_SECONDS,
            )
            tracker = SeqTracker(store.ui.last_transition_seq())
            self.cursor = tracker.cursor
            self._check_workers(store)  # before ready: a worker from now on is news
            self.ready.set()
            try:
                self._watch(store, waker, tracker)
            finally:
                waker.close()
        finally:
            self.ready.set()
            store.close()

    def _check_workers(self, store: Any) -> None:
        """Publish ``workers`` when the set of live workers is not the one seen last."""

        try:
            live = frozenset(w.worker.id for w in live_workers(store, time.time()))
        except LirunError:
            return  # the transitions' read says so
        if self._live_workers is not None and live != self._live_workers:
            self.publish([Notice("workers")])
        self._live_workers = live

    def _check_teams(self, store: Any) -> None:
        """Publish ``team`` for each team whose message count moved since the last look."""
        try:
            counts = store.teams.message_counts()
        except LirunError:
            return  # the transitions' read says so
        if self._team_counts is not None:
            moved = [t for t, n in counts.items() if self._team_counts.get(t, 0) != n]
            if moved:
                self.publish([TeamNotice(t) for t in moved])
        self._team_counts = counts

    def _watch(self, store: Any, waker: Any, tracker: SeqTracker) -> None:
        next_workers = time.monotonic() + WORKERS_CHECK_SECONDS
        while not self._stop.is_set():
            if time.monotonic() >= next_workers:
                self._check_workers(store)
                next_workers = time.monotonic() + WORKERS_CHECK_SECONDS
            try:
                rows = store.ui.transitions_since(tracker.cursor, limit=BATCH)
            except LirunError as exc:
                if self.error is None:
                    self.publish([Notice("stale")])
                self.error = str(exc)
                rows = []
            else:
                if self.error is not None:
                    self.publish([Notice("recovered")])
                self.error = None
            by_seq = {int(r.seq): r for r in rows}
            fresh = tracker.accept(by_seq, time.monotonic())
            self.cursor = tracker.cursor
            self.publish([change_of(by_seq[s], tracker.cursor) for s in fresh])
            self._check_teams(store)
            if len(rows) >= BATCH:
                continue  # more are waiting
            wait = GAP_RECHECK_SECONDS if tracker.waiting else IDLE_WAIT_SECONDS
            wait = max(0.0, min(wait, next_workers - time.monotonic()))
            waker.wait(wait, self._stop.is_set)
            waker.after_read(True)
