"""Claude Code's contract: ``ANTHROPIC_BASE_URL`` at the mock's Messages API, and
``CLAUDE_CODE_MAX_RETRIES`` (default 10, ~3 minutes of backoff) cut to 2 where a case
retries."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from support.contracts import (
    AUTH_REPLAY,
    BASE_URL,
    STALL,
    STALL_ARGS,
    STALL_REPLAY,
    STALLED,
    Contract,
)
from support.contracts import Case as _Case

Case = partial(_Case, "claude")
CLAUDE_FEW = {"CLAUDE_CODE_MAX_RETRIES": "2"}


def environment(home: Path, tmp_path: Path, case: _Case) -> dict[str, str]:
    return {"ANTHROPIC_BASE_URL": BASE_URL, "ANTHROPIC_API_KEY": "sk-ant-contract-test"}


CASES = (
    Case("text", "text", "completed", "run.completed.ok", 60, max_attempts=0),
    Case("tool-write", "tool", "completed", "run.completed.ok", 60, max_attempts=0,
         provider_args=("--permission-mode", "acceptEdits"), touch="mock_note.txt"),
    # Claude Code retries a 401 like a 5xx (10 times, ~3 minutes); lirun stops it at the
    # first auth signal. --timeout bounds the run where it does not.
    Case("401", "401", "failed", "run.failed.provider_auth", 30, max_attempts=1,
         li_args=("--timeout", "40"), replay_hang=True, replay_args=AUTH_REPLAY),
    Case("429", "429", "failed", "run.failed.provider_rate_limit", 45,
         min_attempts=2, env=CLAUDE_FEW, no_model_answered=True),
    Case("500", "500", "failed", "run.failed.provider_server_error", 45,
         min_attempts=2, env=CLAUDE_FEW, no_model_answered=True),
    Case("529", "529", "failed", "run.failed.provider_overloaded", 45,
         min_attempts=2, env=CLAUDE_FEW, no_model_answered=True),
    Case("400-prompt-too-long", "400", "failed", "run.failed.provider_rejected", 30,
         max_attempts=0, no_model_answered=True),
    Case("unknown-model", "404", "failed", "run.failed.provider_rejected", 30,
         max_attempts=0, no_model_answered=True),
    Case("refused", "refused", "failed", "run.failed.provider_network", 45,
         min_attempts=2, env=CLAUDE_FEW, no_model_answered=True),
    # The same fault is the same class on every version: 2.1.197 says "Unable to connect
    # to API (ECONNRESET)", 2.1.332 "Connection dropped" with the catch-all server_error.
    Case("closed", "close", "failed", "run.failed.provider_network", 45,
         min_attempts=2, env=CLAUDE_FEW, no_model_answered=True),
    Case("cut", "cut", "failed", "run.failed.provider_network", 45,
         env=CLAUDE_FEW, no_model_answered=True),
    Case("403", "403", "failed", "run.failed.provider_auth", 30, max_attempts=0,
         env=CLAUDE_FEW, no_model_answered=True),
    Case("503", "503", "failed", "run.failed.provider_server_error", 30,
         min_attempts=2, env=CLAUDE_FEW, no_model_answered=True),
    # A 200 whose data lines are not JSON: the connection worked, the answer did not.
    # 2.1.332 mostly gives up at once, but on a loaded machine it once retried once
    # ("API retry 1/1"), and lirun showed and counted that retry: at most one.
    Case("malformed", "malformed", "failed", "run.failed.provider_server_error", 30,
         max_attempts=1, env=CLAUDE_FEW, li_args=STALL_ARGS, no_model_answered=True),
    # The first chunk arrived, then silence: Claude Code waits; lirun's stall limit ends it.
    Case("stall", "stall", "failed", "run.failed.provider_stalled", 30,
         min_seconds=float(STALL), env=CLAUDE_FEW, li_args=STALL_ARGS,
         lirun_words=STALLED, replay_hang=True,
         replay_args=STALL_REPLAY),
    Case("hang", "hang", "failed", "run.failed.provider_stalled", 40,
         min_seconds=float(STALL), li_args=STALL_ARGS, lirun_words=STALLED,
         replay_hang=True, replay_args=STALL_REPLAY),
    # lirun's own clock while the CLI is still retrying (its default budget, 10 retries).
    Case("529-timeout", "529", "timed_out", "run.timed_out.provider_retrying", 40,
         min_seconds=8, min_attempts=2, li_args=("--timeout", "8"), lirun_words=r"retr",
         replay_hang=True, replay_args=("--timeout", "1")),
)  # fmt: skip

CONTRACT = Contract(
    provider="claude",
    cli_name="claude-code",
    package="@anthropic-ai/claude-code",
    pinned="2.1.332",
    bin="claude",
    model="claude-sonnet-4-5",
    api_path="/v1/messages",
    version_line="{} (Claude Code)",
    cases=CASES,
    own_env=("ANTHROPIC_", "CLAUDE_CODE_"),
    environment=environment,
)
