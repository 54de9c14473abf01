"""``li run`` under faults: a record or a refusal, a spooled outcome, signals that agree.

Real ``li`` processes, a real lock held by another process, both backends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lirun.lifecycle import EXIT_CODE_BY_STATUS
from support.execkit import (
    get_row,
    li_argv,
    poll,
    process_alive,
    run_li,
    session_rows,
    start_li,
    wait_line_for,
)
from support.storekit import write_lock_held


def _db_exists(db_url: str) -> bool:
    return db_url.startswith("postgresql") or Path(db_url).exists()


@pytest.mark.slow
def test_a_setup_write_that_fails_starts_nothing_and_exits_2(
    li_env: dict[str, str], db_url: str, repo: Path, lirun_home: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    env = {**li_env, "LIRUN_WRITE_RETRY_SECONDS": "0.5"}
    assert run_li("db", "migrate", env=env, cwd=repo).returncode == 0
    with write_lock_held(db_url):
        proc = run_li("run", "--run-id", "r1", "--", "touch", str(marker), env=env, cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert "nothing was started" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not marker.exists()
    assert session_rows(db_url) == []
    assert not (lirun_home / "runs" / "r1").exists()  # the id stays free
    again = run_li("run", "--run-id", "r1", "--", "touch", str(marker), env=env, cwd=repo)
    assert again.returncode == 0, again.stderr  # completed: the id was reusable
    assert marker.exists()


@pytest.mark.slow
def test_a_teardown_write_that_cannot_land_is_spooled_and_applied_later(
    li_env: dict[str, str], db_url: str, repo: Path, lirun_home: Path, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    env = {**li_env, "LIRUN_WRITE_RETRY_SECONDS": "1"}
    li = start_li(
        "run",
        "--run-id",
        "r1",
        "--",
        "sh",
        "-c",
        f"echo done; touch {ready}; sleep 1",
        env=env,
        cwd=repo,
    )
    poll(ready.exists, what="the child to start")
    with write_lock_held(db_url):
        _, err = li.communicate(timeout=60)
        assert get_row(db_url, "r1")["status"] == "running"
    assert li.returncode == EXIT_CODE_BY_STATUS["completed"], err
    assert "Traceback" not in err
    assert "pending" in err
    assert "r1" in err
    assert (lirun_home / "runs" / "r1" / "outcome.pending.json").is_file()
    # The next reader records the true outcome before it answers.
    status = run_li("status", "r1", env=env, cwd=repo)
    assert status.returncode == 0, status.stderr
    row = get_row(db_url, "r1")
    assert (row["status"], row["status_reason_code"], row["exit_code"]) == (
        "completed",
        "run.completed.ok",
        0,
    )
    assert not (lirun_home / "runs" / "r1" / "outcome.pending.json").exists()
    wait = run_li("wait", "r1", env=env, cwd=repo)
    assert wait.stdout.strip() == wait_line_for(row)


@pytest.mark.slow
def test_li_wait_applies_a_pending_outcome_before_a_reaper_can_call_it_orphaned(
    li_env: dict[str, str], db_url: str, repo: Path, lirun_home: Path, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    env = {**li_env, "LIRUN_WRITE_RETRY_SECONDS": "1"}
    li = start_li(
        "run",
        "--run-id",
        "r1",
        "--",
        "sh",
        "-c",
        f"touch {ready}; sleep 1; exit 3",
        env=env,
        cwd=repo,
    )
    poll(ready.exists, what="the child to start")
    with write_lock_held(db_url):
        li.communicate(timeout=60)
    assert li.returncode == 1
    # li is gone and the row still says running: a plain reaper would call it orphaned.
    wait = run_li("wait", "r1", env=env, cwd=repo)
    assert "status=failed\treason=run.failed.exit_nonzero" in wait.stdout, wait
    assert get_row(db_url, "r1")["status_reason_code"] == "run.failed.exit_nonzero"


def _signal_rounds() -> list[tuple[signal.Signals, float]]:
    # Spread over start-up (imports, opening the database, setup) and the run itself.
    delays = [0.08, 0.15, 0.25, 0.35, 0.6]
    return [(sig, d) for d in delays for sig in (signal.SIGINT, signal.SIGTERM)]


@pytest.mark.slow
def test_a_signal_at_any_moment_gives_the_exit_code_of_the_stored_status(
    li_env: dict[str, str], db_url: str, repo: Path
) -> None:
    assert run_li("db", "migrate", env=li_env, cwd=repo).returncode == 0
    problems = []
    for n, (sig, delay) in enumerate(_signal_rounds()):
        run_id = f"sig{n}"
        li = start_li("run", "--run-id", run_id, "--", "sleep", "0.4", env=li_env, cwd=repo)
        time.sleep(delay)
        li.send_signal(sig)
        _, err = li.communicate(timeout=60)
        rows = [r for r in session_rows(db_url) if r["id"] == run_id]
        expected = EXIT_CODE_BY_STATUS[rows[0]["status"]] if rows else 2
        frames = [line for line in err.splitlines() if line.strip().startswith("File ")]
        before_lirun = "Traceback" in err and not any("/lirun/" in f for f in frames)
        if li.returncode < 0 or "Fatal Python error" in err or before_lirun:
            continue  # the signal came while the interpreter itself started: none of our code ran
        if "Traceback" in err or li.returncode != expected:
            problems.append((sig.name, delay, li.returncode, rows and rows[0]["status"], err))
    assert problems == []


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()]


@pytest.mark.slow
def test_processes_the_run_left_behind_are_ended_and_recorded(
    li_env: dict[str, str], db_url: str, repo: Path, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 30 & echo $! >> {pids}; setsid sleep 31 & echo $! >> {pids}; echo x"
    proc = run_li("run", "--run-id", "r1", "--", "sh", "-c", script, env=li_env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    left = _pids(pids)
    assert len(left) == 2
    assert [pid for pid in left if process_alive(pid)] == []
    row = get_row(db_url, "r1")
    assert row["status"] == "completed"
    [entry] = [e for e in row["status_evidence_refs"] if e["kind"] == "killed_descendants"]
    assert sorted(p["pid"] for p in entry["processes"]) == sorted(left)
    # A child caught between fork and exec still shows its parent's command line.
    for process in entry["processes"]:
        assert process["command"] in ("sleep 30", "sleep 31", "[sleep]") or process[
            "command"
        ].startswith(("sh -c", "setsid")), process


@pytest.mark.slow
def test_a_grandchild_dies_with_the_run_when_the_child_is_killed(
    li_env: dict[str, str], db_url: str, repo: Path, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    script = f"setsid sleep 30 & echo $$ $! > {pids}.tmp; mv {pids}.tmp {pids}; wait"
    li = start_li("run", "--run-id", "r1", "--", "sh", "-c", script, env=li_env, cwd=repo)
    poll(pids.exists, what="the child to start")
    shell, grandchild = _pids(pids)
    os.kill(shell, signal.SIGKILL)
    li.communicate(timeout=60)
    assert li.returncode == 1
    poll(lambda: not process_alive(grandchild), timeout=5, what="the grandchild to end")
    row = get_row(db_url, "r1")
    assert row["status"] == "failed"
    [entry] = [e for e in row["status_evidence_refs"] if e["kind"] == "killed_descendants"]
    assert [p["pid"] for p in entry["processes"]] == [grandchild]


def _with_password(db_url: str) -> str:
    if not db_url.startswith("postgresql://"):
        return db_url
    # Trust auth ignores the password; it must still never reach the child.
    user_info = db_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret@", 1)
    return f"{user_info}&password=s3cret"


@pytest.mark.slow
def test_the_child_gets_the_database_without_its_password(
    li_env: dict[str, str], db_url: str, repo: Path, lirun_home: Path
) -> None:
    url = _with_password(db_url)
    env = {**li_env, "LIRUN_DB_URL": url}
    script = "env | grep '^LIRUN_DB_URL=' ; li status --json >/dev/null && echo nested-ok"
    bindir = Path(sys.executable).parent
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    proc = run_li("run", "--run-id", "r1", "--", "sh", "-c", script, env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "s3cret" not in proc.stdout
    [line] = [x for x in proc.stdout.splitlines() if x.startswith("LIRUN_DB_URL=")]
    if db_url.startswith("postgresql://"):
        assert "schema=" in line
        assert "password" not in line
    else:
        assert line == f"LIRUN_DB_URL={db_url}"
    assert "nested-ok" in proc.stdout  # a nested li reads the same database


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_run_dir_left_without_a_row_does_not_block_its_id(
    li_env: dict[str, str], db_url: str, repo: Path, lirun_home: Path
) -> None:
    # What li leaves when killed after run.json and before the row: no child ever ran.
    left = lirun_home / "runs" / "r1"
    (left / "stream").mkdir(parents=True)
    (left / "run.json").write_text(json.dumps({"run_id": "r1", "owner_pid": _dead_pid()}))
    proc = run_li("run", "--run-id", "r1", "--", "echo", "hi", env=li_env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert get_row(db_url, "r1")["status"] == "completed"


def test_a_run_dir_with_output_but_no_row_is_refused_with_what_to_do(
    li_env: dict[str, str], db_url: str, repo: Path, lirun_home: Path
) -> None:
    left = lirun_home / "runs" / "r1"
    (left / "stream").mkdir(parents=True)
    (left / "stream" / "stdout.log").write_text("work\n")
    (left / "run.json").write_text(json.dumps({"run_id": "r1", "owner_pid": _dead_pid()}))
    proc = run_li("run", "--run-id", "r1", "--", "echo", "hi", env=li_env, cwd=repo)
    assert proc.returncode == 2
    assert "move that directory away" in proc.stderr
    assert str(left) in proc.stderr


def _writable_by_others(path: Path) -> bool:
    return bool(path.stat().st_mode & 0o022)


@pytest.mark.slow
def test_detach_logs_and_runs_are_private_under_umask_0(
    li_env: dict[str, str], db_url: str, repo: Path, lirun_home: Path
) -> None:
    env = {**li_env, "LIRUN_HOME": str(lirun_home / "fresh")}
    proc = subprocess.run(
        li_argv("run", "--detach", "--", "echo", "hi"),
        env=env,
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        umask=0,
    )
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    wait = run_li("wait", run_id, env=env, cwd=repo)
    assert wait.returncode == 0, wait.stderr
    home = lirun_home / "fresh"
    run_dir = home / "runs" / run_id
    paths = [home, home / "runs", run_dir, run_dir / "artifacts"]
    paths += [run_dir / "li.stdout.log", run_dir / "li.stderr.log"]
    paths += list((run_dir / "stream").iterdir())
    assert [p for p in paths if _writable_by_others(p)] == []


def test_an_artifact_id_given_twice_is_refused(
    li_env: dict[str, str], db_url: str, repo: Path
) -> None:
    proc = run_li(
        "run", "--artifact", "r=a.md", "--artifact", "r=b.md", "--", "true", env=li_env, cwd=repo
    )
    assert proc.returncode == 2
    assert "--artifact r is given twice" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_full_disk_at_teardown_spools_the_outcome(
    repo: Path, lirun_home: Path, tmp_path: Path, tiny_disk: Callable[[str], Path]
) -> None:
    """SQLite only: a full disk is a file-system fault (the database file is on it)."""
    from support.diskkit import fill, free

    disk = tiny_disk("2m")
    db = str(disk / "state.db")
    env = {**os.environ, "LIRUN_HOME": str(lirun_home), "PYTHONUNBUFFERED": "1"}
    env.update({"LIRUN_DB_URL": db, "LIRUN_WRITE_RETRY_SECONDS": "1"})
    ready, go = tmp_path / "ready", tmp_path / "go"
    script = f"touch {ready}; while [ ! -e {go} ]; do sleep 0.05; done; echo done"
    li = start_li("run", "--run-id", "r1", "--", "sh", "-c", script, env=env, cwd=repo)
    poll(ready.exists, what="the child to start")
    fill(disk)
    go.touch()
    _, err = li.communicate(timeout=60)
    assert li.returncode == 0, err
    assert "Traceback" not in err
    assert "pending" in err
    assert get_row(db, "r1")["status"] == "running"
    # A full disk also refuses the next run before anything starts.
    refused = run_li("run", "--", "echo", "hi", env=env, cwd=repo)
    assert refused.returncode == 2, refused
    assert "nothing was started" in refused.stderr, refused
    free(disk)
    status = run_li("status", "r1", env=env, cwd=repo)
    assert status.returncode == 0, status.stderr
    row = get_row(db, "r1")
    assert (row["status"], row["exit_code"]) == ("completed", 0)


@pytest.mark.slow
def test_a_waiter_already_waiting_reports_the_spooled_cause_not_orphaned(
    li_env: dict[str, str], db_url: str, repo: Path, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    env = {**li_env, "LIRUN_WRITE_RETRY_SECONDS": "1"}
    script = f"touch {ready}; sleep 1; exit 3"
    li = start_li("run", "--run-id", "r1", "--", "sh", "-c", script, env=env, cwd=repo)
    poll(ready.exists, what="the child to start")
    waiter = start_li("wait", "r1", env=env, cwd=repo)
    with write_lock_held(db_url):
        li.communicate(timeout=60)
    out, err = waiter.communicate(timeout=60)
    assert "status=failed\treason=run.failed.exit_nonzero" in out, (out, err)
    assert get_row(db_url, "r1")["status_reason_code"] == "run.failed.exit_nonzero"


@pytest.mark.slow
@pytest.mark.parametrize("cgroup", ["", "off"], ids=["cgroup", "nocgroup"])
def test_the_outcome_is_recorded_before_a_leftover_that_ignores_sigterm_is_killed(
    li_env: dict[str, str], db_url: str, repo: Path, tmp_path: Path, cgroup: str
) -> None:
    ready, pid_file = tmp_path / "ready", tmp_path / "pid"
    script = (
        f"sh -c 'trap \"\" TERM; echo $$ > {pid_file}; touch {ready}; exec sleep 300' & "
        f"while [ ! -e {ready} ]; do sleep 0.01; done; echo done"
    )
    env = {**li_env, "LIRUN_CGROUP": cgroup}
    li = start_li("run", "--run-id", "r1", "--", "sh", "-c", script, env=env, cwd=repo)
    poll(ready.exists, what="the leftover to ignore SIGTERM")
    leftover = int(pid_file.read_text())
    poll(lambda: (get_row(db_url, "r1") or {}).get("status") == "completed", timeout=10,
         what="the outcome")  # fmt: skip
    # The record landed while the leftover still ran out its grace.
    assert process_alive(leftover)
    assert li.poll() is None
    li.communicate(timeout=30)
    assert li.returncode == 0
    assert not process_alive(leftover)
    row = get_row(db_url, "r1")
    assert row["status"] == "completed"
    first, late = [e for e in row["status_evidence_refs"] if e["kind"] == "killed_descendants"]
    assert first["signal"] == "SIGTERM"
    assert leftover in [p["pid"] for p in first["processes"]]
    assert late["signal"] == "SIGKILL"
    assert leftover in [p["pid"] for p in late["processes"]]
    from lirun.store import open_store

    store = open_store(db_url, readonly=True)
    try:
        [event] = [e for e in store.list_admin_events("r1") if e.event_type == "evidence_appended"]
    finally:
        store.close()
    assert event.payload["status"] == "completed"
    assert event.payload["evidence"] == [late]
