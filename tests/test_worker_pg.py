"""``li worker`` on PostgreSQL through the procrastinate queue, as real processes: three
workers fire each due time once; SIGKILL of one mid-run fails its run by lease and the
others carry on; simulated hosts (``support.simhosts``) with one host's link cut mid-run.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from lirun.schedules.actions import parse_action
from lirun.schedules.submit import fire_now, submit
from lirun.schedules.triggers import every_trigger
from lirun.store import Store, open_store
from support.cli import li_command
from support.pg import make_pg_url
from support.pgcluster import PgCluster
from support.queuekit import TESTS_DIR, wait_until
from support.simhosts import SimHost, simulated_hosts, url_from
from support.workerkit import (
    add_schedule,
    due_at,
    next_due,
    run_row,
    status_is,
    until,
    workers,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SLEEP = [sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))"]
# a short run with some output
NAP = [sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1])); print('done')"]


def started(store: Store, run_id: str) -> dict[str, Any] | None:
    """The run's row once it is running with its session made, else None."""
    row = status_is(store, run_id, "running")
    return row if row and row.get("session_id") else None


def queue_state(url: str, store: Store, run_ids: list[str]) -> str:
    """The runs' rows and the queue's jobs, for a failure message."""
    import psycopg

    from lirun.store.pg_connect import split_schema

    rest, schema = split_schema(url)
    with psycopg.connect(rest, autocommit=True) as conn:
        jobs = conn.execute(
            f"SELECT id, status, worker_id, args->>'run_id' FROM {schema}_queue.procrastinate_jobs"
        ).fetchall()
    runs = [(r, run_row(store, r)["status"], run_row(store, r)["worker_id"]) for r in run_ids]
    return f"runs {runs}; jobs {jobs}"


def queue(store: Store, cwd: Path, *argv: str) -> str:
    """``li submit -- run ARGV...`` through the library: the queued run's id."""
    return submit(store, parse_action(["run", *argv], base=str(cwd))).id


@pytest.fixture
def pg_only_url() -> Iterator[str]:
    yield from make_pg_url()


def worker_env(url: str, home: Path) -> dict[str, str]:
    env = dict(os.environ)
    home.mkdir(parents=True, exist_ok=True)
    env.update({"LIRUN_HOME": str(home), "LIRUN_DB_URL": url, "PYTHONUNBUFFERED": "1"})
    return env


@pytest.fixture
def env(pg_only_url: str, tmp_path: Path) -> dict[str, str]:
    return worker_env(pg_only_url, tmp_path / "home")


@pytest.fixture
def store(env: dict[str, str]) -> Iterator[Store]:
    s = open_store(env["LIRUN_DB_URL"])
    yield s
    s.close()


