"""pi's contract: a ``models.json`` provider ``mock`` speaking OpenAI chat completions
at the mock, in a private ``PI_CODING_AGENT_DIR`` whose ``settings.json`` cuts pi's
retries to two 0.3 s apart with none inside its HTTP client, offline (``PI_OFFLINE``).
pi exits 0 whatever happened to its calls, so every case is about what lirun reads from
the stream; it has no request timeout of its own (the SDK's 10 minutes), so a silent
server is lirun's stall limit's to end."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from support.contracts import (
    BASE_URL,
    STALL,
    STALL_ARGS,
    STALL_REPLAY,
    STALLED,
    Contract,
)
from support.contracts import Case as _Case

Case = partial(_Case, "pi")
SETTINGS = {"retry": {"enabled": True, "maxRetries": 2, "baseDelayMs": 300,
                      "provider": {"maxRetries": 0}}}  # fmt: skip


def models(base_url: str = BASE_URL) -> dict[str, object]:
    """pi's ``models.json``: a provider ``mock`` speaking OpenAI chat completions."""
    model = {"id": "mock-model", "contextWindow": 128000, "maxTokens": 4096,
             "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0}}  # fmt: skip
    provider = {
        "baseUrl": f"{base_url}/v1",
        "api": "openai-completions",
        "apiKey": "MOCK_API_KEY",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [model],
    }
    return {"providers": {"mock": provider}}


def environment(home: Path, tmp_path: Path, case: _Case) -> dict[str, str]:
    agent_dir = tmp_path / "pi-agent"
    agent_dir.mkdir()
    (agent_dir / "models.json").write_text(json.dumps(models()))
    (agent_dir / "settings.json").write_text(json.dumps(SETTINGS))
    return {"PI_CODING_AGENT_DIR": str(agent_dir), "PI_OFFLINE": "1", "PI_TELEMETRY": "0",
            "MOCK_API_KEY": "sk-fake"}  # fmt: skip


def api_model(model: str) -> str:
    """``pi/PROVIDER/MODEL``: pi asks the API for MODEL (PROVIDER is pi's own)."""
    return model.partition("/")[2]


CASES = (
    Case("text", "text", "completed", "run.completed.ok", 30, max_attempts=0),
    Case("tool-write", "tool", "completed", "run.completed.ok", 30, max_attempts=0,
         touch="mock_note.txt"),
    # pi exits 0 on each of these: the last assistant message_end says what happened.
    Case("401", "401", "failed", "run.failed.provider_auth", 20, max_attempts=0),
    Case("403", "403", "failed", "run.failed.provider_auth", 20, max_attempts=0),
    Case("429", "429", "failed", "run.failed.provider_rate_limit", 30, min_attempts=2,
         max_attempts=2),
    Case("500", "500", "failed", "run.failed.provider_server_error", 30, min_attempts=2,
         max_attempts=2),
    Case("503", "503", "failed", "run.failed.provider_overloaded", 30, min_attempts=2,
         max_attempts=2),
    Case("400-prompt-too-long", "400", "failed", "run.failed.provider_rejected", 20,
         max_attempts=0),
    # pi sends a model models.json does not list ("Using custom model id").
    Case("unknown-model", "404", "failed", "run.failed.provider_rejected", 20,
         max_attempts=0, model_name="mock/no-such-model"),
    Case("refused", "refused", "failed", "run.failed.provider_network", 30,
         min_attempts=2),
    Case("closed", "close", "failed", "run.failed.provider_network", 30, min_attempts=2),
    Case("cut", "cut", "failed", "run.failed.provider_network", 30, min_attempts=2),
    Case("malformed", "malformed", "failed", "run.failed.provider_server_error", 30),
    # Without a request timeout pi waits on a silent server for ever: the stall limit
    # ends it.
    Case("hang", "hang", "failed", "run.failed.provider_stalled", 30,
         min_seconds=float(STALL), li_args=STALL_ARGS, lirun_words=STALLED,
         replay_hang=True, replay_args=STALL_REPLAY),
    Case("stall", "stall", "failed", "run.failed.provider_stalled", 30,
         min_seconds=float(STALL), li_args=STALL_ARGS, lirun_words=STALLED,
         replay_hang=True, replay_args=STALL_REPLAY),
)  # fmt: skip

CONTRACT = Contract(
    provider="pi",
    cli_name="pi",
    package="@mariozechner/pi-coding-agent",
    pinned="0.73.1",
    bin="pi",
    model="mock/mock-model",
    api_path="/v1/chat/completions",
    version_line="{}",
    cases=CASES,
    own_env=("PI_",),
    environment=environment,
    api_model=api_model,
)
