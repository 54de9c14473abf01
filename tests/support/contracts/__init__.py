"""The contract suite's cases: each real agent CLI against each mock API scenario, and
what lirun must record. One module per provider (``claude.py``, ``codex.py``, …) says how
its CLI is installed, pointed at the mock and asked; a new provider is one more module
here, listed in :data:`MODULES`.

One table, read twice: ``tests/test_real_clis.py`` runs each case live (the pinned or the
newest CLI in a network namespace beside :mod:`support.mockapi`), and
``tests/test_real_streams.py`` replays the stream each live case recorded, for every
version recorded (``tests/fixtures/<provider>/real-<version>-<case>.jsonl``), through the
fake provider and expects the same status and reason.

A case states classes, not sentences: the status and reason, the retries lirun counted,
how long the run took, and lirun's own words where lirun ended the run (a stall, its
timeout). The CLIs' wording changes from release to release (2.1.197 "Unable to connect
to API (ECONNRESET)", 2.1.332 "Connection dropped (ECONNRESET)"), and a suite that pinned
it would fail on every release for no fault of lirun's. Each contract cuts its CLI's
retry budget down with the CLI's own settings, so the suite stays short.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.netns import PORT

BASE_URL = f"http://127.0.0.1:{PORT}"
STALL = "4"  # --stall-timeout for the cases where the CLI waits on a silent server
STALL_ARGS = ("--stall-timeout", STALL, "--timeout", "60")
STALL_REPLAY = ("--stall-timeout", "1", "--timeout", "5")
AUTH_REPLAY = ("--timeout", "5", "--grace", "0.5")
STALLED = r"stall|no progress"  # lirun's words when its stall limit ended the run
_VERSION = re.compile(r"\d+(?:\.\d+)+(?:-[A-Za-z][0-9A-Za-z.]*)?")


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
    # The CLI made up every answer (Claude Code's ``"model":"<synthetic>"``): no model
    # answered, so lirun records none (the model it announced stays in the evidence).
    no_model_answered: bool = False
    # The CLI's own attempt budget where only a settings file gives it (Gemini CLI's
    # general.maxAttempts); None: the contract's default.
    cli_attempts: int | None = None
    model_name: str | None = None  # another model than the contract's usual one

    @property
    def id(self) -> str:
        return f"{self.provider}-{self.name}"

    @property
    def contract(self) -> Contract:
        return CONTRACTS[self.provider]

    @property
    def fixture(self) -> str:
        """The pinned version's recorded stream."""
        return self.fixture_for(self.contract.pinned)

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
        return self.model_name or self.contract.model

    @property
    def api_model(self) -> str:
        """The model the CLI asks the API for."""
        return self.contract.api_model(self.model)

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


def _same(model: str) -> str:
    return model


def _model_in_body(request: Mapping[str, Any]) -> str | None:
    body = request.get("body")
    return body.get("model") if isinstance(body, dict) else None


@dataclass(frozen=True)
class Contract:
    """How one provider's real CLI is installed (``scripts/install-clis``: ``cli_name``,
    ``package``, ``pinned``, ``bin``), pointed at the mock (``environment``) and asked
    (``model``); what ``--version`` prints (``version_line``) and where it calls the mock
    (``api_path``)."""

    provider: str
    cli_name: str  # the cache's directory: $CACHE/<cli_name>-<version>
    package: str
    pinned: str
    bin: str
    model: str  # what `li agent PROVIDER/MODEL` asks for
    api_path: str  # the path prefix the CLI POSTs its turns to
    version_line: str  # what `<bin> --version` prints, "{}" the version
    cases: tuple[Case, ...]
    # Prefixes of the variables that configure this CLI: the machine's own stay out.
    own_env: tuple[str, ...]
    # (the CLI's private HOME, the test's temp dir, the case) -> variables to set.
    environment: Callable[[Path, Path, Case], dict[str, str]]
    api_model: Callable[[str], str] = _same
    model_sent: Callable[[Mapping[str, Any]], str | None] = _model_in_body


# The contracts, in the order the suite runs them.
MODULES = ("claude", "codex", "gemini", "pi", "copilot", "opencode")
CONTRACTS: dict[str, Contract] = {}
for _name in MODULES:
    _contract: Contract = importlib.import_module(f"support.contracts.{_name}").CONTRACT
    CONTRACTS[_contract.provider] = _contract
CASES: tuple[Case, ...] = tuple(case for c in CONTRACTS.values() for case in c.cases)
