"""``li run`` end to end: real ``li`` processes, real children, real git repos, both backends."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lirun.lifecycle import EXIT_CODE_BY_STATUS
from support.execkit import (
    get_row,
    li_argv,
    only_row,
    opened_store,
    poll,
    process_alive,
    run_li,
    send,
    session_rows,
    start_li,
    wait_for_running_row,
    wait_line_for,
)


def test_a_silent_command_that_exits_0_is_completed_by_its_exit_code(
    li_env: dict[str, str], db_url: str, repo: Path
) -> None:
    """A command's exit code is its verdict (issue 18): `li run -- true` in a clean repo,
    which prints nothing and changes nothing, is completed, exit 0."""
    proc = run_li("run", "--", "true", env=li_env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"], row["exit_code"]) == (
        "completed",
        "run.completed.ok",
        0,
    )
    assert row["status_reason_summary"] == "completed: command exited 0"
    exit_code, cwd = row["status_evidence_refs"]
    assert exit_code == {"kind": "exit_code", "exit_code": 0, "label": "command exited 0"}
    # the exit code decided; what the cwd's comparison saw (nothing) is recorded after it
    assert (cwd["kind"], cwd["changed"], cwd["commits_since_start"]) == ("git", False, 0)
    assert "completed (run.completed.ok)" in proc.stderr


def test_require_change_with_no_change_in_a_git_repo_is_completed_empty(
    li_env: dict[str, str], db_url: str, repo: Path
) -> None:
    proc = run_li("run", "--require-change", "--", "true", env=li_env, cwd=repo)
    assert proc.returncode == 1, proc.stderr
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"], row["exit_code"]) == (
        "completed_empty",
        "run.completed_empty.no_evidence",
        1,
    )
    assert "completed_empty" in proc.stderr


def test_a_profile_that_asks_for_a_change_makes_exit_0_need_one(
    li_env: dict[str, str], db_url: str, repo: Path, lirun_home: Path
) -> None:
    (lirun_home / "profiles").mkdir(exist_ok=True)
    (lirun_home / "profiles" / "strict.yaml").write_text("defaults:\n  require_change: true\n")
    proc = run_li("run", "--profile", "strict", "--", "true", env=li_env, cwd=repo)
    assert proc.returncode == 1, proc.stderr
    assert only_row(db_url)["status_reason_code"] == "run.completed_empty.no_evidence"


def test_a_commands_output_is_output_never_an_assistant_message(
    li_env: dict[str, str], db_url: str, repo: Path
) -> None:
    """`li run -- git status` used to be "completed: non-empty assistant message"."""
    proc = run_li("run", "--", "git", "status", env=li_env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    row = only_row(db_url)
    assert row["status_reason_summary"] == "completed: command exited 0"
    assert "assistant" not in json.dumps(row["status_evidence_refs"])
    shown = run_li("status", row["id"], env=li_env, cwd=repo)
    assert shown.returncode == 0, shown.stderr
    labels = [line.split()[0] for line in shown.stdout.splitlines() if line.strip()]
    assert "output" in labels
    assert "reply" not in labels
    assert "assistant message" not in shown.stdout
    detail = json.loads(run_li("status", "--json", row["id"], env=li_env, cwd=repo).stdout)
    assert detail["output_text"] == proc.stdout != ""
    assert "reply_text" not in detail
    listed = json.loads(run_li("status", "--json", env=li_env, cwd=repo).stdout)
    assert "output_text" in listed[0]
    assert "reply_text" not in listed[0]


def test_a_command_that_says_something_is_completed_and_fully_recorded(
    li_env: dict[str, str], db_url: str, repo: Path, lirun_home: Path
) -> None:
    proc = run_li("run", "--", "sh", "-c", "echo hi; echo oops >&2", env=li_env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "hi\n"  # the child's stdout is the result
    assert "oops" in proc.stderr
    row = only_row(db_url)
    run_id = row["id"]
    assert (row["status"], row["status_reason_code"], row["exit_code"]) == (
        "completed",
        "run.completed.ok",
        0,
    )
    assert row["provider"] == "command"
    assert row["command_json"] == ["sh", "-c", "echo hi; echo oops >&2"]
    assert row["cwd"] == str(repo)
    assert row["run_dir"] == str(lirun_home / "runs" / run_id)
    assert row["owner_pid"]
    assert row["owner_host"]
    assert row["heartbeat_at"]
    assert row["lease_seconds"] >= 60
    assert row["branch_id"] == run_id
    assert row["resumed_from"] is None
    run_dir = Path(row["run_dir"])
    assert json.loads((run_dir / "run.json").read_text())["run_id"] == run_id
    assert (run_dir / "stream" / "stdout.log").read_text() == "hi\n"
    assert (run_dir / "stream" / "stderr.log").read_text() == "oops\n"
    with opened_store(db_url) as store:
        messages = store.sessions.list_messages(run_id)
        branch = store.sessions.get_branch(run_id)
    assert [(m.role, m.content) for m in messages] == [("output", "hi\n")]
    assert branch is not None
    assert branch.last_session_id == run_id


def test_nonzero_exit_is_failed_with_the_exit_code_as_evidence(
    li_env: dict[str, str], db_url: str, repo: Path
) -> None:
    proc = run_li("run", "--json", "--", "sh", "-c", "echo partial; exit 3", env=li_env, cwd=repo)
    assert proc.returncode == 1
    summary = json.loads(proc.stdout)  # --json owns stdout; the child's output went to stderr
    assert "partial" in proc.stderr
    row = only_row(db_url)
    assert summary == {
        "schema": "lirun.run_result/1",
        "run_id": row["id"],
        "status": "failed",
        "reason": "run.failed.exit_nonzero",
        "run_dir": row["run_dir"],
        "artifact_dir": row["artifacts_path"],
        "exit_code": 1,
        "branch_id": row["id"],
        "engine_session_uid": None,
    }
    assert row["status_reason_code"] == "run.failed.exit_nonzero"
    assert {"kind": "exit_code", "exit_code": 3} in row["status_evidence_refs"]


def test_missing_required_artifact_fails_the_run(
    li_env: dict[str, str], db_url: str, repo: Path, tmp_path: Path
) -> None:
    save = tmp_path / "out"
    proc = run_li(
        "run", "--save", str(save), "--artifact", "report=report.md",
        "--", "sh", "-c", "echo working", env=li_env, cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 1
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"]) == ("failed", "run.failed.missing_artifact")
    assert row["artifacts_path"] == str(save)
    assert row["artifact_contract_json"]["expected"][0]["id"] == "report"


def test_produced_artifact_and_missing_optional_one_complete(
    li_env: dict[str, str], db_url: str, repo: Path, tmp_path: Path
) -> None:
    save = tmp_path / "out"
    save.mkdir()
    proc = run_li(
        "run", "--save", str(save), "--artifact", "report=report.md", "--artifact", "log=x.log?",
        "--", "sh", "-c", f"echo done > {save}/report.md", env=li_env, cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    row = only_row(db_url)
    assert row["status"] == "completed"
    assert row["artifact_verification_json"]["status"] == "warning"


def test_the_child_writes_deliverables_into_the_artifact_dir_it_is_given(
    li_env: dict[str, str], db_url: str, repo: Path, tmp_path: Path
) -> None:
    save = tmp_path / "not" / "yet" / "there"
    script = 'echo done > "$LIRUN_ARTIFACT_DIR/report.md"; echo "$LIRUN_PARENT_RUN_ID"'
    proc = run_li(
        "run", "--save", str(save), "--artifact", "report=report.md",
        "--", "sh", "-c", script, env=li_env, cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    row = only_row(db_url)
    assert row["status"] == "completed"
    assert (save / "report.md").read_text() == "done\n"
    assert proc.stdout.strip() == row["id"]
    assert row["artifact_verification_json"]["produced"][0]["id"] == "report"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--artifact", "report=../escape.md", "--", "true"], "report"),
        (["--artifact", "no-equals-sign", "--", "true"], "ID=PATH"),
        (["--cwd", "/nonexistent/dir", "--", "true"], "not a directory"),
        (["--", "no-such-command-xyz"], "not found on PATH"),
        (["--timeout", "-1", "--", "true"], "is negative"),
        (["--"], "no command given"),
        (["--resume", "nope", "--", "true"], "no such branch"),
        (["--invocation", "nope", "--", "true"], "no such invocation"),
        (["--profile", "nope", "--", "true"], "no profile named"),
    ],
)
def test_setup_errors_exit_2_with_no_row_and_no_run_dir(
    li_env: dict[str, str], db_url: str, repo: Path, lirun_home: Path, argv: list[str], message: str
) -> None:
    proc = run_li("run", *argv, env=li_env, cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert proc.stdout == ""
    assert session_rows(db_url) == [] if _db_exists(db_url) else True
    assert not (lirun_home / "runs").exists() or not any((lirun_home / "runs").iterdir())


def test_malformed_profile_contract_exits_2_naming_the_entry(
    li_env: dict[str, str], db_url: str, repo: Path, lirun_home: Path
) -> None:
    (lirun_home / "profiles").mkdir()
    (lirun_home / "profiles" / "writer.yaml").write_text(
        "artifacts:\n  - id: summary\n    path: /etc/passwd\n"
    )
    proc = run_li("run", "--profile", "writer", "--", "true", env=li_env, cwd=repo)
    assert proc.returncode == 2
    assert "summary" in proc.stderr
    assert "writer.yaml" in proc.stderr
    assert session_rows(db_url) == [] if _db_exists(db_url) else True


def test_profile_contract_is_snapshotted_and_enforced(
    li_env: dict[str, str], db_url: str, repo: Path, lirun_home: Path
) -> None:
    (lirun_home / "profiles").mkdir()
    (lirun_home / "profiles" / "writer.yaml").write_text(
        "artifacts:\n  - id: summary\n    path: summary.md\n"
    )
    proc = run_li("run", "--profile", "writer", "--", "sh", "-c", "echo hi", env=li_env, cwd=repo)
    assert proc.returncode == 1
    row = only_row(db_url)
    assert row["status_reason_code"] == "run.failed.missing_artifact"
    (entry,) = row["artifact_contract_json"]["expected"]
    assert (entry["id"], entry["source"]) == ("summary", "agent_profile")


def _db_exists(db_url: str) -> bool:
    return db_url.startswith("postgres") or os.path.exists(db_url)


def test_wall_clock_timeout_is_timed_out_124(
    li_env: dict[str, str], db_url: str, repo: Path
) -> None:
    started = time.monotonic()
    proc = run_li("run", "--timeout", "0.5", "--", "sleep", "30", env=li_env, cwd=repo)
    assert proc.returncode == 124
    assert time.monotonic() - started < 15
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"], row["exit_code"]) == (
        "timed_out",
        "run.timed_out.deadline",
        124,
    )


def test_idle_watchdog_is_timed_out_idle(li_env: dict[str, str], db_url: str, repo: Path) -> None:
    script = "echo started; sleep 30"
    proc = run_li("run", "--idle-timeout", "0.6", "--", "sh", "-c", script, env=li_env, cwd=repo)
    assert proc.returncode == 124
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"]) == ("timed_out", "run.timed_out.idle")
    stop = next(e for e in row["status_evidence_refs"] if e["kind"] == "supervisor_stop")
    assert stop["killed_by"] == "idle"


@pytest.mark.parametrize(
    ("sig", "status", "reason"),
    [
        (signal.SIGINT, "aborted", "run.cancelled.sigint"),
        (signal.SIGTERM, "cancelled", "run.cancelled.sigterm"),
    ],
)
def test_signal_to_li_stops_the_child_and_commits_the_outcome(
    li_env: dict[str, str],
    db_url: str,
    repo: Path,
    tmp_path: Path,
    sig: signal.Signals,
    status: str,
    reason: str,
) -> None:
    pidfile = tmp_path / "child.pid"
    script = f"echo $$ > {pidfile}; sleep 30 & wait"
    proc = start_li("run", "--", "sh", "-c", script, env=li_env, cwd=repo)
    wait_for_running_row(db_url)
    poll(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the child pid")
    code, _, _ = send(proc, sig)
    assert code == EXIT_CODE_BY_STATUS[status]
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"], row["exit_code"]) == (status, reason, code)
    assert poll(lambda: not process_alive(int(pidfile.read_text())), what="child to die")


def test_sigkill_to_li_leaves_a_running_row_that_reap_finalizes(
    li_env: dict[str, str], db_url: str, repo: Path, tmp_path: Path
) -> None:
    pidfile, grandchild = tmp_path / "child.pid", tmp_path / "grandchild.pid"
    script = f"echo $$ > {pidfile}; sleep 30 & echo $! > {grandchild}; wait"
    proc = start_li("run", "--", "sh", "-c", script, env=li_env, cwd=repo)
    row = wait_for_running_row(db_url)
    poll(lambda: grandchild.exists() and grandchild.read_text().strip(), what="the pids")
    child, sleeper = int(pidfile.read_text()), int(grandchild.read_text())
    poll(lambda: get_row(db_url, row["id"])["child_pid"] == child, what="the child recorded")
    proc.kill()  # li cannot clean up after SIGKILL: its child group runs on, unsupervised
    proc.communicate(timeout=30)
    row = get_row(db_url, row["id"])
    assert row["status"] == "running"
    assert process_alive(sleeper)
    assert row["owner_pid"] == proc.pid
    assert row["owner_start_time"]
    assert row["heartbeat_at"]
    reap = run_li("reap", env=li_env, cwd=repo)
    assert reap.returncode == 0, reap.stderr
    row = get_row(db_url, row["id"])
    assert (row["status"], row["status_reason_code"]) == ("failed", "session.orphaned.no_process")
    stopped = [e for e in row["status_evidence_refs"] if e["kind"] == "orphaned_process_group"]
    assert stopped == [{"kind": "orphaned_process_group", "pgid": child, "signal": "SIGTERM"}]
    assert poll(lambda: not process_alive(child), what="the orphaned child to stop")
    assert poll(lambda: not process_alive(sleeper), what="its grandchild to stop")


def test_heartbeat_renews_while_the_child_runs(
    li_env: dict[str, str], db_url: str, repo: Path
) -> None:
    env = {**li_env, "LIRUN_HEARTBEAT_INTERVAL": "0.1"}
    proc = start_li("run", "--", "sleep", "1.5", env=env, cwd=repo)
    row = wait_for_running_row(db_url)
    first = row["heartbeat_at"]
    poll(lambda: get_row(db_url, row["id"])["heartbeat_at"] > first, what="a heartbeat")
    proc.communicate(timeout=30)
    final = get_row(db_url, row["id"])
    assert final["status"] == "completed"
    assert final["lease_seconds"] >= 4 * 0.1


def test_resume_creates_a_new_row_linked_to_the_branch(
    li_env: dict[str, str], db_url: str, repo: Path
) -> None:
    first = run_li("run", "--json", "--", "sh", "-c", "echo one", env=li_env, cwd=repo)
    first_id = json.loads(first.stdout)["run_id"]
    second = run_li(
        "run", "--json", "--resume", first_id, "--", "sh", "-c", "echo two", env=li_env, cwd=repo
    )
    assert second.returncode == 0, second.stderr
    second_id = json.loads(second.stdout)["run_id"]
    assert second_id != first_id
    row = get_row(db_url, second_id)
    assert (row["branch_id"], row["resumed_from"]) == (first_id, first_id)
    assert get_row(db_url, first_id)["status"] == "completed"  # never reopened
    with opened_store(db_url) as store:
        branch = store.sessions.get_branch(first_id)
    assert branch is not None
    assert (branch.first_session_id, branch.last_session_id) == (first_id, second_id)


def test_resume_refuses_a_branch_whose_last_execution_is_running(
    li_env: dict[str, str], db_url: str, repo: Path
) -> None:
    proc = start_li("run", "--", "sleep", "30", env=li_env, cwd=repo)
    row = wait_for_running_row(db_url)
    try:
        again = run_li("run", "--resume", row["id"], "--", "true", env=li_env, cwd=repo)
        assert again.returncode == 2
        assert "still running" in again.stderr
    finally:
        send(proc, signal.SIGTERM)
    assert len(session_rows(db_url)) == 1


def test_resume_on_timeout_runs_one_more_leg_in_the_same_execution(
    li_env: dict[str, str], db_url: str, repo: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "first-leg-done"
    script = f"if [ -e {marker} ]; then echo finished; else touch {marker}; sleep 30; fi"
    proc = run_li(
        "run", "--timeout", "0.8", "--resume-on-timeout", "--", "sh", "-c", script,
        env=li_env, cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    row = only_row(db_url)
    assert row["status"] == "completed"
    legs = [e for e in row["status_evidence_refs"] if e["kind"] == "leg"]
    assert [(leg["leg"], leg["status"]) for leg in legs] == [(1, "timed_out"), (2, "completed")]
    with opened_store(db_url) as store:
        history = [t.status for t in store.list_transitions("session", row["id"])]
    assert history == ["running", "completed"]  # the first leg deferred: no terminal write
    stdout_log = Path(row["run_dir"]) / "stream" / "stdout.log"
    assert stdout_log.read_text() == "finished\n"


def test_detach_prints_the_id_and_wait_prints_the_line_the_record_holds(
    li_env: dict[str, str], db_url: str, repo: Path
) -> None:
    proc = run_li("run", "--detach", "--", "sh", "-c", "sleep 0.5; echo hi", env=li_env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    assert get_row(db_url, run_id)["status"] in ("running", "completed")
    waited = run_li("wait", "--timeout", "30", run_id, env=li_env, cwd=repo)
    assert waited.returncode == 0, waited.stderr
    row = get_row(db_url, run_id)
    assert row["status"] == "completed"
    assert row["owner_pid"] != os.getpid()
    assert waited.stdout == wait_line_for(row) + "\n"
    assert (Path(row["run_dir"]) / "stream" / "stdout.log").read_text() == "hi\n"


def test_run_id_reuse_is_refused(li_env: dict[str, str], db_url: str, repo: Path) -> None:
    first = run_li("run", "--run-id", "fixed-1", "--", "true", env=li_env, cwd=repo)
    assert first.returncode == 0
    again = run_li("run", "--run-id", "fixed-1", "--", "sh", "-c", "exit 3", env=li_env, cwd=repo)
    assert again.returncode == 2
    assert "already used" in again.stderr
    assert get_row(db_url, "fixed-1")["status"] == "completed"  # the first run's, untouched


def test_invocation_is_linked(li_env: dict[str, str], db_url: str, repo: Path) -> None:
    with opened_store(db_url) as store:
        inv = store.invocations.create(skill="review")
    proc = run_li("run", "--invocation", inv.id, "--", "true", env=li_env, cwd=repo)
    assert proc.returncode == 0
    assert only_row(db_url)["invocation_id"] == inv.id


def test_cwd_option_sets_where_the_child_runs_and_evidence_is_checked(
    li_env: dict[str, str], db_url: str, repo: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = run_li(
        "run", "--cwd", str(repo), "--", "sh", "-c", "echo change >> README.md",
        env=li_env, cwd=elsewhere,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    row = only_row(db_url)
    assert (row["status"], row["cwd"]) == ("completed", str(repo))  # a dirty tree is evidence


def test_nested_li_does_not_inherit_the_run_id(
    li_env: dict[str, str], db_url: str, repo: Path
) -> None:
    env = {**li_env, "LIRUN_RUN_ID": "outer-1"}
    inner = f"{shlex.quote(sys.executable)} -m lirun run -- sh -c 'echo inner'"
    proc = run_li("run", "--", "sh", "-c", inner, env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    rows = {r["id"]: r for r in session_rows(db_url)}
    assert "outer-1" in rows
    assert len(rows) == 2
    (inner_row,) = [r for r in rows.values() if r["id"] != "outer-1"]
    assert inner_row["status"] == "completed"


def test_stdin_is_passed_through(li_env: dict[str, str], db_url: str, repo: Path) -> None:
    proc = subprocess.run(
        li_argv("run", "--", "cat"),
        input="piped data\n",
        env=li_env,
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "piped data\n"


def test_a_command_that_cannot_start_after_setup_is_finalized_failed(
    store: Any, repo: Path
) -> None:
    from lirun.exec.execution import execute
    from lirun.exec.legs import CommandProgram
    from lirun.exec.request import RunRequest

    request = RunRequest(program=CommandProgram(["/nonexistent/tool"]), cwd=str(repo))
    result = execute(request, store=store)
    assert (result.status, result.reason, result.exit_code) == (
        "failed",
        "run.failed.exception",
        1,
    )
    row = store.get_entity("session", result.run_id)
    assert row["status"] == "failed"
    (cause,) = [e for e in row["status_evidence_refs"] if e["kind"] == "exception"]
    assert cause["type"].endswith("SpawnError")
    assert "/nonexistent/tool" in cause["message"]
