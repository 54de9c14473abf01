"""Lifecycle policy registry: per entity type, its statuses, terminal and success sets.

Status vocabularies live here only; the database stores TEXT.
"""

from __future__ import annotations

from lirun.errors import ValidationError
from lirun.hints import NamedTuple


class EntityPolicy(NamedTuple):
    """Everything the store and the waiter need to know about one entity type.

    A NamedTuple rather than a dataclass: importing dataclasses (and with it inspect)
    would cost `li wait`, which loads this module, about 5 ms of its startup budget.
    """

    entity_type: str
    table: str
    statuses: frozenset[str]
    terminal: frozenset[str]
    success: frozenset[str]
    initial: str
    reason_domains: frozenset[str]
    extra_fields: frozenset[str]
    # The terminal write's own columns (set by the store, ``store.transitions``): the
    # column that records when the row ended, and whether ``exit_code`` follows the
    # status through EXIT_CODE_BY_STATUS (the exit code `li wait` reports).
    ended_column: str | None = None
    exit_code_by_status: bool = False


# A play's statuses in the order a play moves through them (the show board's columns).
PLAY_STATUS_ORDER = (
    "pending",
    "prepared",
    "running",
    "running_complete",
    "gated",
    "redoing",
    "merged",
    "escalated",
    "gate_failed",
    "blocked",
    "aborted_after_finish",
)
# The columns a play's writes set besides its status, in a status write (its extra fields)
# or alone (``Store.update_fields``): its execution, attempt, git facts, gate and feedback.
PLAY_FIELDS = frozenset(
    {
        "ended_at",
        "session_id",
        "attempt",
        "branch",
        "worktree",
        "candidate_sha",
        "candidate_base",
        "merge_sha",
        "merged_at",
        "gate_json",
        "feedback",
    }
)
_SESSION_STATUSES = frozenset(
    {"running", "completed", "completed_empty", "failed", "timed_out", "aborted", "cancelled"}
)
_SESSION_TERMINAL = _SESSION_STATUSES - {"running"}

POLICIES: dict[str, EntityPolicy] = {
    p.entity_type: p
    for p in (
        EntityPolicy(
            entity_type="session",
            table="sessions",
            statuses=_SESSION_STATUSES,
            terminal=_SESSION_TERMINAL,
            success=frozenset({"completed"}),
            initial="running",
            reason_domains=frozenset({"run", "session"}),
            extra_fields=frozenset(
                {"ended_at", "exit_code", "engine_session_uid", "artifact_verification_json"}
            ),
            ended_column="ended_at",
            exit_code_by_status=True,
        ),
        EntityPolicy(
            entity_type="invocation",
            table="invocations",
            statuses=_SESSION_STATUSES,
            terminal=_SESSION_TERMINAL,
            success=frozenset({"completed"}),
            initial="running",
            reason_domains=frozenset({"run", "session"}),
            extra_fields=frozenset({"ended_at", "exit_code"}),
            ended_column="ended_at",
            exit_code_by_status=True,
        ),
        EntityPolicy(
            entity_type="schedule_run",
            table="schedule_runs",
            statuses=frozenset(
                {
                    "queued",
                    "waiting_dependency",
                    "running",
                    "retry_wait",
                    "completed",
                    "failed",
                    "timed_out",
                    "skipped",
                    "cancelled",
                }
            ),
            terminal=frozenset({"completed", "failed", "timed_out", "skipped", "cancelled"}),
            success=frozenset({"completed"}),
            initial="queued",
            reason_domains=frozenset({"run", "schedule"}),
            extra_fields=frozenset(
                {"started_at", "ended_at", "attempt", "exit_code"}
                # what a worker writes with a status change (migration 0008)
                | {"worker_id", "lease_expires_at", "heartbeat_at"}
                | {"lease_epoch"}  # the claim's fence (migration 0012)
                | {"session_id", "invocation_id", "show_id"}
            ),
            ended_column="ended_at",  # its exit_code is the action's own: the caller's
        ),
        EntityPolicy(
            entity_type="show",
            table="shows",
            statuses=frozenset({"active", "completed", "aborted"}),
            terminal=frozenset({"completed", "aborted"}),
            success=frozenset({"completed"}),
            initial="active",
            reason_domains=frozenset({"show"}),
            extra_fields=frozenset({"ended_at", "integration_head", "final_gate_json"}),
            ended_column="ended_at",
        ),
        EntityPolicy(
            entity_type="play",
            table="plays",
            statuses=frozenset(PLAY_STATUS_ORDER),
            terminal=frozenset(
                {"merged", "escalated", "gate_failed", "blocked", "aborted_after_finish"}
            ),
            success=frozenset({"merged"}),
            initial="pending",
            reason_domains=frozenset({"play"}),
            extra_fields=PLAY_FIELDS,
            ended_column="ended_at",
        ),
        # A schedule definition: every change of it (created, updated by apply, enabled,
        # disabled, deleted) is a guarded status write with its own reason code.
        EntityPolicy(
            entity_type="schedule",
            table="schedules",
            statuses=frozenset({"enabled", "disabled", "deleted"}),
            terminal=frozenset({"deleted"}),
            success=frozenset(),
            initial="enabled",
            reason_domains=frozenset({"schedule_definition"}),
            extra_fields=frozenset(
                {
                    "spec",
                    "tz",
                    "action_kind",
                    "action_json",
                    "trigger_json",
                    "policies_json",
                    "next_due_at",
                    "enabled",
                    "deleted_at",
                }
            ),
            ended_column="deleted_at",
        ),
        EntityPolicy(
            entity_type="team",
            table="teams",
            statuses=frozenset({"active", "archived"}),
            terminal=frozenset({"archived"}),
            success=frozenset(),
            initial="active",
            reason_domains=frozenset({"team"}),
            extra_fields=frozenset({"archived_at"}),
            ended_column="archived_at",
        ),
    )
}

