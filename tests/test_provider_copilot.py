"""GitHub Copilot CLI: its command line, its version sentence, and what its stream says.

The streams are the real CLI's (1.0.102 against the mock, tests/fixtures/copilot/), cut or
extended by a line where a case needs one the mock cannot make the CLI write.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lirun.providers.copilot import CopilotStreamParser, build_copilot_command, failure_class
from lirun.providers.registry import get_provider, parse_provider_spec
from support.providerkit import fixture_path, reason_of


def feed(parser: CopilotStreamParser, lines: list[str]) -> list[Any]:
    return [event for line in lines for event in parser.feed_line(line)]


def lines_of(name: str) -> list[str]:
    return fixture_path(f"copilot/{name}.jsonl").read_text(encoding="utf-8").splitlines()


def test_command_reads_the_prompt_on_stdin_and_allows_the_tools() -> None:
    assert build_copilot_command("copilot") == [
        "copilot", "--output-format", "json", "--allow-all-tools", "--no-auto-update",
    ]  # fmt: skip
    argv = build_copilot_command("copilot", model="gpt-5", resume="s-1", extra_args=["--x"])
    assert argv[-5:] == ["--model", "gpt-5", "--resume", "s-1", "--x"]
    assert "-p" not in argv
    assert parse_provider_spec("copilot/claude-sonnet-4.5") == ("copilot", "claude-sonnet-4.5")


def test_the_version_sentence_loses_its_full_stop() -> None:
    provider = get_provider("copilot")
    said = "GitHub Copilot CLI 1.0.102.\nRun 'copilot update' to check for updates.\n"
    assert provider.parse_version(said) == "1.0.102"
    assert provider.parse_version("9.8.7") == "9.8.7"
    assert provider.capabilities.resume
    assert not provider.capabilities.reports_cost


def test_a_tool_call_and_its_result_then_the_reply() -> None:
    parser = CopilotStreamParser()
    feed(parser, lines_of("real-1.0.102-tool-write"))
    verdict = parser.finish(0)
    assert (verdict.status, verdict.reply, verdict.model) == (
        "completed", "I wrote mock_note.txt.", "mock-model",
    )  # fmt: skip
    assert (verdict.tool_calls, verdict.retries, verdict.cost) == (1, 0, None)
    assert verdict.engine_session_uid
    # No tokens in the stream: the usage holds what it says, no token counts.
    assert verdict.usage is not None
    assert not any("token" in key for key in verdict.usage)


@pytest.mark.parametrize(
    ("case", "retries", "reason"),
    [
        ("401", 2, "run.failed.provider_auth"),
        ("429", 5, "run.failed.provider_rate_limit"),
        ("503", 5, "run.failed.provider_overloaded"),
        ("refused", 5, "run.failed.provider_network"),
        ("malformed", 5, "run.failed.provider_server_error"),
        ("400-prompt-too-long", 1, "run.failed.provider_rejected"),
    ],
)
def test_each_retry_is_counted_and_shown_as_it_happens(
    case: str, retries: int, reason: str
) -> None:
    parser = CopilotStreamParser()
    events = feed(parser, lines_of(f"real-1.0.102-{case}"))
    shown = [e for e in events if e.kind == "retry"]
    assert [e.data["count"] for e in shown] == list(range(1, retries + 1))
    verdict = parser.finish(1)
    assert (verdict.retries, reason_of(verdict), verdict.reply) == (retries, reason, "")


def test_a_cut_answer_retried_counts_every_retry_and_is_no_reply() -> None:
    """Each attempt streams "Hello from t" before the cut: progress for the stall limit,
    yet the call did not go through, so its retries go on counting."""
    parser = CopilotStreamParser()
    feed(parser, lines_of("real-1.0.102-cut"))
    verdict = parser.finish(1)
    assert (verdict.retries, reason_of(verdict), verdict.reply) == (
        5, "run.failed.provider_network", "",
    )  # fmt: skip


def test_a_signal_then_exit_code_zero_is_no_success() -> None:
    """On SIGTERM the CLI writes ``abort`` and still a result with exitCode 0, rc 0 (the
    real CLI, killed by ``timeout`` while the mock never answered)."""
    lines = lines_of("sigterm")
    kinds = [json.loads(line)["type"] for line in lines]
    assert "abort" in kinds
    assert json.loads(lines[-1])["exitCode"] == 0
    stopped = CopilotStreamParser()
    feed(stopped, lines)
    assert reason_of(stopped.finish(None, killed_by="stall")) == "run.failed.provider_stalled"
    outside = CopilotStreamParser()
    feed(outside, lines)
    verdict = outside.finish(0)
    assert verdict.status == "failed"
    assert "aborted" in str(verdict.exception)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"error_type": "authentication", "status": 403}, "auth"),
        ({"status": 503, "text": "The engine is currently overloaded"}, "overloaded"),
        ({"status": 503, "text": "Service Unavailable"}, "server_error"),
        ({"text": "Could not connect to local model provider at http://x/v1."}, "network"),
        ({"text": "Failed to parse chat-completions stream chunk: key must be"}, "server_error"),
        ({"code": "model_not_found"}, "rejected"),
        ({"text": "something new"}, None),
    ],
)
def test_failure_classes(fields: dict[str, Any], expected: str | None) -> None:
    assert failure_class(**fields) == expected


def test_a_call_retried_once_then_answered_is_a_success_with_its_retry_kept() -> None:
    """The 429 stream up to its first retry, then the text stream's answer: the retry is
    evidence, the answer is the run's."""
    rate_limited = lines_of("real-1.0.102-429")
    first_retry = next(
        i
        for i, line in enumerate(rate_limited)
        if json.loads(line)["type"] == "assistant.turn_retry"
    )
    answered = lines_of("real-1.0.102-text")
    start = next(
        i for i, line in enumerate(answered) if json.loads(line)["type"] == "model.call_start"
    )
    parser = CopilotStreamParser()
    feed(parser, [*rate_limited[: first_retry + 1], *answered[start:]])
    verdict = parser.finish(0)
    assert (verdict.status, verdict.reply, verdict.retries) == (
        "completed", "Hello from the mock API.", 1,
    )  # fmt: skip
    assert verdict.last_error_status == 429
    assert not verdict.retrying
