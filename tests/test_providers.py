"""Provider stream parsing, verdicts, command lines and executable lookup (no real models)."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lirun.errors import LirunError, UsageError
from lirun.exec.stream import KEPT_REPLY_CHARS, Event, StreamParser, events_to_messages
from lirun.exec.verdict import StreamVerdict
from lirun.provider_errors import (
    ProviderError,
    ProviderNonRetryableError,
    ProviderNotFoundError,
    ProviderRetryableError,
)
from lirun.providers.claude import ClaudeStreamParser, build_claude_command
from lirun.providers.codex import CodexStreamParser, build_codex_command
from lirun.providers.registry import (
    find_provider_executable,
    get_provider,
    parse_provider_spec,
    provider_names,
)
from lirun.record.outcome import OutcomeFacts, base_outcome
from lirun.settings import Settings
from support.providerkit import (
    FIXTURES_DIR,
    fake_env_for,
    fixture_path,
    fixture_stderr_lines,
    load_expectations,
    make_fake_bin_dir,
    reason_of,
)

EXPECTATIONS = load_expectations()


def replay(name: str, parser: StreamParser | None = None) -> StreamParser:
    parser = parser or get_provider(EXPECTATIONS[name]["provider"]).new_parser()
    for line in fixture_stderr_lines(name):  # as the fake provider writes it: first
        parser.feed_stderr_line(line)
    for line in fixture_path(name).read_text(encoding="utf-8").splitlines(keepends=True):
        parser.feed_line(line)
    return parser


def replay_events(name: str) -> tuple[StreamParser, list[Event]]:
    """The parser keeps no events: a test that looks at them collects what it hands on."""
    parser = get_provider(EXPECTATIONS[name]["provider"]).new_parser()
    lines = fixture_path(name).read_text(encoding="utf-8").splitlines(keepends=True)
    events = [
        event for line in fixture_stderr_lines(name) for event in parser.feed_stderr_line(line)
    ]
    return parser, events + [event for line in lines for event in parser.feed_line(line)]


def verdict_for(name: str) -> StreamVerdict:
    return replay(name).finish(**EXPECTATIONS[name]["finish"])


def feed(parser: StreamParser, *objects: dict[str, Any] | str) -> StreamParser:
    for obj in objects:
        parser.feed_line(obj if isinstance(obj, str) else json.dumps(obj))
    return parser


def claude_result(**fields: Any) -> dict[str, Any]:
    return {"type": "result", "subtype": "success", "is_error": False, "session_id": "s1", **fields}


# --- every fixture against its expectation row ---------------------------------------------


def test_every_fixture_has_an_expectation() -> None:
    # Streams recorded from the real CLIs (``real-<version>-<case>``) carry their
    # expectations in tests/support/contracts/ and are replayed by test_real_streams.
    on_disk = {
        str(p.relative_to(FIXTURES_DIR))
        for p in FIXTURES_DIR.glob("*/*.jsonl")
        if not p.name.startswith("real-")
    }
    assert on_disk == set(EXPECTATIONS)


@pytest.mark.parametrize("name", sorted(EXPECTATIONS))
def test_fixture_verdict(name: str) -> None:
    row = EXPECTATIONS[name]
    verdict = verdict_for(name)
    assert verdict.status == row["status"]
    exc_name = type(verdict.exception).__name__ if verdict.exception is not None else None
    assert exc_name == row["exception"]
    assert verdict.retryable is row["retryable"]
    assert reason_of(verdict) == row["reason"]
    assert verdict.engine_session_uid == row["engine_session_uid"]
    assert verdict.reply == row["reply"]
    assert verdict.usage == row["usage"]
    assert verdict.cost == row["cost"]
    assert verdict.num_turns == row["num_turns"]
    assert verdict.provider == row["provider"]
    assert any(e["kind"] == "provider_exit" for e in verdict.evidence)
    if "retries" in row:  # the rows of the retry and error shapes say what must be kept
        assert (verdict.retries, verdict.last_error) == (row["retries"], row["last_error"])
        assert verdict.provider_version == row["provider_version"]
    if "model" in row:  # the model that answered (Gemini: the key of result.stats.models)
        assert verdict.model == row["model"]


@pytest.mark.parametrize("name", sorted(EXPECTATIONS))
def test_fixture_events_become_messages(name: str) -> None:
    parser = get_provider(EXPECTATIONS[name]["provider"]).new_parser()
    lines = fixture_path(name).read_text(encoding="utf-8").splitlines()
    events = [e for line in fixture_stderr_lines(name) for e in parser.feed_stderr_line(line)]
    events += [e for line in lines for e in parser.feed_line(line)]
    messages = events_to_messages(events)
    assistant = [m.content for m in messages if m.role == "assistant"]
    assert parser.assistant_text_count == len(assistant)
    assert parser.last_assistant_text == (assistant[-1] if assistant else "")
    assert parser.tool_call_count == sum(m.role == "tool_call" for m in messages)
    assert parser.tool_result_count == sum(m.role == "tool_result" for m in messages)
    for message in messages:
        if message.role != "assistant":
            assert isinstance(json.loads(message.content), dict)


# --- claude specifics ----------------------------------------------------------------------


def test_claude_success_state() -> None:
    parser, events = replay_events("claude/success.jsonl")
    assert parser.model == "claude-sonnet-4-5"
    texts = [e.data["text"] for e in events if e.kind == "assistant_text"]
    assert texts == ["Fixing the test.", "Done: test fixed."]
    assert (parser.assistant_text_count, parser.last_assistant_text) == (2, "Done: test fixed.")
    calls = [e.data for e in events if e.kind == "tool_call"]
    assert calls == [{"id": "toolu_1", "name": "Bash", "input": {"command": "pytest -q"}}]
    results = [e.data for e in events if e.kind == "tool_result"]
    assert results[0]["content"] == "1 passed"
    assert (parser.tool_call_count, parser.tool_result_count) == (1, 1)
    assert parser.ignored_types["rate_limit_event"] == 1


def test_claude_second_result_is_evidence_only() -> None:
    verdict = verdict_for("claude/two_results.jsonl")
    extra = [e for e in verdict.evidence if e["kind"] == "provider_extra_terminal"]
    assert [e["subtype"] for e in extra] == ["error_during_execution"]
    first = next(e for e in verdict.evidence if e["kind"] == "provider_result")
    assert first["subtype"] == "success"


def test_claude_api_error_dressed_as_success_records_evidence() -> None:
    verdict = verdict_for("claude/api_error_as_success.jsonl")
    result = next(e for e in verdict.evidence if e["kind"] == "provider_result")
    assert result == result | {"subtype": "success", "is_error": True, "api_error_status": 400}
    assert result["terminal_reason"] == "api_error"
    messages = next(e for e in verdict.evidence if e["kind"] == "provider_errors")["messages"]
    assert any("prompt is too long" in m for m in messages)
    # The error text is the provider error, never the reply.
    assert verdict.reply == ""
    assert "prompt is too long" in str(verdict.exception)


def test_claude_truncated_line_is_an_unparsed_note() -> None:
    parser = replay("claude/truncated_last_line.jsonl")
    assert parser.unparsed_lines == 1
    assert not parser.saw_terminal


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        (
            {"api_error_status": 529, "is_error": True, "result": "API Error: 529 overloaded"},
            "run.failed.provider_overloaded",
        ),
        ({"api_error_status": 500, "is_error": True}, "run.failed.provider_server_error"),
        ({"api_error_status": 429, "is_error": True}, "run.failed.provider_rate_limit"),
        (
            {"subtype": "error_during_execution", "errors": ["Overloaded"]},
            "run.failed.provider_overloaded",
        ),
        (
            {"is_error": True, "result": "API Error: Rate limit reached"},
            "run.failed.provider_rate_limit",
        ),
    ],
)
def test_claude_transient_failures_are_retryable(fields: dict[str, Any], reason: str) -> None:
    verdict = feed(ClaudeStreamParser(), claude_result(**fields)).finish(0)
    assert isinstance(verdict.exception, ProviderRetryableError)
    assert reason_of(verdict) == reason


def test_claude_assistant_rate_limit_error_makes_failure_retryable() -> None:
    assistant = {"type": "assistant", "message": {"content": []}, "error": "rate_limit"}
    result = claude_result(subtype="error_during_execution", is_error=True)
    verdict = feed(ClaudeStreamParser(), assistant, result).finish(1)
    assert verdict.retryable


def test_claude_limits_are_never_retryable() -> None:
    assistant = {"type": "assistant", "message": {"content": []}, "error": "rate_limit"}
    result = claude_result(subtype="error_max_budget_usd", is_error=True)
    verdict = feed(ClaudeStreamParser(), assistant, result).finish(1)
    assert isinstance(verdict.exception, ProviderNonRetryableError)


def test_claude_error_subtype_fails_even_without_is_error() -> None:
    verdict = feed(ClaudeStreamParser(), claude_result(subtype="error_max_turns")).finish(1)
    assert verdict.status == "failed"


def test_claude_resumed_run_takes_session_id_from_init() -> None:
    init = {"type": "system", "subtype": "init", "session_id": "new", "model": "m"}
    parser = feed(ClaudeStreamParser(), {"type": "stream_event", "session_id": "old"}, init)
    assert parser.engine_session_uid == "new"


# --- codex specifics -----------------------------------------------------------------------


def test_codex_success_state() -> None:
    parser, events = replay_events("codex/success.jsonl")
    calls = [e.data for e in events if e.kind == "tool_call"]
    assert [c["name"] for c in calls] == ["command_execution", "file_change"]
    assert calls[0]["input"] == {"command": "bash -lc ls"}
    assert parser.tool_call_count == 2
    results = [e.data for e in events if e.kind == "tool_result"]
    assert results[0] == {
        "id": "item_1",
        "name": "command_execution",
        "status": "completed",
        "exit_code": 0,
        "aggregated_output": "README.md\n",
    }


def test_codex_error_events_are_not_terminal() -> None:
    parser = feed(CodexStreamParser(), {"type": "error", "message": "Reconnecting... 1/5"})
    assert not parser.saw_terminal
    assert parser.errors == ["Reconnecting... 1/5"]
    assert type(parser.finish(0).exception) is ProviderError


@pytest.mark.parametrize("exit_code", [0, 1])
def test_codex_outage_verdict_ignores_exit_code(exit_code: int) -> None:
    verdict = replay("codex/outage.jsonl").finish(exit_code)
    assert isinstance(verdict.exception, ProviderRetryableError)


def test_codex_turn_failed_without_transient_cause_is_not_retryable() -> None:
    failed = {"type": "turn.failed", "error": {"message": "invalid api key"}}
    verdict = feed(CodexStreamParser(), failed).finish(1)
    assert isinstance(verdict.exception, ProviderNonRetryableError)


def test_codex_usage_is_the_last_running_total() -> None:
    first = {"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 1}}
    second = {"type": "turn.completed", "usage": {"input_tokens": 30, "output_tokens": 4}}
    parser = feed(CodexStreamParser(), first, second)
    assert parser.usage == {"input_tokens": 30, "output_tokens": 4}
    assert len(parser.extra_terminals) == 1


def test_codex_agent_message_only_counts_when_completed() -> None:
    item = {"id": "i1", "type": "agent_message", "text": "draft"}
    parser = feed(CodexStreamParser(), {"type": "item.updated", "item": item})
    assert (parser.assistant_text_count, parser.reply) == (0, "")


# --- provider-neutral rules ----------------------------------------------------------------


def test_terminal_time_comes_from_the_injected_clock() -> None:
    parser = ClaudeStreamParser(clock=lambda: 42.0)
    feed(parser, {"type": "system", "subtype": "init", "session_id": "s"})
    assert (parser.saw_terminal, parser.terminal_at) == (False, None)
    feed(parser, claude_result(result="ok"))
    assert (parser.saw_terminal, parser.terminal_at) == (True, 42.0)


@pytest.mark.parametrize(
    ("exit_code", "killed_by", "status"),
    [
        (0, None, "completed"),
        (None, None, "completed"),
        (-15, "grace", "completed"),
        (2, None, "failed"),
    ],
)
def test_success_event_and_exit_code(
    exit_code: int | None, killed_by: str | None, status: str
) -> None:
    verdict = feed(ClaudeStreamParser(), claude_result(result="ok")).finish(
        exit_code, killed_by=killed_by
    )
    assert verdict.status == status
    if status == "failed":
        assert isinstance(verdict.exception, ProviderNonRetryableError)


@pytest.mark.parametrize("exit_code", [0, 1, None, -9])
def test_no_terminal_is_an_unclassified_provider_error(exit_code: int | None) -> None:
    verdict = ClaudeStreamParser().finish(exit_code, killed_by="idle")
    assert type(verdict.exception) is ProviderError
    assert verdict.exception.retryable is False
    assert reason_of(verdict) == "run.failed.provider_nonretryable"


GARBAGE = [
    "",
    "   \n",
    "not json at all",
    '{"type": "result", "subtype": "succ',
    "[1, 2, 3]",
    '"just a string"',
    "null",
    '{"no_type": true}',
    '{"type": "brand_new_event", "payload": {}}',
    '{"type": "assistant", "message": "not a dict"}',
    '{"type": "assistant", "message": {"content": [1, null, {"type": "text"}]}}',
    '{"type": "user", "message": {"content": "x"}}',
    '{"type": "item.completed", "item": "not a dict"}',
    '{"type": "turn.failed", "error": "not a dict"}',
]


@pytest.mark.parametrize("name", ["claude/success.jsonl", "codex/success.jsonl"])
def test_garbage_lines_are_harmless(name: str) -> None:
    clean = verdict_for(name)
    parser = get_provider(EXPECTATIONS[name]["provider"]).new_parser()
    lines = fixture_path(name).read_text(encoding="utf-8").splitlines()
    for line in lines[:-1]:
        for junk in GARBAGE[:-1]:  # turn.failed junk would be a (codex) terminal event
            parser.feed_line(junk)
        parser.feed_line(line)
    parser.feed_line(lines[-1])
    noisy = parser.finish(**EXPECTATIONS[name]["finish"])
    assert (noisy.status, noisy.reply, noisy.usage) == (
        clean.status,
        clean.reply,
        clean.usage,
    )
    noise = next(e for e in noisy.evidence if e["kind"] == "provider_stream_noise")
    assert noise["unparsed_lines"] > 0


@pytest.mark.parametrize("parser_cls", [ClaudeStreamParser, CodexStreamParser])
@pytest.mark.parametrize("junk", GARBAGE)
def test_garbage_alone_never_raises(parser_cls: type[StreamParser], junk: str) -> None:
    parser = parser_cls()
    events = parser.feed_line(junk)
    assert all(e.kind in {"unparsed", "terminal", "error"} for e in events)
    assert parser.finish(0).status == "failed"


def test_unparsed_note_becomes_a_system_message() -> None:
    events = ClaudeStreamParser().feed_line("garbage")
    [message] = events_to_messages(events)
    assert message.role == "system"
    assert json.loads(message.content)["line"] == "garbage"


# --- errors --------------------------------------------------------------------------------


def test_provider_error_hierarchy() -> None:
    assert issubclass(ProviderError, LirunError)
    assert issubclass(ProviderError, RuntimeError)
    assert ProviderRetryableError("x", provider="claude").retryable is True
    err = ProviderNonRetryableError("x", provider="codex", detail={"a": 1})
    assert (err.retryable, err.provider, err.detail) == (False, "codex", {"a": 1})
    assert ProviderError("x", provider="claude").exit_code == 1
    assert issubclass(ProviderNotFoundError, UsageError)
    assert ProviderNotFoundError.exit_code == 2


# --- command lines -------------------------------------------------------------------------


def test_build_claude_command() -> None:
    base = ["claude", "-p", "--output-format", "stream-json", "--verbose"]
    assert build_claude_command("claude") == base
    full = build_claude_command(
        "claude", model="claude-sonnet-4-5", resume="abc", extra_args=["--x"]
    )
    assert full == [*base, "--model", "claude-sonnet-4-5", "--resume", "abc", "--x"]


def test_build_codex_command() -> None:
    # "-": codex exec reads the prompt from stdin (the prompt is never an argument)
    assert build_codex_command("codex") == ["codex", "exec", "--json", "-"]
    assert build_codex_command("codex", model="gpt-5") == [
        "codex", "exec", "--json", "-m", "gpt-5", "-"
    ]  # fmt: skip
    assert build_codex_command("codex", resume="t1", cwd="/w") == [
        "codex", "exec", "--json", "-C", "/w", "resume", "t1", "-"
    ]  # fmt: skip


def test_registry_specs() -> None:
    assert {"claude", "codex", "gemini", "pi"} <= set(provider_names())
    assert get_provider("claude").env_var == "LIRUN_CLAUDE_BIN"
    assert get_provider("codex").env_var == "LIRUN_CODEX_BIN"
    assert isinstance(get_provider("codex").new_parser(), CodexStreamParser)
    argv = get_provider("claude").command("c", model="m")
    assert argv[-2:] == ["--model", "m"]


# --- parse_provider_spec -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("claude", ("claude", None)),
        ("claude/claude-sonnet-4-5", ("claude", "claude-sonnet-4-5")),
        ("codex/gpt-5-codex", ("codex", "gpt-5-codex")),
        ("Codex", ("codex", None)),
        ("codex/org/model", ("codex", "org/model")),
        ("gemini/gemini-2.5-flash", ("gemini", "gemini-2.5-flash")),
    ],
)
def test_parse_provider_spec(text: str, expected: tuple[str, str | None]) -> None:
    assert parse_provider_spec(text) == expected


@pytest.mark.parametrize("text", ["nosuchcli", "nosuchcli/pro", "", "claude/", "gemini/"])
def test_parse_provider_spec_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        parse_provider_spec(text)


# --- find_provider_executable --------------------------------------------------------------


def test_find_uses_override_then_env_then_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = make_fake_bin_dir(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("LIRUN_CLAUDE_BIN", raising=False)
    assert find_provider_executable("claude", None, Settings.from_env()) == str(bin_dir / "claude")
    other = make_fake_bin_dir(tmp_path / "other")
    monkeypatch.setenv("LIRUN_CLAUDE_BIN", str(other / "claude"))
    assert find_provider_executable("claude", None, Settings.from_env()) == str(other / "claude")
    third = make_fake_bin_dir(tmp_path / "third")
    given = find_provider_executable("claude", str(third / "claude"), Settings.from_env())
    assert given == str(third / "claude")


def test_find_missing_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("LIRUN_CODEX_BIN", raising=False)
    with pytest.raises(ProviderNotFoundError, match="LIRUN_CODEX_BIN") as info:
        find_provider_executable("codex", None, Settings.from_env())
    assert info.value.exit_code == 2


def test_find_override_missing(tmp_path: Path) -> None:
    with pytest.raises(ProviderNotFoundError, match="does not exist"):
        find_provider_executable("claude", str(tmp_path / "nope"), Settings())


def test_find_env_not_executable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "claude"
    plain.write_text("#!/bin/sh\n")
    plain.chmod(0o644)
    monkeypatch.setenv("LIRUN_CLAUDE_BIN", str(plain))
    with pytest.raises(ProviderNotFoundError, match="not executable"):
        find_provider_executable("claude", None, Settings.from_env())


def test_find_unknown_provider() -> None:
    with pytest.raises(UsageError, match="unknown provider"):
        find_provider_executable("nosuchcli", None, Settings())


# --- the fake provider itself --------------------------------------------------------------


def test_fake_provider_replays_fixture(tmp_path: Path) -> None:
    bin_dir = make_fake_bin_dir(tmp_path / "bin")
    log = tmp_path / "argv.jsonl"
    env = fake_env_for("codex/completed_then_nonzero_exit.jsonl", argv_log=log, touch="out/a.txt")
    argv = build_codex_command(str(bin_dir / "codex"), model="gpt-5")
    proc = subprocess.run(
        argv, env=env, cwd=tmp_path, input="do it", capture_output=True, text=True, timeout=30
    )
    expected = fixture_path("codex/completed_then_nonzero_exit.jsonl").read_text(encoding="utf-8")
    assert (proc.returncode, proc.stdout) == (1, expected)
    assert json.loads(log.read_text())["argv"] == argv[1:]
    assert json.loads(log.read_text())["stdin"] == "do it"
    assert (tmp_path / "out" / "a.txt").exists()


def test_fake_provider_hang_is_killable(tmp_path: Path) -> None:
    bin_dir = make_fake_bin_dir(tmp_path / "bin")
    env = fake_env_for("claude/hang_after_result.jsonl")
    argv = build_claude_command(str(bin_dir / "claude"))
    proc = subprocess.Popen(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    parser = ClaudeStreamParser()
    while not parser.saw_terminal:
        parser.feed_line(proc.stdout.readline())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == -signal.SIGTERM
    proc.stdout.close()
    assert parser.finish(proc.returncode, killed_by="grace").status == "completed"


def test_fake_provider_scripts_are_executable() -> None:
    assert os.access(FIXTURES_DIR.parent / "fake_provider.py", os.X_OK)


@pytest.mark.parametrize(
    ("name", "calls", "denied"),
    [
        ("claude/success.jsonl", 1, 0),
        ("claude/success_nothing_done.jsonl", 1, 1),
        ("claude/all_denied_with_reply.jsonl", 1, 1),
        ("claude/success_silent.jsonl", 0, 0),
        ("codex/success.jsonl", 2, 0),
        ("codex/turn_completed_silent.jsonl", 0, 0),
    ],
)
def test_the_verdict_counts_tool_calls_and_denials(name: str, calls: int, denied: int) -> None:
    verdict = verdict_for(name)
    assert (verdict.tool_calls, verdict.permission_denials) == (calls, denied)


# --- bounded memory ------------------------------------------------------------------------


def _claude_stream(n: int, payload: str) -> Iterator[str]:
    """Every kind of Claude Code line, ``n`` rounds; ids and type names unique per round."""
    yield json.dumps({"type": "system", "subtype": "init", "session_id": "s", "model": "m"})
    for i in range(n):
        use = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"c": payload}}
        text = {"type": "text", "text": f"step {i} {payload}"}
        yield json.dumps({"type": "assistant", "message": {"content": [text, use]}})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": payload}
        yield json.dumps({"type": "user", "message": {"content": [result]}})
        yield json.dumps({"type": f"drift_{i}", "subtype": f"new_{i}"})
        retry = {"type": "system", "subtype": "api_retry", "attempt": i, "error": f"e{i}"}
        yield json.dumps(retry)
        yield json.dumps(claude_result(result=f"done {i} {payload}"))  # later ones: extras
        yield f"not json {i} {payload[:100]}"


def _codex_stream(n: int, payload: str) -> Iterator[str]:
    yield json.dumps({"type": "thread.started", "thread_id": "t"})
    for i in range(n):
        item = {"id": f"item_{i}", "type": "command_execution", "command": payload}
        yield json.dumps({"type": "item.started", "item": item})
        done = {**item, "status": "completed", "aggregated_output": payload}
        yield json.dumps({"type": "item.completed", "item": done})
        message = {"id": f"msg_{i}", "type": "agent_message", "text": f"{i} {payload}"}
        yield json.dumps({"type": "item.completed", "item": message})
        yield json.dumps({"type": "error", "message": f"Reconnecting... {i}/5 {payload}"})
        yield json.dumps({"type": f"drift.{i}"})
        yield json.dumps({"type": "turn.completed", "usage": {"input_tokens": i}})


def _retained_bytes(parser: StreamParser, lines: Iterator[str]) -> int:
    """What feeding ``lines`` left allocated: the parser's own growth (events are dropped,
    as the caller drops them once recorded)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for line in lines:
            parser.feed_line(line)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