def test_three_workers_on_the_queue_fire_each_due_time_once(
    env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    with workers(env, tmp_path, "--concurrency", "2", count=3) as procs:
        schedule = add_schedule(store, tmp_path, "tick", ["run", "echo", "ok"], overlap="allow")
        first = next_due(schedule)
        until(lambda: time.time() > first + 10.2, timeout=20, what="10 seconds of fires")
        store.schedules.change(
            schedule.id, new_status="disabled", reason_code="schedule_definition.disabled.user"
        )
        codes = [proc.terminate() for proc in procs]
    assert codes == [0, 0, 0]
    assert all("ProcrastinateTransport" in p.text() for p in procs)
    runs = store.schedules.list_runs(schedule.id, limit=1000)
    dues = sorted(due_at(r) for r in runs)
    assert len(dues) == len(set(dues)), "a due time was fired twice"
    assert dues == list(range(first, dues[-1] + 1)), "a due time was lost"
    assert len(dues) >= 10
    assert {r.status for r in runs} == {"completed"}, [r.status_reason_code for r in runs]
    ends = "".join(p.text() for p in procs).count(" completed reason=schedule.completed.ok")
    assert ends == len(dues)  # each run ended once, on one worker
    assert len({r.worker_id for r in runs}) >= 2  # the queue shared the work


def test_sigkill_of_a_worker_mid_run_fails_its_run_by_lease_and_the_others_go_on(
    env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    schedule = add_schedule(
        store,
        tmp_path,
        "long",
        ["run", *SLEEP, "60"],
        trigger=every_trigger("1d", int(time.time())),
    )
    with workers(env, tmp_path, "--lease", "2s", count=1) as (holder,):
        run = fire_now(store, "long")
        running = until(lambda: started(store, run.id), what="the run to start")
        with workers(env, tmp_path, "--lease", "2s", count=2) as others:
            holder.kill()
            failed = until(lambda: status_is(store, run.id, "failed"), what="the lease")
            assert failed["status_reason_code"] == "schedule.failed.lease_lapsed"
            session = store.get_entity("session", running["session_id"])
            assert session is not None
            assert session["status"] == "failed"
            after = queue(store, tmp_path, "echo", "after")
            done = until(lambda: status_is(store, after, "completed", "failed"), what="a new run")
            assert done["status"] == "completed"
            assert done["worker_id"] != running["worker_id"]
            assert "lease_lapsed" in "".join(p.text() for p in others)
    assert len(store.schedules.list_runs(schedule.id)) == 1  # no retry asked, none made
    _kill_child(store, running["session_id"])


def _kill_child(store: Store, session_id: str) -> None:
    import signal

    child = (store.get_entity("session", session_id) or {}).get("child_pid")
    if child:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(child), signal.SIGKILL)


@pytest.fixture
def hosts() -> Iterator[tuple[list[SimHost], PgCluster]]:
    with simulated_hosts(("alpha", 3), ("beta", 4)) as made:
        yield made


def test_a_cut_hosts_run_is_failed_by_lease_on_the_other_host_and_nothing_runs_twice(
    hosts: tuple[list[SimHost], PgCluster], tmp_path: Path
) -> None:
    (alpha, beta), cluster = hosts
    url = cluster.new_url()
    store = open_store(url)
    logs = {h.name: tmp_path / f"{h.name}.log" for h in (alpha, beta)}

    def start(host: SimHost, url: str = url, logs: dict[str, Path] = logs) -> None:
        env = worker_env(url_from(host, cluster, url), tmp_path / f"home-{host.name}")
        argv = li_command("worker", "--lease", "3s", "--grace", "2s")
        host.start(argv, log=logs[host.name], env=env, cwd=TESTS_DIR)
        assert wait_until(lambda: " started: " in logs[host.name].read_text(), 30), logs[
            host.name
        ].read_text()

    try:
        start(alpha)
        held = queue(store, tmp_path, *SLEEP, "60")
        running = until(lambda: started(store, held), 30, "alpha's run")
        start(beta)
        alpha.cut()
        cut_at = time.monotonic()
        failed = until(lambda: status_is(store, held, "failed"), 30, "the lease to lapse")
        assert failed["status_reason_code"] == "schedule.failed.lease_lapsed"
        assert time.monotonic() - cut_at < 20
        during = queue(store, tmp_path, "echo", "during")
        done = until(lambda: status_is(store, during, "completed", "failed"), 30, "beta's run")
        assert done["status"] == "completed"
        assert done["worker_id"] != running["worker_id"]
        alpha.restore()
        after = [queue(store, tmp_path, "echo", f"after-{i}") for i in range(4)]
        for run_id in after:
            try:
                row = until(partial(status_is, store, run_id, "completed", "failed"), 40)
            except AssertionError:
                raise AssertionError(queue_state(url, store, after)) from None
            assert row["status"] == "completed"
        # alpha's worker serves again (its one slot free: it stopped the run it lost):
        # within 30 s, one of two concurrent runs lands on it
        deadline, back = time.monotonic() + 30, False
        while not back and time.monotonic() < deadline:
            pair = [queue(store, tmp_path, *NAP, "1") for _ in range(2)]
            rows = [until(partial(status_is, store, r, "completed"), 20, "a pair") for r in pair]
            back = any(row["worker_id"] == running["worker_id"] for row in rows)
        again = run_row(store, held)
        assert (again["status"], again["status_reason_code"]) == (
            "failed",
            "schedule.failed.lease_lapsed",
        )
        session = store.get_entity("session", running["session_id"])
        assert session is not None
        assert session["status"] == "failed"
    finally:
        codes = [host.stop(proc) for host in (alpha, beta) for proc in host.procs]
        store.close()
    assert codes == [0, 0], (logs["alpha"].read_text(), logs["beta"].read_text())
    # each run started once: one session per run, and only the held one failed
    text = logs["alpha"].read_text() + logs["beta"].read_text()
    assert text.count(f"run {during} completed") == 1
    assert all(text.count(f"run {run_id} completed") == 1 for run_id in after)
    assert back, "the cut host serves again once it stopped the run it lost"
    # alpha stopped the run it lost: at its lease's end while still cut off, or, when the
    # link came back before that stop ended, on finding it failed by the other host
    alpha_log = logs["alpha"].read_text()
    assert (
        "lease lost: stopping this worker's runs" in alpha_log
        or f"run {held} is no longer this worker's" in alpha_log
    ), alpha_log


def test_a_worker_ends_promptly_after_sigterm_while_its_database_is_down(
    pg_cluster: PgCluster, tmp_path: Path
) -> None:
    """SIGTERM while the server is down (a failover under way, issue 33): the worker ends
    within its grace and a few seconds, not after the 30 s a write may wait out an outage;
    its row, not marked stopped, ages out."""
    env = worker_env(pg_cluster.new_url(), tmp_path / "home")
    with workers(env, tmp_path, "--lease", "4s", "--grace", "1s") as [worker]:
        pg_cluster.stop("immediate")
        try:
            time.sleep(1.5)  # its heartbeat and queue find the server gone
            began = time.monotonic()
            code = worker.terminate(timeout=40)
            took = time.monotonic() - began
        finally:
            pg_cluster.start()
    assert code == 0, worker.text()[-2000:]
    assert took < 12, f"the worker ended {took:.1f}s after SIGTERM: {worker.text()[-2000:]}"
    assert "Traceback" not in worker.text()
