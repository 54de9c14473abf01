"""``li worker`` as real processes on one SQLite file: exactly one run per due time with
two workers, SIGKILL mid-run (lease), overlap, missed fires, the start deadline, submit
then wait, SIGTERM grace, --allow-root, --notify. (The store half runs on both backends
in test_worker_store.py; PostgreSQL workers have their own tests.)"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lirun.schedules.actions import parse_action
from lirun.schedules.submit import fire_now, submit
from lirun.schedules.triggers import at_trigger, every_trigger, format_utc
from lirun.store import Store, open_store
from support.cli import li_command
from support.workerkit import (
    add_schedule,
    due_at,
    next_due,
    run_row,
    status_is,
    until,
    workers,
)

LEASE = "1s"
SLEEP = [sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))"]


@pytest.fixture
def env(tmp_path: Path, lirun_home: Path) -> dict[str, str]:
    environ = dict(os.environ)
    db = str(tmp_path / "state.db")
    environ.update({"LIRUN_HOME": str(lirun_home), "LIRUN_DB_URL": db, "PYTHONUNBUFFERED": "1"})
    return environ


@pytest.fixture
def store(env: dict[str, str]) -> Iterator[Store]:
    s = open_store(env["LIRUN_DB_URL"])
    yield s
    s.close()


def test_two_workers_fire_each_due_time_exactly_once(
    env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    with workers(env, tmp_path, "--concurrency", "2", count=2) as procs:
        schedule = add_schedule(store, tmp_path, "tick", ["run", "echo", "ok"], overlap="allow")
        first = next_due(schedule)
        until(lambda: time.time() > first + 8.2, timeout=15, what="8 seconds of fires")
        for proc in procs:
            assert proc.terminate() == 0
    runs = store.schedules.list_runs(schedule.id, limit=1000)
    dues = sorted(due_at(r) for r in runs)
    assert len(dues) == len(set(dues)), "a due time was fired twice"
    assert dues == list(range(first, dues[-1] + 1)), "a due time was lost"
    assert len(dues) >= 8
    assert {r.status for r in runs} == {"completed"}, [r.status_reason_code for r in runs]
    logs = "".join(p.text() for p in procs)
    assert logs.count(" fire tick ") == len(dues)  # one stderr line per fire
    late = [
        float(line.split("(+")[1].split("s)")[0])
        for line in logs.splitlines()
        if " fire tick " in line
    ]
    assert max(late) < 1.0, late  # every fire started within a second of its due time


def test_sigkill_mid_run_fails_the_run_by_lease_and_the_other_worker_retries(
    env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    marker = tmp_path / "first-attempt"
    script = (
        f"import os, sys, time\nif os.path.exists({str(marker)!r}): sys.exit(0)\n"
        f"open({str(marker)!r}, 'w').close()\ntime.sleep(60)\n"
    )
    trigger = every_trigger("1d", int(time.time()))
    schedule = add_schedule(
        store, tmp_path, "long", ["run", sys.executable, "-c", script], trigger=trigger, retries=1
    )
    with workers(env, tmp_path, "--lease", LEASE, count=2) as procs:
        run = fire_now(store, "long")
        until(lambda: status_is(store, run.id, "running"), what="the run to start")
        until(lambda: marker.exists(), what="the child to start")
        running = run_row(store, run.id)
        until(
            lambda: (store.get_entity("session", running["session_id"]) or {}).get("child_pid"),
            what="the child's pid on its session",
        )
        holder = next(p for p in procs if p.pid == _worker_pid(store, running["worker_id"]))
        other = next(p for p in procs if p is not holder)
        holder.kill()
        try:
            failed = until(lambda: status_is(store, run.id, "failed"), what="the lease to lapse")
            assert failed["status_reason_code"] == "schedule.failed.lease_lapsed"
            session = store.get_entity("session", running["session_id"])
            assert session is not None
            assert session["status"] == "failed"
            # Its owner (the killed worker) is provably gone on this host: reaped as
            # `li reap` does, the agent's process group stopped, not left running.
            assert session["status_reason_code"] == "session.orphaned.no_process"
            until(lambda: not _alive(int(session["child_pid"])), what="the orphan to stop")
            retry = until(
                lambda: [r for r in store.schedules.list_runs(schedule.id) if r.retry_of == run.id]
            )[0]
            assert retry.attempt == 2
            done = until(
                lambda: status_is(store, retry.id, "completed", "failed"), what="the retry"
            )
            assert done["status"] == "completed"
            assert done["worker_id"] != running["worker_id"]
            assert " run " in other.text()
            assert "lease_lapsed" in other.text()
        finally:
            child = (store.get_entity("session", running["session_id"]) or {}).get("child_pid")
            if child:
                _kill_quietly(int(child))


def _worker_pid(store: Store, worker_id: str) -> int:
    for worker in store.workers.list_live(since=0):
        if worker.id == worker_id:
            return worker.pid
    raise AssertionError(f"worker {worker_id} not live")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _kill_quietly(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def test_overlap_skip_records_the_due_times_a_long_run_covers(
    env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    with workers(env, tmp_path, "--concurrency", "3", "--grace", "10s") as (proc,):
        schedule = add_schedule(store, tmp_path, "slow", ["run", *SLEEP, "3.5"])
        first = next_due(schedule)
        until(lambda: time.time() > first + 2.5, what="three due times")
        store.schedules.change(
            schedule.id, new_status="disabled", reason_code="schedule_definition.disabled.user"
        )
        assert proc.terminate() == 0
    runs = sorted(store.schedules.list_runs(schedule.id), key=due_at)
    assert [r.status for r in runs[:3]] == ["completed", "skipped", "skipped"]
    assert {r.status_reason_code for r in runs[1:3]} == {"schedule.skipped.overlap"}


@pytest.mark.parametrize("missed", ["skip", "run_once"])
def test_missed_fires_after_an_outage(
    env: dict[str, str], store: Store, tmp_path: Path, missed: str
) -> None:
    now = int(time.time())
    # Added 105 s ago, every 10 s: ten due times passed while no worker ran, the latest
    # 5 s ago, older than the 2 s grace.
    schedule = add_schedule(
        store, tmp_path, "poll", ["run", "echo", "ok"], trigger=every_trigger("10s", now - 105),
        now=now - 105, missed=missed, missed_grace="2s",
    )  # fmt: skip
    with workers(env, tmp_path) as (proc,):
        until(lambda: len(store.schedules.list_runs(schedule.id)) >= 10, what="the missed rows")
        if missed == "run_once":
            until(
                lambda: any(r.status == "completed" for r in store.schedules.list_runs(schedule.id))
            )
        proc.terminate()
    runs = sorted(
        (r for r in store.schedules.list_runs(schedule.id) if due_at(r) < now),
        key=due_at,
    )
    assert len(runs) == 10
    assert {r.status_reason_code for r in runs[:9]} == {"schedule.skipped.missed_fire"}
    last = runs[-1]
    if missed == "skip":
        assert (last.status, last.status_reason_code) == (
            "skipped",
            "schedule.skipped.missed_fire",
        )
    else:
        assert (last.status, last.status_reason_code) == (
            "completed",
            "schedule.completed.ok",
        )


def test_a_queued_run_past_its_start_deadline_fails(
    env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    trigger = at_trigger(format_utc(int(time.time()) + 86400), None)
    add_schedule(
        store, tmp_path, "late", ["run", "echo", "ok"], trigger=trigger, start_deadline="1s"
    )
    run = fire_now(store, "late")
    until(lambda: time.time() > float(run.created_at) + 1.5, what="the deadline to pass")
    with workers(env, tmp_path):
        row = until(lambda: status_is(store, run.id, "failed", "completed"))
    assert row["status_reason_code"] == "schedule.failed.start_deadline"
    assert row["started_at"] is None


def test_submit_then_wait(env: dict[str, str], tmp_path: Path) -> None:
    with workers(env, tmp_path):
        ok = subprocess.run(
            li_command("submit", "--", "run", "echo", "ok"),
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ok.returncode == 0, ok.stderr
        bad = subprocess.run(
            li_command("submit", "--", "run", "false"),
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        waited = subprocess.run(
            li_command("wait", ok.stdout.strip(), bad.stdout.strip()),
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert waited.returncode == 1, waited.stderr  # one of the two failed
    lines = dict(line.split("\t", 1) for line in waited.stdout.splitlines())
    assert lines[ok.stdout.strip()].startswith("status=completed\treason=schedule.completed.ok")
    assert lines[bad.stdout.strip()].startswith("status=failed\treason=run.failed.exit_nonzero")
    assert lines[bad.stdout.strip()].endswith("exit_code=1")
    status = subprocess.run(
        li_command("status", bad.stdout.strip()),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert re.search(r"^produced\s+run \d{8}T", status.stdout, re.MULTILINE), status.stdout


def test_a_command_schedule_that_exits_0_records_completed_runs(
    env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    """A command's exit code is its verdict (issue 18): a schedule running `run sh -c
    'exit 0'` (silent, changes nothing) records schedule.completed.ok, not
    schedule.failed.completed_empty, so the dashboard shows 100 % success; `run
    --require-change` asks for a change and, with none, fails completed_empty."""
    from lirun.ui.views import schedules_view

    work = tmp_path / "work"  # not tmp_path itself, which holds the SQLite file
    work.mkdir()
    with workers(env, tmp_path):
        schedule = add_schedule(store, work, "probe", ["run", "sh", "-c", "exit 0"])
        strict = submit(
            store, parse_action(["run", "--require-change", "sh", "-c", "exit 0"], base=str(work))
        )
        ended = until(
            lambda: (
                [
                    r
                    for r in store.schedules.list_runs(schedule.id, limit=100)
                    if r.status not in ("queued", "running")
                ][:2]
                or None
            ),
            what="a probe run to end",
        )
        strict_row = until(lambda: status_is(store, strict.id, "completed", "failed"))
    assert {(r.status, r.status_reason_code) for r in ended} == {
        ("completed", "schedule.completed.ok")
    }
    assert ended[0].session_id is not None
    session = store.get_entity("session", ended[0].session_id) or {}
    assert (session["status"], session["status_reason_summary"]) == (
        "completed",
        "completed: command exited 0",
    )
    (probe,) = [s for s in schedules_view(store)["schedules"] if s["name"] == "probe"]
    assert probe["success_rate"] == 1.0
    assert (strict_row["status"], strict_row["status_reason_code"]) == (
        "failed",
        "schedule.failed.completed_empty",
    )


def test_sigterm_lets_work_finish_for_the_grace_then_cancels(
    env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    with workers(env, tmp_path, "--concurrency", "2", "--grace", "2s") as (proc,):
        short = submit(store, parse_action(["run", *SLEEP, "1"], base=str(tmp_path)))
        long = submit(store, parse_action(["run", *SLEEP, "60"], base=str(tmp_path)))
        until(
            lambda: status_is(store, short.id, "running") and status_is(store, long.id, "running")
        )
        started = time.monotonic()
        assert proc.terminate() == 0
        assert time.monotonic() - started < 10
    assert run_row(store, short.id)["status"] == "completed"
    cancelled = run_row(store, long.id)
    assert (cancelled["status"], cancelled["status_reason_code"]) == (
        "cancelled",
        "schedule.cancelled.worker_stopped",
    )
    session = store.get_entity("session", cancelled["session_id"])
    assert session is not None
    assert session["status"] == "cancelled"
    assert " claiming nothing more" in proc.text()
    assert "grace over" in proc.text()


def test_allow_root_refuses_a_cwd_outside(
    env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "sub").mkdir(parents=True)
    outside.mkdir()
    with workers(env, tmp_path, "--allow-root", str(allowed)):
        inside = submit(store, parse_action(["run", "--cwd", str(allowed / "sub"), "echo", "ok"]))
        refused = submit(store, parse_action(["run", "--cwd", str(outside), "echo", "ok"]))
        until(lambda: status_is(store, refused.id, "failed", "completed"))
        until(lambda: status_is(store, inside.id, "failed", "completed"))
    row = run_row(store, refused.id)
    assert row["status_reason_code"] == "schedule.failed.cwd_not_allowed"
    assert str(outside) in row["status_reason_summary"]
    assert row["session_id"] is None
    assert run_row(store, inside.id)["status"] == "completed"


def test_notify_gets_the_wait_line_fields(
    env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    out = tmp_path / "notified"
    trigger = every_trigger("1d", int(time.time()))
    add_schedule(
        store,
        tmp_path,
        "told",
        ["run", "false"],
        trigger=trigger,
        notify=f"env | grep ^LIRUN_ > {out}",
    )
    with workers(env, tmp_path):
        run = fire_now(store, "told")
        until(
            lambda: out.exists() and "LIRUN_WAIT_LINE" in out.read_text(), what="the notify command"
        )
    fields = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    assert fields["LIRUN_RUN_ID"] == run.id
    assert (fields["LIRUN_STATUS"], fields["LIRUN_REASON"]) == ("failed", "run.failed.exit_nonzero")
    assert (fields["LIRUN_EXIT_CODE"], fields["LIRUN_SUCCESS"], fields["LIRUN_SCHEDULE"]) == (
        "1",
        "0",
        "told",
    )


def test_worker_status_then_a_worker_that_cannot_renew_stops_its_runs(
    env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    import json

    with workers(env, tmp_path, "--lease", LEASE) as (proc,):
        run = submit(store, parse_action(["run", *SLEEP, "60"], base=str(tmp_path)))
        until(lambda: status_is(store, run.id, "running"))
        listed = subprocess.run(
            li_command("worker", "status", "--json"), env=env, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        assert listed.returncode == 0, listed.stderr
        (live,) = json.loads(listed.stdout)
        assert (live["pid"], live["running"]) == (proc.pid, [run.id])
        assert live["heartbeat_age"] < 1.0
        # The worker row is taken from it (as when its database link is gone): it cannot
        # renew its lease, so it stops its run rather than letting it go on unrecorded.
        store.workers.stop(live["id"])
        row = until(lambda: status_is(store, run.id, "cancelled", "failed", "completed"))
        assert "lease lost" in proc.text()
    assert row["status_reason_code"] == "schedule.cancelled.lease_lost"
    session = store.get_entity("session", row["session_id"])
    assert session is not None
    assert session["status"] == "cancelled"


def test_a_flow_runs_as_its_invocation_and_a_changed_file_is_refused(
    env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    flow = tmp_path / "hello.yaml"
    flow.write_text("legs:\n  - id: hello\n    run: [echo, hello]\n")
    ran = submit(store, parse_action(["flow", str(flow)], base=str(tmp_path)))
    changed = tmp_path / "changed.yaml"
    changed.write_text(flow.read_text())
    refused = submit(store, parse_action(["flow", str(changed)], base=str(tmp_path)))
    changed.write_text("legs:\n  - id: other\n    run: [echo, other]\n")
    with workers(env, tmp_path):
        done = until(lambda: status_is(store, ran.id, "completed", "failed"), what="the flow")
        bad = until(lambda: status_is(store, refused.id, "completed", "failed"))
    assert done["status"] == "completed", done["status_reason_summary"]
    invocation = store.get_entity("invocation", done["invocation_id"])
    assert invocation is not None
    assert invocation["status"] == "completed"
    assert bad["status_reason_code"] == "schedule.failed.file_changed"
    assert bad["invocation_id"] is None


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["worker", "--concurrency", "0"], "--concurrency must be at least 1"),
        (["worker", "--grace", "soon"], "--grace 'soon'"),
        (["worker", "--lease", "0.5"], "give at least 1s"),
        (["worker", "--lease", "99999999999999999999"], "give at most 1d"),
        (["worker", "--lease", "inf"], "--lease 'inf' is not a duration"),
        (["worker", "--lease", "nan"], "--lease 'nan' is not a duration"),
        (["worker", "--grace", "1e400"], "--grace '1e400' is not a duration"),
        (["worker", "--grace", "99999999999999999999"], "at most 366d"),
        (["status", "--since", "9" * 400], "--since"),
        (["worker", "--allow-root", "/no/such/dir"], "is not a directory"),
        (["submit"], "no action: give it after --"),
        (["submit", "--", "deploy", "x"], "unknown action 'deploy'"),
        (["schedule", "fire", "nope"], "no schedule named 'nope'"),
    ],
)
def test_bad_input_exits_2_saying_what_was_wrong(
    env: dict[str, str], args: list[str], says: str
) -> None:
    done = subprocess.run(li_command(*args), env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert done.stdout == ""


def _overloaded_once_claude(tmp_path: Path) -> Path:
    """A claude that is overloaded (529: run.failed.provider_overloaded) on its first run
    and succeeds after."""
    from support.providerkit import FAKE_PROVIDER, fixture_path

    overloaded = tmp_path / "overloaded.jsonl"
    overloaded.write_text(
        '{"type":"system","subtype":"init","session_id":"s","model":"m"}\n'
        '{"type":"result","subtype":"success","is_error":true,"api_error_status":529,'
        '"result":"API Error: 529 overloaded","session_id":"s"}\n'
    )
    marker = tmp_path / "claude-called-once"
    script = tmp_path / "claude"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then F=x;\n'
        f'elif [ -e "{marker}" ]; then F="{fixture_path("claude/success.jsonl")}";\n'
        f'else : > "{marker}"; F="{overloaded}"; fi\n'
        f'LIRUN_FAKE_FIXTURE="$F" LIRUN_FAKE_EXIT=0 exec "{sys.executable}" '
        f'"{FAKE_PROVIDER}" "$@"\n'
    )
    script.chmod(0o755)
    return script


def test_submit_takes_retries_notify_and_a_start_deadline(
    env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    """An ad-hoc run has the run policies a schedule has: a retryable provider failure is
    tried again as attempt 2 linked to the first, --notify runs after each end, and
    --start-deadline fails a run no worker started in time."""
    told = tmp_path / "told"
    env = {**env, "LIRUN_CLAUDE_BIN": str(_overloaded_once_claude(tmp_path))}
    queued = subprocess.run(
        li_command(
            "submit", "--retries", "1", "--notify", f"echo $LIRUN_STATUS >> {told}",
            "--", "agent", "claude", "go", "--cwd", str(tmp_path),
        ),
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert queued.returncode == 0, queued.stderr
    late = subprocess.run(
        li_command("submit", "--start-deadline", "1s", "--", "run", "echo", "ok"),
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert late.returncode == 0, late.stderr
    until(lambda: time.time() > float(run_row(store, late.stdout.strip())["created_at"]) + 1.5)
    first = queued.stdout.strip()
    with workers(env, tmp_path):
        row = until(lambda: status_is(store, first, "failed", "completed"))
        assert row["status_reason_code"] == "run.failed.provider_overloaded"
        retry = until(lambda: _retry_of(store, env["LIRUN_DB_URL"], first), what="attempt 2")
        done = until(lambda: status_is(store, retry["id"], "failed", "completed"))
        until(lambda: told.exists() and len(told.read_text().split()) == 2, what="notify twice")
        expired = until(lambda: status_is(store, late.stdout.strip(), "failed", "completed"))
    assert (done["status"], done["attempt"]) == ("completed", 2)
    assert told.read_text().split() == ["failed", "completed"]
    assert expired["status_reason_code"] == "schedule.failed.start_deadline"
    bad = subprocess.run(
        li_command("submit", "--retries", "x", "--", "run", "true"),
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2, bad.stderr
    assert "--retries 'x'" in bad.stderr, bad.stderr


def _retry_of(store: Store, db_path: str, run_id: str) -> dict[str, Any] | None:
    import sqlite3

    with contextlib.closing(sqlite3.connect(db_path)) as db:
        found = db.execute("SELECT id FROM schedule_runs WHERE retry_of = ?", (run_id,))
        row = found.fetchone()
    return run_row(store, row[0]) if row else None