# Well above one run's fixed state (a 64 KiB reply at most, 20 errors, a few terminals),
# far below 20,000 events of 1 KB (about 20 MB kept before the parser stopped keeping them).
_RETAINED_LIMIT = 256 * 1024


@pytest.mark.parametrize(
    ("provider", "stream"), [("claude", _claude_stream), ("codex", _codex_stream)]
)
def test_the_parser_keeps_no_per_event_state(
    provider: str, stream: Callable[[int, str], Iterator[str]]
) -> None:
    payload = "x" * 1000
    rounds = 20_000 // 6  # six lines a round: 20,000 lines, more events
    small = _retained_bytes(get_provider(provider).new_parser(), stream(200, payload))
    parser = get_provider(provider).new_parser()
    large = _retained_bytes(parser, stream(rounds, payload))
    assert parser.tool_call_count == rounds
    assert parser.lines_seen > 20_000 - 6
    assert large < _RETAINED_LIMIT, f"the parser kept {large} bytes"
    assert large - small < 32 * 1024, f"{small} bytes after 200 rounds, {large} after {rounds}"
    verdict = parser.finish(0)
    assert verdict.tool_calls == rounds
    assert verdict.reply.endswith(payload)


def test_the_kept_reply_is_capped_to_its_tail() -> None:
    long_text = "a" * KEPT_REPLY_CHARS + "the end"
    text = {"type": "text", "text": long_text}
    parser = feed(ClaudeStreamParser(), {"type": "assistant", "message": {"content": [text]}})
    assert len(parser.reply) == KEPT_REPLY_CHARS
    assert parser.reply.endswith("the end")
    feed(parser, claude_result(result="b" * KEPT_REPLY_CHARS + "result end"))
    assert len(parser.reply) == KEPT_REPLY_CHARS
    assert parser.reply.endswith("result end")
    item = {"id": "m", "type": "agent_message", "text": long_text}
    codex = feed(CodexStreamParser(), {"type": "item.completed", "item": item})
    assert codex.reply == long_text[-KEPT_REPLY_CHARS:]


