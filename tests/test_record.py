"""The record says what happened: prompt, options, version, usage, reply, exit codes, errors.

Parsers and option rules are tested directly; the row and ``li status`` end to end with the
fake provider on both backends. Each test fails on the code before migration 0003.
"""

from __future__ import annotations

import json
import re
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from lirun.cli.agent import render_event
from lirun.cli.render import format_cost, format_tokens
from lirun.errors import UsageError
from lirun.exec import versions
from lirun.exec.agent_legs import AgentProgram
from lirun.exec.agent_record import retry_note, token_counts
from lirun.exec.profile_files import load_playbook, load_profile
from lirun.exec.profiles import ProfileError
from lirun.exec.provider_options import ProviderOptions
from lirun.exec.stream import StreamParser
from lirun.exec.supervisor import ProcessResult
from lirun.providers.claude import ClaudeStreamParser
from lirun.providers.codex import CodexStreamParser
from lirun.providers.registry import get_provider
from support.execkit import get_row, li_argv, only_row, opened_store, run_li
from support.providerkit import env_with_fake_bin, fixture_path


def replay(name: str) -> tuple[StreamParser, list[Any]]:
    provider = name.split("/")[0]
    parser = get_provider(provider).new_parser()
    events = []
    for line in fixture_path(name).read_text(encoding="utf-8").splitlines():
        events += parser.feed_line(line)
    return parser, events


# --- retries and errors are facts, not noise ------------------------------------------------


def test_claude_api_retries_are_counted_with_the_last_error() -> None:
    parser, events = replay("claude/api_retry_offline.jsonl")
    assert parser.retries == 7
    assert parser.last_error == "unknown"
    assert "system/api_retry" not in parser.ignored_types
    assert [e.kind for e in events].count("retry") == 7
    assert parser.provider_version == "2.1.197"
    verdict = parser.finish(-15, killed_by="timeout")
    [fact] = [e for e in verdict.evidence if e["kind"] == "provider_retries"]
    assert (fact["count"], fact["last_error"]) == (7, "unknown")
    assert "after 7 attempts" in str(verdict.exception)


def test_claude_retry_with_an_http_status_names_it() -> None:
    parser = ClaudeStreamParser()
    parser.feed_line(
        '{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,'
        '"error_status":529,"error":"overloaded"}'
    )
    assert parser.last_error == "overloaded (HTTP 529)"


def test_codex_reconnects_are_retries_and_other_errors_are_kept() -> None:
    parser, _ = replay("codex/reconnecting_offline.jsonl")
    assert parser.retries == 3
    assert parser.last_error is not None
    assert "waiting for network" in parser.last_error
    # The transport fallback is a warning: kept, never an error.
    assert any("Falling back" in message for message in parser.warnings)
    assert not any("Falling back" in message for message in parser.errors)
    assert not parser.saw_terminal


def test_codex_error_text_becomes_the_failure_not_a_missing_terminal_event() -> None:
    parser, _ = replay("codex/error_401.jsonl")
    verdict = parser.finish(1)
    assert str(verdict.exception).startswith("unexpected status 401 Unauthorized")
    assert getattr(verdict.exception, "failure_class", None) == "auth"
    assert parser.retries == 0


def test_kept_errors_are_bounded() -> None:
    parser = CodexStreamParser()
    for n in range(1000):
        parser.feed_line(json.dumps({"type": "error", "message": f"Reconnecting... {n}/5"}))
        parser.feed_line(json.dumps({"type": "error", "message": f"boom {n}"}))
    assert parser.retries == 999
    assert len(parser.errors) <= 20
    assert parser.last_error == "boom 999"


def test_a_retry_is_shown_live() -> None:
    _, events = replay("claude/api_retry_offline.jsonl")
    line = render_event("claude", next(e for e in events if e.kind == "retry"))
    assert line == "claude: retrying (1): API retry 1/10: unknown"


def _result(duration: float, *, timed_out: bool) -> ProcessResult:
    return ProcessResult(
        pid=1, exit_code=-15, duration=duration, killed_by="timeout" if timed_out else None
    )


def test_retry_note_says_what_the_provider_was_doing() -> None:
    parser, _ = replay("claude/api_retry_offline.jsonl")
    verdict = parser.finish(-15, killed_by="timeout")
    note = retry_note(_result(60.2, timed_out=True), verdict)
    assert note == "after 60 s, claude was retrying the API (7 attempts; last error: unknown)"
    quiet = ClaudeStreamParser().finish(0)
    assert retry_note(_result(1, timed_out=True), quiet) is None


