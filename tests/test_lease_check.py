"""The fence of a run's lease: ``LIRUN_FENCE`` in the work a worker starts, and ``li lease
check`` (0 only while that lease is the current one), on both backends."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from lirun.errors import UsageError
from lirun.record.reap_schedule_runs import fail_lapsed_run
from lirun.schedules import fence_token
from lirun.schedules.actions import parse_action
from lirun.schedules.submit import submit
from lirun.store import Store
from lirun.store.rows import RunLeaseRow
from support.cli import li_command
from support.workerkit import run_row, status_is, until, workers

# The work: its fence and what `li lease check` told it, then wait for `go`.
JOB = """\
import os, subprocess, sys, time
here = sys.argv[1]
open(os.path.join(here, "fence"), "w").write(os.environ.get("LIRUN_FENCE", ""))
rc = subprocess.run([sys.executable, "-m", "lirun", "lease", "check"], capture_output=True)
open(os.path.join(here, "checked"), "w").write(f"{rc.returncode} {rc.stdout.decode().strip()}")
while not os.path.exists(os.path.join(here, "go")):
    time.sleep(0.05)
"""


def check(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command("lease", "check", *args), env=env, capture_output=True, text=True, timeout=60
    )


def queued(store: Store, tmp_path: Path, argv: list[str] | None = None) -> str:
    action = parse_action(["run", *(argv or ["true"])], base=str(tmp_path))
    return submit(store, action).id


# --- the decision ------------------------------------------------------------------------


def lease(
    status: str = "running", epoch: int = 1, expires: float | None = 110.0, **kw: str
) -> RunLeaseRow:
    reason = kw.get("reason", "schedule.running.started")
    return RunLeaseRow(status, reason, epoch, expires, "w", 100.0, kw.get("retry"))


@pytest.mark.parametrize(
    ("row", "code", "said"),
    [
        (lease(), 0, "current: run r epoch 1, its lease expires in 10.0s"),
        (None, 1, "not current: no run r"),
        (lease(epoch=2), 1, "taken over: run r runs under epoch 2 now, not 1"),
        (lease(expires=99.5), 1, "lapsed: the lease of run r expired 0.5s ago"),
        (lease(expires=100.0), 1, "lapsed:"),
        (lease(expires=None), 1, "lapsed:"),
        (
            lease("failed", reason="schedule.failed.lease_lapsed", retry="r2"),
            1,
            "taken over: another worker ended run r once its lease lapsed: failed "
            "(schedule.failed.lease_lapsed); retried as r2",
        ),
        (lease("completed", reason="schedule.completed.ok"), 1, "run ended: run r is completed"),
        (lease("queued", reason="schedule.queued.created"), 1, "taken over: run r is queued again"),
    ],
)
def test_judge(row: RunLeaseRow | None, code: int, said: str) -> None:
    verdict = fence_token.judge(fence_token.Fence("r", 1), row)
    assert (verdict.code, verdict.line[: len(said)]) == (code, said)
    # The same with the worker of the claim named: the row's worker is "w".
    verdict = fence_token.judge(fence_token.Fence("r", 1, "w"), row)
    assert (verdict.code, verdict.line[: len(said)]) == (code, said)


def test_judge_tells_two_claims_of_one_epoch_apart_by_their_worker() -> None:
    """A failover lost w1's claim and w2 claimed the run again, under the same epoch."""
    verdict = fence_token.judge(fence_token.Fence("r", 1, "w1"), lease())
    assert (verdict.code, verdict.line) == (
        1,
        "taken over: run r epoch 1 is worker w's claim now, not worker w1's",
    )
    assert fence_token.judge(fence_token.Fence("r", 2, "w"), lease()).line.startswith(
        "taken over: run r runs under epoch 1 now, not 2"
    )


@pytest.mark.parametrize(
    "text",
    ["", "  ", "abc", "abc:", ":3", "abc:0", "abc:-1", "abc:x", "abc:x:w", ":1:w", "abc:0:w", "w"],
)
def test_a_missing_or_malformed_fence_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError):
        fence_token.parse(text)


def test_a_fence_names_its_worker_and_one_that_names_none_still_parses() -> None:
    worker = "0b6e52c4-6f0e-4a43-9d4f-5c1a2b3c4d5e"  # a worker id: never all digits
    written = fence_token.token("r-1", 3, worker)
    assert written == f"r-1:3:{worker}"
    assert fence_token.parse(f" {written} ") == fence_token.Fence("r-1", 3, worker)
    assert str(fence_token.parse(written)) == written
    assert fence_token.parse("a:b:7") == fence_token.Fence("a:b", 7)  # as workers before set
    assert fence_token.parse("a:b:7:w") == fence_token.Fence("a:b", 7, "w")


# --- the store: epochs --------------------------------------------------------------------


def test_each_claim_raises_the_epoch_and_a_retry_counts_on(store: Store, tmp_path: Path) -> None:
    run_id = queued(store, tmp_path)
    assert store.schedules.claim_run(run_id, worker_id="w1", lease_seconds=60)
    assert not store.schedules.claim_run(run_id, worker_id="w2", lease_seconds=60)
    run = store.schedules.get_run(run_id)
    assert run is not None
    assert (run.lease_epoch, run.worker_id) == (1, "w1")
    assert fail_lapsed_run(store, run, "w1 stopped renewing")
    failed = store.schedules.get_run(run_id)
    assert failed is not None
    retry = store.schedules.queue_retry(failed)
    assert retry is not None
    assert retry.lease_epoch == 1
    assert store.schedules.claim_run(retry.id, worker_id="w2", lease_seconds=60)
    claimed = store.schedules.get_run(retry.id)
    assert claimed is not None
    assert claimed.lease_epoch == 2
    held = store.workers.lease_of(run_id)
    assert held is not None
    assert (held.status, held.retried_by) == ("failed", retry.id)
    assert abs(held.db_now - time.time()) < 5  # the database's clock


