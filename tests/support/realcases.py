"""The contract cases: each real CLI against each mock API scenario, and what lirun records.

One table, read twice: ``tests/test_real_clis.py`` runs each case live (the pinned or the
newest CLI in a network namespace beside :mod:`support.mockapi`), and
``tests/test_real_streams.py`` replays the stream each live case recorded, for every
version recorded (``tests/fixtures/<provider>/real-<version>-<case>.jsonl``), through the
fake provider and expects the same status and reason.

A case states classes, not sentences: the status and reason, the retries lirun counted,
how long the run took, and lirun's own words where lirun ended the run (a stall, its
timeout). The CLIs' wording changes from release to release (2.1.197 "Unable to connect
to API (ECONNRESET)", 2.1.332 "Connection dropped (ECONNRESET)"), and a suite that pinned
it would fail on every release for no fault of lirun's.

Retry budgets are cut down with the CLIs' own settings so the suite stays short:
Claude Code's ``CLAUDE_CODE_MAX_RETRIES`` (default 10, ~3 minutes of backoff), and for
Codex a model provider pointing at the mock with ``stream_max_retries`` /
``request_max_retries`` and ``supports_websockets=false`` (the plain ``openai_base_url``
setting, used by the text case, first tries WebSockets five times, ~9 s). pi reads its
retry budget from ``settings.json`` in its agent directory (:data:`PI_SETTINGS`) and the
mock from ``models.json`` (:func:`pi_models`); it exits 0 whatever happened to its calls,
so every pi case is about what lirun reads from the stream. Gemini CLI takes its attempts
from the setting ``general.maxAttempts`` in the private HOME's ``.gemini/settings.json``
(:attr:`Case.cli_attempts`; default 10 with 5-30 s backoff).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from support.mockapi import MODEL_CODEX, MODEL_GEMINI
from support.netns import PORT
from support.realcli import CLAUDE_VERSION, CODEX_VERSION, GEMINI_VERSION, PI_VERSION

BASE_URL = f"http://127.0.0.1:{PORT}"
CLAUDE_MODEL = "claude-sonnet-4-5"
CODEX_MODEL = MODEL_CODEX
PI_MODEL = "mock/mock-model"  # pi/PROVIDER/MODEL: the models.json provider "mock"
GEMINI_MODEL = MODEL_GEMINI
VERSIONS = {
    "claude": CLAUDE_VERSION,
    "codex": CODEX_VERSION,
    "pi": PI_VERSION,
    "gemini": GEMINI_VERSION,
}  # the pins
MODELS = {"claude": CLAUDE_MODEL, "codex": CODEX_MODEL, "pi": PI_MODEL, "gemini": GEMINI_MODEL}
_VERSION = re.compile(r"\d+(?:\.\d+)+(?:-[A-Za-z][0-9A-Za-z.]*)?")
STALL = "4"  # --stall-timeout for the cases where the CLI waits on a silent server


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


@dataclass(frozen=True)
class Case:
    provider: str
    name: str  # the case's name in test ids and fixture names
    scenario: str  # the mock's scenario (support.mockapi.SCENARIOS, or "refused")
    status: str
    reason: str
    max_seconds: float  # li's whole run, start to exit
    min_seconds: float = 0.0
    min_attempts: int = 0  # provider retries lirun counted
    max_attempts: int | None = None
    li_args: tuple[str, ...] = ()
    provider_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    # Replay: the CLI was still running when lirun ended it (a timer or a stop at the
    # first auth signal), so the fake provider hangs after the stream instead of exiting.
    replay_hang: bool = False
    replay_args: tuple[str, ...] = ()
    touch: str | None = None  # the file the live agent wrote (the replay writes it too)
    # A regex for lirun's own words in the summary, where lirun ended the run (a stall,
    # its timeout while the CLI retried); the CLI's words are never pinned.
    lirun_words: str | None = None
    # Claude Code made up every answer (``"model":"<synthetic>"``): no model answered, so
    # lirun records none (the model it announced stays in the evidence).
    no_model_answered: bool = False
    # The CLI's own attempt budget where only a settings file gives it (Gemini CLI's
    # general.maxAttempts); None: the case does not set it.
    cli_attempts: int | None = None
    model_name: str | None = None  # another model than the provider's usual one

    @property
    def id(self) -> str:
        return f"{self.provider}-{self.name}"

    @property
    def fixture(self) -> str:
        """The pinned version's recorded stream."""
        return self.fixture_for(VERSIONS[self.provider])

    def fixture_for(self, version: str) -> str:
        return f"{self.provider}/real-{version}-{self.name}.jsonl"

    def recorded_versions(self, fixtures: Path) -> list[str]:
        """Every version whose stream of this case is recorded under ``fixtures``."""
        suffix = f"-{self.name}.jsonl"
        found = []
        for path in sorted((fixtures / self.provider).glob(f"real-*{suffix}")):
            version = path.name[len("real-") : -len(suffix)]
            if _VERSION.fullmatch(version):
                found.append(version)
        return found

    @property
    def model(self) -> str:
        return self.model_name or MODELS[self.provider]

    @property
    def api_model(self) -> str:
        """The model the CLI sends the API (pi's ``PROVIDER/`` is pi's own)."""
        return self.model.partition("/")[2] if self.provider == "pi" else self.model

    @property
    def recorded_model(self) -> str | None:
        """The model column lirun must hold for this case."""
        return None if self.no_model_answered else self.model

    def summary_matches(self, summary: str) -> bool:
        """A summary is there, and says lirun's own words where lirun ended the run."""
        if not summary.strip():
            return False
        pattern = self.lirun_words
        return pattern is None or re.search(pattern, summary, re.IGNORECASE) is not None


