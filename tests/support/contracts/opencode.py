"""OpenCode's contract: a provider ``mock`` in a private ``OPENCODE_CONFIG`` speaking OpenAI
chat completions at the mock (``@ai-sdk/openai-compatible``), the private HOME's XDG
directories, and no fetch of the models catalogue, no update check, no plugins.

OpenCode's retry budget cannot be set (5 retries, 2 s doubling to 30 s, ``retry-after``
honoured; about a minute on a 5xx or a lost connection) and it writes nothing on stdout
while it retries: its retries are read from its log on stderr. So the 429 case (the
mock's ``retry-after: 1``) runs to OpenCode's own end, and the cases where it would retry
for a minute, or wait on a silent server for its 5-minute request timeout, are ended by
lirun's stall limit, which records the class of the retries it saw."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from support.contracts import BASE_URL, STALL_REPLAY, STALLED, Contract
from support.contracts import Case as _Case

Case = partial(_Case, "opencode")
# The stall limit counts from OpenCode's first model call (each line of its log before it
# is progress: it takes 2-4 s to start, more on a busy machine), and its retries come 2 s
# and 6 s after it: long enough for a retry or two to show.
STALL = "10"
STALL_ARGS = ("--stall-timeout", STALL, "--timeout", "90")


def config(base_url: str = BASE_URL) -> dict[str, object]:
    """``opencode.json``: a provider ``mock`` with the contract's two models."""
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "Mock",
        "options": {"baseURL": f"{base_url}/v1", "apiKey": "sk-fake"},
        "models": {"mock-model": {"name": "mock-model"},
                   "no-such-model": {"name": "no-such-model"}},
    }  # fmt: skip
    return {"autoupdate": False, "share": "disabled", "provider": {"mock": provider}}


def environment(home: Path, tmp_path: Path, case: _Case) -> dict[str, str]:
    path = tmp_path / "opencode.json"
    path.write_text(json.dumps(config()))
    return {
        "OPENCODE_CONFIG": str(path),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
    }


def api_model(model: str) -> str:
    """``opencode/PROVIDER/MODEL``: OpenCode asks the API for MODEL."""
    return model.partition("/")[2]


_stalled = partial(
    Case, li_args=STALL_ARGS, lirun_words=STALLED, replay_hang=True, replay_args=STALL_REPLAY
)

CASES = (
    Case("text", "text", "completed", "run.completed.ok", 90, max_attempts=0),
    Case("tool-write", "tool", "completed", "run.completed.ok", 90, max_attempts=0,
         touch="mock_note.txt"),
    # An error event with the HTTP status, exit 1, no retry.
    Case("401", "401", "failed", "run.failed.provider_auth", 90, max_attempts=0),
    Case("403", "403", "failed", "run.failed.provider_auth", 90, max_attempts=0),
    # retry-after: 1 is honoured: 5 retries a second apart, then the error event.
    Case("429", "429", "failed", "run.failed.provider_rate_limit", 90, min_attempts=5,
         max_attempts=5),
    Case("400-prompt-too-long", "400", "failed", "run.failed.provider_rejected", 90,
         max_attempts=0),
    Case("unknown-model", "404", "failed", "run.failed.provider_rejected", 90,
         max_attempts=0, model_name="mock/no-such-model"),
    # OpenCode would retry these for about a minute: lirun's stall limit ends them, with
    # the class of the retries it read.
    _stalled("500", "500", "failed", "run.failed.provider_server_error", 90,
             min_seconds=float(STALL), min_attempts=1),
    _stalled("503", "503", "failed", "run.failed.provider_overloaded", 90,
             min_seconds=float(STALL), min_attempts=1),
    _stalled("refused", "refused", "failed", "run.failed.provider_network", 90,
             min_seconds=float(STALL), min_attempts=1),
    _stalled("closed", "close", "failed", "run.failed.provider_network", 90,
             min_seconds=float(STALL), min_attempts=1),
    _stalled("cut", "cut", "failed", "run.failed.provider_network", 90,
             min_seconds=float(STALL), min_attempts=1),
    Case("malformed", "malformed", "failed", "run.failed.provider_server_error", 90),
    # The request timeout is 5 minutes: the stall limit ends a silent server.
    _stalled("hang", "hang", "failed", "run.failed.provider_stalled", 90,
             min_seconds=float(STALL)),
    _stalled("stall", "stall", "failed", "run.failed.provider_stalled", 90,
             min_seconds=float(STALL)),
)  # fmt: skip

CONTRACT = Contract(
    provider="opencode",
    cli_name="opencode",
    package="opencode-ai",
    pinned="1.18.33",
    bin="opencode",
    model="mock/mock-model",
    api_path="/v1/chat/completions",
    version_line="{}",
    cases=CASES,
    own_env=("OPENCODE_",),
    environment=environment,
    api_model=api_model,
)