ENTITY_TYPES: frozenset[str] = frozenset(POLICIES)

_ALIASES: dict[str, str] = {
    "run": "session",
    "runs": "session",
    "execution": "session",
    "executions": "session",
    "schedule-run": "schedule_run",
    "schedule-runs": "schedule_run",
}
for _policy in POLICIES.values():
    _ALIASES[_policy.table] = _policy.entity_type

VALID_STATUSES_BY_ENTITY_TYPE: dict[str, frozenset[str]] = {
    k: p.statuses for k, p in POLICIES.items()
}
TERMINAL_STATUSES_BY_ENTITY_TYPE: dict[str, frozenset[str]] = {
    k: p.terminal for k, p in POLICIES.items()
}
SUCCESS_STATUSES_BY_ENTITY_TYPE: dict[str, frozenset[str]] = {
    k: p.success for k, p in POLICIES.items()
}
VALID_SESSION_STATUSES: frozenset[str] = _SESSION_STATUSES
SESSION_TERMINAL_STATUSES: frozenset[str] = _SESSION_TERMINAL

EXIT_CODE_BY_STATUS: dict[str, int] = {
    "completed": 0,
    "completed_empty": 1,
    "failed": 1,
    "timed_out": 124,
    "aborted": 130,
    "cancelled": 143,
}


def exit_code_for_status(status: str) -> int:
    """``li``'s exit code for a final session status; anything unexpected is unsuccessful (1)."""
    return EXIT_CODE_BY_STATUS.get(status, 1)


VALID_SOURCES: frozenset[str] = frozenset({"executor", "agent", "admin", "system"})


def canonical_entity_type(entity_type: str) -> str:
    """``sessions`` / ``run`` → ``session``; an unknown type is a ValidationError."""
    key = str(entity_type).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in POLICIES:
        raise ValidationError(
            f"unknown entity type {entity_type!r}; expected one of {', '.join(sorted(POLICIES))}"
        )
    return key


# The word ``li`` prints and the dashboard shows for a kind whose stored entity type is
# older (design.md glossary): a row of ``sessions`` is a run.
_SHOWN_KINDS: dict[str, str] = {"session": "run"}


def shown_kind(entity_type: str) -> str:
    """``run`` for the stored ``session``; every other kind as it is stored."""
    return _SHOWN_KINDS.get(entity_type, entity_type)


def policy_for(entity_type: str) -> EntityPolicy:
    return POLICIES[canonical_entity_type(entity_type)]


def is_terminal(entity_type: str, status: str | None) -> bool:
    return status is not None and status in policy_for(entity_type).terminal


def is_success(entity_type: str, status: str | None) -> bool:
    return status is not None and status in policy_for(entity_type).success


def validate_status(entity_type: str, status: str) -> None:
    policy = policy_for(entity_type)
    if status not in policy.statuses:
        raise ValidationError(
            f"status {status!r} is not valid for {policy.entity_type}; "
            f"expected one of {', '.join(sorted(policy.statuses))}"
        )


def validate_source(source: str) -> None:
    if source not in VALID_SOURCES:
        raise ValidationError(
            f"source {source!r} is not valid; expected one of {', '.join(sorted(VALID_SOURCES))}"
        )
