"""Live updates: one watcher per server turns new history rows into events for every
browser; the history's sequence numbers (migration 0007) let a browser that reconnects
catch up from its Last-Event-ID. Both backends."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import pytest

from lirun.store import Store, open_store
from lirun.ui.events import Hub, SeqTracker
from support.uikit import serve


@pytest.mark.parametrize(
    ("start", "batches", "cursors"),
    [
        (0, [[1, 2, 3]], [3]),  # contiguous: the cursor follows
        (5, [[6, 8], [7]], [6, 8]),  # 7 commits after 8: the cursor waits, then passes both
        (0, [[2], [2, 1]], [0, 2]),  # a repeat is not new
    ],
)
def test_the_cursor_is_a_low_water_mark(
    start: int, batches: list[list[int]], cursors: list[int]
) -> None:
    tracker = SeqTracker(start, gap_wait=10)
    seen = []
    for batch in batches:
        seen.append(tracker.accept(batch, now=0.0))
        assert tracker.cursor == cursors[len(seen) - 1]
    assert sorted(s for b in seen for s in b) == sorted({s for b in batches for s in b})


def test_a_hole_that_never_fills_is_passed_after_the_gap_wait() -> None:
    tracker = SeqTracker(0, gap_wait=2.0)
    assert tracker.accept([1, 3, 4], now=100.0) == [1, 3, 4]
    assert tracker.cursor == 1
    assert tracker.waiting
    tracker.advance(now=101.0)
    assert tracker.cursor == 1
    tracker.advance(now=102.5)  # a rolled-back write left 2 unused
    assert tracker.cursor == 4
    assert not tracker.waiting


@contextmanager
def running_hub(db_url: str) -> Iterator[tuple[Hub, asyncio.AbstractEventLoop]]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    hub = Hub(db_url)
    hub.start(loop)
    assert hub.error is None
    try:
        yield hub, loop
    finally:
        hub.stop()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def next_change(loop: asyncio.AbstractEventLoop, queue: Any, timeout: float = 5.0) -> Any:
    return asyncio.run_coroutine_threadsafe(asyncio.wait_for(queue.get(), timeout), loop).result()


def test_one_watcher_pushes_every_transition_to_every_subscriber(store: Store, db_url: str) -> None:
    with running_hub(db_url) as (hub, loop):
        first, second = hub.subscribe(), hub.subscribe()
        started = time.monotonic()
        store.sessions.create(id="live-1", owner_pid=None)
        store.update_status(
            "session", "live-1", new_status="failed", reason_code="run.failed.exception"
        )
        for queue in (first, second):
            created, ended = next_change(loop, queue), next_change(loop, queue)
            assert (created.entity_id, created.status, created.previous_status) == (
                "live-1",
                "running",
                None,
            )
            assert (ended.status, ended.reason_code) == ("failed", "run.failed.exception")
            assert ended.seq == created.seq + 1
            assert ended.cursor >= created.cursor
        assert time.monotonic() - started < 2.0  # a wake-up, not a poll of seconds


def test_the_history_is_numbered_in_commit_order(store: Store) -> None:
    before = store.ui.last_transition_seq()
    store.sessions.create(id="n-1", owner_pid=None)
    store.update_status("session", "n-1", new_status="completed", reason_code="run.completed.ok")
    rows = store.ui.transitions_since(before)
    assert [r.seq for r in rows] == [before + 1, before + 2]
    assert [r.status for r in rows] == ["running", "completed"]
    assert store.ui.transitions_since(before + 1)[0].status == "completed"


def test_each_change_names_its_parent_record(store: Store) -> None:
    """A leg's changes name its flow, a play's its show: a page drawn before the leg
    started still hears about it."""
    before = store.ui.last_transition_seq()
    inv = store.invocations.create(skill="flow")
    store.sessions.create(id="leg-1", owner_pid=None, invocation_id=inv.id)
    show = store.shows.create(topic="t")
    play = store.shows.create_play(show_id=show.id, name="p")
    parents = {r.entity_id: r.parent_id for r in store.ui.transitions_since(before)}
    assert parents == {
        inv.id: None,
        "leg-1": inv.id,
        show.id: None,
        play.id: show.id,
    }


def sse_events(
    base: str, last_event_id: str | None, count: int
) -> list[tuple[str, str, dict[str, Any]]]:
    """The first ``count`` events of /events (id, event name, data)."""
    parts = urlsplit(base)
    assert parts.hostname is not None
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    conn.request("GET", "/events", headers=headers)
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("content-type", "").startswith("text/event-stream")
    events: list[tuple[str, str, dict[str, Any]]] = []
    fields: dict[str, str] = {}
    try:
        while len(events) < count:
            line = response.fp.readline().decode().rstrip("\n")
            if line == "":
                if "event" in fields:
                    events.append(
                        (fields.get("id", ""), fields["event"], json.loads(fields["data"]))
                    )
                fields = {}
            elif not line.startswith(":"):
                key, _, value = line.partition(": ")
                fields[key] = value
    finally:
        conn.close()
    return events


def test_a_reconnecting_browser_catches_up_from_its_last_event_id(
    store: Store, db_url: str
) -> None:
    with serve(db_url) as base:
        hello = sse_events(base, None, 1)
        assert hello[0][1] == "hello"
        last_seen = hello[0][0]
        # While the browser is away, a run starts and ends.
        store.sessions.create(id="while-away", owner_pid=None)
        store.update_status(
            "session", "while-away", new_status="completed", reason_code="run.completed.ok"
        )
        missed = sse_events(base, last_seen, 2)
        assert [(e[1], e[2]["id"], e[2]["status"]) for e in missed] == [
            ("transition", "while-away", "running"),
            ("transition", "while-away", "completed"),
        ]
        assert int(missed[-1][0]) >= int(last_seen)


def test_a_reconnect_from_far_behind_is_told_to_reload(store: Store, db_url: str) -> None:
    import time as clock

    now = clock.time()
    store.sessions.import_many(
        {
            "id": f"bulk{i}",
            "status": "completed",
            "reason_code": "run.completed.ok",
            "created_at": now,
        }
        for i in range(1100)
    )
    with serve(db_url) as base:
        assert sse_events(base, "0", 1)[0][1] == "reset"


def test_the_watcher_reports_a_database_it_cannot_open(tmp_path: Any) -> None:
    loop = asyncio.new_event_loop()
    try:
        hub = Hub(str(tmp_path / "missing-dir" / "state.db"))
        hub.start(loop)
        assert hub.error is not None
        assert "missing-dir" in hub.error
    finally:
        loop.close()


@pytest.mark.slow
def test_browsers_hear_when_the_database_goes_away_and_comes_back(pg_cluster: Any) -> None:
    """PostgreSQL restarts under a running dashboard: every browser is told its page may
    be stale, then that it is current again, and changes flow as before."""
    from lirun.ui.events import Notice

    url = f"{pg_cluster.new_url()}&connect_timeout=2"
    open_store(url).close()  # migrated, as the dashboard's own Store leaves it
    with running_hub(url) as (hub, loop):
        queue = hub.subscribe()
        pg_cluster.stop()
        assert next_change(loop, queue, timeout=20) == Notice("stale")
        pg_cluster.start()
        assert next_change(loop, queue, timeout=30) == Notice("recovered")
        store = open_store(url)
        try:
            store.sessions.create(id="after-restart", owner_pid=None)
            change = next_change(loop, queue, timeout=10)
            assert (change.entity_id, change.status) == ("after-restart", "running")
        finally:
            store.close()


def test_browsers_hear_when_a_worker_comes_or_goes(
    store: Store, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker registers, stops, or dies (its heartbeat lapses) without a transition: the
    workers page listed a dead worker as live until some run changed."""
    from lirun.liveness import current_owner
    from lirun.ui import events

    monkeypatch.setattr(events, "WORKERS_CHECK_SECONDS", 0.05)
    with running_hub(db_url) as (hub, loop):
        queue = hub.subscribe()
        worker = store.workers.register(
            owner=current_owner(), concurrency=1, transport="local", lease_seconds=60
        )
        assert next_change(loop, queue, 3.0) == events.Notice("workers")
        store.workers.stop(worker)
        assert next_change(loop, queue, 3.0) == events.Notice("workers")