CLAUDE_FEW = {"CLAUDE_CODE_MAX_RETRIES": "2"}
STALL_ARGS = ("--stall-timeout", STALL, "--timeout", "60")
AUTH_REPLAY = ("--timeout", "5", "--grace", "0.5")

CLAUDE_CASES = (
    Case("claude", "text", "text", "completed", "run.completed.ok", 60, max_attempts=0),
    Case("claude", "tool-write", "tool", "completed", "run.completed.ok", 60, max_attempts=0,
         provider_args=("--permission-mode", "acceptEdits"), touch="mock_note.txt"),
    # Claude Code retries a 401 like a 5xx (10 times, ~3 minutes); lirun stops it at the
    # first auth signal. --timeout bounds the run where it does not.
    Case("claude", "401", "401", "failed", "run.failed.provider_auth", 30, max_attempts=1,
         li_args=("--timeout", "40"), replay_hang=True, replay_args=AUTH_REPLAY),
    Case("claude", "429", "429", "failed", "run.failed.provider_rate_limit", 45,
         min_attempts=2, env=CLAUDE_FEW, no_model_answered=True),
    Case("claude", "500", "500", "failed", "run.failed.provider_server_error", 45,
         min_attempts=2, env=CLAUDE_FEW, no_model_answered=True),
    Case("claude", "529", "529", "failed", "run.failed.provider_overloaded", 45,
         min_attempts=2, env=CLAUDE_FEW, no_model_answered=True),
    Case("claude", "400-prompt-too-long", "400", "failed", "run.failed.provider_rejected", 30,
         max_attempts=0, no_model_answered=True),
    Case("claude", "unknown-model", "404", "failed", "run.failed.provider_rejected", 30,
         max_attempts=0, no_model_answered=True),
    Case("claude", "refused", "refused", "failed", "run.failed.provider_network", 45,
         min_attempts=2, env=CLAUDE_FEW, no_model_answered=True),
    # The same fault is the same class on every version: 2.1.197 says "Unable to connect
    # to API (ECONNRESET)", 2.1.332 "Connection dropped" with the catch-all server_error.
    Case("claude", "closed", "close", "failed", "run.failed.provider_network", 45,
         min_attempts=2, env=CLAUDE_FEW, no_model_answered=True),
    Case("claude", "cut", "cut", "failed", "run.failed.provider_network", 45,
         env=CLAUDE_FEW, no_model_answered=True),
    Case("claude", "403", "403", "failed", "run.failed.provider_auth", 30, max_attempts=0,
         env=CLAUDE_FEW, no_model_answered=True),
    Case("claude", "503", "503", "failed", "run.failed.provider_server_error", 30,
         min_attempts=2, env=CLAUDE_FEW, no_model_answered=True),
    # A 200 whose data lines are not JSON: the connection worked, the answer did not.
    Case("claude", "malformed", "malformed", "failed", "run.failed.provider_server_error", 30,
         max_attempts=0, env=CLAUDE_FEW, li_args=STALL_ARGS, no_model_answered=True),
    # The first chunk arrived, then silence: Claude Code waits; lirun's stall limit ends it.
    Case("claude", "stall", "stall", "failed", "run.failed.provider_stalled", 30,
         min_seconds=float(STALL), env=CLAUDE_FEW, li_args=STALL_ARGS,
         lirun_words=r"stall|no progress", replay_hang=True,
         replay_args=("--stall-timeout", "1", "--timeout", "5")),
    Case("claude", "hang", "hang", "failed", "run.failed.provider_stalled", 40,
         min_seconds=float(STALL), li_args=STALL_ARGS, lirun_words=r"stall|no progress",
         replay_hang=True, replay_args=("--stall-timeout", "1", "--timeout", "5")),
    # lirun's own clock while the CLI is still retrying (its default budget, 10 retries).
    Case("claude", "529-timeout", "529", "timed_out", "run.timed_out.provider_retrying", 40,
         min_seconds=8, min_attempts=2, li_args=("--timeout", "8"), lirun_words=r"retr",
         replay_hang=True, replay_args=("--timeout", "1")),
)  # fmt: skip