def test_later_terminal_events_are_kept_a_few_and_counted() -> None:
    parser = feed(ClaudeStreamParser(), *[claude_result(result=f"r{i}") for i in range(50)])
    evidence = parser.finish(0).evidence
    kept = [e for e in evidence if e["kind"] == "provider_extra_terminal"]
    omitted = [e for e in evidence if e["kind"] == "provider_extra_terminals_omitted"]
    assert len(kept) == 5
    assert omitted[0]["count"] == 49 - 5
    assert parser.reply == "r0"  # the first result is the run's answer


# --- failure classes, auth signals, warnings, attempts, stalls (issue 18) ---------------------


def _retry_line(attempt: int, status: int | None, error: str) -> dict[str, Any]:
    return {
        "type": "system",
        "subtype": "api_retry",
        "attempt": attempt,
        "max_retries": 10,
        "retry_delay_ms": 500,
        "error_status": status,
        "error": error,
    }


@pytest.mark.parametrize(
    ("status", "error"),
    [(401, "authentication_failed"), (403, "unknown"), (None, "authentication_failed")],
)
def test_claude_first_auth_retry_flags_the_run_at_once(status: int | None, error: str) -> None:
    parser = feed(ClaudeStreamParser(), _retry_line(1, status, error))
    assert parser.fatal is not None
    assert parser.fatal.failure_class == "auth"
    verdict = parser.finish(-15, killed_by="provider")
    assert reason_of(verdict) == "run.failed.provider_auth"
    assert "on API attempt 1 of 10" in str(verdict.exception)


