"""Status writes through a lost connection or a held lock (issue 8, item 2)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from lirun.errors import DatabaseBusyError, DatabaseConnectionLostError
from lirun.store import Store, open_store
from lirun.store.retry import backoff, retry_write, write_retry_seconds
from support.pg import make_pg_url
from support.storekit import assert_linear, row_of, write_lock_held


def _finish(store: Store, entity_id: str, **kwargs: Any) -> bool:
    return store.update_status(
        "session",
        entity_id,
        new_status="completed",
        reason_code="run.completed.ok",
        expected_statuses={"running"},
        extra_fields={"exit_code": 0},
        **kwargs,
    )


@contextmanager
def _commit_then_lose_the_answer(store: Store) -> Iterator[list[int]]:
    """The next write commits, then its caller hears a dropped connection (an ambiguous
    COMMIT); later writes are untouched."""
    real = store.connector.write
    calls = [0]

    @contextmanager
    def write(**kwargs: Any) -> Iterator[Any]:
        calls[0] += 1
        with real(**kwargs) as tx:
            yield tx
        if calls[0] == 1:
            raise DatabaseConnectionLostError("server closed the connection unexpectedly")

    store.connector.write = write  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        store.connector.write = real  # type: ignore[method-assign]


def test_a_retry_after_an_ambiguous_commit_writes_history_once(
    store: Store, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="lirun.store.retry")
    store.sessions.create(id="s-1")
    with _commit_then_lose_the_answer(store) as calls:
        assert _finish(store, "s-1") is True
    assert calls[0] == 2  # it did retry, and the retry found the landed transition
    history = assert_linear(store, "session", "s-1")
    assert [t.status for t in history] == ["running", "completed"]
    said = caplog.text  # the library logs; it writes nothing to stderr itself
    assert said.count("lost the database") == 1
    assert said.count("is back") == 1
    assert capsys.readouterr().err == ""


def test_a_held_lock_past_the_bound_raises_busy(
    store: Store, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.sessions.create(id="s-1")
    monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "1")
    with write_lock_held(db_url):
        started = time.monotonic()
        with pytest.raises(DatabaseBusyError):
            _finish(store, "s-1")
        elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 10, elapsed
    assert row_of(store, "session", "s-1")["status"] == "running"


def test_a_lock_released_within_the_bound_lets_the_write_land(
    store: Store, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    store.sessions.create(id="s-1")
    monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "20")
    with write_lock_held(db_url) as holder:
        assert holder.stdin is not None
        threading.Timer(1.0, holder.stdin.close).start()
        assert _finish(store, "s-1") is True
    assert [t.status for t in assert_linear(store, "session", "s-1")] == [
        "running",
        "completed",
    ]


@pytest.fixture
def pg_only_url() -> Iterator[str]:
    for url in make_pg_url():
        yield f"{url}&application_name=lirun-test-victim-{os.getpid()}"


@pytest.mark.postgres
def test_postgres_connections_dropped_by_the_server_are_replaced(pg_only_url: str) -> None:
    import psycopg

    from support.pg import PG_URL

    store = open_store(pg_only_url)
    try:
        store.sessions.create(id="s-1")
        assert store.get_entity("session", "s-1") is not None  # opens the read connection
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                [f"lirun-test-victim-{os.getpid()}"],
            ).fetchall()
        assert len(killed) == 2  # the store's write and read connections
        assert row_of(store, "session", "s-1")["status"] == "running"
        assert _finish(store, "s-1") is True
        assert [t.status for t in store.list_transitions("session", "s-1")] == [
            "running",
            "completed",
        ]
    finally:
        store.close()


def test_the_retry_bound_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LIRUN_WRITE_RETRY_SECONDS", raising=False)
    assert write_retry_seconds() == 30.0
    for raw, expected in (("2.5", 2.5), ("-1", 0.0), ("nan", 30.0), ("soon", 30.0)):
        monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", raw)
        assert write_retry_seconds() == expected


def test_backoff_doubles_from_a_tenth_to_two_seconds() -> None:
    delays = [backoff(None)]
    for _ in range(6):
        delays.append(backoff(delays[-1]))
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]


def test_retry_write_gives_up_with_the_last_error_at_the_bound(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "3")
    caplog.set_level(logging.INFO, logger="lirun.store.retry")
    now = [0.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    def attempt(wait: float, tries: int) -> None:
        raise DatabaseConnectionLostError(f"down (try {tries})")

    with pytest.raises(DatabaseConnectionLostError, match="try 5"):
        retry_write(attempt, where="db", sleep=sleep, clock=lambda: now[0])
    assert sleeps == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.5])
    notes = [(r.levelname, r.event, r.getMessage()) for r in caplog.records]  # type: ignore[attr-defined]
    assert [(level, event) for level, event, _ in notes] == [
        ("INFO", "db.lost"),
        ("WARNING", "db.gave_up"),
    ]
    assert "lost the database" in notes[0][2]
    assert "gave up" in notes[1][2]