CODEX_CASES = (
    # The plain setting: Codex tries WebSockets first (five times), then falls back to
    # HTTPS; the fallback is a warning, never the run's provider error.
    Case("codex", "text", "text", "completed", "run.completed.ok", 60,
         provider_args=("-c", f"openai_base_url={BASE_URL}/v1")),
    Case("codex", "tool-write", "tool", "completed", "run.completed.ok", 60, max_attempts=0,
         provider_args=(*codex_provider(), "--sandbox", "danger-full-access"),
         touch="mock_note.txt"),
    Case("codex", "401", "401", "failed", "run.failed.provider_auth", 30, max_attempts=1,
         provider_args=tuple(codex_provider()), li_args=("--timeout", "40"),
         replay_hang=True, replay_args=AUTH_REPLAY),
    Case("codex", "429", "429", "failed", "run.failed.provider_rate_limit", 45,
         min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES)),
    Case("codex", "500", "500", "failed", "run.failed.provider_server_error", 45,
         min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES)),
    Case("codex", "529", "529", "failed", "run.failed.provider_overloaded", 45,
         min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES)),
    Case("codex", "400-prompt-too-long", "400", "failed", "run.failed.provider_rejected", 30,
         max_attempts=0, provider_args=tuple(CODEX_FEW_RETRIES)),
    Case("codex", "unknown-model", "404", "failed", "run.failed.provider_rejected", 30,
         max_attempts=0, provider_args=tuple(CODEX_FEW_RETRIES)),
    # Codex waits for the network forever ("Reconnecting... waiting for network" every
    # ~35 s): the stall limit ends it, and the class is the network's.
    Case("codex", "refused", "refused", "failed", "run.failed.provider_network", 40,
         min_seconds=float(STALL), provider_args=tuple(CODEX_FEW_RETRIES), li_args=STALL_ARGS,
         replay_hang=True, replay_args=("--stall-timeout", "1", "--timeout", "5")),
    Case("codex", "closed", "close", "failed", "run.failed.provider_network", 45,
         min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES)),
    Case("codex", "cut", "cut", "failed", "run.failed.provider_network", 45,
         min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES)),
    # Codex retries a 403 like a lost connection; lirun stops it at the first refusal.
    Case("codex", "403", "403", "failed", "run.failed.provider_auth", 30, max_attempts=1,
         provider_args=tuple(CODEX_FEW_RETRIES)),
    Case("codex", "503", "503", "failed", "run.failed.provider_server_error", 30,
         min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES)),
    # Codex skips data that is not JSON and then finds the stream ended without its last
    # event ("stream closed before response.completed"): from its words alone that is a
    # stream cut short, the network's class.
    Case("codex", "malformed", "malformed", "failed", "run.failed.provider_network", 30,
         min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES), li_args=STALL_ARGS),
    Case("codex", "stall", "stall", "failed", "run.failed.provider_stalled", 30,
         min_seconds=float(STALL), provider_args=tuple(CODEX_FEW_RETRIES), li_args=STALL_ARGS,
         lirun_words=r"stall|no progress", replay_hang=True,
         replay_args=("--stall-timeout", "1", "--timeout", "5")),
    Case("codex", "hang", "hang", "failed", "run.failed.provider_stalled", 40,
         min_seconds=float(STALL), provider_args=tuple(CODEX_FEW_RETRIES), li_args=STALL_ARGS,
         lirun_words=r"stall|no progress", replay_hang=True,
         replay_args=("--stall-timeout", "1", "--timeout", "5")),
    Case("codex", "500-timeout", "500", "timed_out", "run.timed_out.provider_retrying", 40,
         min_seconds=8, min_attempts=1, provider_args=tuple(codex_provider()),
         li_args=("--timeout", "8"), lirun_words=r"retr", replay_hang=True,
         replay_args=("--timeout", "1")),
)  # fmt: skip

