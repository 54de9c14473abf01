"""PostgreSQL only: every transition (creation included) is announced with pg_notify, on
commit only, saying whether it is terminal (`li wait` wakes for those alone).

SQLite has no NOTIFY (waiters there watch ``PRAGMA data_version``), so these tests are
backend-specific by nature and use a PostgreSQL database alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from lirun.store import Store
from lirun.store.connector import NOTIFY_CHANNEL
from support.storekit import create_entity

pytestmark = pytest.mark.postgres


@pytest.fixture
def listener(pg_store: Store) -> Iterator[Any]:
    """The connector's own LISTEN connection (each driver's ``Listener``)."""
    listening = pg_store.connector.listen(NOTIFY_CHANNEL)  # type: ignore[attr-defined]
    yield listening
    listening.close()


def received(listener: Any, entity_id: str, timeout: float = 0.5) -> list[dict[str, Any]]:
    """Notifications about ``entity_id`` (other tests share the channel) within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        for payload in map(json.loads, listener.take()):
            if payload.get("id") == entity_id:
                return [payload]
        left = deadline - time.monotonic()
        if left <= 0:
            return []
        listener.wait_readable(None, left)


def note(entity_type: str, entity_id: str, status: str, terminal: bool) -> dict[str, Any]:
    return {"type": entity_type, "id": entity_id, "status": status, "terminal": terminal}


def test_terminal_transition_notifies(pg_store: Store, listener: Any) -> None:
    sid = create_entity(pg_store, "session")
    assert received(listener, sid) == [note("session", sid, "running", False)]
    pg_store.update_status("session", sid, new_status="failed", reason_code="run.failed.exception")
    assert received(listener, sid) == [note("session", sid, "failed", True)]


def test_every_transition_notifies_creation_included(pg_store: Store, listener: Any) -> None:
    rid = create_entity(pg_store, "schedule_run")
    assert received(listener, rid) == [note("schedule_run", rid, "queued", False)]
    pg_store.update_status(
        "schedule_run", rid, new_status="running", reason_code="schedule.running.started"
    )
    assert received(listener, rid) == [note("schedule_run", rid, "running", False)]
    pg_store.update_status(
        "schedule_run", rid, new_status="timed_out", reason_code="schedule.timed_out.deadline"
    )
    assert received(listener, rid) == [note("schedule_run", rid, "timed_out", True)]


class WatchingTx:
    """A write transaction that calls ``after_notify`` right after pg_notify has run."""

    def __init__(self, tx: Any, after_notify: Callable[[], None]) -> None:
        self._tx = tx
        self._after_notify = after_notify

    def execute(self, sql: str, params: Any = None) -> int:
        return int(self._tx.execute(sql, params))

    def query(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        rows = list(self._tx.query(sql, params))
        if "pg_notify" in sql:
            self._after_notify()
        return rows


def watch_notify(
    store: Store, monkeypatch: pytest.MonkeyPatch, after_notify: Callable[[], None]
) -> None:
    real_write = store.connector.write

    @contextmanager
    def watching_write(**kwargs: Any) -> Iterator[WatchingTx]:
        with real_write(**kwargs) as tx:
            yield WatchingTx(tx, after_notify)

    monkeypatch.setattr(store.connector, "write", watching_write)


def test_notification_arrives_only_after_commit(
    pg_store: Store, listener: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the status transaction is open after pg_notify, the listener hears nothing."""
    sid = create_entity(pg_store, "session")
    assert received(listener, sid) == [note("session", sid, "running", False)]
    heard_before_commit: list[list[dict[str, Any]]] = []
    watch_notify(
        pg_store,
        monkeypatch,
        lambda: heard_before_commit.append(received(listener, sid, timeout=0.3)),
    )
    assert pg_store.update_status(
        "session", sid, new_status="completed", reason_code="run.completed.ok"
    )
    assert heard_before_commit == [[]]
    assert received(listener, sid) == [note("session", sid, "completed", True)]


def test_rolled_back_transition_never_notifies(
    pg_store: Store, listener: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = create_entity(pg_store, "session")
    assert received(listener, sid) == [note("session", sid, "running", False)]
    notified: list[bool] = []

    def fail() -> None:
        notified.append(True)
        raise RuntimeError("failure after pg_notify")

    watch_notify(pg_store, monkeypatch, fail)
    with pytest.raises(RuntimeError, match="after pg_notify"):
        pg_store.update_status(
            "session", sid, new_status="completed", reason_code="run.completed.ok"
        )
    assert notified == [True]
    assert received(listener, sid, timeout=0.5) == []
    assert pg_store.get_entity("session", sid)["status"] == "running"  # type: ignore[index]
