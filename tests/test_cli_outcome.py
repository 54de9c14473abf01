"""Outcome truth end to end (docs/outcome.md): real ``li`` processes, fake provider CLIs,
real git repositories and plain directories, both backends.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from support.execkit import get_row, only_row, poll, run_li, send, session_rows, start_li
from support.gitkit import GIT_ENV, commit, git
from support.providerkit import env_with_fake_bin, fake_env


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    path = tmp_path / "plain"
    path.mkdir()
    (path / "input.txt").write_text("in\n", encoding="utf-8")
    return path


def _env(li_env: dict[str, str], fake_bin: Path, fixture: str, **kw: Any) -> dict[str, str]:
    return env_with_fake_bin(fixture, base=li_env, fake_bin=fake_bin, **kw)


def _outcome(db_url: str, run_id: str) -> tuple[str, str]:
    row = get_row(db_url, run_id)
    return row["status"], row["status_reason_code"]


# --- item 1: a crashed resumed run is a provider failure ------------------------------------


@pytest.mark.parametrize(
    ("provider", "first", "crash"),
    [
        ("claude", "claude/success.jsonl", "claude/crash_mid_stream.jsonl"),
        ("claude", "claude/success.jsonl", "claude/crash_after_init.jsonl"),
        ("codex", "codex/success.jsonl", "codex/crash_no_terminal.jsonl"),
    ],
)
def test_a_crashed_resumed_run_is_failed_not_the_earlier_verdict(
    li_env: dict[str, str],
    db_url: str,
    repo: Path,
    fake_bin: Path,
    provider: str,
    first: str,
    crash: str,
) -> None:
    done = run_li("agent", provider, "one", "--json", env=_env(li_env, fake_bin, first), cwd=repo)
    r1 = json.loads(done.stdout)["run_id"]
    assert _outcome(db_url, r1) == ("completed", "run.completed.ok")
    env = _env(li_env, fake_bin, crash)
    proc = run_li("agent", provider, "continue", "--json", "--resume", r1, env=env, cwd=repo)
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    r2 = summary["run_id"]
    assert (summary["status"], summary["reason"]) == ("failed", "run.failed.provider_nonretryable")
    assert _outcome(db_url, r2) == ("failed", "run.failed.provider_nonretryable")
    row = get_row(db_url, r2)
    assert row["engine_session_uid"] == get_row(db_url, r1)["engine_session_uid"]
    assert "no terminal event" in row["status_reason_summary"]
    waited = run_li("wait", "--timeout", "10", r2, env=env, cwd=repo)
    assert waited.returncode == 1
    assert "status=failed" in waited.stdout
    assert _outcome(db_url, r1) == ("completed", "run.completed.ok")  # never touched


def test_a_crash_sharing_its_engine_session_with_a_running_run_is_not_left_running(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, tmp_path: Path
) -> None:
    stalled = tmp_path / "stalled.jsonl"
    stalled.write_text(
        '{"type":"system","subtype":"init","session_id":"11111111-1111-4111-8111-111111111111"}\n'
    )
    env = _env(li_env, fake_bin, "claude/success.jsonl")
    env.update(fake_env(str(stalled), hang_after=True, base={}))
    running = start_li("agent", "claude", "long task", env=env, cwd=repo)
    try:
        poll(
            lambda: any(r["engine_session_uid"] for r in session_rows(db_url)),
            what="the running execution's engine uid",
        )
        crash_env = _env(li_env, fake_bin, "claude/crash_mid_stream.jsonl")
        proc = run_li("agent", "claude", "other task", "--json", env=crash_env, cwd=repo)
        assert proc.returncode == 1, proc.stderr
        crashed = json.loads(proc.stdout)["run_id"]
        assert _outcome(db_url, crashed) == ("failed", "run.failed.provider_nonretryable")
    finally:
        send(running, signal.SIGTERM)


def test_a_crash_never_inherits_another_runs_provider_error(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, tmp_path: Path
) -> None:
    overloaded = tmp_path / "overloaded.jsonl"
    overloaded.write_text(
        '{"type":"system","subtype":"init","session_id":"11111111-1111-4111-8111-111111111111"}\n'
        '{"type":"result","subtype":"success","is_error":true,"api_error_status":529,'
        '"result":"API Error: 529 overloaded",'
        '"session_id":"11111111-1111-4111-8111-111111111111"}\n'
    )
    env = _env(li_env, fake_bin, "claude/success.jsonl")
    env.update(fake_env(str(overloaded), base={}))
    first = json.loads(run_li("agent", "claude", "one", "--json", env=env, cwd=repo).stdout)
    assert _outcome(db_url, first["run_id"])[1] == "run.failed.provider_overloaded"
    crash_env = _env(li_env, fake_bin, "claude/crash_after_init.jsonl")
    proc = run_li("agent", "claude", "two", "--json", env=crash_env, cwd=repo)
    crashed = json.loads(proc.stdout)["run_id"]
    row = get_row(db_url, crashed)
    assert row["status_reason_code"] == "run.failed.provider_nonretryable"
    assert "529" not in row["status_reason_summary"]


# --- item 2: evidence relative to the run's start ---------------------------------------------


@pytest.mark.parametrize("before", ["dirty tree", "unpushed commit"])
def test_work_from_before_the_run_does_not_make_it_completed(
    li_env: dict[str, str], db_url: str, repo: Path, before: str
) -> None:
    if before == "dirty tree":
        (repo / "README.md").write_text("edited by hand earlier\n", encoding="utf-8")
    else:
        git(repo, "checkout", "-q", "-b", "feature")
        commit(repo, "earlier.txt")
    # A command asks for evidence of work with --require-change (its exit 0 is otherwise
    # its verdict); then what was there before the run never counts.
    proc = run_li("run", "--require-change", "--", "true", env=li_env, cwd=repo)
    assert proc.returncode == 1, proc.stderr
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"]) == (
        "completed_empty",
        "run.completed_empty.no_evidence",
    )


def test_an_agent_committing_on_trunk_is_completed(
    li_env: dict[str, str], db_url: str, tmp_path: Path, fake_bin: Path
) -> None:
    repo = tmp_path / "trunk-repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "trunk")
    commit(repo, "base.txt")
    # A silent success otherwise (no tool call, no reply): the commit is the work.
    env = _env(li_env, fake_bin, "claude/success_silent.jsonl", touch="work.txt")
    env.update(GIT_ENV, LIRUN_FAKE_COMMIT="work")
    proc = run_li("agent", "claude", "commit it", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert git(repo, "log", "--oneline").count("\n") == 1  # the fake agent committed
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"]) == ("completed", "run.completed.ok")
    (git_ev,) = [e for e in row["status_evidence_refs"] if e["kind"] == "git"]
    assert git_ev["commits_since_start"] == 1
    assert git_ev["base_ref"] is None


@pytest.mark.parametrize(
    ("options", "command", "status", "reason"),
    [
        ([], ["true"], "completed", "run.completed.ok"),
        ([], ["sh", "-c", "echo ok"], "completed", "run.completed.ok"),
        ([], ["sh", "-c", "echo out > output.txt"], "completed", "run.completed.ok"),
        (["--require-change"], ["true"], "completed_empty", "run.completed_empty.no_evidence"),
        (
            ["--require-change"],
            ["sh", "-c", "echo ok"],
            "completed_empty",
            "run.completed_empty.no_evidence",
        ),
        (
            ["--require-change"],
            ["sh", "-c", "echo out > output.txt"],
            "completed",
            "run.completed.ok",
        ),
    ],
    ids=[
        "silent",
        "output",
        "a new file",
        "require-change silent",
        "require-change output",
        "require-change a new file",
    ],
)
def test_outside_git_a_command_is_judged_by_its_exit_code_unless_it_asks_for_a_change(
    li_env: dict[str, str],
    db_url: str,
    plain: Path,
    options: list[str],
    command: list[str],
    status: str,
    reason: str,
) -> None:
    proc = run_li("run", *options, "--", *command, env=li_env, cwd=plain)
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"]) == (status, reason), proc.stderr
    assert proc.returncode == (0 if status == "completed" else 1)


def test_outside_git_a_silent_agent_is_completed_empty(
    li_env: dict[str, str], db_url: str, plain: Path, fake_bin: Path
) -> None:
    env = _env(li_env, fake_bin, "codex/turn_completed_silent.jsonl")
    proc = run_li("agent", "codex", "do it", env=env, cwd=plain)
    assert proc.returncode == 1, proc.stderr
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"]) == (
        "completed_empty",
        "run.completed_empty.no_activity",
    )


def test_every_tool_call_denied_is_completed_empty_even_in_a_dirty_tree(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    (repo / "README.md").write_text("dirty before the run\n", encoding="utf-8")
    env = _env(li_env, fake_bin, "claude/all_denied_with_reply.jsonl")
    proc = run_li("agent", "claude", "write a.txt", env=env, cwd=repo)
    assert proc.returncode == 1, proc.stderr
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"]) == (
        "completed_empty",
        "run.completed_empty.permission_denied",
    )
    assert "1 of 1 tool call(s) denied" in row["status_reason_summary"]


def test_an_agent_that_changes_the_tree_is_completed_even_if_silent(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    env = _env(li_env, fake_bin, "claude/success_silent.jsonl", touch="src/fixed.py")
    proc = run_li("agent", "claude", "fix", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"]) == ("completed", "run.completed.ok")
    (git_ev,) = [e for e in row["status_evidence_refs"] if e["kind"] == "git"]
    assert git_ev["tree_changed"] is True
    assert git_ev["commits_since_start"] == 0


# --- li run --require-change --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "status"),
    [("echo 3 passed", "completed_empty"), ("echo 3 passed; echo x > out.txt", "completed")],
    ids=["stdout only", "a change"],
)
def test_require_change_does_not_count_stdout(
    li_env: dict[str, str], db_url: str, repo: Path, script: str, status: str
) -> None:
    proc = run_li("run", "--require-change", "--", "sh", "-c", script, env=li_env, cwd=repo)
    assert proc.stdout.startswith("3 passed")
    assert only_row(db_url)["status"] == status, proc.stderr


def test_require_change_survives_detach(li_env: dict[str, str], db_url: str, repo: Path) -> None:
    proc = run_li(
        "run", "--detach", "--require-change", "--", "sh", "-c", "echo hi", env=li_env, cwd=repo
    )
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    waited = run_li("wait", "--timeout", "30", run_id, env=li_env, cwd=repo)
    assert "status=completed_empty" in waited.stdout, waited.stderr


def test_run_help_says_the_exit_code_is_the_verdict_and_offers_require_change(
    li_env: dict[str, str], repo: Path
) -> None:
    out = " ".join(run_li("run", "--help", env=li_env, cwd=repo).stdout.split())
    assert "A command's exit code is its verdict: exit 0 is completed" in out
    assert "--require-change" in out
    assert "reply" not in out
    assert "assistant" not in out
