"""OpenCode: its command line, its JSON stream, and what only its log on stderr says.

OpenCode 1.18.33 has no closing event, writes nothing on stdout while it retries, and
never names the model on stdout: the recorded streams of the real CLI
(tests/fixtures/opencode/, with the ``--print-logs`` stderr beside some) and small streams
built from their events show each of these.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from lirun.errors import UsageError
from lirun.exec.stream import Event
from lirun.providers.opencode import (
    OpencodeStreamParser,
    build_opencode_command,
    opencode_failure_class,
    parse_log_line,
)
from lirun.providers.registry import get_provider, parse_provider_spec
from support.execkit import only_row, run_li
from support.providerkit import env_with_fake_bin, fixture_path, fixture_stderr_lines, reason_of

SESSION = "ses_dbd8aac81ffexhmS0jLyxTJzbG"


def replay(name: str) -> tuple[OpencodeStreamParser, list[Event]]:
    """The fixture as the fake provider writes it: its stderr first, then its stdout."""
    parser = OpencodeStreamParser()
    fixture = f"opencode/{name}.jsonl"
    events = [e for line in fixture_stderr_lines(fixture) for e in parser.feed_stderr_line(line)]
    for line in fixture_path(fixture).read_text(encoding="utf-8").splitlines():
        events += parser.feed_line(line)
    return parser, events


def line(kind: str, **part: Any) -> str:
    return json.dumps({"type": kind, "timestamp": 1, "sessionID": SESSION, "part": part})


def step_finish(reason: str, total: int = 18, cost: float = 0.0) -> str:
    tokens = {"total": total, "input": 11, "output": 7, "reasoning": 0,
              "cache": {"write": 0, "read": 2}}  # fmt: skip
    return line("step_finish", reason=reason, tokens=tokens, cost=cost)


def log(message: str, **fields: str) -> str:
    pairs = " ".join(f"{k}={v}" for k, v in fields.items())
    return f"timestamp=2026-12-06T01:07:22.619Z level=INFO run=0b4d0f90 message={message} {pairs}"


BUILD = {"providerID": "mock", "modelID": "mock-model", "small": "false", "agent": "build"}


# --- the command line ----------------------------------------------------------------------


def test_command_reads_json_and_the_log_and_takes_provider_slash_model() -> None:
    head = ["opencode", "run", "--format", "json", "--print-logs", "--log-level", "INFO"]
    assert build_opencode_command("opencode") == head
    assert build_opencode_command(
        "opencode", model="openrouter/openai/gpt-5", resume="ses_1", extra_args=["--auto"]
    ) == [*head, "-m", "openrouter/openai/gpt-5", "--session", "ses_1", "--auto"]


@pytest.mark.parametrize("model", ["/mock-model", "mock/", " / "])
def test_command_refuses_half_a_model(model: str) -> None:
    with pytest.raises(UsageError, match="opencode/PROVIDER/MODEL"):
        build_opencode_command("opencode", model=model)
    # A bare model goes as given; OpenCode says what it makes of it.
    assert build_opencode_command("opencode", model="gpt-5")[-2:] == ["-m", "gpt-5"]


def test_spec_keeps_provider_and_model_after_opencode() -> None:
    assert parse_provider_spec("opencode/mock/mock-model") == ("opencode", "mock/mock-model")
    provider = get_provider("opencode")
    assert provider.env_var == "LIRUN_OPENCODE_BIN"
    assert provider.capabilities.resume
    assert provider.capabilities.reports_cost
    assert provider.parse_version("1.18.33\n") == "1.18.33"


# --- stdout --------------------------------------------------------------------------------


def test_success_records_reply_session_tokens_and_cost() -> None:
    parser, events = replay("ok")
    verdict = parser.finish(0)
    assert (verdict.status, verdict.reply) == ("completed", "Hello from the mock.")
    assert verdict.engine_session_uid == SESSION
    assert verdict.usage == {"input_tokens": 11, "output_tokens": 7, "reasoning_tokens": 0,
                             "total_tokens": 18, "cache_read_tokens": 0,
                             "cache_write_tokens": 0}  # fmt: skip
    assert (verdict.cost, verdict.num_turns) == (0.0, 1)
    assert [e.kind for e in events] == ["session", "assistant_text", "terminal", "usage"]
    # Without the log on stderr nothing names the model: none is made up.
    assert verdict.model is None


def test_tokens_and_cost_are_summed_over_the_steps_and_tool_calls_is_no_end() -> None:
    parser = OpencodeStreamParser()
    for text in (line("step_start"), step_finish("tool-calls", cost=0.25)):
        parser.feed_line(text)
    assert not parser.saw_terminal  # the model goes on after its tool calls
    for text in (line("step_start"), line("text", text="done"), step_finish("stop", cost=0.5)):
        parser.feed_line(text)
    verdict = parser.finish(0)
    assert (verdict.status, verdict.cost, verdict.num_turns) == ("completed", 0.75, 2)
    assert verdict.usage is not None
    assert (verdict.usage["total_tokens"], verdict.usage["cache_read_tokens"]) == (36, 4)


def test_a_tool_call_is_its_call_and_its_result_and_a_failed_tool_is_no_failed_run() -> None:
    parser, events = replay("tool-error")
    kinds = [e.kind for e in events]
    assert kinds.count("tool_call") == kinds.count("tool_result") == 1
    [result] = [e.data for e in events if e.kind == "tool_result"]
    assert result["is_error"] is True
    assert "invalid arguments" in result["content"]
    assert parser.finish(0).status == "completed"
    parser, events = replay("read")
    [result] = [e.data for e in events if e.kind == "tool_result"]
    assert result["is_error"] is False
    assert "hello world from file" in result["content"]


def test_a_refused_permission_counts_as_a_denial() -> None:
    parser = OpencodeStreamParser()
    state = {"status": "error", "input": {"command": "rm -rf /"},
             "error": "The user rejected permission to use this specific tool call."}  # fmt: skip
    parser.feed_line(line("tool_use", tool="bash", callID="c1", state=state))
    assert parser.finish(0).permission_denials == 1


def test_auth_failure_is_the_error_event_with_its_status() -> None:
    parser, _ = replay("401")
    verdict = parser.finish(1)
    assert (verdict.status, reason_of(verdict), verdict.retryable) == (
        "failed", "run.failed.provider_auth", False,
    )  # fmt: skip
    assert verdict.reply == ""
    assert verdict.last_error_status == 401


def test_context_overflow_is_rejected_and_a_second_error_is_evidence() -> None:
    parser, _ = replay("400")
    verdict = parser.finish(1)
    assert reason_of(verdict) == "run.failed.provider_rejected"
    assert parser.extra_terminal_count == 1


@pytest.mark.parametrize("reason", ["stop", "length"])
def test_a_stream_cut_before_its_last_step_finished_is_no_success(reason: str) -> None:
    parser = OpencodeStreamParser()
    parser.feed_line(line("step_start"))
    parser.feed_line(line("text", text="Hello from "))
    verdict = parser.finish(0)
    assert verdict.status == "failed"
    assert "no terminal event" in str(verdict.exception)
    parser.feed_line(step_finish(reason))
    assert parser.finish(0).status == "completed"


@pytest.mark.parametrize(
    ("text", "status", "name", "failure_class"),
    [
        ("Incorrect API key provided", 401, "APIError", "auth"),
        ("You are not allowed to sample from this model", 403, "APIError", "auth"),
        ("Rate limit reached for requests", 429, "APIError", "rate_limit"),
        ("The engine is currently overloaded, please try again later", 503, "APIError",
         "overloaded"),
        ("The server had an error processing your request", 500, "APIError", "server_error"),
        ("AI_APICallError: The server had an error processing your request", None, None,
         "server_error"),
        ("Your input exceeds the context window of this model.", None, "ContextOverflowError",
         "rejected"),
        ("The model `no-such-model` does not exist", 404, "APIError", "rejected"),
        ("AI_APICallError: Cannot connect to API: Unable to connect. Is the computer able to "
         "access the url?", None, None, "network"),
        ("Cannot connect to API: The socket connection was closed unexpectedly.", None, None,
         "network"),
        ("AI_JSONParseError: JSON parsing failed: Text: {this is not json.", None, None,
         "server_error"),
        ("Something new", None, "UnknownError", None),
    ],
)  # fmt: skip
def test_failures_map_to_classes(
    text: str, status: int | None, name: str | None, failure_class: str | None
) -> None:
    assert opencode_failure_class(text, status, name) == failure_class


def test_an_unknown_error_fails_unclassified_and_not_retried() -> None:
    parser = OpencodeStreamParser()
    error = {
        "name": "UnknownError",
        "data": {"message": "Unexpected server error. Check server logs for details."},
    }
    parser.feed_line(json.dumps({"type": "error", "sessionID": SESSION, "error": error}))
    verdict = parser.finish(1)
    assert verdict.status == "failed"
    assert verdict.retryable is False
    assert "Unexpected server error" in str(verdict.exception)


@pytest.mark.parametrize("junk", ["not json", "[1, 2]", '{"type": "new_event"}', '{"type":'])
def test_garbage_never_changes_a_success(junk: str) -> None:
    parser = OpencodeStreamParser()
    for text in (line("step_start"), junk, line("text", text="hi"), junk, step_finish("stop")):
        parser.feed_line(text)
    assert (parser.finish(0).status, parser.reply) == ("completed", "hi")


# --- stderr: the log -----------------------------------------------------------------------


def test_log_lines_are_read_as_key_value_pairs() -> None:
    said = parse_log_line(
        'timestamp=t level=ERROR message="stream error" agent=build '
        'error.error="AI_APICallError: say \\"no\\""'
    )
    assert said == {"timestamp": "t", "level": "ERROR", "message": "stream error",
                    "agent": "build", "error.error": 'AI_APICallError: say "no"'}  # fmt: skip


def test_the_log_names_session_version_and_model_and_each_retry() -> None:
    parser, events = replay("429")
    verdict = parser.finish(1)
    assert (verdict.model, verdict.provider_version) == ("mock/mock-model", "1.18.33")
    assert verdict.engine_session_uid == "ses_db71be8e9ffeCGJolxAfvqXSTm"
    assert [e.data["count"] for e in events if e.kind == "retry"] == [1, 2, 3, 4, 5]
    assert (reason_of(verdict), verdict.retries) == ("run.failed.provider_rate_limit", 5)


def test_the_title_call_is_never_the_runs_model_or_a_retry() -> None:
    parser = OpencodeStreamParser()
    title = {**BUILD, "modelID": "small-model", "small": "true", "agent": "title"}
    parser.feed_stderr_line(log("stream", **title))
    parser.feed_stderr_line(log('"stream error"', **title, **{"error.error": '"boom"'}))
    parser.feed_stderr_line(log("stream", **title))
    assert (parser.model, parser.retries) == (None, 0)
    parser.feed_stderr_line(log("stream", **BUILD))
    parser.feed_stderr_line(log("stream", **BUILD))  # a second step is no retry
    assert (parser.model, parser.retries) == ("mock/mock-model", 0)


def test_its_startup_log_is_progress_and_its_retries_are_not() -> None:
    now = [0.0]
    parser = OpencodeStreamParser(clock=lambda: now[0])
    now[0] = 20.0  # a slow start, logged step by step
    parser.feed_stderr_line(log("bootstrapping", directory="/repo"))
    assert parser.progress_at() == 20.0
    now[0] = 21.0
    parser.feed_stderr_line(log("stream", **BUILD))
    error = {"error.error": '"AI_APICallError: Rate limit reached"'}
    for moment in (22.0, 24.0, 28.0):
        now[0] = moment
        parser.feed_stderr_line(log('"stream error"', **BUILD, **error))
        parser.feed_stderr_line(log("stream", **BUILD))
        parser.feed_stderr_line(log("tracking", hash="abc"))
    assert (parser.progress_at(), parser.retries, parser.retrying) == (21.0, 3, True)


def test_a_stall_while_opencode_retries_takes_the_retries_class() -> None:
    parser, _ = replay("500-retrying")
    verdict = parser.finish(None, killed_by="stall")
    assert reason_of(verdict) == "run.failed.provider_server_error"
    assert verdict.retries >= 1
    assert verdict.engine_session_uid is not None


def test_a_retry_that_succeeds_completes_with_its_retries_as_evidence() -> None:
    parser = OpencodeStreamParser()
    parser.feed_stderr_line(log("stream", **BUILD))
    parser.feed_stderr_line(
        log('"stream error"', **BUILD, **{"error.error": '"AI_APICallError: Overloaded"'})
    )
    parser.feed_stderr_line(log("stream", **BUILD))
    for text in (line("step_start"), line("text", text="hi"), step_finish("stop")):
        parser.feed_line(text)
    verdict = parser.finish(0)
    assert (verdict.status, verdict.retries, verdict.retrying) == ("completed", 1, False)
    assert any(e["kind"] == "provider_retries" for e in verdict.evidence)


# --- end to end through li agent -----------------------------------------------------------


def test_li_agent_opencode_passes_the_prompt_on_stdin_and_records_the_run(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, tmp_path: Path
) -> None:
    argv_log = tmp_path / "argv.jsonl"
    env = env_with_fake_bin("opencode/ok.jsonl", base=li_env, fake_bin=fake_bin,
                            argv_log=argv_log)  # fmt: skip
    proc = run_li("agent", "opencode/mock/mock-model", "say hello", env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hello from the mock.\n"
    [call] = [json.loads(ln) for ln in argv_log.read_text().splitlines()]
    assert call["stdin"] == "say hello"
    assert call["argv"][:4] == ["run", "--format", "json", "--print-logs"]
    assert call["argv"][-2:] == ["-m", "mock/mock-model"]
    row = only_row(db_url)
    assert (row["provider"], row["engine_session_uid"]) == ("opencode", SESSION)
    assert row["reply_text"] == "Hello from the mock."


def test_li_agent_opencode_shows_retries_live(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path
) -> None:
    env = env_with_fake_bin("opencode/429.jsonl", base=li_env, fake_bin=fake_bin, exit_code=1)
    proc = run_li("agent", "opencode/mock/mock-model", "say hello", env=env, cwd=repo)
    assert proc.returncode != 0
    assert proc.stderr.count("opencode: retrying") == 5, proc.stderr
    row = only_row(db_url)
    assert (row["status_reason_code"], row["provider_retries"], row["model"]) == (
        "run.failed.provider_rate_limit", 5, "mock/mock-model",
    )  # fmt: skip


def test_the_child_works_in_the_runs_directory_whatever_pwd_li_had(
    li_env: dict[str, str], repo: Path, tmp_path: Path
) -> None:
    """A CLI that reads PWD (OpenCode writes its files relative to it) must see the run's
    directory, not the one ``li`` was started from."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**li_env, "PWD": str(elsewhere)}
    # Not a shell: a shell sets PWD again itself when it does not name its directory.
    show = "import os, sys; sys.stdout.write(os.environ['PWD'])"
    proc = run_li("run", "--cwd", str(repo), "--", sys.executable, "-c", show, env=env,
                  cwd=elsewhere)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == os.path.abspath(repo)
