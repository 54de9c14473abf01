"""A failover with asynchronous replication can lose the last commits: a schedule run's
row goes back in time. The lease must still hold on both backends (docs/queue.md, "With
asynchronous replication"): a run whose ending was lost lapses and is ended by the
reaper, and a lost claim claimed again never leaves two copies with a current fence.
The loss is played by writing the row back to what it held before, with SQL."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lirun.schedules import fence_token
from lirun.schedules.actions import parse_action
from lirun.schedules.definition import make_policies
from lirun.schedules.runner import Runner, RunnerConfig
from lirun.schedules.submit import submit
from lirun.store import Store
from support.cli import li_command
from support.workerkit import run_row, status_is, until, workers

# The work: one line per copy started (with its fence), then wait for `go`.
JOB = """\
import os, sys, time
here = sys.argv[1]
with open(os.path.join(here, "copies"), "a") as out:
    out.write(os.environ.get("LIRUN_FENCE", "") + "\\n")
while not os.path.exists(os.path.join(here, "go")):
    time.sleep(0.05)
"""

# What a claim writes on a run, and what its ending does.
CLAIMED = ("status", "status_reason_code", "worker_id", "lease_epoch", "lease_expires_at")
ENDED = ("status", "status_reason_code", "status_reason_summary", "ended_at", "exit_code")


def write_back(
    store: Store, run_id: str, earlier: Mapping[str, Any], columns: tuple[str, ...]
) -> None:
    """The run's row as it was: what a failover that lost the commits since does to it."""
    sets = ", ".join(f"{c} = :{c}" for c in columns)
    values = {c: earlier[c] for c in columns}
    with store.connector.write() as tx:
        tx.execute(f"UPDATE schedule_runs SET {sets} WHERE id = :id", {**values, "id": run_id})


def job_run(store: Store, tmp_path: Path, name: str = "job", **policies: Any) -> tuple[str, Path]:
    here = tmp_path / name
    here.mkdir()
    (tmp_path / "job.py").write_text(JOB)
    argv = ["run", sys.executable, str(tmp_path / "job.py"), str(here)]
    run = submit(
        store, parse_action(argv, base=str(tmp_path)), policies=make_policies(policies, None)
    )
    return run.id, here


def copies(here: Path) -> list[str]:
    path = here / "copies"
    return path.read_text().splitlines() if path.exists() else []


def check(env: dict[str, str], fence: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command("lease", "check", "--fence", fence),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_run_whose_ending_was_lost_lapses_and_the_reaper_ends_it(
    store: Store, li_env: dict[str, str], tmp_path: Path
) -> None:
    """The worker recorded the run's end, the failover lost it: the row says `running`
    with this worker's id again. The worker no longer has it in hand (only another run),
    so its heartbeat does not renew it: the lease lapses and the reaper fails it
    (retried, at least once), while the worker and its other run live on."""
    options = ("--lease", "2s", "--concurrency", "2", "--grace", "1s")
    with workers(li_env, tmp_path, *options) as (worker,):
        run_id, here = job_run(store, tmp_path, retries=1)
        other, there = job_run(store, tmp_path, "other")
        until(lambda: copies(here) and copies(there), what="both runs' work to start")
        running = run_row(store, run_id)
        (here / "go").touch()
        until(lambda: status_is(store, run_id, "completed"), what="the run to end")
        write_back(store, run_id, running, ENDED)
        assert run_row(store, run_id)["status"] == "running"
        failed = until(lambda: status_is(store, run_id, "failed"), timeout=10, what="the lapse")
        assert failed["status_reason_code"] == "schedule.failed.lease_lapsed"
        (retry,) = until(lambda: store.schedules.retries_of(run_id), what="the retry")
        assert retry.attempt == 2
        until(lambda: status_is(store, retry.id, "completed"), what="the retry to run")
        assert status_is(store, other, "running"), "the run in hand lost its lease"
        (there / "go").touch()
        until(lambda: status_is(store, other, "completed"), what="the other run to end")
        assert worker.proc.poll() is None


def test_a_lost_claim_claimed_again_leaves_the_old_copy_no_current_fence(
    store: Store, li_env: dict[str, str], tmp_path: Path
) -> None:
    """Worker w1 claimed the run and started its work; the failover lost the claim (the
    row is `queued` again, under the epoch before it) and worker w2 claims it, under the
    same epoch. `li lease check` tells w1's copy it is not current, w2's that it is."""
    run_id, here = job_run(store, tmp_path)
    queued = run_row(store, run_id)
    runner = Runner(RunnerConfig(db_url=store.url, worker_id="w1"))
    thread = threading.Thread(target=runner.handle, args=(run_id,))
    thread.start()
    try:
        until(lambda: copies(here), what="w1's copy to start")
        claimed = run_row(store, run_id)
        write_back(store, run_id, queued, CLAIMED)
        assert store.schedules.claim_run(run_id, worker_id="w2", lease_seconds=60)
        again = run_row(store, run_id)
        assert (again["lease_epoch"], again["worker_id"]) == (claimed["lease_epoch"], "w2")
        (old,) = copies(here)
        new = fence_token.token(run_id, again["lease_epoch"], "w2")
        assert new != old
        told = check(li_env, old)
        assert (told.returncode, told.stdout.split(":")[0]) == (1, "taken over"), told.stdout
        assert "w2" in told.stdout
        assert check(li_env, new).returncode == 0
    finally:
        (here / "go").touch()
        thread.join(30)
    assert not thread.is_alive()


def test_a_worker_never_claims_again_a_run_it_has_in_hand(store: Store, tmp_path: Path) -> None:
    """The claim was lost while this worker's copy runs, and the run is offered to the
    same worker again: it does not claim it a second time (the two copies would hold the
    same fence), so another worker can, or this one once its copy has ended."""
    run_id, here = job_run(store, tmp_path)
    queued = run_row(store, run_id)
    runner = Runner(RunnerConfig(db_url=store.url, worker_id="w1"))
    first = threading.Thread(target=runner.handle, args=(run_id,))
    first.start()
    second = threading.Thread(target=runner.handle, args=(run_id,))
    try:
        until(lambda: copies(here), what="the first copy to start")
        write_back(store, run_id, queued, CLAIMED)
        second.start()
        second.join(10)
        assert not second.is_alive(), "the worker claimed its own run again"
        assert run_row(store, run_id)["status"] == "queued"
        assert len(copies(here)) == 1
    finally:
        (here / "go").touch()
        first.join(30)
        if second.is_alive():
            second.join(30)
    assert len(copies(here)) == 1
