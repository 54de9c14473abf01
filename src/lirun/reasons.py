"""The closed reason-code registry.

A code is ``<domain>.<outcome>.<cause>``, three lower_snake parts (one exception:
``legacy.imported``). An unknown code is a ValidationError on write and prints as
``unknown`` on read.

Each code may accompany only some statuses. The rule: a code accompanies the status its
middle segment names (``run.failed.admin`` → ``failed``, ``play.gated.awaiting`` →
``gated``), unless ``_STATUSES`` lists its statuses explicitly (the exceptions, such as
``run.cancelled.sigint`` for ``aborted``). ``legacy.imported`` accompanies any status: an
imported record keeps the status it had. A new code that follows its middle segment
needs no entry in ``_STATUSES``; one that fits no status at all fails at import.
"""

from __future__ import annotations

from lirun.errors import ValidationError
from lirun.lifecycle import POLICIES, policy_for

REASON_DOMAINS: frozenset[str] = frozenset(
    {"run", "session", "play", "show", "schedule", "team", "schedule_definition"}
)
LEGACY_IMPORTED = "legacy.imported"
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def _is_code_shape(code: str) -> bool:
    """``domain.outcome.detail``: three ``[a-z][a-z0-9_]*`` words (no ``re``: start-up cost)."""
    parts = code.split(".")
    return len(parts) == 3 and all(
        p and "a" <= p[0] <= "z" and all(c in _WORD_CHARS for c in p) for p in parts
    )


