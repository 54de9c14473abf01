"""``li wait`` on a schedule run whose worker died: a lone waiter does not hang. With no
other worker to reap it, the waiter finalizes a run whose lease lapsed and whose worker
is provably dead (this host, its process gone), as a worker's reaper would: the run
and its session ``failed``, a retry queued when ``--retries`` allows. Both backends."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lirun.schedules.actions import parse_action
from lirun.schedules.definition import make_policies
from lirun.schedules.submit import submit
from lirun.store import Store, open_store
from support.cli import li_command
from support.workerkit import run_row, status_is, until, workers

SLEEP = [sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))"]


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = open_store(db_url)
    yield s
    s.close()


def test_a_lone_waiter_finalizes_a_run_whose_worker_was_killed(
    li_env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    policies = make_policies({"retries": "1"}, None)
    run = submit(store, parse_action(["run", *SLEEP, "60"], base=str(tmp_path)), policies=policies)
    with workers(li_env, tmp_path, "--lease", "1s") as (worker,):
        row = until(lambda: (r := status_is(store, run.id, "running")) and r.get("session_id"))
        session_id = str(run_row(store, run.id)["session_id"])  # linked before it starts
        until(lambda: (store.get_entity("session", session_id) or {}).get("child_pid"))
        worker.kill()
    assert row
    started = time.monotonic()
    waited = subprocess.run(
        li_command("wait", run.id, "--timeout", "30"),
        env=li_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert waited.returncode == 1, (waited.stdout, waited.stderr)
    assert time.monotonic() - started < 20
    assert waited.stdout.split("\t")[1:3] == [
        "status=failed",
        "reason=schedule.failed.lease_lapsed",
    ]
    final = run_row(store, run.id)
    assert final["status_reason_code"] == "schedule.failed.lease_lapsed"
    assert "li wait" in final["status_reason_summary"]
    ended = store.get_entity("session", session_id)
    assert ended is not None, ended
    assert ended["status"] == "failed", ended
    child = int(ended["child_pid"])
    until(lambda: not _alive(child), what="the orphaned child to be stopped")
    retries = [r for r in store.schedules.list_queued_runs(limit=50) if r.retry_of == run.id]
    assert [r.attempt for r in retries] == [2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie reparented to us is gone for our purpose
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_a_lone_waiter_ends_a_queued_run_past_its_start_deadline(
    li_env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    """No worker at all: the start deadline still ends the run, and the waiter says so."""
    queued = subprocess.run(
        li_command("submit", "--start-deadline", "1s", "--", "run", "true"),
        env=li_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    run_id = queued.stdout.strip()
    waited = subprocess.run(
        li_command("wait", run_id, "--timeout", "20"),
        env=li_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert waited.returncode == 1, (waited.stdout, waited.stderr)
    assert waited.stdout.split("\t")[1:3] == [
        "status=failed",
        "reason=schedule.failed.start_deadline",
    ]
    row = run_row(store, run_id)
    assert row["started_at"] is None
    assert "queued" in row["status_reason_summary"]
