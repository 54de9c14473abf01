"""Provider trouble is seen while it happens, wherever the agent runs.

Retries, warnings and errors from the provider's stream: one stderr line per event
(never on stdout), the same lines in a detached run's log, and the row's retries so far,
last error, model and CLI version written while the run runs (``li status ID``). Fake
providers replay recorded streams; the row is read on both backends.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from lirun.exec.agent_legs import AgentProgram
from lirun.exec.execution import execute
from lirun.exec.legs import LegContext
from lirun.exec.request import RunRequest
from lirun.exec.supervisor import Limits
from lirun.exec.trouble import progress_fields, trouble_line, trouble_reporter
from lirun.record.rundir import allocate_run
from lirun.settings import Settings
from support.execkit import get_row, poll, run_li
from support.providerkit import env_with_fake_bin, fake_env_for, fixture_path


class _Event:
    def __init__(self, kind: str, data: dict[str, Any]) -> None:
        self.kind, self.data = kind, data


@pytest.mark.parametrize(
    ("kind", "data", "line"),
    [
        ("retry", {"count": 3, "message": "API error 529"}, "claude: retrying (3): API error 529"),
        ("error", {"message": "Invalid API key"}, "claude: error: Invalid API key"),
        ("warning", {"message": "model deprecated"}, "claude: warning: model deprecated"),
        ("assistant_text", {"text": "hello"}, None),
        ("session", {"engine_session_uid": "u"}, None),
    ],
)
def test_a_trouble_event_is_one_line_by_kind(
    kind: str, data: dict[str, Any], line: str | None
) -> None:
    assert trouble_line("claude", _Event(kind, data)) == line


def test_the_reporter_says_each_trouble_line_under_its_name() -> None:
    said: list[str] = []
    on_event = trouble_reporter(said.append, "leg review[1]")
    on_event("claude", _Event("error", {"message": "Invalid API key"}))
    on_event("claude", _Event("assistant_text", {"text": "hello"}))
    assert said == ["leg review[1]: claude: error: Invalid API key"]


def test_progress_fields_say_only_what_the_stream_said() -> None:
    from lirun.providers.claude import ClaudeStreamParser

    parser = ClaudeStreamParser()
    assert progress_fields(parser) == {}
    for text in fixture_path("claude/api_retry_offline.jsonl").read_text().splitlines()[:3]:
        parser.feed_line(text)
    assert progress_fields(parser) == {
        "provider_retries": 2,
        "provider_error": "unknown",
        "model": "claude-sonnet-4-5",
        "provider_version": "2.1.197",
    }


def test_the_agent_leg_reports_progress_only_when_it_changes(tmp_path: Path) -> None:
    from lirun.exec.agent_legs import AgentLeg
    from lirun.providers.claude import ClaudeStreamParser

    seen: list[dict[str, Any]] = []
    run = allocate_run(str(tmp_path / "runs"), "r1")
    ctx = LegContext(run=run, branch_id="r1", on_progress=seen.append)
    leg = AgentLeg(["claude"], ClaudeStreamParser(), ctx)
    try:
        for text in fixture_path("claude/api_retry_offline.jsonl").read_text().splitlines()[:3]:
            leg._on_line(text)
    finally:
        leg.close()
    assert seen[0] == {"model": "claude-sonnet-4-5", "provider_version": "2.1.197"}
    assert seen[1] == {"provider_retries": 1, "provider_error": "unknown"}
    assert seen[2] == {"provider_retries": 2}  # the unchanged error is not written again


def test_the_row_holds_retries_and_the_last_error_while_the_run_runs(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_bin: Path
) -> None:
    for key, value in fake_env_for("claude/api_retry_offline.jsonl", delay=0.2).items():
        monkeypatch.setenv(key, value)
    program = AgentProgram(provider="claude", executable=str(fake_bin / "claude"), prompt="go")
    request = RunRequest(
        program=program,
        cwd=str(tmp_path),
        limits=Limits(timeout=6),
        settings=Settings(db_url=db_url, run_id="trouble-run"),
    )
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(execute(request)))
    worker.start()
    try:

        def retrying() -> dict[str, Any] | None:
            try:
                row = get_row(db_url, "trouble-run")
            except AssertionError:
                return None
            return row if (row.get("provider_retries") or 0) >= 2 else None

        row = poll(retrying, timeout=20, what="retries on the running row")
        assert row["status"] == "running"
        assert row["provider_error"] == "unknown"
        assert (row["model"], row["provider_version"]) == ("claude-sonnet-4-5", "2.1.197")
    finally:
        worker.join(timeout=30)
    assert results
    assert results[0].status == "timed_out"
    final = get_row(db_url, "trouble-run")
    assert final["provider_retries"] == 7  # the end's record still counts them all


@pytest.mark.slow
def test_li_status_of_a_running_detached_agent_shows_its_trouble(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    env = env_with_fake_bin(
        "claude/api_retry_offline.jsonl", base=li_env, fake_bin=fake_bin, delay=0.3
    )
    started = run_li(
        "agent", "claude", "go", "--detach", "--json", "--timeout", "5", env=env, cwd=repo
    )
    assert started.returncode == 0, started.stderr
    run_id = json.loads(started.stdout)["run_id"]

    def shown() -> str | None:
        out = run_li("status", run_id, env=env, cwd=repo).stdout
        return out if "retries" in out and "so far" in out else None

    text = poll(shown, timeout=20, what="li status with retries so far")
    assert "running" in text
    assert "claude/claude-sonnet-4-5" in text
    assert "2.1.197" in text
    assert "last provider error" in text
    assert "unknown" in text
    poll(lambda: get_row(db_url, run_id)["status"] != "running", timeout=30, what="the end")
    row = get_row(db_url, run_id)
    log = Path(row["run_dir"]) / "li.stderr.log"
    lines = log.read_text().splitlines()
    retries = [line for line in lines if "claude: retrying (" in line]
    assert len(retries) == 7, lines  # the detached log has one line per retry
    assert not [line for line in lines if "claude: session" in line]  # only the trouble


@pytest.mark.slow
def test_a_resumed_leg_counts_on_from_the_retries_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_bin: Path
) -> None:
    db_url = str(tmp_path / "state.db")
    for key, value in fake_env_for("claude/api_retry_offline.jsonl", delay=0.05).items():
        monkeypatch.setenv(key, value)
    program = AgentProgram(provider="claude", executable=str(fake_bin / "claude"), prompt="go")
    request = RunRequest(
        program=program,
        cwd=str(tmp_path),
        limits=Limits(timeout=2),
        settings=Settings(db_url=db_url, run_id="resumed-run"),
        resume_on_timeout=True,
    )
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(execute(request)))
    worker.start()
    try:

        def second_leg() -> dict[str, Any] | None:
            try:
                row = get_row(db_url, "resumed-run")
            except AssertionError:
                return None
            return row if (row.get("provider_retries") or 0) > 7 else None

        row = poll(second_leg, timeout=20, what="the second leg's retries")
        assert row["status"] == "running"
    finally:
        worker.join(timeout=30)
    assert get_row(db_url, "resumed-run")["provider_retries"] == 14
