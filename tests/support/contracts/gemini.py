"""Gemini CLI's contract: ``GOOGLE_GEMINI_BASE_URL`` at the mock's Gemini API with
``GEMINI_API_KEY``, and a ``.gemini/settings.json`` in the private HOME that selects that
key (key and base URL alone choose the gateway and exit 41), turns telemetry off and sets
``general.maxAttempts`` (:attr:`Case.cli_attempts`; the CLI's default is 10 with 5-30 s
backoff)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from support.contracts import (
    BASE_URL,
    STALL,
    STALL_ARGS,
    STALL_REPLAY,
    STALLED,
    Contract,
)
from support.contracts import Case as _Case
from support.mockapi import GEMINI_PATH, MODEL_GEMINI, gemini_model

Case = partial(_Case, "gemini")


def environment(home: Path, tmp_path: Path, case: _Case) -> dict[str, str]:
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"maxAttempts": case.cli_attempts or 1, "enableAutoUpdate": False},
    }
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    return {"GEMINI_API_KEY": "fake-key", "GOOGLE_GEMINI_BASE_URL": BASE_URL}


def model_sent(request: Mapping[str, Any]) -> str | None:
    """The Gemini API names the model in the path, not the body."""
    return gemini_model(str(request["path"]))


# Gemini CLI exits with the HTTP status mod 256 on API errors and 0 on a cut stream: the
# record must follow the stream. One attempt unless the case is about retries (they are
# then read from its stderr); two attempts cost one backoff (5 s, or the server's 1 s
# retryDelay on 429).
CASES = (
    Case("text", "text", "completed", "run.completed.ok", 30, max_attempts=0,
         cli_attempts=1),
    Case("tool-write", "tool", "completed", "run.completed.ok", 30, max_attempts=0,
         cli_attempts=1, touch="mock_note.txt"),
    Case("401", "401", "failed", "run.failed.provider_auth", 20, max_attempts=0,
         cli_attempts=1),
    Case("403", "403", "failed", "run.failed.provider_auth", 20, max_attempts=0,
         cli_attempts=1),
    Case("429", "429", "failed", "run.failed.provider_rate_limit", 30,
         min_attempts=1, cli_attempts=2),
    Case("500", "500", "failed", "run.failed.provider_server_error", 20,
         max_attempts=0, cli_attempts=1),
    Case("503", "503", "failed", "run.failed.provider_overloaded", 30,
         min_attempts=1, cli_attempts=2),
    Case("400-prompt-too-long", "400", "failed", "run.failed.provider_rejected", 20,
         max_attempts=0, cli_attempts=1),
    Case("unknown-model", "404", "failed", "run.failed.provider_rejected", 20,
         max_attempts=0, cli_attempts=1, model_name="no-such-model"),
    Case("refused", "refused", "failed", "run.failed.provider_network", 30,
         min_attempts=1, cli_attempts=2),
    Case("closed", "close", "failed", "run.failed.provider_network", 30,
         cli_attempts=1),
    # Exit 0 and result status "error" with no error: a cut stream is never a success.
    Case("cut", "cut", "failed", "run.failed.provider_network", 20, max_attempts=0,
         cli_attempts=1),
    # 200 with a body that is not the protocol: the server's fault, whatever the exit code.
    Case("malformed", "malformed", "failed", "run.failed.provider_server_error", 20,
         max_attempts=0, cli_attempts=1),
    # The CLI waits 60 s for headers and 300 s for a body: the stall limit ends it first.
    Case("hang", "hang", "failed", "run.failed.provider_stalled", 20,
         min_seconds=float(STALL), cli_attempts=1, li_args=STALL_ARGS,
         lirun_words=STALLED, replay_hang=True, replay_args=STALL_REPLAY),
    Case("stall", "stall", "failed", "run.failed.provider_stalled", 20,
         min_seconds=float(STALL), cli_attempts=1, li_args=STALL_ARGS,
         lirun_words=STALLED, replay_hang=True, replay_args=STALL_REPLAY),
)  # fmt: skip

CONTRACT = Contract(
    provider="gemini",
    cli_name="gemini-cli",
    package="@google/gemini-cli",
    pinned="0.61.0",
    bin="gemini",
    model=MODEL_GEMINI,
    api_path=GEMINI_PATH,
    version_line="{}",
    cases=CASES,
    own_env=("GEMINI_", "GOOGLE_"),
    environment=environment,
    model_sent=model_sent,
)
