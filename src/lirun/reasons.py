"""The closed reason-code registry.

A code is ``<domain>.<outcome>.<cause>``, three lower_snake parts (one exception:
``legacy.imported``). An unknown code is a ValidationError on write and prints as
``unknown`` on read.
"""

from __future__ import annotations

import re

from lirun.errors import ValidationError
from lirun.lifecycle import policy_for

REASON_DOMAINS: frozenset[str] = frozenset({"run", "session", "play", "show", "schedule", "team"})
LEGACY_IMPORTED = "legacy.imported"
_CODE_RE = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")

_CODES: dict[str, str] = {
    # execution teardown (ADR D4, DESIGN §5)
    "run.running.started": "execution started",
    "run.running.resumed": "execution resumed from an earlier one",
    "run.running.linked_engine": "linked engine session is still running",
    "run.completed.ok": "completed with evidence of work",
    "run.completed.linked_engine": "linked engine session completed",
    "run.completed_empty.no_evidence": "exited cleanly but showed no evidence of work",
    "run.completed_empty.permission_denied": "every tool call was denied and nothing changed",
    "run.completed_empty.no_activity": "no tool call, no reply and nothing changed",
    "run.timed_out.deadline": "wall-clock limit reached",
    "run.timed_out.idle": "no output for longer than the idle limit",
    "run.cancelled.sigint": "interrupted (SIGINT)",
    "run.cancelled.sigterm": "terminated (SIGTERM)",
    "run.cancelled.system": "cancelled by the system",
    "run.failed.provider_retryable": "provider error that may succeed on retry",
    "run.failed.provider_nonretryable": "provider error that will not succeed on retry",
    "run.failed.exception": "failed with an exception",
    "run.failed.exit_nonzero": "command exited with a non-zero code",
    "run.failed.missing_artifact": "a required artifact is missing",
    "run.failed.escalated": "escalated",
    "run.failed.linked_engine": "linked engine session failed",
    "run.failed.setup": "could not start the execution",
    "run.failed.admin": "marked failed by an operator",
    "run.completed.admin": "marked completed by an operator",
    "run.cancelled.admin": "cancelled by an operator",
    # liveness (DESIGN §4.6)
    "session.orphaned.no_process": "owner process is gone",
    "session.stale.no_heartbeat": "no heartbeat within the lease",
    # plays
    "play.pending.created": "play created",
    "play.prepared.ok": "play prepared",
    "play.running.started": "play started",
    "play.running_complete.ok": "play work finished, awaiting gate",
    "play.gated.awaiting": "awaiting gate",
    "play.redoing.gate_failed": "redoing after a failed gate",
    "play.merged.ok": "merged",
    "play.escalated.gate": "escalated to a human",
    "play.gate_failed.check": "gate check failed",
    "play.blocked.dependency": "blocked by a dependency",
    "play.aborted_after_finish.user": "aborted after finishing",
    # shows
    "show.active.created": "show created",
    "show.completed.ok": "show completed",
    "show.aborted.user": "show aborted",
    # schedules
    "schedule.queued.created": "schedule run queued",
    "schedule.waiting_dependency.upstream": "waiting for an upstream run",
    "schedule.running.started": "schedule run started",
    "schedule.retry_wait.backoff": "waiting to retry",
    "schedule.completed.ok": "schedule run completed",
    "schedule.failed.action": "scheduled action failed",
    "schedule.timed_out.deadline": "schedule run exceeded its deadline",
    "schedule.skipped.overlap": "skipped: previous run still active",
    "schedule.skipped.disabled": "skipped: schedule disabled",
    "schedule.cancelled.user": "schedule run cancelled",
    # teams
    "team.active.created": "team created",
    "team.archived.user": "team archived",
    # imports from older stores
    LEGACY_IMPORTED: "imported from a legacy store",
}

VALID_REASON_CODES: frozenset[str] = frozenset(_CODES)


def reason_domain(code: str) -> str:
    return code.split(".", 1)[0]


def describe(code: str) -> str:
    """A short human text for a registered code, else ``""``."""
    return _CODES.get(code, "")


def is_registered(code: str | None) -> bool:
    return code is not None and code in VALID_REASON_CODES


def display_reason(code: str | None) -> str:
    """The code if registered, else the literal ``unknown`` (the wait line's rule)."""
    return code if is_registered(code) else "unknown"  # type: ignore[return-value]


def validate_reason(code: str, entity_type: str | None = None) -> None:
    """Raise ValidationError unless ``code`` is registered and its domain fits the entity."""
    if not isinstance(code, str) or code not in VALID_REASON_CODES:
        raise ValidationError(
            f"reason code {code!r} is not registered; codes look like 'run.failed.exception' "
            "(see lirun.VALID_REASON_CODES)"
        )
    if entity_type is None or code == LEGACY_IMPORTED:
        return
    policy = policy_for(entity_type)
    if reason_domain(code) not in policy.reason_domains:
        raise ValidationError(
            f"reason code {code!r} (domain {reason_domain(code)!r}) does not fit "
            f"{policy.entity_type}; allowed domains: {', '.join(sorted(policy.reason_domains))}"
        )


def _check_registry() -> None:
    for code in VALID_REASON_CODES:
        if code != LEGACY_IMPORTED and (
            not _CODE_RE.match(code) or reason_domain(code) not in REASON_DOMAINS
        ):
            raise AssertionError(f"malformed registered reason code {code!r}")


_check_registry()


_CREATION_REASONS = {
    ("session", "running"): "run.running.started",
    ("invocation", "running"): "run.running.started",
    ("schedule_run", "queued"): "schedule.queued.created",
    ("show", "active"): "show.active.created",
    ("play", "pending"): "play.pending.created",
    ("team", "active"): "team.active.created",
}


def creation_reason(entity_type: str, status: str) -> str:
    """The reason on the history row written when an entity is created in ``status``."""
    policy = policy_for(entity_type)
    known = _CREATION_REASONS.get((policy.entity_type, status))
    if known:
        return known
    if policy.entity_type in ("session", "invocation"):
        return resolve_run_reason(status)
    for code in sorted(VALID_REASON_CODES):
        domain, _, rest = code.partition(".")
        if domain in policy.reason_domains and rest.split(".")[0] == status:
            return code
    return LEGACY_IMPORTED


def resolve_run_reason(status: str, *, signal_name: str | None = None) -> str:
    """Base teardown reason for an in-memory execution status (DESIGN §5), no exception."""
    if status == "aborted":
        return "run.cancelled.sigint"
    if status == "cancelled":
        return "run.cancelled.sigterm" if signal_name == "SIGTERM" else "run.cancelled.system"
    return {
        "completed": "run.completed.ok",
        "completed_empty": "run.completed_empty.no_evidence",
        "timed_out": "run.timed_out.deadline",
        "running": "run.running.started",
    }.get(status, "run.failed.exception")
