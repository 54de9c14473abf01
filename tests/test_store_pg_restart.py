"""A PostgreSQL server restarted under a run, a waiter and a status write (issue 8, item 2).

Each test starts its own throwaway cluster (tests/pgcluster.py) and restarts that one.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lirun.store import open_store
from support.cli import li_command
from support.pgcluster import Cluster, throwaway_cluster
from support.waitkit import finish, parse_line, read_line, start_waiter, wait_until_ready

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def pg_cluster() -> Iterator[Cluster]:
    yield from throwaway_cluster()


def _later(seconds: float, action: object) -> threading.Timer:
    timer = threading.Timer(seconds, action)  # type: ignore[arg-type]
    timer.start()
    return timer


def _env(cluster: Cluster, home: Path) -> dict[str, str]:
    return {**os.environ, "LIRUN_HOME": str(home), "LIRUN_DB_URL": cluster.url}


def test_a_status_write_waits_out_a_restart(
    pg_cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(pg_cluster.url)
    try:
        store.create_session(id="s-1")
        pg_cluster.stop()
        timer = _later(1.5, pg_cluster.start)
        applied = store.update_status(
            "session", "s-1", new_status="completed", reason_code="run.completed.ok"
        )
        timer.join()
        assert applied is True
        assert [t["status"] for t in store.list_transitions("session", "s-1")] == [
            "running",
            "completed",
        ]
    finally:
        store.close()
    err = capsys.readouterr().err
    assert err.count("lost the database") == 1 and err.count("is back") == 1, err


def test_a_status_write_gives_up_at_the_bound(
    pg_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lirun.errors import DatabaseConnectionLostError

    monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "1")
    store = open_store(pg_cluster.url)
    try:
        store.create_session(id="s-1")
        pg_cluster.stop()
        started = time.monotonic()
        with pytest.raises(DatabaseConnectionLostError):
            store.update_status(
                "session", "s-1", new_status="completed", reason_code="run.completed.ok"
            )
        assert time.monotonic() - started < 5
    finally:
        store.close()


@pytest.mark.parametrize("restart_after", [1.5, 3.0])
def test_li_run_keeps_its_outcome_across_a_restart(
    pg_cluster: Cluster, lirun_home: Path, restart_after: float
) -> None:
    # The server goes down while the child runs and comes back either before the child
    # ends (1.5 s) or after it, while teardown is writing (3 s).
    open_store(pg_cluster.url).close()
    env = _env(pg_cluster, lirun_home)
    run = subprocess.Popen(
        # It prints a reply: a silent `sleep` would rightly end completed_empty.
        li_command("run", "--run-id", "r-1", "--", "sh", "-c", "sleep 2; echo done"),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.8)
    pg_cluster.stop()
    time.sleep(restart_after)
    pg_cluster.start()
    _, err = run.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert run.returncode == 0, err
    store = open_store(pg_cluster.url)
    try:
        row = store.get_entity("session", "r-1")
    finally:
        store.close()
    assert row is not None and row["status"] == "completed", err


def test_li_wait_reconnects_after_a_restart(pg_cluster: Cluster, lirun_home: Path) -> None:
    store = open_store(pg_cluster.url)
    store.create_session(id="w-1")
    store.close()
    waiter = start_waiter(_env(pg_cluster, lirun_home), "w-1", "--interval", "0.3")
    try:
        wait_until_ready(waiter, settle=1.0)
        pg_cluster.stop()
        time.sleep(2.0)
        pg_cluster.start()
        time.sleep(1.0)
        store = open_store(pg_cluster.url)
        try:
            store.update_status(
                "session",
                "w-1",
                new_status="completed",
                reason_code="run.completed.ok",
                extra_fields={"exit_code": 0},
            )
        finally:
            store.close()
        line = parse_line(read_line(waiter, timeout=15))
    finally:
        code, _, err = finish(waiter)
    assert (line["id"], line["status"]) == ("w-1", "completed"), err
    assert code == 0, err
    assert err.count("retrying until the database answers") == 1, err
    assert err.count("answers again") == 1, err
