"""``li agent`` end to end with fake provider executables replaying docs/providers.md streams.

Every fixture shape must end with the status and reason its expectation row gives, on
both backends, in a clean git repo.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from lirun.exec.agent_legs import CONTINUATION_PROMPT
from lirun.lifecycle import EXIT_CODE_BY_STATUS
from support.execkit import (
    get_row,
    only_row,
    opened_store,
    poll,
    run_li,
    send,
    session_rows,
    start_li,
    wait_line_for,
)
from support.providerkit import (
    env_with_fake_bin,
    fake_env,
    load_expectations,
)

EXPECTATIONS = load_expectations()


def _env(li_env: dict[str, str], fake_bin: Path, fixture: str, **kw: Any) -> dict[str, str]:
    return env_with_fake_bin(fixture, base=li_env, fake_bin=fake_bin, **kw)


def _timer_flags(row: dict[str, Any]) -> list[str]:
    """Short timers for the shapes that hang; none for the others (they must end alone)."""
    if not row["hang_after"]:
        return []
    killed_by = row["finish"]["killed_by"]
    if killed_by == "grace":
        return ["--grace", "0.5"]
    if killed_by == "provider":
        return []  # li stops it at the stream's first auth signal
    if killed_by == "stall":
        return ["--stall-timeout", "1"]
    return ["--idle-timeout", "1"]


@pytest.mark.parametrize("fixture", sorted(EXPECTATIONS))
def test_each_fixture_shape_ends_as_expected(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, fixture: str
) -> None:
    row_expected = EXPECTATIONS[fixture]
    provider = row_expected["provider"]
    env = _env(li_env, fake_bin, fixture)
    args = ["agent", provider, "fix the test", "--json", *_timer_flags(row_expected)]
    proc = run_li(*args, env=env, cwd=repo)
    status = row_expected["final_status_in_clean_repo"]
    reason = row_expected["final_reason_in_clean_repo"]
    assert proc.returncode == EXIT_CODE_BY_STATUS[status], proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["status"], summary["reason"]) == (status, reason)
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"]) == (status, reason)
    uid = row_expected["engine_session_uid"]
    assert row["engine_session_uid"] == uid == summary["engine_session_uid"]
    assert row["provider"] == provider
    assert "fix the test" not in row["command_json"]
    assert row["prompt"] == "fix the test"
    with opened_store(db_url) as store:
        branch = store.sessions.get_branch(row["id"])
        messages = store.sessions.list_messages(row["id"])
    assert branch is not None
    assert branch.engine_session_uid == uid
    assert branch.provider == provider
    reply = row_expected["reply"]
    if reply.strip():
        assert reply in [m.content for m in messages if m.role == "assistant"]
    stream = Path(row["run_dir"]) / "stream" / f"{row['id']}.jsonl"
    fixture_text = (Path(__file__).parent / "fixtures" / fixture).read_text()
    if row_expected.get("stops_early"):  # li stopped it: what it wrote, exactly
        assert fixture_text.startswith(stream.read_text())
    else:
        assert stream.read_text() == fixture_text  # the buffer is an exact copy of the stream


def test_answer_goes_to_stdout_and_progress_to_stderr(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    env = _env(li_env, fake_bin, "claude/success.jsonl")
    proc = run_li("agent", "claude", "fix it", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Done: test fixed.\n"
    assert "claude: -> Bash" in proc.stderr
    assert "completed (run.completed.ok)" in proc.stderr
    quiet = run_li("agent", "claude", "fix it", "--quiet", env=env, cwd=repo)
    assert "-> Bash" not in quiet.stderr


def test_model_and_prompt_reach_the_provider_command_line(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, tmp_path: Path
) -> None:
    log = tmp_path / "argv.jsonl"
    env = _env(li_env, fake_bin, "claude/success.jsonl", argv_log=log)
    proc = run_li("agent", "claude/claude-sonnet-4-5", "fix it", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    (call,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert call["argv"] == [
        "-p", "--output-format", "stream-json", "--verbose", "--model", "claude-sonnet-4-5",
    ]  # fmt: skip
    assert call["stdin"] == "fix it"  # on stdin: never visible in ps
    assert call["cwd"] == str(repo)
    assert only_row(db_url)["model"] == "claude-sonnet-4-5"


def test_a_bare_result_text_is_recorded_as_the_reply(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, tmp_path: Path
) -> None:
    stream = tmp_path / "bare.jsonl"
    stream.write_text(
        '{"type":"system","subtype":"init","session_id":"s-1"}\n'
        '{"type":"result","subtype":"success","is_error":false,"result":"All good.",'
        '"session_id":"s-1"}\n'
    )
    env = _env(li_env, fake_bin, "claude/success.jsonl")
    env.update(fake_env(str(stream), base={}))
    proc = run_li("agent", "claude", "check", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    row = only_row(db_url)
    assert row["status"] == "completed"
    with opened_store(db_url) as store:
        replies = [
            m.content for m in store.sessions.list_messages(row["id"]) if m.role == "assistant"
        ]
    assert replies == ["All good."]


@pytest.mark.parametrize("how", ["path", "env", "flag-not-executable", "env-missing"])
def test_missing_or_unusable_provider_exits_2_with_no_row(
    li_env: dict[str, str], db_url: str, repo: Path, tmp_path: Path, lirun_home: Path, how: str
) -> None:
    env = {**li_env, "PATH": str(tmp_path / "empty-path")}
    env.pop("LIRUN_CLAUDE_BIN", None)
    args = ["agent", "claude", "hi"]
    not_exec = tmp_path / "claude"
    not_exec.write_text("#!/bin/sh\n")
    if how == "env-missing":
        env["LIRUN_CLAUDE_BIN"] = str(tmp_path / "nope")
    elif how == "flag-not-executable":
        args += ["--bin", str(not_exec)]
    proc = run_li(*args, env=env, cwd=repo)
    assert proc.returncode == 2
    expected = {"path": "not found on PATH", "env": "not found on PATH"}.get(how, "claude")
    assert expected in proc.stderr
    if how == "flag-not-executable":
        assert "not executable" in proc.stderr
    assert not (lirun_home / "runs").exists()
    if db_url.startswith("postgres") or os.path.exists(db_url):
        assert session_rows(db_url) == []


def test_bin_env_var_is_used(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, tmp_path: Path
) -> None:
    env = _env(li_env, fake_bin, "codex/success.jsonl")
    env["PATH"] = os.environ["PATH"]
    env["LIRUN_CODEX_BIN"] = str(fake_bin / "codex")
    proc = run_li("agent", "codex", "go", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert only_row(db_url)["command_json"][0] == str(fake_bin / "codex")


def test_unknown_provider_is_a_usage_error(li_env: dict[str, str], db_url: str, repo: Path) -> None:
    proc = run_li("agent", "nosuchcli", "hi", env=li_env, cwd=repo)
    assert proc.returncode == 2
    assert "known providers" in proc.stderr


@pytest.mark.parametrize(
    ("provider", "fixture", "resume_args"),
    [
        ("claude", "claude/success.jsonl", ["--resume", "11111111-1111-4111-8111-111111111111"]),
        ("codex", "codex/success.jsonl", ["resume", "0199a213-81c0-7800-8aa1-bbab2a035a53"]),
        ("pi", "pi/ok.jsonl", ["--session", "01a24272-c808-7491-a858-f730c9982205"]),
        ("gemini", "gemini/ok.jsonl", ["--resume", "b37cfe77-e9c6-4a91-be9d-c145b58677ff"]),
        ("copilot", "copilot/ok.jsonl", ["--resume", "379d68d6-6e96-49b1-951b-157a8045ae68"]),
        ("opencode", "opencode/ok.jsonl", ["--session", "ses_dbd8aac81ffexhmS0jLyxTJzbG"]),
    ],
)
def test_resume_continues_the_branch_with_the_engine_session(
    li_env: dict[str, str],
    db_url: str,
    repo: Path,
    fake_bin: Path,
    tmp_path: Path,
    provider: str,
    fixture: str,
    resume_args: list[str],
) -> None:
    log = tmp_path / "argv.jsonl"
    env = _env(li_env, fake_bin, fixture, argv_log=log)
    first = json.loads(run_li("agent", provider, "one", "--json", env=env, cwd=repo).stdout)
    proc = run_li("agent", provider, "two", "--json", "--resume", first["run_id"], env=env,
                  cwd=repo)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    second = json.loads(proc.stdout)
    assert second["run_id"] != first["run_id"]
    assert second["branch_id"] == first["run_id"]
    row = get_row(db_url, second["run_id"])
    assert (row["branch_id"], row["resumed_from"]) == (first["run_id"], first["run_id"])
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    calls = [entry["argv"] for entry in logged]
    assert len(calls) == 2
    joined = " ".join(calls[1])
    assert " ".join(resume_args) in joined
    assert not any(a in calls[0] for a in resume_args[1:])
    assert [entry["stdin"] for entry in logged] == ["one", "two"]
    assert not any("two" in arg for arg in calls[1])


def test_resume_with_another_provider_is_refused(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    env = _env(li_env, fake_bin, "claude/success.jsonl")
    first = json.loads(run_li("agent", "claude", "one", "--json", env=env, cwd=repo).stdout)
    proc = run_li("agent", "codex", "two", "--resume", first["run_id"], env=env, cwd=repo)
    assert proc.returncode == 2
    assert "belongs to claude" in proc.stderr
    assert len(session_rows(db_url)) == 1


def test_resume_on_timeout_resumes_the_engine_session_in_the_same_row(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, tmp_path: Path
) -> None:
    log = tmp_path / "argv.jsonl"
    env = _env(li_env, fake_bin, "codex/stall_after_turn_started.jsonl", argv_log=log)
    proc = run_li(
        "agent", "codex", "go", "--idle-timeout", "0.8", "--resume-on-timeout",
        env=env, cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 124
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"]) == ("timed_out", "run.timed_out.idle")
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    calls = [entry["argv"] for entry in logged]
    assert len(calls) == 2
    assert calls[1][-3:] == ["resume", "0199a213-81c0-7800-8aa1-000000000005", "-"]
    assert [entry["stdin"] for entry in logged] == ["go", CONTINUATION_PROMPT]
    with opened_store(db_url) as store:
        history = [t.status for t in store.list_transitions("session", row["id"])]
    assert history == ["running", "timed_out"]


@pytest.mark.parametrize(
    ("sig", "status"), [(signal.SIGINT, "aborted"), (signal.SIGTERM, "cancelled")]
)
def test_signal_while_the_agent_stalls(
    li_env: dict[str, str],
    db_url: str,
    repo: Path,
    fake_bin: Path,
    sig: signal.Signals,
    status: str,
) -> None:
    env = _env(li_env, fake_bin, "codex/stall_after_turn_started.jsonl")
    proc = start_li("agent", "codex", "go", env=env, cwd=repo)

    def engine_uid_recorded() -> bool:
        rows = session_rows(db_url)
        return bool(rows) and rows[0]["engine_session_uid"] is not None

    poll(engine_uid_recorded, what="the engine uid on the running row")  # recorded live
    assert only_row(db_url)["status"] == "running"
    code, _, _ = send(proc, sig)
    assert code == EXIT_CODE_BY_STATUS[status]
    row = only_row(db_url)
    assert row["status"] == status
    assert row["engine_session_uid"] == "0199a213-81c0-7800-8aa1-000000000005"


def test_detach_then_wait(li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path) -> None:
    env = _env(li_env, fake_bin, "claude/success.jsonl", delay=0.2)
    proc = run_li("agent", "claude", "fix", "--detach", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    waited = run_li("wait", "--timeout", "30", run_id, env=env, cwd=repo)
    assert waited.returncode == 0, waited.stderr
    row = get_row(db_url, run_id)
    assert row["status"] == "completed"
    assert waited.stdout == wait_line_for(row) + "\n"


def test_playbook_prompt_and_contract(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, lirun_home: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    (lirun_home / "playbooks").mkdir()
    (lirun_home / "playbooks" / "fix.yaml").write_text(
        "prompt: fix the failing test\n"
        "artifacts:\n  - id: notes\n    path: notes.md\n"
        "defaults:\n  timeout: 30\n"
    )
    log = tmp_path / "argv.jsonl"
    env = _env(li_env, fake_bin, "claude/success.jsonl", argv_log=log)
    proc = run_li("agent", "claude", "--playbook", "fix", env=env, cwd=repo)
    assert proc.returncode == 1
    row = only_row(db_url)
    assert row["status_reason_code"] == "run.failed.missing_artifact"
    assert json.loads(log.read_text())["stdin"] == "fix the failing test"


# --- provider failures: auth stops at once, warnings, model, stall (issue 18) -----------------


def test_an_auth_refusal_stops_the_agent_at_once(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    import time

    # The fake retries a 401 and then sleeps for good, as Claude Code does for minutes.
    env = _env(li_env, fake_bin, "claude/auth_401_retry.jsonl", hang_after=True)
    started = time.monotonic()
    proc = run_li("agent", "claude", "go", env=env, cwd=repo)
    assert time.monotonic() - started < 10
    assert proc.returncode == 1, proc.stderr
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"]) == ("failed", "run.failed.provider_auth")
    assert row["status_reason_summary"].startswith(
        "claude: the provider refused the credentials: authentication_failed (HTTP 401) on "
        "API attempt 1 of 10; stopped at the first refusal"
    )
    [stop] = [e for e in row["status_evidence_refs"] if e.get("kind") == "supervisor_stop"]
    assert stop["killed_by"] == "provider"


def test_no_credentials_records_no_model_and_no_reply(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    env = _env(li_env, fake_bin, "claude/not_logged_in.jsonl")
    proc = run_li("agent", "claude/opus", "go", env=env, cwd=repo)
    assert proc.returncode == 1
    row = only_row(db_url)
    assert row["status_reason_summary"] == (
        "claude: the provider refused the credentials: Not logged in · Please run /login"
    )
    assert row["model"] is None  # every assistant event was <synthetic>
    assert row["reply_text"] is None
    assert row["provider_error"] == "Not logged in · Please run /login"
    assert proc.stdout == ""


def test_a_model_fallback_names_the_model_that_answered(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    proc = run_li(
        "agent", "claude", "go", env=_env(li_env, fake_bin, "claude/model_fallback.jsonl"), cwd=repo
    )
    assert proc.returncode == 0, proc.stderr
    assert only_row(db_url)["model"] == "claude-sonnet-4-5"


def test_codex_warnings_are_shown_as_warnings_never_as_the_error(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    env = _env(li_env, fake_bin, "codex/warnings_then_completed.jsonl")
    proc = run_li("agent", "codex", "go", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "codex: warning: Model metadata for `o4-mini` not found" in proc.stderr
    assert "codex: warning: Falling back from WebSockets" in proc.stderr
    assert "codex: error:" not in proc.stderr
    row = only_row(db_url)
    assert row["provider_error"] is None
    kinds = [e.get("kind") for e in row["status_evidence_refs"]]
    assert "provider_warnings" in kinds


def test_a_stalled_agent_ends_by_itself_with_what_it_was_doing(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    # Reconnect notices forever (output, so no idle timeout), never progress.
    env = _env(li_env, fake_bin, "codex/offline_forever.jsonl", hang_after=True)
    proc = run_li("agent", "codex", "go", "--stall-timeout", "1", env=env, cwd=repo)
    assert proc.returncode == 1, proc.stderr
    row = only_row(db_url)
    assert (row["status"], row["status_reason_code"]) == ("failed", "run.failed.provider_network")
    summary = row["status_reason_summary"]
    assert summary.startswith("codex: ")
    assert "no progress for 1 s: codex was retrying the API" in summary
    assert "8 attempts; last: Reconnecting... waiting for network" in summary
    assert row["provider_retries"] == 8


def test_progress_keeps_a_slow_agent_from_stalling(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    # Six lines 0.5 s apart (2.5 s in all) under a 2 s stall limit: each item is progress.
    env = _env(li_env, fake_bin, "codex/success.jsonl", delay=0.5)
    proc = run_li("agent", "codex", "go", "--stall-timeout", "2", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert only_row(db_url)["status"] == "completed"


def test_stall_timeout_zero_turns_it_off_and_li_run_has_none(
    li_env: dict[str, str], repo: Path, fake_bin: Path
) -> None:
    env = _env(li_env, fake_bin, "codex/success.jsonl")
    assert run_li("agent", "codex", "go", "--stall-timeout", "0", env=env, cwd=repo).returncode == 0
    assert (
        run_li("agent", "codex", "go", "--stall-timeout", "-1", env=env, cwd=repo).returncode == 2
    )
    refused = run_li("run", "--stall-timeout", "5", "--", "true", env=env, cwd=repo)
    assert refused.returncode == 2