def test_token_counts_take_only_what_the_provider_reported() -> None:
    claude = {"input_tokens": 3, "output_tokens": 9, "cache_read_input_tokens": 100}
    assert token_counts(claude) == {"input_tokens": 3, "output_tokens": 9, "cache_read_tokens": 100}
    codex = {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122}
    assert token_counts(codex)["cache_read_tokens"] == 24448
    assert token_counts(None) == {}
    assert token_counts({"input_tokens": "many"}) == {}


def test_list_formatting() -> None:
    assert (format_tokens(950), format_tokens(25_100), format_tokens(None)) == ("950", "25.1k", "-")
    assert (format_cost(0.0123), format_cost(None)) == ("$0.0123", "-")


# --- provider options ---------------------------------------------------------------------


def test_named_claude_options_become_flags() -> None:
    options = ProviderOptions.from_mapping(
        {
            "permission_mode": "acceptEdits",
            "max_turns": 30,
            "append_system_prompt": "-be brief",
            "allowed_tools": ["Bash(git diff:*)", "Read"],
            "mcp_config": "mcp.json",
            "provider_args": ["--add-dir", "/x"],
        }
    )
    assert options.to_args("claude") == [
        "--permission-mode", "acceptEdits", "--max-turns", "30",
        "--append-system-prompt=-be brief", "--add-dir", "/x",
        "--allowedTools", "Bash(git diff:*)", "Read", "--mcp-config", "mcp.json",
    ]  # fmt: skip
    assert options.to_record() == {
        "permission_mode": "acceptEdits",
        "max_turns": 30,
        "append_system_prompt": "-be brief",
        "allowed_tools": ["Bash(git diff:*)", "Read"],
        "mcp_config": ["mcp.json"],
        "provider_args": ["--add-dir", "/x"],
    }


def test_named_codex_options_become_flags() -> None:
    options = ProviderOptions.from_mapping(
        {"sandbox": "workspace-write", "approval_policy": "never", "config": {"a.b": True}}
    )
    assert options.to_args("codex") == [
        "--sandbox", "workspace-write", "-c", "approval_policy=never", "-c", "a.b=true",
    ]  # fmt: skip
    listed = ProviderOptions.from_mapping({"config": ["model_reasoning_effort=high"]})
    assert listed.to_args("codex") == ["-c", "model_reasoning_effort=high"]


def test_later_options_win_and_provider_args_accumulate() -> None:
    base = ProviderOptions.of(("--a",), permission_mode="plan", max_turns=3)
    over = ProviderOptions.of(("--b",), permission_mode="acceptEdits")
    merged = base.merged(over)
    assert merged.get("permission_mode") == "acceptEdits"
    assert merged.get("max_turns") == 3  # a value the later options do not set stays
    assert merged.provider_args == ("--a", "--b")


@pytest.mark.parametrize(
    ("provider", "arg"),
    [
        ("claude", "-p"),
        ("claude", "--print"),
        ("claude", "--output-format"),
        ("claude", "--output-format=json"),
        ("claude", "--input-format"),
        ("codex", "--json"),
    ],
)
def test_options_that_break_supervision_are_refused(provider: str, arg: str) -> None:
    with pytest.raises(UsageError, match="cannot be passed"):
        ProviderOptions(provider_args=(arg, "x")).check_for(provider)


def test_an_option_of_the_other_provider_is_refused() -> None:
    with pytest.raises(UsageError, match="permission_mode is not codex"):
        ProviderOptions.of(permission_mode="plan").check_for("codex")
    with pytest.raises(UsageError, match="sandbox is not claude"):
        AgentProgram("claude", "claude", "p", options=ProviderOptions.of(sandbox="read-only"))


@pytest.mark.parametrize(
    "bad",
    [
        {"max_turns": 0},
        {"max_turns": True},
        {"allowed_tools": 3},
        {"permission_mode": ""},
        {"config": ["novalue"]},
        {"config": 5},
        {"provider_args": [1]},
    ],
)
def test_bad_option_values_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        ProviderOptions.from_mapping(bad, where="here")


