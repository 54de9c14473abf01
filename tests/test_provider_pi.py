"""The pi coding agent: its command line and the stream truths its exit code hides.

pi ``--mode json`` exits 0 whatever happened to the model calls, so every verdict here
comes from the stream: the recorded streams of the real pi 0.73.1 (tests/fixtures/pi/)
and small streams built from their events.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lirun.errors import UsageError
from lirun.providers.pi import PiStreamParser, build_pi_command, pi_failure_class
from lirun.providers.registry import get_provider, parse_provider_spec
from support.execkit import only_row, run_li
from support.providerkit import env_with_fake_bin, fixture_path, reason_of


def replay(name: str, upto: int | None = None) -> tuple[PiStreamParser, list[Any]]:
    parser = PiStreamParser()
    lines = fixture_path(f"pi/{name}.jsonl").read_text(encoding="utf-8").splitlines()
    events = [e for line in lines[:upto] for e in parser.feed_line(line)]
    return parser, events


def lines_of(name: str) -> list[dict[str, Any]]:
    text = fixture_path(f"pi/{name}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


# --- the command line ----------------------------------------------------------------------


def test_command_splits_provider_and_model() -> None:
    assert build_pi_command("pi") == ["pi", "--mode", "json"]
    assert build_pi_command("pi", model="mock/mock-model", resume="s1", extra_args=["-x"]) == [
        "pi", "--mode", "json", "--provider", "mock", "--model", "mock-model",
        "--session", "s1", "-x",
    ]  # fmt: skip
    # Only the first slash splits: OpenRouter-style ids keep theirs.
    assert build_pi_command("pi", model="openrouter/openai/gpt-5")[3:] == [
        "--provider", "openrouter", "--model", "openai/gpt-5"
    ]  # fmt: skip
    # No provider: pi's own default provider (its settings, else google) picks the model.
    assert build_pi_command("pi", model="gemini-2.5-flash")[3:] == ["--model", "gemini-2.5-flash"]


@pytest.mark.parametrize("model", ["/mock-model", "mock/", " / "])
def test_command_refuses_half_a_model(model: str) -> None:
    with pytest.raises(UsageError, match="pi/PROVIDER/MODEL"):
        build_pi_command("pi", model=model)


def test_spec_takes_provider_and_model_after_pi() -> None:
    assert parse_provider_spec("pi/mock/mock-model") == ("pi", "mock/mock-model")
    assert get_provider("pi").env_var == "LIRUN_PI_BIN"
    assert isinstance(get_provider("pi").new_parser(), PiStreamParser)


# --- the stream ----------------------------------------------------------------------------


def test_success_records_reply_tokens_cost_model_and_session() -> None:
    parser, events = replay("ok")
    verdict = parser.finish(0)
    assert (verdict.status, verdict.exception) == ("completed", None)
    assert verdict.reply == "Hello from the mock."
    assert verdict.engine_session_uid == "01a24272-c808-7491-a858-f730c9982205"
    assert verdict.model == "mock/mock-model"
    assert verdict.usage is not None
    assert verdict.usage["totalTokens"] == 18
    assert verdict.cost == pytest.approx(0.000025)
    # One assistant text, from message_end: the deltas are progress, not replies.
    assert [e.data["text"] for e in events if e.kind == "assistant_text"] == [
        "Hello from the mock."
    ]


def test_usage_and_cost_are_summed_over_the_calls() -> None:
    parser, events = replay("tool")
    verdict = parser.finish(0)
    assert verdict.usage is not None
    assert verdict.usage["totalTokens"] == 36
    assert verdict.cost == pytest.approx(0.00005)
    assert (verdict.tool_calls, verdict.num_turns) == (1, 2)
    [call] = [e.data for e in events if e.kind == "tool_call"]
    assert call == {"id": "call_mock1", "name": "read", "input": {"path": "hello.txt"}}
    [result] = [e.data for e in events if e.kind == "tool_result"]
    assert result["is_error"] is False


def test_a_failed_tool_is_evidence_not_the_runs_end() -> None:
    parser, events = replay("toolerr")
    assert parser.finish(0).status == "completed"
    assert [e.data["is_error"] for e in events if e.kind == "tool_result"] == [True]


def test_auth_failure_despite_exit_code_zero_never_replies_the_prompt() -> None:
    parser, events = replay("401")
    verdict = parser.finish(0)
    assert verdict.status == "failed"
    assert reason_of(verdict) == "run.failed.provider_auth"
    assert str(verdict.exception) == "401 Incorrect API key provided: sk-fake."
    assert verdict.reply == ""
    assert not [e for e in events if e.kind == "assistant_text"]  # "say hello" is the user's


def test_provisional_stop_reason_on_message_start_is_not_an_end() -> None:
    # Up to the assistant message_start: "stopReason":"stop" there, before any answer.
    parser, _ = replay("ok", upto=6)
    assert lines_of("ok")[5]["message"]["stopReason"] == "stop"
    assert not parser.saw_terminal
    assert parser.finish(0).status == "failed"  # the stream ended before any answer


def test_agent_end_before_a_retry_is_not_the_end() -> None:
    rows = lines_of("429-default")
    first_retry = next(i for i, r in enumerate(rows) if r["type"] == "auto_retry_start")
    assert rows[first_retry - 1]["type"] == "agent_end"
    parser, events = replay("429-default", upto=first_retry + 1)
    assert not parser.saw_terminal
    assert parser.retrying
    [retry] = [e for e in events if e.kind == "retry"]
    assert retry.data["class"] == "rate_limit"
    assert retry.data["attempt"] == 1


def test_rate_limit_after_three_retries() -> None:
    parser, events = replay("429-default")
    assert parser.saw_terminal  # auto_retry_end{success:false}: pi gave up
    verdict = parser.finish(0)
    assert reason_of(verdict) == "run.failed.provider_rate_limit"
    assert [e.data["attempt"] for e in events if e.kind == "retry"] == [1, 2, 3]
    assert (verdict.retries, verdict.last_error_status) == (3, 429)
    assert verdict.reply == ""


def test_a_retry_that_succeeds_completes_with_its_retries_as_evidence() -> None:
    failed, ok = lines_of("429-default")[:9], lines_of("ok")[1:]
    retry = {"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 2000,
             "errorMessage": "429 Rate limit reached for requests"}  # fmt: skip
    done = {"type": "auto_retry_end", "success": True, "attempt": 1}
    parser = PiStreamParser()
    for row in [*failed, retry, *ok, done]:
        parser.feed_line(json.dumps(row))
    verdict = parser.finish(0)
    assert (verdict.status, verdict.reply, verdict.retries) == (
        "completed",
        "Hello from the mock.",
        1,
    )
    assert not verdict.retrying


def test_a_cut_stream_is_not_a_clean_success() -> None:
    # pi reports stopReason "stop" with the text so far and usage all 0.
    last = [r for r in lines_of("cut-default") if r["type"] == "message_end"][-1]["message"]
    assert (last["stopReason"], last["usage"]["totalTokens"]) == ("stop", 0)
    parser, _ = replay("cut-default")
    verdict = parser.finish(0)
    assert verdict.status == "failed"
    assert reason_of(verdict) == "run.failed.provider_network"
    assert "closed mid-stream" in str(verdict.exception)
    assert verdict.reply == ""
    [end] = [e for e in verdict.evidence if e.get("kind") == "provider_message_end"]
    assert end["stop_reason"] == "stop"


def test_a_stalled_body_is_ended_by_the_stall_limit() -> None:
    parser, _ = replay("stall-t5")
    assert not parser.saw_terminal
    assert parser.last_progress_at is not None  # the one text chunk was progress
    verdict = parser.finish(-15, killed_by="stall")
    assert reason_of(verdict) == "run.failed.provider_stalled"
    assert verdict.model == "mock/mock-model"  # named by the message being streamed


def test_a_kill_during_a_retry_delay_is_no_end_of_the_stream() -> None:
    rows = lines_of("refused-default")
    second_retry = [i for i, r in enumerate(rows) if r["type"] == "auto_retry_start"][1]
    parser, _ = replay("refused-default", upto=second_retry + 1)
    verdict = parser.finish(-15, killed_by="stall")
    assert reason_of(verdict) == "run.failed.provider_network"  # the retries' class
    assert verdict.retrying


@pytest.mark.parametrize(
    ("message", "failure_class"),
    [
        ("401 Incorrect API key provided: sk-fake.", "auth"),
        ("403 You are not allowed to sample from this model", "auth"),
        ("429 Rate limit reached for requests", "rate_limit"),
        ("500 The server had an error while processing your request.", "server_error"),
        ("503 The engine is currently overloaded, please try again later", "overloaded"),
        ("400 Your input exceeds the context window of this model.", "rejected"),
        ("404 The model `nope` does not exist", "rejected"),
        ("Connection error.", "network"),
        ("Request timed out.", "network"),
        ("terminated", "network"),
        ("Expected property name or '}' in JSON at position 1", "server_error"),
        ("something new", None),
    ],
)
def test_error_messages_map_to_classes(message: str, failure_class: str | None) -> None:
    assert pi_failure_class(message) == failure_class


def test_an_unknown_error_fails_unclassified() -> None:
    rows = lines_of("401")
    for row in rows:
        if row.get("message", {}).get("errorMessage"):
            row["message"]["errorMessage"] = "something new"
    parser = PiStreamParser()
    for row in rows:
        parser.feed_line(json.dumps(row))
    verdict = parser.finish(0)
    assert verdict.status == "failed"
    assert verdict.exception is not None
    assert verdict.exception.failure_class is None
    assert "something new" in str(verdict.exception)


@pytest.mark.parametrize(
    "junk",
    ['{"type": "message_end", "message": "x"}', '{"type": "auto_retry_start", "attempt": "2"}',
     '{"type": "message_update"}', '{"type": "tool_execution_end", "result": []}', "garbage"],
)  # fmt: skip
def test_garbage_never_changes_a_success(junk: str) -> None:
    parser = PiStreamParser()
    for line in fixture_path("pi/ok.jsonl").read_text().splitlines():
        parser.feed_line(junk)
        parser.feed_line(line)
    verdict = parser.finish(0)
    assert (verdict.status, verdict.reply) == ("completed", "Hello from the mock.")


# --- end to end through li agent -----------------------------------------------------------


def test_li_agent_pi_passes_the_prompt_on_stdin_and_records_the_run(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, tmp_path: Path
) -> None:
    log = tmp_path / "argv.jsonl"
    env = env_with_fake_bin("pi/ok.jsonl", base=li_env, fake_bin=fake_bin, argv_log=log)
    proc = run_li("agent", "pi/mock/mock-model", "say hello", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hello from the mock.\n"
    [call] = [json.loads(line) for line in log.read_text().splitlines()]
    # The fake reads stdin to its end, as pi does: it got the prompt and then EOF.
    assert call["stdin"] == "say hello"
    assert call["argv"] == ["--mode", "json", "--provider", "mock", "--model", "mock-model"]
    row = only_row(db_url)
    assert (row["model"], row["provider"]) == ("mock/mock-model", "pi")
    assert row["reply_text"] == "Hello from the mock."


def test_li_agent_pi_shows_retries_live(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    env = env_with_fake_bin("pi/429-default.jsonl", base=li_env, fake_bin=fake_bin)
    proc = run_li("agent", "pi/mock/mock-model", "say hello", env=env, cwd=repo)
    assert proc.returncode != 0
    assert proc.stderr.count("pi: retrying") == 3, proc.stderr
    row = only_row(db_url)
    assert (row["status_reason_code"], row["provider_retries"]) == (
        "run.failed.provider_rate_limit",
        3,
    )


def test_the_version_pi_prints_on_stderr_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lirun.exec.versions import cli_version

    monkeypatch.setenv("LIRUN_HOME", str(tmp_path / "home"))
    exe = tmp_path / "pi"
    exe.write_text("#!/bin/sh\necho 0.73.1 >&2\n")
    exe.chmod(0o755)
    assert cli_version(str(exe), ("--version",), get_provider("pi").parse_version) == "0.73.1"
