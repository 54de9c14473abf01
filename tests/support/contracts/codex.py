"""Codex's contract: a model provider at the mock's Responses API, HTTPS only
(``supports_websockets=false``), with ``stream_max_retries`` / ``request_max_retries``
cut down; the text case uses the plain ``openai_base_url`` setting, which first tries
WebSockets five times (~9 s)."""

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
from support.mockapi import MODEL_CODEX

Case = partial(_Case, "codex")


def codex_provider(**retries: int) -> list[str]:
    """Codex options for a model provider at the mock, HTTPS only, with these retries."""
    settings = [
        'name="mock"',
        f'base_url="{BASE_URL}/v1"',
        'env_key="OPENAI_API_KEY"',
        'wire_api="responses"',
        "supports_websockets=false",
        *(f"{key}={value}" for key, value in sorted(retries.items())),
    ]
    return ["-c", "model_provider=mock", "-c", f"model_providers.mock={{{','.join(settings)}}}"]


CODEX_FEW_RETRIES = codex_provider(stream_max_retries=2, request_max_retries=1)


def environment(home: Path, tmp_path: Path, case: _Case) -> dict[str, str]:
    return {"OPENAI_API_KEY": "sk-contract-test"}


CASES = (
    # The plain setting: Codex tries WebSockets first (five times), then falls back to
    # HTTPS; the fallback is a warning, never the run's provider error.
    Case("text", "text", "completed", "run.completed.ok", 60,
         provider_args=("-c", f"openai_base_url={BASE_URL}/v1")),
    Case("tool-write", "tool", "completed", "run.completed.ok", 60, max_attempts=0,
         provider_args=(*codex_provider(), "--sandbox", "danger-full-access"),
         touch="mock_note.txt"),
    Case("401", "401", "failed", "run.failed.provider_auth", 30, max_attempts=1,
         provider_args=tuple(codex_provider()), li_args=("--timeout", "40"),
         replay_hang=True, replay_args=AUTH_REPLAY),
    Case("429", "429", "failed", "run.failed.provider_rate_limit", 45,
         min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES)),
    Case("500", "500", "failed", "run.failed.provider_server_error", 45,
         min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES)),
    Case("529", "529", "failed", "run.failed.provider_overloaded", 45,
         min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES)),
    Case("400-prompt-too-long", "400", "failed", "run.failed.provider_rejected", 30,
         max_attempts=0, provider_args=tuple(CODEX_FEW_RETRIES)),
    Case("unknown-model", "404", "failed", "run.failed.provider_rejected", 30,
         max_attempts=0, provider_args=tuple(CODEX_FEW_RETRIES)),
    # Codex waits for the network forever ("Reconnecting... waiting for network" every
    # ~35 s): the stall limit ends it, and the class is the network's.
    Case("refused", "refused", "failed", "run.failed.provider_network", 40,
         min_seconds=float(STALL), provider_args=tuple(CODEX_FEW_RETRIES), li_args=STALL_ARGS,
         replay_hang=True, replay_args=STALL_REPLAY),
    Case("closed", "close", "failed", "run.failed.provider_network", 45,
         min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES)),
    Case("cut", "cut", "failed", "run.failed.provider_network", 45,
         min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES)),
    # Codex retries a 403 like a lost connection; lirun stops it at the first refusal.
    Case("403", "403", "failed", "run.failed.provider_auth", 30, max_attempts=1,
         provider_args=tuple(CODEX_FEW_RETRIES)),
    Case("503", "503", "failed", "run.failed.provider_server_error", 30,
         min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES)),
    # Codex skips data that is not JSON and then finds the stream ended without its last
    # event ("stream closed before response.completed"): from its words alone that is a
    # stream cut short, the network's class.
    Case("malformed", "malformed", "failed", "run.failed.provider_network", 30,
         min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES), li_args=STALL_ARGS),
    Case("stall", "stall", "failed", "run.failed.provider_stalled", 30,
         min_seconds=float(STALL), provider_args=tuple(CODEX_FEW_RETRIES), li_args=STALL_ARGS,
         lirun_words=STALLED, replay_hang=True,
         replay_args=STALL_REPLAY),
    Case("hang", "hang", "failed", "run.failed.provider_stalled", 40,
         min_seconds=float(STALL), provider_args=tuple(CODEX_FEW_RETRIES), li_args=STALL_ARGS,
         lirun_words=STALLED, replay_hang=True,
         replay_args=STALL_REPLAY),
    Case("500-timeout", "500", "timed_out", "run.timed_out.provider_retrying", 40,
         min_seconds=8, min_attempts=1, provider_args=tuple(codex_provider()),
         li_args=("--timeout", "8"), lirun_words=r"retr", replay_hang=True,
         replay_args=("--timeout", "1")),
)  # fmt: skip

CONTRACT = Contract(
    provider="codex",
    cli_name="codex",
    package="@openai/codex",
    pinned="0.171.0",
    bin="codex",
    model=MODEL_CODEX,
    api_path="/v1/responses",
    version_line="codex-cli {}",
    cases=CASES,
    own_env=("OPENAI_", "CODEX_"),
    environment=environment,
)