@pytest.mark.parametrize(("status", "error"), [(None, "unknown"), (529, "unknown"), (429, "x")])
def test_claude_other_retries_never_stop_the_run(status: int | None, error: str) -> None:
    assert feed(ClaudeStreamParser(), _retry_line(1, status, error)).fatal is None


def test_claude_no_credentials_is_auth_in_its_own_words_with_no_model() -> None:
    parser = replay("claude/not_logged_in.jsonl")
    assert parser.fatal is not None  # the synthetic assistant error already says it
    verdict = parser.finish(1)
    outcome = base_outcome(OutcomeFacts(status=verdict.status, exception=verdict.exception))
    assert outcome.reason_code == "run.failed.provider_auth"
    assert outcome.summary == (
        "claude: the provider refused the credentials: Not logged in · Please run /login"
    )
    assert "is_error" not in outcome.summary
    assert verdict.reply == ""
    assert verdict.model is None  # every assistant event was <synthetic>: no model call
    assert any(e["kind"] == "provider_no_model_call" for e in verdict.evidence)


def test_claude_invalid_key_result_summary_is_the_providers_words() -> None:
    verdict = replay("claude/auth_401_result.jsonl").finish(1)
    outcome = base_outcome(OutcomeFacts(status=verdict.status, exception=verdict.exception))
    assert outcome.summary == (
        "claude: the provider refused the credentials: Invalid API key · Fix external API key"
    )
    assert verdict.reply == ""
    assert verdict.retries == 10


