"""A PostgreSQL server restarted under a run, a waiter and a status write (issue 8, item 2).

Each test starts its own throwaway cluster (tests/pgcluster.py) and restarts that one.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lirun.store import open_store
from support.cli import li_command
from support.pgcluster import PgCluster
from support.waitkit import finish, parse_line, read_line, start_waiter, wait_until_ready

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def cluster(pg_cluster: PgCluster) -> Iterator[Cluster]:
    """The session's throwaway cluster, seen through a schema of this test's own."""
    yield Cluster(pg_cluster, f"{pg_cluster.new_url()}&connect_timeout=2")


class Cluster:
    def __init__(self, server: PgCluster, url: str) -> None:
        self.server, self.url = server, url

    def stop(self) -> None:
        self.server.stop()

    def start(self) -> None:
        self.server.start()


def _later(seconds: float, action: object) -> threading.Timer:
    timer = threading.Timer(seconds, action)  # type: ignore[arg-type]
    timer.start()
    return timer


def _env(cluster: Cluster, home: Path) -> dict[str, str]:
    return {**os.environ, "LIRUN_HOME": str(home), "LIRUN_DB_URL": cluster.url}


def test_a_status_write_waits_out_a_restart(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="lirun.store.retry")
    store = open_store(cluster.url)
    try:
        store.sessions.create(id="s-1")
        cluster.stop()
        timer = _later(1.5, cluster.start)
        applied = store.update_status(
            "session", "s-1", new_status="completed", reason_code="run.completed.ok"
        )
        timer.join()
        assert applied is True
        assert [t.status for t in store.list_transitions("session", "s-1")] == [
            "running",
            "completed",
        ]
    finally:
        store.close()
    said = caplog.text  # said once each, through logging
    assert said.count("lost the database") == 1, said
    assert said.count("is back") == 1, said


def test_a_status_write_gives_up_at_the_bound(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lirun.errors import DatabaseConnectionLostError

    monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "1")
    store = open_store(cluster.url)
    try:
        store.sessions.create(id="s-1")
        cluster.stop()
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
    cluster: Cluster, lirun_home: Path, tmp_path: Path, restart_after: float
) -> None:
    # The server goes down while the child runs and comes back either before the child
    # ends (1.5 s) or after it, while teardown is writing (3 s).
    open_store(cluster.url).close()
    env = _env(cluster, lirun_home)
    ready = tmp_path / "ready"
    run = subprocess.Popen(
        li_command(
            "run", "--run-id", "r-1", "--", "sh", "-c", f"touch {ready}; sleep 2; echo done"
        ),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The child starts only once the row exists: stop the server while it runs, not before.
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.02)
    assert ready.exists(), run.communicate()[1]
    cluster.stop()
    time.sleep(restart_after)
    cluster.start()
    _, err = run.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert run.returncode == 0, err
    store = open_store(cluster.url)
    try:
        row = store.get_entity("session", "r-1")
    finally:
        store.close()
    assert row is not None, err
    assert row["status"] == "completed", err


def test_li_wait_reconnects_after_a_restart(cluster: Cluster, lirun_home: Path) -> None:
    store = open_store(cluster.url)
    store.sessions.create(id="w-1")
    store.close()
    waiter = start_waiter(_env(cluster, lirun_home), "w-1", "--interval", "0.3")
    try:
        wait_until_ready(waiter, settle=1.0)
        cluster.stop()
        time.sleep(2.0)
        cluster.start()
        time.sleep(1.0)
        store = open_store(cluster.url)
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


def test_li_wait_started_while_the_server_is_down_waits_for_it(
    cluster: Cluster, lirun_home: Path
) -> None:
    store = open_store(cluster.url)
    store.sessions.create(id="d-1")
    store.close()
    cluster.stop()
    waiter = start_waiter(_env(cluster, lirun_home), "d-1", "--interval", "0.3")
    try:
        time.sleep(1.5)
        assert waiter.poll() is None  # still waiting for the server, not exited 2
        cluster.start()
        store = open_store(cluster.url)
        try:
            store.update_status(
                "session", "d-1", new_status="completed", reason_code="run.completed.ok"
            )
        finally:
            store.close()
        line = parse_line(read_line(waiter, timeout=15))
    finally:
        code, _, err = finish(waiter)
    assert (line["id"], line["status"], code) == ("d-1", "completed", 0), err
    assert err.count("retrying until the database answers") == 1, err
    assert "Traceback" not in err, err


def test_li_wait_on_a_server_that_stays_down_ends_at_its_timeout(
    cluster: Cluster, lirun_home: Path
) -> None:
    cluster.stop()
    started = time.monotonic()
    done = subprocess.run(
        li_command("wait", "--timeout", "2", "x-1"),
        env=_env(cluster, lirun_home),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 3, done.stderr
    assert time.monotonic() - started < 10
    assert "timed out" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_outcome_reached_while_the_server_is_down_is_spooled_and_delivered(
    cluster: Cluster, lirun_home: Path, tmp_path: Path
) -> None:
    # The run ends while the server is down for longer than a write retries: li run spools
    # its outcome and exits with the run's code; a waiter that waited through the outage
    # (never reporting the run unknown) prints the true outcome once the server is back.
    open_store(cluster.url).close()
    env = {**_env(cluster, lirun_home), "LIRUN_WRITE_RETRY_SECONDS": "1"}
    ready, go = tmp_path / "ready", tmp_path / "go"
    script = f"touch {ready}; while [ ! -e {go} ]; do sleep 0.05; done; exit 3"
    run = subprocess.Popen(
        li_command("run", "--run-id", "sp-1", "--", "sh", "-c", script),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.02)
    assert ready.exists(), run.communicate()[1]
    waiter = start_waiter(env, "sp-1", "--interval", "0.3")
    try:
        wait_until_ready(waiter, settle=1.0)
        cluster.stop()
        try:
            go.touch()
            _, run_err = run.communicate(timeout=60)
            assert run.returncode == 1, run_err  # failed: the run's own exit code
            assert "pending" in run_err, run_err
            assert (lirun_home / "runs" / "sp-1" / "outcome.pending.json").is_file()
            time.sleep(1.0)
            assert waiter.poll() is None  # still waiting: the run is not unknown
        finally:
            cluster.start()
        line = parse_line(read_line(waiter, timeout=30))
    finally:
        code, _, err = finish(waiter, timeout=30)
    assert (line["id"], line["status"], line["reason"]) == (
        "sp-1",
        "failed",
        "run.failed.exit_nonzero",
    ), err
    assert code == 1, err
    assert not (lirun_home / "runs" / "sp-1" / "outcome.pending.json").exists()
    assert "Traceback" not in err + run_err, err + run_err
