"""True across CLI versions: structure before wording, retry evidence before a catch-all code,
and a notice when a run's CLI version is outside the provider's tested window."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from lirun.exec.stream import StreamParser
from lirun.exec.version_window import UNTESTED_KIND, version_key, version_notice
from lirun.providers.claude import ClaudeStreamParser
from lirun.providers.codex import CodexStreamParser
from lirun.providers.registry import get_provider
from support.drift import compare, format_table, read_recorded
from support.execkit import git_repo, run_li
from support.providerkit import FIXTURES_DIR, fake_env

WINDOW = ("2.1.197", "2.1.332")


@pytest.mark.parametrize("version", ["2.1.197", "2.1.250", "2.1.332", "2.1.332 (Claude Code)"])
def test_a_version_inside_the_window_gets_no_notice(version: str) -> None:
    assert version_notice("claude", version, WINDOW) is None


@pytest.mark.parametrize(
    ("version", "side"),
    [("2.1.333", "newer than"), ("2.2", "newer than"), ("3.0.0", "newer than"),
     ("2.1.196", "older than"), ("2.1.197-beta.1", "older than"),
     ("weird build", "not a version number")],
)  # fmt: skip
def test_a_version_outside_the_window_is_said_with_the_window(version: str, side: str) -> None:
    notice = version_notice("claude", version, WINDOW)
    assert notice is not None
    assert notice["kind"] == UNTESTED_KIND
    assert (notice["version"], notice["tested"]) == (version, "2.1.197..2.1.332")
    assert side in notice["note"]
    assert "docs/providers.md" in notice["note"]


@pytest.mark.parametrize(("version", "window"), [(None, WINDOW), ("", WINDOW), ("9.9.9", None)])
def test_nothing_to_compare_is_no_notice(version: str | None, window: Any) -> None:
    assert version_notice("claude", version, window) is None


def test_version_order_is_numeric() -> None:
    assert version_key("0.9.0") < version_key("0.10.0") < version_key("0.171.0")  # type: ignore[operator]


def failure_class(parser: StreamParser, *events: dict[str, Any]) -> str | None:
    for event in events:
        parser.feed_line(json.dumps(event))
    error = parser.finish(1).exception
    assert error is not None
    return error.failure_class


RETRY = {"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 2,
         "error_status": None, "error": "unknown", "session_id": "s"}  # fmt: skip


def assistant_error(code: str, text: str) -> dict[str, Any]:
    content = [{"type": "text", "text": text}]
    message = {"model": "<synthetic>", "role": "assistant", "content": content}
    return {"type": "assistant", "error": code, "message": message, "session_id": "s"}


def result(text: str, **fields: Any) -> dict[str, Any]:
    return {"type": "result", "subtype": "success", "is_error": True, "result": text,
            "api_error_status": None, "session_id": "s", **fields}  # fmt: skip


def test_claude_2_1_332_dropped_connection_is_network() -> None:
    """2.1.332 ends a closed connection with the catch-all ``server_error``; 2.1.197 said
    "Unable to connect": the same fault, the same class."""
    said = "API Error: Connection dropped (ECONNRESET). Check the gateway, then try again."
    events = (
        RETRY,
        assistant_error("server_error", said),
        result(said, api_error="connection_failed"),
    )
    assert failure_class(ClaudeStreamParser(), *events) == "network"


def test_claude_structure_wins_over_the_words() -> None:
    said = "API Error: something new and unheard of"
    events = (assistant_error("server_error", said), result(said, api_error="connection_failed"))
    assert failure_class(ClaudeStreamParser(), *events) == "network"
    events = (assistant_error("model_not_found", said), result(said, api_error_status=404))
    assert failure_class(ClaudeStreamParser(), *events) == "rejected"


def test_claude_retry_evidence_wins_over_a_catch_all_code() -> None:
    said = "API Error: wording no release printed before"
    events = (RETRY, assistant_error("server_error", said), result(said))
    assert failure_class(ClaudeStreamParser(), *events) == "network"
    # Without the retry evidence the catch-all is all there is.
    assert failure_class(ClaudeStreamParser(), *events[1:]) == "server_error"


def test_codex_reconnect_evidence_names_an_unknown_final_wording() -> None:
    events = (
        {"type": "turn.started"},
        {"type": "error", "message": "Reconnecting... 1/2 (connection lost)"},
        {"type": "turn.failed", "error": {"message": "something new went wrong"}},
    )
    assert failure_class(CodexStreamParser(), *events) == "network"


def test_codex_status_and_code_come_before_the_words() -> None:
    failed = {"type": "turn.failed",
              "error": {"message": "connection lost, retry later", "status": 429}}  # fmt: skip
    assert failure_class(CodexStreamParser(), {"type": "turn.started"}, failed) == "rate_limit"
    failed = {"type": "turn.failed", "error": {"message": "no", "code": "model_not_found"}}
    assert failure_class(CodexStreamParser(), {"type": "turn.started"}, failed) == "rejected"


# --- the notice reaches the record and `li status` -------------------------------------------


def test_a_run_with_an_untested_version_says_so_in_li_status(
    tmp_path: Path, lirun_home: Path, fake_bin: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    db = str(tmp_path / "state.db")
    base = {**os.environ, "LIRUN_HOME": str(lirun_home), "LIRUN_DB_URL": db}
    env = fake_env("codex/success.jsonl", base=base)
    env["LIRUN_FAKE_VERSION"] = "codex-cli 99.0.0"
    env["LIRUN_CODEX_BIN"] = str(fake_bin / "codex")
    proc = run_li("agent", "codex", "hello", "--json", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    status = run_li("status", run_id, env=env, cwd=repo)
    assert UNTESTED_KIND in status.stdout, status.stdout
    assert "codex 99.0.0 is newer than the versions lirun was tested with" in status.stdout


def test_a_run_with_a_tested_version_has_no_notice(
    tmp_path: Path, lirun_home: Path, fake_bin: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    db = str(tmp_path / "state.db")
    base = {**os.environ, "LIRUN_HOME": str(lirun_home), "LIRUN_DB_URL": db}
    env = fake_env("codex/success.jsonl", base=base)
    low, _ = get_provider("codex").tested_versions
    env["LIRUN_FAKE_VERSION"] = f"codex-cli {low}"
    env["LIRUN_CODEX_BIN"] = str(fake_bin / "codex")
    proc = run_li("agent", "codex", "hello", "--json", env=env, cwd=repo)
    run_id = json.loads(proc.stdout)["run_id"]
    assert UNTESTED_KIND not in run_li("status", run_id, env=env, cwd=repo).stdout


# --- scripts/drift's comparison -------------------------------------------------------------


def test_drift_names_new_events_keys_wordings_and_outcomes(tmp_path: Path) -> None:
    pinned = tmp_path / "real-1.0.0-closed.jsonl"
    newest = tmp_path / "real-1.1.0-closed.jsonl"
    pinned.write_text(json.dumps(result("API Error: Unable to connect (ECONNRESET)")) + "\n")
    newest.write_text(
        json.dumps(RETRY) + "\n"
        + json.dumps(result("API Error: Connection dropped (ECONNRESET)", api_error="x")) + "\n"
    )  # fmt: skip
    facts = {"status": "failed", "status_reason_code": "run.failed.provider_network",
             "child_exit_code": 1, "problems": []}  # fmt: skip
    pinned.with_suffix(".json").write_text(json.dumps({**facts, "cli_version": "1.0.0"}))
    changed = {**facts, "cli_version": "1.1.0", "child_exit_code": 2, "problems": ["x"],
               "status_reason_code": "run.failed.provider_server_error"}  # fmt: skip
    newest.with_suffix(".json").write_text(json.dumps(changed))
    old, new = read_recorded(pinned), read_recorded(newest)
    assert old is not None
    assert new is not None
    drift = compare("claude", "closed", old, new)
    assert (drift.pinned, drift.newest, drift.passed) == ("1.0.0", "1.1.0", False)
    assert drift.events == "+system/api_retry"
    assert drift.keys == "result/success: +api_error"
    assert drift.wordings == '"API Error: Connection dropped (ECONNRESET)"'
    assert drift.exit_code == "1 → 2"
    assert drift.outcome == "failed/provider_network → failed/provider_server_error"
    same = compare("claude", "closed", old, old)
    assert (same.events, same.keys, same.wordings, same.exit_code) == ("=", "=", "=", "=")
    assert "| claude | closed | 1.0.0 | 1.1.0 | FAIL |" in format_table([drift])


def test_drift_reads_the_recorded_fixtures() -> None:
    recorded = read_recorded(FIXTURES_DIR / "claude" / "real-2.1.197-text.jsonl")
    assert recorded is not None
    assert recorded.version == "2.1.197"
    assert recorded.events


def test_drift_looks_inside_a_stream_whose_fields_sit_under_data(tmp_path: Path) -> None:
    """Copilot CLI's lines are all ``{type, data, id, timestamp, ...}``: what changes is in
    ``data``, and its giving up is ``session.error``'s ``data.message``."""
    facts = {"status": "failed", "status_reason_code": "run.failed.provider_auth",
             "child_exit_code": 1, "problems": []}  # fmt: skip
    streams = []
    for version, data in (
        ("1.0.0", {"errorType": "authentication", "message": "Authentication failed (HTTP 401)"}),
        ("1.1.0", {"errorType": "auth", "statusCode": 401, "message": "Key refused (HTTP 401)"}),
    ):
        path = tmp_path / f"real-{version}-401.jsonl"
        path.write_text(json.dumps({"type": "session.error", "data": data, "id": "x"}) + "\n")
        path.with_suffix(".json").write_text(json.dumps({**facts, "cli_version": version}))
        streams.append(read_recorded(path))
    old, new = streams
    assert old is not None
    assert new is not None
    drift = compare("copilot", "401", old, new)
    assert drift.keys == "session.error: +data.statusCode"
    assert drift.wordings == '"Key refused (HTTP #)"'