def test_claude_model_fallback_updates_the_model() -> None:
    verdict = replay("claude/model_fallback.jsonl").finish(0)
    assert verdict.model == "claude-sonnet-4-5"
    [fact] = [e for e in verdict.evidence if e["kind"] == "provider_model_fallback"]
    assert (fact["from"], fact["to"]) == ("claude-opus-4-8[1m]", "claude-sonnet-4-5")


def test_claude_real_model_call_keeps_the_model() -> None:
    verdict = verdict_for("claude/success.jsonl")
    assert verdict.model == "claude-sonnet-4-5"


def test_codex_warnings_are_never_the_error() -> None:
    parser, events = replay_events("codex/warnings_then_completed.jsonl")
    assert [e.kind for e in events].count("warning") == 2
    assert parser.errors == []
    assert parser.last_error is None
    verdict = parser.finish(0)
    [fact] = [e for e in verdict.evidence if e["kind"] == "provider_warnings"]
    assert fact["count"] == 2
    assert "Model metadata" in fact["messages"][0]
    assert not any(m.role == "error" for m in events_to_messages(events))


def test_codex_attempts_are_counted_not_notices() -> None:
    parser = replay("codex/offline_forever.jsonl")
    assert parser.retries == 8  # 2/5 .. 5/5, then three "waiting for network"
    assert parser.retrying
    assert parser.retry_class == "network"


