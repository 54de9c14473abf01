"""Gemini CLI: its command line, what its stream and stderr mean, and ``li agent gemini``.

The recorded streams (tests/fixtures/gemini, their stderr beside them) are checked row by
row in test_providers / test_cli_agent; here are the rules they do not pin down alone:
the exit code is a hint, never the verdict; failures before the stream are read from
stderr; retries are read from stderr as they happen.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lirun.providers.gemini import GeminiStreamParser, build_gemini_command, gemini_failure_class
from lirun.providers.registry import find_provider_executable, get_provider
from lirun.settings import Settings
from support.execkit import only_row, run_li
from support.providerkit import env_with_fake_bin, fixture_path, reason_of

INIT = {"type": "init", "session_id": "s-1", "model": "auto"}


def parse(
    *stdout: dict[str, Any], stderr: tuple[str, ...] = (), exit_code: int | None = 0
) -> tuple[GeminiStreamParser, Any]:
    parser = GeminiStreamParser()
    for line in stderr:
        parser.feed_stderr_line(line)
    for obj in stdout:
        parser.feed_line(json.dumps(obj))
    return parser, parser.finish(exit_code)


def error_result(message: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {"type": "result", "status": "error", "stats": {"models": {}}}
    if message is not None:
        result["error"] = {"type": "unknown", "message": message}
    return result


def test_command_line_is_headless_with_tools_and_the_prompt_on_stdin() -> None:
    assert build_gemini_command("gemini") == [
        "gemini", "-o", "stream-json", "--approval-mode", "yolo", "--skip-trust",
    ]  # fmt: skip
    argv = build_gemini_command("g", model="gemini-2.5-flash", resume="u-1", extra_args=["-s"])
    assert argv[-5:] == ["-m", "gemini-2.5-flash", "--resume", "u-1", "-s"]
    assert get_provider("gemini").new_parser().reads_stderr


def test_the_executable_comes_from_lirun_gemini_bin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = tmp_path / "gemini"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("LIRUN_GEMINI_BIN", str(exe))
    assert find_provider_executable("gemini", None, Settings.from_env()) == str(exe)


@pytest.mark.parametrize(
    ("text", "status", "expected"),
    [
        ('[API Error: {"error":{"code":401,"message":"x","status":"UNAUTHENTICATED"}}]', None,
         "auth"),
        ('[API Error: {"error":{"message":"x","status":"RESOURCE_EXHAUSTED"}}]', None,
         "rate_limit"),
        ("[API Error: The model is overloaded. Please try again later.]", None, "overloaded"),
        ("[API Error: anything]", 500, "server_error"),
        ("[API Error: exception TypeError: fetch failed sending request]", None, "network"),
        ("Model stream ended without a finish reason.", None, "network"),
        ("[API Error: Expected property name or '}' in JSON at position 1]", None,
         "server_error"),
        ("Gemini CLI is not running in a trusted directory. To proceed, ...", None, "rejected"),
        ("[API Error: something nobody has seen]", None, None),
    ],
)  # fmt: skip
def test_failure_classes(text: str, status: int | None, expected: str | None) -> None:
    assert gemini_failure_class(text, status) == expected


def test_the_model_is_the_one_that_answered_not_auto() -> None:
    stats = {"total_tokens": 9, "input_tokens": 6, "output_tokens": 3,
             "models": {"gemini-2.5-flash": {"total_tokens": 9}}}  # fmt: skip
    parser, verdict = parse(
        INIT,
        {"type": "message", "role": "assistant", "content": "Hel", "delta": True},
        {"type": "message", "role": "assistant", "content": "lo.", "delta": True},
        {"type": "result", "status": "success", "stats": stats},
    )
    assert (verdict.status, verdict.reply) == ("completed", "Hello.")
    assert (parser.model, verdict.model) == ("gemini-2.5-flash", "gemini-2.5-flash")
    assert verdict.usage == {"input_tokens": 6, "output_tokens": 3, "total_tokens": 9}
    assert (verdict.engine_session_uid, parser.assistant_text_count) == ("s-1", 1)


def test_the_exit_code_is_a_hint_only_when_the_stream_did_not_say_which_class() -> None:
    unknown = error_result("[API Error: something nobody has seen]")
    _, hinted = parse(INIT, unknown, exit_code=145)  # 401 mod 256
    assert reason_of(hinted) == "run.failed.provider_auth"
    _, plain = parse(INIT, unknown, exit_code=1)
    assert reason_of(plain) == "run.failed.provider_nonretryable"
    # The stream wins over the exit code: a 429 that exits 244 is still a rate limit.
    said = error_result('[API Error: {"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}]')
    _, stream_wins = parse(INIT, said, exit_code=244)
    assert reason_of(stream_wins) == "run.failed.provider_rate_limit"
    # A success the exit code contradicts is not trusted, and not classified by the code.
    ok = {"type": "result", "status": "success", "stats": {}}
    _, contradicted = parse(INIT, ok, exit_code=173)
    assert reason_of(contradicted) == "run.failed.provider_nonretryable"


def test_a_cut_stream_that_exits_0_is_a_network_failure_without_a_reply() -> None:
    _, verdict = parse(
        INIT,
        {"type": "message", "role": "assistant", "content": "Hello fr", "delta": True},
        {"type": "error", "severity": "error", "message": "Model stream ended without a finish "
         "reason."},
        error_result(None),
        exit_code=0,
    )  # fmt: skip
    assert (verdict.status, reason_of(verdict), verdict.reply) == (
        "failed", "run.failed.provider_network", "")  # fmt: skip


@pytest.mark.parametrize(
    ("stderr", "exit_code", "reason", "said"),
    [
        (("When using Gemini API, you must specify the GEMINI_API_KEY environment variable.",),
         41, "run.failed.provider_auth", "must specify the GEMINI_API_KEY"),
        (("Warning: 256-color support not detected.",
          "Gemini CLI is not running in a trusted directory. To proceed, either use "
          "`--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, "
          "or trust this directory in interactive mode."),
         55, "run.failed.provider_rejected", "not running in a trusted directory"),
        (("Something new went wrong.",), 52, "run.failed.provider_rejected", "Something new"),
        ((), 44, "run.failed.provider_nonretryable", "exited with code 44"),
    ],
)  # fmt: skip
def test_startup_failures_are_read_from_stderr(
    stderr: tuple[str, ...], exit_code: int, reason: str, said: str
) -> None:
    _, verdict = parse(stderr=stderr, exit_code=exit_code)
    assert reason_of(verdict) == reason
    assert said in str(verdict.exception)


def test_retries_are_read_from_stderr_as_they_happen() -> None:
    parser = GeminiStreamParser()
    first = parser.feed_stderr_line(
        "Attempt 1 failed with status 429. Retrying with backoff... _ApiError: {}"
    )
    assert [(e.kind, e.data["count"], e.data["class"]) for e in first] == [
        ("retry", 1, "rate_limit")
    ]
    assert parser.feed_stderr_line("    at throwErrorIfNotOK (file:///x.js:1:2)") == []
    # A quota error's text spans two lines: the second says whether it retries.
    assert parser.feed_stderr_line("Attempt 2 failed: Resource has been exhausted.") == []
    retry = parser.feed_stderr_line("Suggested retry after 1s.. Retrying after 5261ms...")
    assert [e.kind for e in retry] == ["retry"]
    parser.feed_stderr_line("Attempt 3 failed: Resource has been exhausted.")
    last = parser.feed_stderr_line("Suggested retry after 1s.. Max attempts reached")
    assert [e.kind for e in last] == ["error"]
    assert (parser.retries, parser.retrying, parser.retry_class) == (2, False, "rate_limit")
    offline = GeminiStreamParser()
    offline.feed_stderr_line("Attempt 1 failed. Retrying with backoff... Error: fetch failed")
    assert (offline.retries, offline.retry_class) == (1, "network")


def test_li_agent_gemini_sends_the_prompt_on_stdin_and_shows_retries_live(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, tmp_path: Path
) -> None:
    log = tmp_path / "argv.jsonl"
    env = env_with_fake_bin("gemini/429-default.jsonl", base=li_env, fake_bin=fake_bin,
                            argv_log=log)  # fmt: skip
    proc = run_li("agent", "gemini/gemini-2.5-flash", "fix it", env=env, cwd=repo)
    assert proc.returncode != 0
    (call,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert call["argv"] == build_gemini_command("gemini", model="gemini-2.5-flash")[1:]
    assert call["stdin"] == "fix it"
    assert "gemini: retrying (1): Attempt 1 failed with status 429" in proc.stderr
    assert "gemini: retrying (9): Attempt 9 failed with status 429" in proc.stderr
    row = only_row(db_url)
    assert (row["status_reason_code"], row["provider_retries"], row["model"]) == (
        "run.failed.provider_rate_limit", 9, "gemini-2.5-flash")  # fmt: skip
    stderr_log = Path(row["run_dir"]) / "stream" / "stderr.log"
    expected = fixture_path("gemini/429-default.stderr.txt").read_text()
    assert stderr_log.read_text() == expected  # still an exact copy


@pytest.mark.parametrize("flag", ["-o", "--output-format=json", "-p", "--prompt", "-i"])
def test_the_flags_lirun_sets_itself_are_refused(flag: str) -> None:
    from lirun.errors import UsageError
    from lirun.exec.provider_options import check_provider_args

    with pytest.raises(UsageError, match="cannot be passed"):
        check_provider_args("gemini", [flag, "x"])
    check_provider_args("gemini", ["--sandbox", "--include-directories", "x"])  # others pass
