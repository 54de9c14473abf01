"""PostgreSQL only: the LISTEN waker sleeps on its connection and a stop pipe together,
and every driver error of its connection reaches it typed (issue 10, items 7 and 8)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest

from lirun.errors import DatabaseConnectionLostError
from lirun.store import Store, open_store
from lirun.store.connector import NOTIFY_CHANNEL
from lirun.wait.wake import ListenWaker
from support.pgcluster import PgCluster

pytestmark = pytest.mark.postgres


class Stop:
    """A stop request with a pipe, as `li wait` passes its signal trap; counts its looks."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        self.requested = False
        self.looks = 0

    def __call__(self) -> bool:
        self.looks += 1
        return self.requested

    def fileno(self) -> int:
        return self.read_fd

    def request(self) -> None:
        self.requested = True
        os.write(self.write_fd, b"\0")

    def close(self) -> None:
        os.close(self.read_fd)
        os.close(self.write_fd)


@pytest.fixture
def stop() -> Iterator[Stop]:
    request = Stop()
    yield request
    request.close()


@pytest.fixture
def quiet_store(pg_cluster: PgCluster) -> Iterator[Store]:
    """A store on the throwaway cluster, where no other test run sends notifications
    (on a shared server, every terminal write anywhere wakes every listener)."""
    store = open_store(pg_cluster.new_url())
    try:
        yield store
    finally:
        store.close()


def test_an_idle_waker_does_not_wake_to_look_for_a_stop(quiet_store: Store, stop: Stop) -> None:
    waker = ListenWaker(quiet_store.connector, lambda: {"nothing"})
    try:
        start = time.monotonic()
        assert waker.wait(1.0, stop) is False
        assert time.monotonic() - start >= 0.9
    finally:
        waker.close()
    assert stop.looks <= 3  # it used to look every 50 ms: twenty times a second


def test_the_stop_pipe_wakes_a_sleeping_waker_at_once(pg_store: Store, stop: Stop) -> None:
    waker = ListenWaker(pg_store.connector, lambda: {"nothing"})
    timer = threading.Timer(0.2, stop.request)
    try:
        start = time.monotonic()
        timer.start()
        assert waker.wait(30.0, stop) is False
        assert time.monotonic() - start < 5
    finally:
        timer.cancel()
        waker.close()


def test_a_terminal_commit_wakes_the_waker(pg_store: Store, stop: Stop) -> None:
    sid = pg_store.sessions.create(id="listened").id
    waker = ListenWaker(pg_store.connector, lambda: {sid})

    def finish() -> None:
        pg_store.update_status(
            "session", sid, new_status="completed", reason_code="run.completed.ok",
            expected_statuses={"running"}, extra_fields={"exit_code": 0},
        )  # fmt: skip

    timer = threading.Timer(0.2, finish)
    try:
        start = time.monotonic()
        timer.start()
        assert waker.wait(30.0, stop) is True
        assert time.monotonic() - start < 5
    finally:
        timer.cancel()
        waker.close()


def test_a_lost_listening_connection_raises_a_typed_error(pg_store: Store) -> None:
    from psycopg import Error as DriverError

    listener = pg_store.connector.listen(NOTIFY_CHANNEL)  # type: ignore[attr-defined]
    listener._conn.close()  # what a server restart leaves behind
    for step in (listener.take, listener.fileno):
        with pytest.raises(DatabaseConnectionLostError) as info:
            step()
        assert isinstance(info.value.__cause__, DriverError)
    listener.close()


def test_the_waker_listens_again_after_its_connection_is_lost(pg_store: Store, stop: Stop) -> None:
    waker = ListenWaker(pg_store.connector, lambda: {"nothing"})
    try:
        waker._listener._conn.close()
        assert waker.wait(1.0, stop) is True  # lost: the waiter re-reads at once
        assert waker._listener is None
        assert waker.wait(5.0, stop) is True  # listening again after one backoff step
        assert waker._listener is not None
        assert waker.wait(0.3, stop) is False  # and quiet again
    finally:
        waker.close()