def test_a_stall_while_reconnecting_is_a_network_failure_naming_what_codex_did() -> None:
    clock = iter([0.0, *range(1, 100)]).__next__
    parser = replay("codex/offline_forever.jsonl", CodexStreamParser(clock=lambda: float(clock())))
    verdict = parser.finish(-15, killed_by="stall")
    assert isinstance(verdict.exception, ProviderRetryableError)
    assert reason_of(verdict) == "run.failed.provider_network"
    text = str(verdict.exception)
    assert text.startswith("no progress for ")
    assert (
        "codex was retrying the API (8 attempts; last: Reconnecting... waiting for network" in text
    )


def test_a_stall_with_nothing_known_is_provider_stalled() -> None:
    parser = feed(CodexStreamParser(), {"type": "thread.started", "thread_id": "t"})
    verdict = parser.finish(-15, killed_by="stall")
    assert reason_of(verdict) == "run.failed.provider_stalled"
    assert verdict.retryable


def test_progress_is_model_output_not_retries_or_warnings() -> None:
    now = [0.0]
    parser = CodexStreamParser(clock=lambda: now[0])
    now[0] = 5.0
    feed(parser, {"type": "error", "message": "Reconnecting... 2/5 (stream disconnected)"})
    feed(
        parser,
        {
            "type": "item.completed",
            "item": {"type": "error", "message": "Falling back from WebSockets"},
        },
    )
    assert parser.last_progress_at is None
    assert parser.retrying
    now[0] = 7.0
    feed(
        parser,
        {"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": "hi"}},
    )
    assert parser.last_progress_at == 7.0
    assert not parser.retrying