# pi: two retries 0.3 s apart, no retries inside the HTTP client, and no request timeout
# of its own (the SDK's 10 minutes), so a silent server is lirun's stall limit's to end.
PI_SETTINGS = {"retry": {"enabled": True, "maxRetries": 2, "baseDelayMs": 300,
                         "provider": {"maxRetries": 0}}}  # fmt: skip


def pi_models(base_url: str = BASE_URL) -> dict[str, object]:
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


PI_STALL_REPLAY = ("--stall-timeout", "1", "--timeout", "5")

PI_CASES = (
    Case("pi", "text", "text", "completed", "run.completed.ok", 30, max_attempts=0),
    Case("pi", "tool-write", "tool", "completed", "run.completed.ok", 30, max_attempts=0,
         touch="mock_note.txt"),
    # pi exits 0 on each of these: the last assistant message_end says what happened.
    Case("pi", "401", "401", "failed", "run.failed.provider_auth", 20, max_attempts=0),
    Case("pi", "403", "403", "failed", "run.failed.provider_auth", 20, max_attempts=0),
    Case("pi", "429", "429", "failed", "run.failed.provider_rate_limit", 30, min_attempts=2,
         max_attempts=2),
    Case("pi", "500", "500", "failed", "run.failed.provider_server_error", 30, min_attempts=2,
         max_attempts=2),
    Case("pi", "503", "503", "failed", "run.failed.provider_overloaded", 30, min_attempts=2,
         max_attempts=2),
    Case("pi", "400-prompt-too-long", "400", "failed", "run.failed.provider_rejected", 20,
         max_attempts=0),
    # pi sends a model models.json does not list ("Using custom model id").
    Case("pi", "unknown-model", "404", "failed", "run.failed.provider_rejected", 20,
         max_attempts=0, model_name="mock/no-such-model"),
    Case("pi", "refused", "refused", "failed", "run.failed.provider_network", 30,
         min_attempts=2),
    Case("pi", "closed", "close", "failed", "run.failed.provider_network", 30, min_attempts=2),
    Case("pi", "cut", "cut", "failed", "run.failed.provider_network", 30, min_attempts=2),
    Case("pi", "malformed", "malformed", "failed", "run.failed.provider_server_error", 30),
    # Without a request timeout pi waits on a silent server for ever: the stall limit
    # ends it.
    Case("pi", "hang", "hang", "failed", "run.failed.provider_stalled", 30,
         min_seconds=float(STALL), li_args=STALL_ARGS, lirun_words=r"stall|no progress",
         replay_hang=True, replay_args=PI_STALL_REPLAY),
    Case("pi", "stall", "stall", "failed", "run.failed.provider_stalled", 30,
         min_seconds=float(STALL), li_args=STALL_ARGS, lirun_words=r"stall|no progress",
         replay_hang=True, replay_args=PI_STALL_REPLAY),
)  # fmt: skip