# --- li lease check ----------------------------------------------------------------------


def test_li_lease_check_says_current_lapsed_taken_over_ended(
    store: Store, li_env: dict[str, str], tmp_path: Path
) -> None:
    run_id = queued(store, tmp_path)
    assert store.schedules.claim_run(run_id, worker_id="w1", lease_seconds=60)
    token = fence_token.token(run_id, 1)
    done = check({**li_env, "LIRUN_FENCE": token})
    assert (done.returncode, done.stdout[:8]) == (0, "current:"), done.stderr
    stale = check(li_env, "--fence", fence_token.token(run_id, 2))
    assert (stale.returncode, stale.stdout.split(":")[0]) == (1, "taken over")

    short = queued(store, tmp_path)
    assert store.schedules.claim_run(short, worker_id="w1", lease_seconds=0.2)
    time.sleep(0.4)
    lapsed = check(li_env, "--fence", fence_token.token(short, 1))
    assert (lapsed.returncode, lapsed.stdout.split(":")[0]) == (1, "lapsed"), lapsed.stdout

    run = store.schedules.get_run(short)
    assert run is not None
    assert fail_lapsed_run(store, run, "w1 stopped renewing")
    taken = check(li_env, "--fence", fence_token.token(short, 1))
    assert (taken.returncode, taken.stdout.split(":")[0]) == (1, "taken over")

    ended = check(li_env, "--quiet", "--fence", fence_token.token("no-such-run", 1))
    assert (ended.returncode, ended.stdout, ended.stderr) == (1, "", "")


def test_no_fence_a_bad_fence_and_no_database(li_env: dict[str, str], tmp_path: Path) -> None:
    env = {k: v for k, v in li_env.items() if k != "LIRUN_FENCE"}
    none = check(env)
    assert none.returncode == 2
    assert "no fence: LIRUN_FENCE is not set" in none.stderr
    bad = check(env, "--fence", "abc")
    assert bad.returncode == 2
    assert "not a fence: 'abc'" in bad.stderr
    gone = check(env, "--fence", "r:1", "--db", "postgresql://postgres@127.0.0.1:1/none")
    assert gone.returncode == 3
    assert "cannot tell: the database did not answer" in gone.stderr
    missing = check(env, "--fence", "r:1", "--db", str(tmp_path / "nothing.db"))
    assert missing.returncode == 3, missing.stderr
    for done in (none, bad, gone, missing):
        assert "Traceback" not in done.stderr


def test_a_plain_li_run_has_no_fence(li_env: dict[str, str], tmp_path: Path) -> None:
    env = {k: v for k, v in li_env.items() if k != "LIRUN_FENCE"}
    argv = [sys.executable, "-m", "lirun", "lease", "check"]
    done = subprocess.run(
        li_command("run", "--", *argv), env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1  # the child's exit 2 is the run's failure
    assert "no fence" in done.stderr + done.stdout


# --- a worker's run -----------------------------------------------------------------------


def test_a_workers_run_gets_its_fence_and_it_checks_0_until_the_run_is_taken_over(
    store: Store, li_env: dict[str, str], tmp_path: Path
) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    env = {k: v for k, v in li_env.items() if k != "LIRUN_FENCE"}
    with workers(env, tmp_path, "--grace", "1s"):
        here = tmp_path / "first"
        here.mkdir()
        run_id = queued(store, tmp_path, [sys.executable, str(job), str(here)])
        checked = until(lambda: (here / "checked").exists(), what="the job's check")
        assert checked
        token = (here / "fence").read_text()
        assert token == fence_token.token(run_id, 1, run_row(store, run_id)["worker_id"])
        assert (here / "checked").read_text().startswith("0 current: ")
        assert check(env, "--fence", token).returncode == 0
        # Another worker's reaper takes the run over (its lease lapsed, say): the old
        # fence is not current any more, and the worker stops the old copy.
        run = store.schedules.get_run(run_id)
        assert run is not None
        assert fail_lapsed_run(store, run, "taken over by the test")
        taken = check(env, "--fence", token)
        assert (taken.returncode, taken.stdout.split(":")[0]) == (1, "taken over")

        there = tmp_path / "second"
        there.mkdir()
        second = queued(store, tmp_path, [sys.executable, str(job), str(there)])
        until(lambda: (there / "checked").exists(), what="the second job's check")
        (there / "go").touch()
        until(lambda: status_is(store, second, "completed"), what="the second run to end")
        ended = check(env, "--fence", (there / "fence").read_text())
        assert (ended.returncode, ended.stdout.split(":")[0]) == (1, "run ended")


def test_a_flow_run_by_a_worker_gives_each_leg_the_runs_fence(
    store: Store, li_env: dict[str, str], tmp_path: Path
) -> None:
    env = {k: v for k, v in li_env.items() if k != "LIRUN_FENCE"}
    flow = tmp_path / "fenced.yaml"
    legs = [
        f"  - id: {leg}\n    run: [sh, -c, 'echo $LIRUN_FENCE > {leg}.fence']\n" for leg in "ab"
    ]
    flow.write_text("legs:\n" + "".join(legs))
    with workers(env, tmp_path):
        run = submit(store, parse_action(["flow", str(flow)], base=str(tmp_path)))
        until(lambda: status_is(store, run.id, "completed", "failed"), what="the flow's run")
    assert status_is(store, run.id, "completed")
    fence = fence_token.token(run.id, 1, run_row(store, run.id)["worker_id"])
    for leg in "ab":
        assert (tmp_path / f"{leg}.fence").read_text().strip() == fence