def test_codex_401_error_event_flags_the_run() -> None:
    parser = feed(
        CodexStreamParser(), {"type": "error", "message": "unexpected status 401 Unauthorized: x"}
    )
    assert parser.fatal is not None
    assert parser.fatal.failure_class == "auth"
    assert parser.last_error_status == 401


def test_codex_first_reconnect_on_a_401_flags_the_run() -> None:
    # Codex 0.171.0 retries a refused key like a lost connection ("Reconnecting... 1/5
    # (unexpected status 401 ...)", five times, then turn.failed): the first one is enough.
    notice = (
        "Reconnecting... 1/5 (unexpected status 401 Unauthorized: Incorrect API key "
        "provided, url: http://127.0.0.1:18080/v1/responses)"
    )
    parser = feed(CodexStreamParser(), {"type": "error", "message": notice})
    assert parser.fatal is not None
    assert parser.fatal.failure_class == "auth"
    assert parser.retries == 1


def test_codex_reconnect_for_other_causes_is_only_a_retry() -> None:
    notice = "Reconnecting... 2/5 (unexpected status 404 Not Found: no websockets here)"
    parser = feed(CodexStreamParser(), {"type": "error", "message": notice})
    assert parser.fatal is None
    assert parser.retries >= 1


def test_a_running_tool_call_is_not_a_stall() -> None:
    now = [0.0]
    parser = ClaudeStreamParser(clock=lambda: now[0])
    assert parser.progress_at() == 0.0  # the start, before any progress
    now[0] = 3.0
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make"}}
    feed(parser, {"type": "assistant", "message": {"model": "m", "content": [call]}})
    now[0] = 900.0  # a long build: the stall clock does not run while the tool does
    assert parser.progress_at() == 900.0
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok", "is_error": False}
    feed(parser, {"type": "user", "message": {"content": [result]}})
    now[0] = 950.0
    assert parser.progress_at() == 900.0  # the result was the last progress


def test_attempts_add_up_over_calls_retried_one_after_another() -> None:
    parser = feed(ClaudeStreamParser(), _retry_line(1, 529, "x"), _retry_line(2, 529, "x"))
    assert parser.retries == 2
    feed(parser, {"type": "assistant", "message": {"model": "m", "content": []}})  # it went through
    feed(parser, _retry_line(1, 429, "rate_limit"), _retry_line(2, 429, "rate_limit"))
    feed(parser, _retry_line(3, 429, "rate_limit"))
    assert parser.retries == 5
    assert parser.last_error_status == 429