_CODES: dict[str, str] = {
    # execution teardown (design.md D4, §5)
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
    # provider failures by what a person does next (provider_errors.FAILURE_CLASSES)
    "run.failed.provider_auth": "the provider refused the credentials",
    "run.failed.provider_rejected": "the provider rejected the request",
    "run.failed.provider_rate_limit": "the provider's rate limit was hit",
    "run.failed.provider_overloaded": "the provider is overloaded",
    "run.failed.provider_server_error": "the provider's API failed (server error)",
    "run.failed.provider_network": "the provider's API could not be reached",
    "run.failed.provider_stalled": "the agent made no progress for longer than the stall limit",
    "run.timed_out.provider_retrying": "time limit reached while the provider was retrying",
    "run.failed.exception": "failed with an exception",
    "run.failed.exit_nonzero": "command exited with a non-zero code",
    "run.failed.missing_artifact": "a required artifact is missing",
    "run.failed.artifact_invalid": "a required artifact failed a content check",
    "run.failed.escalated": "escalated",
    "run.failed.linked_engine": "linked engine session failed",
    "run.failed.setup": "could not start the execution",
    "run.failed.admin": "marked failed by an operator",
    "run.completed.admin": "marked completed by an operator",
    "run.cancelled.admin": "cancelled by an operator",
    # flows: one invocation, one session per leg (docs/flow-engine.md)
    "run.failed.leg": "a leg of the flow failed, timed out or was stopped",
    "run.failed.fan_out": "a fan-out's items could not be read",
    "run.completed_empty.leg": "a leg of the flow showed no evidence of work",
    "run.completed_empty.no_items": "a fan-out had no items",
    "run.cancelled.dependency": "not run: a leg it depends on did not complete",
    "run.cancelled.fail_fast": "not run: another leg failed and the flow fails fast",
    "run.cancelled.flow_stopped": "not run: the flow was interrupted or timed out",
    # liveness (design.md §4.6)
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
    # the show engine (shows/): what a play or a show waits on, and why a play did not merge
    "play.pending.waiting_on_deps": "waiting for its dependencies to merge",
    "play.running.retry_provider": "running again after a retryable provider failure",
    "play.running.rerun": "running again: its earlier execution was interrupted or orphaned",
    "play.gated.regate": "the integration branch moved: gating again on the new head",
    "play.redoing.merge_conflict": "redoing after a merge conflict",
    "play.redoing.session_failed": "redoing after its execution did not complete",
    "play.redoing.no_changes": "redoing: its work changed nothing to merge",
    "play.merged.admin": "merged by a person",
    "play.escalated.merge_conflict": "merge conflict on the last attempt: a person decides",
    "play.escalated.session_failed": "its execution did not complete on the last attempt",
    "play.escalated.no_changes": "nothing to merge on the last attempt",
    "play.escalated.provider": (
        "its agent's provider refused the run (login, key or request): a person fixes that"
    ),
    "play.gate_failed.merge_conflict": "merge conflict (no redo: attempts 1)",
    "play.gate_failed.session_failed": "its execution did not complete (no redo: attempts 1)",
    "play.gate_failed.no_changes": "nothing to merge (no redo: attempts 1)",
    "play.blocked.show_aborted": "never started: the show was aborted",
    "play.aborted_after_finish.show_aborted": "finished but not merged when the show was aborted",
    "show.active.resumed": "show resumed",
    "show.active.interrupted": "interrupted by a signal; resume it",
    "show.active.final_gate_failed": "every play merged but the final gate failed",
    "show.active.integration_unverified": "the integration head a person moved failed its gate",
    "show.blocked.no_ready_plays": "no play can go on until a person decides",
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
    # schedule definitions (li schedule add / apply / enable / disable / delete; workers)
    "schedule_definition.enabled.created": "schedule created",
    "schedule_definition.disabled.created": "schedule created disabled",
    "schedule_definition.enabled.updated": "schedule definition updated",
    "schedule_definition.disabled.updated": "schedule definition updated",
    "schedule_definition.enabled.user": "schedule enabled",
    "schedule_definition.disabled.user": "schedule disabled",
    "schedule_definition.deleted.user": "schedule deleted",
    "schedule_definition.enabled.applied": "schedule enabled by apply",
    "schedule_definition.disabled.applied": "schedule disabled by apply",
    "schedule_definition.deleted.applied": "schedule deleted by apply (not in the file)",
    "schedule_definition.disabled.budget_exhausted": "schedule disabled: its budget is spent",
    "schedule_definition.disabled.max_runs": "schedule disabled: it reached --max-runs",
    "schedule_definition.disabled.spent": "schedule disabled: its --at time has fired",
    # schedule runs a worker records as skipped (lirun.schedules.firing)
    "schedule.skipped.missed_fire": "skipped: no worker fired it within the missed grace",
    "schedule.skipped.missed_summary": "skipped: more missed due times than recorded one by one",
    "schedule.skipped.max_runs": "skipped: the schedule reached --max-runs",
    "schedule.skipped.chain_depth": "skipped: its parent run is at the chain depth bound (10)",
    # a poll trigger's last poll (schedules.last_poll_reason, docs/schedules.md)
    "schedule.poll.ok": "poll succeeded",
    "schedule.poll.failed_exit": "poll command exited non-zero",
    "schedule.poll.timed_out": "poll command timed out",
    "schedule.poll.bad_output": "poll command printed something that is not JSON objects",
    "schedule.budget.exhausted": "skipped: the schedule's budget is spent",
    # schedule runs as the workers end them (lirun.schedules.runner / worker)
    "schedule.failed.start_deadline": "queued run not started within its start deadline",
    "schedule.failed.lease_lapsed": "the worker running it stopped renewing its lease",
    "schedule.failed.cwd_not_allowed": "its working directory is outside the worker's --allow-root",
    "schedule.failed.file_changed": "its flow or show file changed since the schedule was added",
    "schedule.failed.file_missing": "its file or working directory is missing on the worker",
    "schedule.failed.setup": "the worker could not start its action",
    "schedule.failed.completed_empty": "the execution ended without evidence of work",
    "schedule.failed.no_action": "the run has no action (its schedule holds none)",
    "schedule.cancelled.worker_stopped": "its worker stopped and the grace period ran out",
    "schedule.cancelled.lease_lost": "its worker could not renew its lease and stopped it",
    "schedule.cancelled.superseded": "not started: the attempt it retried had ended by itself",
    "session.failed.lease_lapsed": "the worker running it stopped renewing its lease",
    # teams
    "team.active.created": "team created",
    "team.archived.user": "team archived",
    "team.archived.operator": "team archived by a person (li team archive)",
    # imports from older stores
    LEGACY_IMPORTED: "imported from a legacy store",
}

VALID_REASON_CODES: frozenset[str] = frozenset(_CODES)

# The run reasons that say "the same work may succeed if tried again": transient provider
# failures. Flows (``retries:``), shows and schedules retry these and never any other.
RETRYABLE_RUN_REASONS: frozenset[str] = frozenset(
    {
        "run.failed.provider_retryable",
        "run.failed.provider_rate_limit",
        "run.failed.provider_overloaded",
        "run.failed.provider_server_error",
        "run.failed.provider_network",
        "run.failed.provider_stalled",
        "run.timed_out.provider_retrying",
    }
)

