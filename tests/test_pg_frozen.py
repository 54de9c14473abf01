"""A PostgreSQL server that freezes or drops a listener (issue 33, item 1): real `li`
processes against a throwaway cluster whose every process is SIGSTOPped (the kernel still
answers TCP: no keepalive or server-side timeout ends a wait, only the client's limit),
and a `li wait` whose LISTEN connection is killed with ``pg_terminate_backend``."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lirun.errors import DatabaseConnectionLostError
from lirun.store import open_store
from lirun.store.bounds import answer_by
from support.cli import li_command
from support.pgcluster import PgCluster
from support.waitkit import complete, finish, parse_line, read_line, start_waiter, wait_until_ready

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def url(pg_cluster: PgCluster) -> Iterator[str]:
    yield pg_cluster.new_url()


def _env(url: str, home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "LIRUN_HOME": str(home), "LIRUN_DB_URL": url, **extra}


def _started_run(env: dict[str, str], run_id: str, tmp_path: Path) -> subprocess.Popen[str]:
    """`li run` of a command that does not end, once its child runs (its row exists)."""
    ready = tmp_path / f"{run_id}.ready"
    run = subprocess.Popen(
        li_command("run", "--run-id", run_id, "--", "sh", "-c", f"touch {ready}; sleep 600"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not ready.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ready.exists(), run.communicate()[1]
    return run


def _stopped(run: subprocess.Popen[str]) -> str:
    run.terminate()
    _, err = run.communicate(timeout=60)
    return err


def test_li_wait_ends_at_its_timeout_on_a_frozen_server(
    pg_cluster: PgCluster, url: str, lirun_home: Path, tmp_path: Path
) -> None:
    env = _env(url, lirun_home)
    run = _started_run(env, "fz-1", tmp_path)
    try:
        started = time.monotonic()
        waiter = start_waiter(env, "--timeout", "5", "fz-1")
        wait_until_ready(waiter, settle=0.0)
        _listening(url)  # it waits: its listener is open, its first read done
        with pg_cluster.frozen():
            code, out, err = finish(waiter, timeout=30)
            took = time.monotonic() - started
    finally:
        run_err = _stopped(run)
    assert code == 3, err  # the documented exit code of a timeout
    assert took < 5 + 5, (took, err)
    assert out == ""
    said = [line for line in err.splitlines() if "did not answer" in line]
    assert len(said) == 1, err  # one line says the server did not answer
    assert "timed out; still waiting on fz-1 (running)" in err, err
    assert "Traceback" not in err + run_err, err + run_err


def test_li_status_ends_on_a_frozen_server(
    pg_cluster: PgCluster, url: str, lirun_home: Path
) -> None:
    env = _env(url, lirun_home, LIRUN_DB_CONNECT_TIMEOUT="2")
    open_store(url).close()
    with pg_cluster.frozen():
        started = time.monotonic()
        done = subprocess.run(
            li_command("status"), env=env, capture_output=True, text=True, timeout=60
        )
        took = time.monotonic() - started
    assert done.returncode != 0, done.stdout
    assert took < 2 + 5, (took, done.stderr)
    assert "did not answer" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_read_under_a_deadline_ends_on_a_frozen_server(pg_cluster: PgCluster, url: str) -> None:
    store = open_store(url, readonly=False)
    try:
        store.sessions.create(id="fz-2")
        with pg_cluster.frozen():
            started = time.monotonic()
            with answer_by(time.monotonic() + 1.0), pytest.raises(DatabaseConnectionLostError):
                store.waits.fetch_rows({"session": ["fz-2"]})
            took = time.monotonic() - started
        assert 1.0 < took < 1.0 + 3, took  # the deadline plus its grace, no reconnect
        assert [r.id for r in store.waits.fetch_rows({"session": ["fz-2"]})] == ["fz-2"]
    finally:
        store.close()


def _listener_pids(url: str) -> set[int]:
    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'lirun-wait:listen'"
        ).fetchall()
    return {int(row[0]) for row in rows}


def _listening(url: str) -> set[int]:
    """The pids of `li wait`'s listening connections, once there is one (a waiter opens
    it before its first read; a loaded machine may take seconds to get there)."""
    deadline = time.monotonic() + 15
    while not (pids := _listener_pids(url)) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # its first read follows at once
    return pids


def _kill_listener(url: str) -> int:
    (pid,) = _listening(url)
    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", [pid])
    return pid


def test_a_killed_listener_is_replaced_and_what_it_missed_is_read(
    url: str, lirun_home: Path
) -> None:
    store = open_store(url)
    try:
        store.sessions.create(id="lk-1")
        store.sessions.create(id="lk-2")
        # A long interval: a prompt line comes from a wake-up or the re-read after the
        # listener is back, never from polling.
        waiter = start_waiter(_env(url, lirun_home), "--interval", "60", "lk-1", "lk-2")
        try:
            wait_until_ready(waiter, settle=1.0)
            killed = _kill_listener(url)
            complete(store, "lk-1")  # ends while the waiter has no listener
            started = time.monotonic()
            first = parse_line(read_line(waiter, timeout=10))
            first_took = time.monotonic() - started
            deadline = time.monotonic() + 10
            while not (_listener_pids(url) - {killed}) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _listener_pids(url) - {killed}, "the listener was not opened again"
            complete(store, "lk-2")  # now its notification wakes the new listener
            started = time.monotonic()
            second = parse_line(read_line(waiter, timeout=10))
            second_took = time.monotonic() - started
        finally:
            code, _, err = finish(waiter)
    finally:
        store.close()
    assert (first["id"], first["status"]) == ("lk-1", "completed"), err
    assert (second["id"], second["status"]) == ("lk-2", "completed"), err
    assert first_took < 3, (first_took, err)
    assert second_took < 1, (second_took, err)
    assert code == 0, err
    assert "Traceback" not in err, err


def test_without_a_deadline_the_limit_follows_the_statement_timeout(
    pg_cluster: PgCluster, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker has no deadline: its waits end at the statement timeout plus the margin."""
    from lirun.store import bounds
    from lirun.store.postgres import PostgresConnector

    monkeypatch.setenv("LIRUN_DB_STATEMENT_TIMEOUT", "1")
    monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "0")
    monkeypatch.setattr(bounds, "ANSWER_MARGIN_SECONDS", 1.0)
    connector = PostgresConnector(url)
    try:
        with pg_cluster.frozen():
            started = time.monotonic()
            with (
                pytest.raises(DatabaseConnectionLostError, match="did not answer"),
                connector.write() as tx,
            ):
                tx.query("SELECT 1 AS one")
            took = time.monotonic() - started
        assert 2.0 <= took < 2.0 + 2, took
        assert connector.read("SELECT 1 AS one") == [{"one": 1}]  # a new connection
    finally:
        connector.close()