# Gemini CLI exits with the HTTP status mod 256 on API errors and 0 on a cut stream: the
# record must follow the stream. One attempt unless the case is about retries (they are
# then read from its stderr); two attempts cost one backoff (5 s, or the server's 1 s
# retryDelay on 429).
GEMINI_STALL_REPLAY = ("--stall-timeout", "1", "--timeout", "5")
GEMINI_CASES = (
    Case("gemini", "text", "text", "completed", "run.completed.ok", 30, max_attempts=0,
         cli_attempts=1),
    Case("gemini", "tool-write", "tool", "completed", "run.completed.ok", 30, max_attempts=0,
         cli_attempts=1, touch="mock_note.txt"),
    Case("gemini", "401", "401", "failed", "run.failed.provider_auth", 20, max_attempts=0,
         cli_attempts=1),
    Case("gemini", "403", "403", "failed", "run.failed.provider_auth", 20, max_attempts=0,
         cli_attempts=1),
    Case("gemini", "429", "429", "failed", "run.failed.provider_rate_limit", 30,
         min_attempts=1, cli_attempts=2),
    Case("gemini", "500", "500", "failed", "run.failed.provider_server_error", 20,
         max_attempts=0, cli_attempts=1),
    Case("gemini", "503", "503", "failed", "run.failed.provider_overloaded", 30,
         min_attempts=1, cli_attempts=2),
    Case("gemini", "400-prompt-too-long", "400", "failed", "run.failed.provider_rejected", 20,
         max_attempts=0, cli_attempts=1),
    Case("gemini", "unknown-model", "404", "failed", "run.failed.provider_rejected", 20,
         max_attempts=0, cli_attempts=1, model_name="no-such-model"),
    Case("gemini", "refused", "refused", "failed", "run.failed.provider_network", 30,
         min_attempts=1, cli_attempts=2),
    Case("gemini", "closed", "close", "failed", "run.failed.provider_network", 30,
         cli_attempts=1),
    # Exit 0 and result status "error" with no error: a cut stream is never a success.
    Case("gemini", "cut", "cut", "failed", "run.failed.provider_network", 20, max_attempts=0,
         cli_attempts=1),
    # 200 with a body that is not the protocol: the server's fault, whatever the exit code.
    Case("gemini", "malformed", "malformed", "failed", "run.failed.provider_server_error", 20,
         max_attempts=0, cli_attempts=1),
    # The CLI waits 60 s for headers and 300 s for a body: the stall limit ends it first.
    Case("gemini", "hang", "hang", "failed", "run.failed.provider_stalled", 20,
         min_seconds=float(STALL), cli_attempts=1, li_args=STALL_ARGS,
         lirun_words=r"stall|no progress", replay_hang=True, replay_args=GEMINI_STALL_REPLAY),
    Case("gemini", "stall", "stall", "failed", "run.failed.provider_stalled", 20,
         min_seconds=float(STALL), cli_attempts=1, li_args=STALL_ARGS,
         lirun_words=r"stall|no progress", replay_hang=True, replay_args=GEMINI_STALL_REPLAY),
)  # fmt: skip

CASES = CLAUDE_CASES + CODEX_CASES + PI_CASES + GEMINI_CASES
