"""The provider-neutral verdict a stream parser hands to the supervisor."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from lirun.provider_errors import ProviderError

StreamStatus = Literal["completed", "failed"]


@dataclass(slots=True)
class StreamVerdict:
    """What the stream and the exit code say, before the ADR's artifact and evidence gates.

    Timeouts and signals are the supervisor's call: it overrides ``status`` for those and
    passes ``exception`` on to ``teardown_persist`` otherwise.
    """

    provider: str
    status: StreamStatus
    exception: ProviderError | None
    reply: str = ""
    engine_session_uid: str | None = None
    model: str | None = None
    usage: dict[str, Any] | None = None
    cost: float | None = None
    num_turns: int | None = None
    exit_code: int | None = None
    evidence: list[dict[str, Any]] = field(default_factory=list)
    provider_version: str | None = None
    # Attempts at an API call the provider retried itself, the last one's HTTP status and
    # failure class, and whether it was still retrying when the stream ended.
    retries: int = 0
    last_error: str | None = None
    last_error_status: int | None = None
    retrying: bool = False
    retry_class: str | None = None
    # The stream shows no model was called (every answer was made up by the CLI).
    no_model_call: bool = False
    duration_ms: float | None = None
    # The agent's own activity, for the completion gate (an agent acts through tool calls).
    tool_calls: int = 0
    permission_denials: int = 0

    @property
    def retryable(self) -> bool:
        return self.exception is not None and self.exception.retryable