def test_the_queue_connections_are_bounded_too(pg_cluster: PgCluster, url: str) -> None:
    """The async class the worker's queue pool and listener use: a frozen server's query
    ends at the caller's deadline; waiting for notifications is not cut."""
    import asyncio
    import contextlib

    from lirun.store.pg_bounded import AsyncBoundedConnection

    async def _drain(notes: Any) -> None:
        async for _ in notes:
            pass

    async def scenario() -> tuple[float, float]:
        conn = await AsyncBoundedConnection.connect(url.split("?")[0], autocommit=True)
        try:
            await conn.execute("LISTEN lirun_frozen_test")
            started = time.monotonic()
            with contextlib.suppress(TimeoutError):  # as procrastinate's listener waits
                await asyncio.wait_for(_drain(conn.notifies()), 2.5)  # past the deadline
            listened = time.monotonic() - started
            with pg_cluster.frozen():
                started = time.monotonic()
                with answer_by(time.monotonic() + 0.5), pytest.raises(psycopg.OperationalError):
                    await conn.execute("SELECT 1")
                return listened, time.monotonic() - started
        finally:
            await conn.close()

    with answer_by(time.monotonic() + 0.5):
        listened, took = asyncio.run(scenario())
    assert listened >= 2.5
    assert 1.0 <= took < 3.0, took
