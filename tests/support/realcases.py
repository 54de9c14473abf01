"""The contract cases: each real CLI against each mock API scenario, and what lirun records.

One table, read twice: ``tests/test_real_clis.py`` runs each case live (the pinned CLI
in a network namespace beside :mod:`support.mockapi`), and ``tests/test_real_streams.py``
replays the stream each live case recorded (``tests/fixtures/<provider>/real-<version>-
<case>.jsonl``) through the fake provider and expects the same status and reason.

Retry budgets are cut down with the CLIs' own settings so the suite stays short:
Claude Code's ``CLAUDE_CODE_MAX_RETRIES`` (default 10, ~3 minutes of backoff), and for
Codex a model provider pointing at the mock with ``stream_max_retries`` /
``request_max_retries`` and ``supports_websockets=false`` (the plain ``openai_base_url``
setting, used by the text case, first tries WebSockets five times, ~9 s), and for Gemini
CLI the setting ``general.maxAttempts`` in the private HOME's ``.gemini/settings.json``
(:attr:`Case.cli_attempts`; default 10 with 5-30 s backoff).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from support.mockapi import MODEL_CODEX, MODEL_GEMINI
from support.netns import PORT
from support.realcli import CLAUDE_VERSION, CODEX_VERSION, GEMINI_VERSION

BASE_URL = f"http://127.0.0.1:{PORT}"
CLAUDE_MODEL = "claude-sonnet-4-5"
CODEX_MODEL = MODEL_CODEX
GEMINI_MODEL = MODEL_GEMINI
VERSIONS = {"claude": CLAUDE_VERSION, "codex": CODEX_VERSION, "gemini": GEMINI_VERSION}
MODELS = {"claude": CLAUDE_MODEL, "codex": CODEX_MODEL, "gemini": GEMINI_MODEL}
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
    summary: str  # a regex the stored summary must match: the provider's own words
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
    provider_error: str | None = None  # a regex for the stored provider error (else summary)
    # Claude Code made up every answer (``"model":"<synthetic>"``): no model answered, so
    # lirun records none (the model it announced stays in the evidence).
    no_model_answered: bool = False
    # The CLI's own attempt budget where only a settings file gives it (Gemini CLI's
    # general.maxAttempts); None: the case does not set it.
    cli_attempts: int | None = None
    model_name: str | None = None  # a model other than the provider's usual one

    @property
    def id(self) -> str:
        return f"{self.provider}-{self.name}"

    @property
    def fixture(self) -> str:
        return f"{self.provider}/real-{VERSIONS[self.provider]}-{self.name}.jsonl"

    @property
    def model(self) -> str:
        return self.model_name or MODELS[self.provider]

    @property
    def recorded_model(self) -> str | None:
        """The model column lirun must hold for this case."""
        return None if self.no_model_answered else self.model

    def summary_matches(self, summary: str) -> bool:
        return re.search(self.summary, summary, re.IGNORECASE | re.DOTALL) is not None

    def provider_error_matches(self, text: str) -> bool:
        pattern = self.provider_error or self.summary
        return re.search(pattern, text, re.IGNORECASE | re.DOTALL) is not None


CLAUDE_FEW = {"CLAUDE_CODE_MAX_RETRIES": "2"}
STALL_ARGS = ("--stall-timeout", STALL, "--timeout", "60")
AUTH_REPLAY = ("--timeout", "5", "--grace", "0.5")

CLAUDE_CASES = (
    Case("claude", "text", "text", "completed", "run.completed.ok",
         r"completed", 60, max_attempts=0),
    Case("claude", "tool-write", "tool", "completed", "run.completed.ok",
         r"completed", 60, max_attempts=0,
         provider_args=("--permission-mode", "acceptEdits"), touch="mock_note.txt"),
    # Claude Code retries a 401 like a 5xx (10 times, ~3 minutes); lirun stops it at the
    # first auth signal. --timeout bounds the run where it does not.
    Case("claude", "401", "401", "failed", "run.failed.provider_auth",
         r"invalid api key|authentication_failed|401", 30, max_attempts=1,
         li_args=("--timeout", "40"), replay_hang=True, replay_args=AUTH_REPLAY),
    Case("claude", "429", "429", "failed", "run.failed.provider_rate_limit",
         r"Number of request tokens has exceeded your rate limit", 45, min_attempts=2,
         env=CLAUDE_FEW, no_model_answered=True),
    Case("claude", "500", "500", "failed", "run.failed.provider_server_error",
         r"500 Internal server error", 45, min_attempts=2, env=CLAUDE_FEW, no_model_answered=True),
    Case("claude", "529", "529", "failed", "run.failed.provider_overloaded",
         r"529 Overloaded", 45, min_attempts=2, env=CLAUDE_FEW, no_model_answered=True),
    Case("claude", "400-prompt-too-long", "400", "failed", "run.failed.provider_rejected",
         r"Prompt is too long", 30, max_attempts=0, no_model_answered=True),
    Case("claude", "refused", "refused", "failed", "run.failed.provider_network",
         r"Unable to connect to API \(ConnectionRefused\)", 45, min_attempts=2,
         env=CLAUDE_FEW, no_model_answered=True),
    Case("claude", "hang", "hang", "failed", "run.failed.provider_stalled",
         r"stall|no progress", 40, min_seconds=float(STALL), li_args=STALL_ARGS,
         replay_hang=True, replay_args=("--stall-timeout", "1", "--timeout", "5")),
    # lirun's own clock while the CLI is still retrying (its default budget, 10 retries).
    Case("claude", "529-timeout", "529", "timed_out", "run.timed_out.provider_retrying",
         r"retr", 40, min_seconds=8, min_attempts=2, li_args=("--timeout", "8"),
         replay_hang=True, replay_args=("--timeout", "1"), provider_error=r"529|overloaded"),
)  # fmt: skip

CODEX_CASES = (
    # The plain setting: Codex tries WebSockets first (five times), then falls back to
    # HTTPS; the fallback is a warning, never the run's provider error.
    Case("codex", "text", "text", "completed", "run.completed.ok",
         r"completed", 60, provider_args=("-c", f"openai_base_url={BASE_URL}/v1")),
    Case("codex", "tool-write", "tool", "completed", "run.completed.ok",
         r"completed", 60, max_attempts=0,
         provider_args=(*codex_provider(), "--sandbox", "danger-full-access"),
         touch="mock_note.txt"),
    Case("codex", "401", "401", "failed", "run.failed.provider_auth",
         r"401 Unauthorized", 30, max_attempts=1, provider_args=tuple(codex_provider()),
         li_args=("--timeout", "40"), replay_hang=True, replay_args=AUTH_REPLAY),
    Case("codex", "429", "429", "failed", "run.failed.provider_rate_limit",
         r"429 Too Many Requests", 45, min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES)),
    Case("codex", "500", "500", "failed", "run.failed.provider_server_error",
         r"high demand", 45, min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES)),
    Case("codex", "529", "529", "failed", "run.failed.provider_overloaded",
         r"529 .*Overloaded", 45, min_attempts=2, provider_args=tuple(CODEX_FEW_RETRIES)),
    Case("codex", "400-prompt-too-long", "400", "failed", "run.failed.provider_rejected",
         r"context window", 30, max_attempts=0, provider_args=tuple(CODEX_FEW_RETRIES)),
    # Codex waits for the network forever ("Reconnecting... waiting for network" every
    # ~35 s): the stall limit ends it, and the class is the network's.
    Case("codex", "refused", "refused", "failed", "run.failed.provider_network",
         r"Connection failed|waiting for network", 40, min_seconds=float(STALL),
         provider_args=tuple(CODEX_FEW_RETRIES), li_args=STALL_ARGS, replay_hang=True,
         replay_args=("--stall-timeout", "1", "--timeout", "5")),
    Case("codex", "hang", "hang", "failed", "run.failed.provider_stalled",
         r"stall|no progress", 40, min_seconds=float(STALL),
         provider_args=tuple(CODEX_FEW_RETRIES), li_args=STALL_ARGS, replay_hang=True,
         replay_args=("--stall-timeout", "1", "--timeout", "5")),
    Case("codex", "500-timeout", "500", "timed_out", "run.timed_out.provider_retrying",
         r"retr", 40, min_seconds=8, min_attempts=1, provider_args=tuple(codex_provider()),
         li_args=("--timeout", "8"), replay_hang=True, replay_args=("--timeout", "1"),
         provider_error=r"high demand"),
)  # fmt: skip

# Gemini CLI exits with the HTTP status mod 256 on API errors and 0 on a cut stream: the
# record must follow the stream. One attempt unless the case is about retries (they are
# then read from its stderr); two attempts cost one backoff (5 s, or the server's 1 s
# retryDelay on 429).
GEMINI_STALL_REPLAY = ("--stall-timeout", "1", "--timeout", "5")
GEMINI_CASES = (
    Case("gemini", "text", "text", "completed", "run.completed.ok",
         r"completed", 30, max_attempts=0, cli_attempts=1),
    Case("gemini", "tool-write", "tool", "completed", "run.completed.ok",
         r"completed", 30, max_attempts=0, cli_attempts=1, touch="mock_note.txt"),
    Case("gemini", "401", "401", "failed", "run.failed.provider_auth",
         r"invalid authentication credentials", 20, max_attempts=0, cli_attempts=1),
    Case("gemini", "403", "403", "failed", "run.failed.provider_auth",
         r"unregistered callers", 20, max_attempts=0, cli_attempts=1),
    Case("gemini", "429", "429", "failed", "run.failed.provider_rate_limit",
         r"Resource has been exhausted", 30, min_attempts=1, cli_attempts=2),
    Case("gemini", "500", "500", "failed", "run.failed.provider_server_error",
         r"internal error", 20, max_attempts=0, cli_attempts=1),
    Case("gemini", "503", "503", "failed", "run.failed.provider_overloaded",
         r"model is overloaded", 30, min_attempts=1, cli_attempts=2),
    Case("gemini", "400-prompt-too-long", "400", "failed", "run.failed.provider_rejected",
         r"exceeds the maximum number of tokens", 20, max_attempts=0, cli_attempts=1),
    Case("gemini", "unknown-model", "404", "failed", "run.failed.provider_rejected",
         r"is not found", 20, max_attempts=0, cli_attempts=1, model_name="no-such-model"),
    Case("gemini", "refused", "refused", "failed", "run.failed.provider_network",
         r"fetch failed", 30, min_attempts=1, cli_attempts=2),
    Case("gemini", "closed-no-answer", "close", "failed", "run.failed.provider_network",
         r"fetch failed|terminated|closed|reset", 30, cli_attempts=1),
    # Exit 0 and result status "error" with no error: a cut stream is never a success.
    Case("gemini", "closed-mid-stream", "cut", "failed", "run.failed.provider_network",
         r"without a finish reason", 20, max_attempts=0, cli_attempts=1),
    # 200 with a body that is not the protocol: the server's fault, whatever the exit code.
    Case("gemini", "malformed", "malformed", "failed", "run.failed.provider_server_error",
         r"JSON", 20, max_attempts=0, cli_attempts=1),
    # The CLI waits 60 s for headers and 300 s for a body: the stall limit ends it first.
    Case("gemini", "hang", "hang", "failed", "run.failed.provider_stalled",
         r"stall|no progress", 20, min_seconds=float(STALL), cli_attempts=1,
         li_args=STALL_ARGS, replay_hang=True, replay_args=GEMINI_STALL_REPLAY),
    Case("gemini", "stalled-body", "stall", "failed", "run.failed.provider_stalled",
         r"stall|no progress", 20, min_seconds=float(STALL), cli_attempts=1,
         li_args=STALL_ARGS, replay_hang=True, replay_args=GEMINI_STALL_REPLAY),
)  # fmt: skip

CASES = CLAUDE_CASES + CODEX_CASES + GEMINI_CASES