def test_profiles_and_playbooks_take_provider_options(lirun_home: Path) -> None:
    (lirun_home / "profiles").mkdir(parents=True)
    (lirun_home / "profiles" / "careful.yaml").write_text(
        "defaults:\n  permission_mode: plan\n  allowed_tools: [Read]\n  max_turns: 5\n"
    )
    assert load_profile("careful").defaults["max_turns"] == 5
    (lirun_home / "playbooks").mkdir(parents=True)
    (lirun_home / "playbooks" / "bad.yaml").write_text("defaults:\n  max_turns: many\n")
    with pytest.raises(ProfileError, match=r"bad\.yaml: defaults: max_turns"):
        load_playbook("bad")


# --- the CLI version, once per binary ---------------------------------------------------------


def test_cli_version_is_asked_once_per_binary(
    tmp_path: Path, lirun_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "asked"
    exe = tmp_path / "codex"
    exe.write_text(f"#!/bin/sh\necho x >> {counter}\necho 'codex-cli 0.171.0'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(versions, "_memory", {})
    provider = get_provider("codex")

    def ask(path: Path) -> str | None:
        return versions.cli_version(str(path), provider.version_args, provider.parse_version)

    assert ask(exe) == "0.171.0"
    monkeypatch.setattr(versions, "_memory", {})  # a new li process: the file cache answers
    assert ask(exe) == "0.171.0"
    assert counter.read_text().count("x") == 1
    exe.write_text(f"#!/bin/sh\necho x >> {counter}\necho 'codex-cli 0.172.0'\n")
    assert ask(exe) == "0.172.0"  # a new binary is asked again
    assert ask(tmp_path / "missing") is None


# --- end to end: the row and li status -------------------------------------------------------


def _env(li_env: dict[str, str], fake_bin: Path, fixture: str, **kw: Any) -> dict[str, str]:
    return env_with_fake_bin(fixture, base=li_env, fake_bin=fake_bin, **kw)


def test_an_agent_row_records_what_happened(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, lirun_home: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    (lirun_home / "profiles").mkdir(parents=True)
    (lirun_home / "profiles" / "edit.yaml").write_text(
        "defaults:\n  permission_mode: acceptEdits\n  max_turns: 30\n"
    )
    log = tmp_path / "argv.jsonl"
    env = _env(li_env, fake_bin, "claude/success.jsonl", argv_log=log)
    proc = run_li(
        "agent", "claude", "fix the test", "--profile", "edit", "--", "--add-dir", "/x",
        env=env, cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    row = only_row(db_url)
    assert row["prompt"] == "fix the test"
    assert (row["model"], row["provider_version"]) == ("claude-sonnet-4-5", "2.1.0")
    assert (row["input_tokens"], row["output_tokens"]) == (20, 40)
    assert (row["cost_usd"], row["num_turns"]) == (0.0123, 2)
    assert row["reply_text"] == "Done: test fixed."
    assert (row["child_exit_code"], row["exit_code"]) == (0, 0)
    assert row["duration_s"] is not None
    assert row["duration_s"] >= 0
    assert row["provider_error"] is None
    assert row["provider_retries"] is None
    assert row["provider_options_json"] == {
        "permission_mode": "acceptEdits",
        "max_turns": 30,
        "provider_args": ["--add-dir", "/x"],
    }
    argv = json.loads(log.read_text())["argv"]
    assert argv[-6:] == ["--permission-mode", "acceptEdits", "--max-turns", "30", "--add-dir", "/x"]
    shown = run_li("status", row["id"], env=env, cwd=repo)
    for text in ("fix the test", "Done: test fixed.", "in 20, out 40", "$0.0123", "2.1.0",
                 "acceptEdits"):  # fmt: skip
        assert text in shown.stdout, shown.stdout
    listed = run_li("status", env=env, cwd=repo).stdout.splitlines()
    assert "TOKENS" in listed[0]
    assert "COST" in listed[0]
    assert "60" in listed[1].split()
    assert "$0.0123" in listed[1].split()


def test_a_refused_provider_option_starts_nothing(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    env = _env(li_env, fake_bin, "claude/success.jsonl")
    proc = run_li("agent", "claude", "x", "--", "--output-format", "json", env=env, cwd=repo)
    assert proc.returncode == 2
    assert "--output-format" in proc.stderr
    assert "Traceback" not in proc.stderr
    with opened_store(db_url) as store:
        assert store.sessions.list_recent() == []


def test_codex_version_and_options_are_recorded(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, tmp_path: Path
) -> None:
    log = tmp_path / "argv.jsonl"
    env = _env(li_env, fake_bin, "codex/success.jsonl", argv_log=log)
    env["LIRUN_FAKE_VERSION"] = "codex-cli 0.171.0"
    proc = run_li("agent", "codex", "go", "--", "-c", "a=b", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    row = only_row(db_url)
    assert row["provider_version"] == "0.171.0"
    assert (row["input_tokens"], row["cache_read_tokens"]) == (24763, 24448)
    assert row["cost_usd"] is None  # Codex reports no cost: none is estimated
    assert json.loads(log.read_text())["argv"] == ["exec", "--json", "-c", "a=b", "-"]


def test_a_codex_error_keeps_its_own_text(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    env = _env(li_env, fake_bin, "codex/error_401.jsonl")
    proc = run_li("agent", "codex", "go", env=env, cwd=repo)
    assert proc.returncode == 1
    row = only_row(db_url)
    assert "unexpected status 401 Unauthorized" in row["status_reason_summary"]
    assert "unexpected status 401 Unauthorized" in row["provider_error"]
    assert row["status_reason_code"] == "run.failed.provider_auth"
    assert "codex: error: unexpected status 401" in proc.stderr


@pytest.mark.slow
def test_a_timeout_while_claude_retries_says_so(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    env = _env(li_env, fake_bin, "claude/api_retry_offline.jsonl", delay=0.05)
    proc = run_li("agent", "claude", "go", "--timeout", "1.5", env=env, cwd=repo)
    assert proc.returncode == 124
    assert proc.stderr.count("claude: retrying") == 7  # shown live, not swallowed
    row = only_row(db_url)
    assert row["status_reason_code"] == "run.timed_out.provider_retrying"
    summary = row["status_reason_summary"]
    assert "claude was retrying the API (7 attempts; last error: unknown)" in summary
    assert summary.startswith("time limit reached while the provider was retrying: after ")
    assert row["provider_retries"] == 7
    assert row["provider_error"] == "unknown"
    kinds = [e.get("kind") for e in row["status_evidence_refs"]]
    assert "provider_retries" in kinds
    [fact] = [e for e in row["status_evidence_refs"] if e.get("kind") == "provider_retrying"]
    assert (fact["attempts"], fact["last_error"]) == (7, "unknown")


def test_a_command_keeps_its_own_exit_code(
    li_env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    proc = run_li("run", "--", "sh", "-c", "echo hi; exit 3", env=li_env, cwd=tmp_path)
    assert proc.returncode == 1
    row = only_row(db_url)
    assert (row["exit_code"], row["child_exit_code"]) == (1, 3)
    assert row["reply_text"] == "hi\n"
    assert row["prompt"] is None
    shown = run_li("status", row["id"], env=li_env, cwd=tmp_path).stdout
    assert re.search(r"exit code +3 \(lirun: 1\)", shown), shown


def test_the_callers_stdin_never_reaches_the_provider(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, tmp_path: Path
) -> None:
    """An open stdin that never closes would hang Claude Code: the child reads the prompt."""
    log = tmp_path / "argv.jsonl"
    env = _env(li_env, fake_bin, "claude/success.jsonl", argv_log=log)
    err_file = tmp_path / "stderr.txt"
    with err_file.open("w") as err_out:
        li = subprocess.Popen(
            li_argv("agent", "claude", "the prompt"),
            env=env,
            cwd=repo,
            stdin=subprocess.PIPE,  # held open and never written while li runs
            stdout=subprocess.DEVNULL,
            stderr=err_out,
        )
        try:
            li.wait(timeout=30)
        except subprocess.TimeoutExpired:
            li.kill()
            raise
        finally:
            assert li.stdin is not None
            li.stdin.close()
    err = err_file.read_text()
    assert li.returncode == 0, err
    assert json.loads(log.read_text())["stdin"] == "the prompt"
    assert only_row(db_url)["prompt"] == "the prompt"


def test_the_prompt_is_not_on_the_command_line(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    env = _env(li_env, fake_bin, "claude/success.jsonl", delay=0.3)
    li = subprocess.Popen(
        li_argv("agent", "claude", "s3cret-prompt"),
        env=env,
        cwd=repo,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        seen = None
        while seen is None and time.monotonic() < deadline:
            with opened_store(db_url) as store:
                rows = store.sessions.list_recent()
            pid = rows[0].child_pid if rows else None
            if pid:
                seen = Path(f"/proc/{pid}/cmdline").read_bytes()
            time.sleep(0.05)
        assert seen is not None
        assert b"s3cret-prompt" not in seen
    finally:
        li.wait(timeout=30)


def test_a_detached_runs_prompt_is_not_on_any_command_line(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    env = _env(li_env, fake_bin, "claude/success.jsonl", delay=0.3)
    proc = run_li("agent", "claude", "s3cret-detached", "--detach", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    row = get_row(db_url, run_id)
    # The worker (li itself, detached) and the provider it started are both running now.
    cmdlines = [Path(f"/proc/{pid}/cmdline") for pid in (row["owner_pid"], row["child_pid"])]
    seen = [p.read_bytes() for p in cmdlines if p.exists()]
    waited = run_li("wait", run_id, "--timeout", "30", env=env, cwd=repo)
    assert waited.returncode == 0, waited.stderr
    assert seen
    assert all(b"s3cret-detached" not in line for line in seen)
    assert get_row(db_url, run_id)["prompt"] == "s3cret-detached"


def test_a_detached_runs_answer_is_on_the_row(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    env = _env(li_env, fake_bin, "claude/success.jsonl")
    proc = run_li("agent", "claude", "fix it", "--detach", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    waited = run_li("wait", run_id, "--timeout", "30", env=env, cwd=repo)
    assert waited.returncode == 0, waited.stderr
    assert get_row(db_url, run_id)["reply_text"] == "Done: test fixed."


# --- artifact_dir is the artifact root (design.md §4.1) ------------------------------------------


def test_wait_and_status_name_the_artifact_root_not_the_run_dir(
    li_env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    save = tmp_path / "deliverables"
    proc = run_li("run", "--save", str(save), "--json", "--", "sh", "-c", "echo hi",
                  env=li_env, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["artifact_dir"] == str(save)
    assert summary["run_dir"] != str(save)
    waited = run_li("wait", summary["run_id"], env=li_env, cwd=tmp_path).stdout
    assert f"\tartifact_dir={save}\t" in waited
    as_json = json.loads(
        run_li("wait", summary["run_id"], "--json", env=li_env, cwd=tmp_path).stdout
    )
    assert (as_json["artifact_dir"], as_json["run_dir"]) == (str(save), summary["run_dir"])
    status = json.loads(
        run_li("status", summary["run_id"], "--json", env=li_env, cwd=tmp_path).stdout
    )
    assert (status["artifact_dir"], status["run_dir"]) == (str(save), summary["run_dir"])
    shown = run_li("status", summary["run_id"], env=li_env, cwd=tmp_path).stdout
    assert re.search(rf"^artifact dir +{re.escape(str(save))}$", shown, re.MULTILINE), shown


def test_an_invocation_shows_its_backing_sessions_artifact_root(
    store: Any, li_env: dict[str, str], tmp_path: Path
) -> None:
    store.invocations.create(skill="s", id="inv")
    store.sessions.create(id="b", invocation_id="inv", run_dir="/runs/b", artifacts_path="/out/b")
    status = json.loads(run_li("status", "inv", "--json", env=li_env, cwd=tmp_path).stdout)
    assert (status["artifact_dir"], status["run_dir"]) == ("/out/b", "/runs/b")


def test_detach_json_names_both_dirs(li_env: dict[str, str], db_url: str, tmp_path: Path) -> None:
    save = tmp_path / "out"
    proc = run_li("run", "--detach", "--json", "--save", str(save), "--", "true",
                  env=li_env, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["artifact_dir"] == str(save)
    run_li("wait", summary["run_id"], "--timeout", "30", env=li_env, cwd=tmp_path)


def test_record_columns_round_trip(store: Any) -> None:
    """Migration 0003 on both backends: big token counts fit, JSON options decode."""
    store.sessions.create(id="r", prompt="do it", provider_options_json={"max_turns": 3})
    store.update_fields(
        "session",
        "r",
        {
            "input_tokens": 5_000_000_000,
            "output_tokens": 7,
            "cache_read_tokens": 1,
            "cache_write_tokens": 2,
            "cost_usd": 1.25,
            "num_turns": 4,
            "duration_s": 12.5,
            "reply_text": "ok",
            "child_exit_code": 3,
            "provider_version": "2.1.197",
            "provider_error": "unknown",
            "provider_retries": 7,
        },
        touch=False,
    )
    row = store.get_entity("session", "r")
    assert row["prompt"] == "do it"
    assert row["provider_options_json"] == {"max_turns": 3}
    assert (row["input_tokens"], row["cost_usd"], row["child_exit_code"]) == (
        5_000_000_000,
        1.25,
        3,
    )
    assert (row["provider_version"], row["provider_retries"]) == ("2.1.197", 7)