# The exceptions to the middle-segment rule: each list is complete (it replaces the rule).
_STATUSES: dict[str, frozenset[str]] = {
    # A poll's outcome is a schedule's last_poll_reason, never a run's status; a skipped
    # row is the only status it could describe (a due time that fired nothing).
    "schedule.poll.ok": frozenset({"skipped"}),
    "schedule.poll.failed_exit": frozenset({"skipped"}),
    "schedule.poll.timed_out": frozenset({"skipped"}),
    "schedule.poll.bad_output": frozenset({"skipped"}),
    # SIGINT ends a run as aborted (130); a SIGINT seen as a cancellation keeps the code.
    "run.cancelled.sigint": frozenset({"aborted", "cancelled"}),
    # Liveness finalizes a dead owner's row as failed (design.md §4.6).
    "session.orphaned.no_process": frozenset({"failed"}),
    "session.stale.no_heartbeat": frozenset({"failed"}),
    # A show waiting on a person is still active (show statuses: active, completed, aborted).
    "show.blocked.no_ready_plays": frozenset({"active"}),
    # A budget refusal: the run it refuses is recorded as skipped (its own domain word).
    "schedule.budget.exhausted": frozenset({"skipped"}),
}


def is_retryable_reason(code: str | None) -> bool:
    """True when an execution that ended with ``code`` may succeed if run again."""
    return code in RETRYABLE_RUN_REASONS


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


def reason_fits_status(code: str, status: str) -> bool:
    """True if ``code`` may accompany ``status``: its explicit list, else its middle segment."""
    if code == LEGACY_IMPORTED:
        return True
    explicit = _STATUSES.get(code)
    if explicit is not None:
        return status in explicit
    parts = code.split(".")
    return len(parts) == 3 and parts[1] == status


def codes_for(entity_type: str, status: str) -> list[str]:
    """The registered codes that fit ``entity_type`` in ``status`` (``legacy.imported`` aside)."""
    domains = policy_for(entity_type).reason_domains
    return sorted(
        code
        for code in VALID_REASON_CODES
        if code != LEGACY_IMPORTED
        and reason_domain(code) in domains
        and reason_fits_status(code, status)
    )


def validate_reason(code: str, entity_type: str | None = None, status: str | None = None) -> None:
    """Raise ValidationError unless ``code`` is registered, its domain fits the entity and
    (when ``status`` is given) it may accompany that status; the error lists codes that fit.
    """
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
    if status is not None and not reason_fits_status(code, status):
        fitting = codes_for(policy.entity_type, status)
        raise ValidationError(
            f"reason code {code!r} does not fit status {status!r} of {policy.entity_type}; "
            f"codes that fit: {', '.join(fitting) or 'none'}"
        )


def _entity_statuses(domain: str) -> frozenset[str]:
    found: set[str] = set()
    for policy in POLICIES.values():
        if domain in policy.reason_domains:
            found |= policy.statuses
    return frozenset(found)


def _check_registry() -> None:
    for code in VALID_REASON_CODES:
        if code == LEGACY_IMPORTED:
            continue
        if not _is_code_shape(code) or reason_domain(code) not in REASON_DOMAINS:
            raise AssertionError(f"malformed registered reason code {code!r}")
        # A code no status of its entities can carry could never be written: say so now.
        if not any(reason_fits_status(code, s) for s in _entity_statuses(reason_domain(code))):
            raise AssertionError(
                f"reason code {code!r} fits no status of its entity types; name a status "
                "in its middle segment or list its statuses in reasons._STATUSES"
            )
    for code in RETRYABLE_RUN_REASONS - VALID_REASON_CODES:
        raise AssertionError(f"reasons.RETRYABLE_RUN_REASONS names unregistered code {code!r}")
    for code in _STATUSES:
        if code not in VALID_REASON_CODES:
            raise AssertionError(f"reasons._STATUSES names unregistered code {code!r}")


_check_registry()


_CREATION_REASONS = {
    ("session", "running"): "run.running.started",
    ("invocation", "running"): "run.running.started",
    ("schedule_run", "queued"): "schedule.queued.created",
    ("show", "active"): "show.active.created",
    ("play", "pending"): "play.pending.created",
    ("team", "active"): "team.active.created",
    ("schedule", "enabled"): "schedule_definition.enabled.created",
    ("schedule", "disabled"): "schedule_definition.disabled.created",
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
    """Base teardown reason for an in-memory execution status (design.md §5), no exception."""
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
