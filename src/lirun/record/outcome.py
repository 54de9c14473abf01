"""``decide_outcome``: the teardown decision as a pure function of facts (design.md D4, §5).

The order of the steps is part of the contract (it decides which reason scripts see):

3. base status and reason from the in-memory status, exception, signal and exit code;
5. linked-engine reconciliation (failed + exactly ``ProviderError`` + an engine uid), with
   evidence of this execution only: another execution's row never lends its verdict;
6. artifact verification: a missing required file fails an otherwise completed run and is
   only recorded in metadata when an earlier, more specific outcome already stands;
7. completion-evidence gate (``completion.py``; still completed, no artifact file
   produced): a reply, or a change since the run's start snapshot; a command that
   exited 0 is completed by its exit code unless it asked for evidence of work
   (``require_change``, declared artifacts), and its stdout never counts (docs/outcome.md);
8. escalation (demotes only an otherwise completed outcome).

Each step is ``(Outcome, OutcomeFacts) -> Outcome``. A step that changes the reason puts
its own evidence first and keeps the earlier evidence after it. Nothing here does I/O:
``teardown`` gathers the facts (and fetches only those the decision needs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from lirun.lifecycle import SESSION_TERMINAL_STATUSES
from lirun.provider_errors import FAILURE_CLASSES, ProviderError, find_provider_error
from lirun.reasons import describe, is_registered, reason_domain, resolve_run_reason
from lirun.record.artifacts import describe_problem
from lirun.record.completion import (
    COMMAND_EXITED_0,
    apply_completion_gate,
    exit_code_decides,
    note_work,
    produced_any,
    wants_change_check,
)
from lirun.record.outcome_types import Outcome, OutcomeFacts
from lirun.store.rows import SessionRow

__all__ = [
    "COMMAND_EXITED_0",
    "STEPS",
    "Outcome",
    "OutcomeFacts",
    "decide_outcome",
    "exit_code_decides",
    "find_provider_error",
    "gate_applies",
    "linked_row_refusal",
    "needs_change_check",
    "needs_linked_engine",
    "outcome_before_gate",
]

_MAX_MESSAGE = 500


# --- step 3: base reason ------------------------------------------------------------------


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


def _message(exc: BaseException) -> str:
    return str(exc)[:_MAX_MESSAGE]


def _failed_base(facts: OutcomeFacts) -> Outcome:
    provider_error = find_provider_error(facts.exception)
    if provider_error is not None:
        kind = "retryable" if provider_error.retryable else "nonretryable"
        evidence = {
            "kind": "provider_error",
            "provider": provider_error.provider,
            "retryable": bool(provider_error.retryable),
            "type": _type_name(provider_error),
            "message": _message(provider_error),
        }
        known = FAILURE_CLASSES.get(provider_error.failure_class or "")
        if known is not None:
            evidence["class"] = known.name
            summary = f"{provider_error.provider}: {describe(known.reason_code)}: "
            return Outcome(
                "failed", known.reason_code, summary + _message(provider_error), [evidence]
            )
        summary = f"{provider_error.provider} provider error ({kind}): {_message(provider_error)}"
        return Outcome("failed", f"run.failed.provider_{kind}", summary, [evidence])
    if facts.exit_code not in (None, 0):
        return Outcome(
            "failed", "run.failed.exit_nonzero", f"command exited with code {facts.exit_code}"
        )
    if facts.exception is not None:
        exc = facts.exception
        evidence = {"kind": "exception", "type": _type_name(exc), "message": _message(exc)}
        summary = f"{_type_name(exc)}: {_message(exc)}".rstrip(": ")
        return Outcome("failed", "run.failed.exception", summary, [evidence])
    return Outcome("failed", "run.failed.exception", describe("run.failed.exception"))


def _base_reason(status: str, facts: OutcomeFacts) -> str:
    if status == "timed_out" and facts.provider_retrying:
        return "run.timed_out.provider_retrying"
    if status == "timed_out" and facts.idle_timeout:
        return "run.timed_out.idle"
    if status == "cancelled" and facts.signal_name == "SIGINT":
        return "run.cancelled.sigint"
    return resolve_run_reason(status, signal_name=facts.signal_name)


def base_outcome(facts: OutcomeFacts) -> Outcome:
    """Step 3. An in-memory status outside the terminal vocabulary is treated as failed."""
    status = facts.status if facts.status in SESSION_TERMINAL_STATUSES else "failed"
    if status == "failed":
        outcome = _failed_base(facts)
    else:
        reason = _base_reason(status, facts)
        summary = describe(reason)
        if status in ("cancelled", "aborted") and facts.cancel_cause:
            summary = f"{summary}: {facts.cancel_cause}"
        if facts.summary_note:
            summary = f"{summary}: {facts.summary_note}"
        outcome = Outcome(status, reason, summary)
    evidence = list(outcome.evidence)
    if facts.signal_name:
        evidence.append({"kind": "signal", "signal": facts.signal_name})
    if facts.exit_code is not None:
        evidence.append({"kind": "exit_code", "exit_code": facts.exit_code})
    metadata: dict[str, Any] = {"in_memory_status": facts.status}
    if facts.cancel_cause:
        metadata["cancel_cause"] = facts.cancel_cause
    return replace(outcome, evidence=evidence, metadata=metadata)


# --- step 5: linked engine ------------------------------------------------------------------


def needs_linked_engine(facts: OutcomeFacts) -> bool:
    """The narrow case: failed, exception of exactly ProviderError (unclassified), a uid."""
    return (
        base_outcome(facts).status == "failed"
        and type(facts.exception) is ProviderError
        and bool(facts.engine_session_uid)
    )


def _linked_reason(row: SessionRow, status: str) -> str:
    code = row.status_reason_code
    if (
        isinstance(code, str)
        and is_registered(code)
        and reason_domain(code) in ("run", "session")
        and code.split(".")[1] != "running"
    ):
        return code
    fallback = f"run.{status}.linked_engine"
    return fallback if is_registered(fallback) else resolve_run_reason(status)


def linked_row_refusal(row: SessionRow, started_at: float | None) -> str | None:
    """Why ``row`` is not this execution's own engine evidence (None: it may be used).

    Every execution row has a run directory; a row with one is another execution (an
    earlier leg of the branch, a concurrent resume) whose verdict is not ours. An engine
    mirror created before this execution started speaks of an earlier turn.
    """
    if row.run_dir:
        return "another execution's record"
    created = row.created_at
    if started_at is not None and isinstance(created, int | float) and created < started_at:
        return "created before this execution started"
    return None


def reconcile_linked_engine(outcome: Outcome, facts: OutcomeFacts) -> Outcome:
    """Step 5: a terminal linked row wins; a running one suppresses the phantom failure.

    Only a row that is this execution's own engine evidence counts (``linked_row_refusal``);
    a leg with no terminal event otherwise stays a provider failure.
    """
    if not (outcome.status == "failed" and needs_linked_engine(facts)):
        return outcome
    row = facts.linked_row
    refusal = None if row is None else linked_row_refusal(row, facts.started_at)
    if row is None or refusal is not None:
        metadata: dict[str, Any] = {**outcome.metadata, "linked_session": None}
        if row is not None:
            metadata["linked_session_ignored"] = {"id": row.id, "why": refusal}
        return replace(outcome, metadata=metadata)
    status = row.status
    pointer = {
        "kind": "linked_session",
        "id": row.id,
        "status": status,
        "engine_session_uid": facts.engine_session_uid,
    }
    metadata = {**outcome.metadata, "linked_session": {"id": row.id, "status": status}}
    if status in SESSION_TERMINAL_STATUSES:
        theirs = row.status_evidence_refs
        theirs_list = [dict(e) for e in theirs if isinstance(e, Mapping)] if theirs else []
        summary = f"linked engine session {row.id} {status}"
        if row.status_reason_summary:
            summary += f": {row.status_reason_summary}"
        return Outcome(
            status, _linked_reason(row, status), summary, [pointer, *theirs_list], metadata
        )
    if status == "running":
        summary = f"linked engine session {row.id} is still running"
        evidence = [pointer, *outcome.evidence]
        return Outcome("running", "run.running.linked_engine", summary, evidence, metadata)
    return replace(outcome, metadata=metadata)


# --- step 6: artifacts ----------------------------------------------------------------------


def _ids(entries: object) -> list[str]:
    return [str(e.get("id")) for e in entries or () if isinstance(e, Mapping)]  # type: ignore[attr-defined]


def apply_artifact_verification(outcome: Outcome, facts: OutcomeFacts) -> Outcome:
    """Step 6: required misses fail a completed run; otherwise they are metadata only."""
    result = facts.verification
    if result is None:
        return outcome
    metadata = {**outcome.metadata, "artifact_verification_status": result.get("status")}
    missing = [e for e in result.get("missing_required") or () if isinstance(e, Mapping)]
    if missing:
        metadata["missing_required_artifact_ids"] = _ids(missing)
    if result.get("missing_optional"):
        metadata["missing_optional_artifact_ids"] = _ids(result.get("missing_optional"))
    invalid = [e for e in result.get("invalid") or () if isinstance(e, Mapping)]
    if invalid:
        metadata["invalid_artifact_ids"] = _ids(invalid)
    if result.get("status") != "failed" or outcome.status != "completed":
        return replace(outcome, metadata=metadata)
    if not missing:
        return _invalid_outcome(outcome, invalid, metadata)
    # The label says what is there instead (artifacts.ARTIFACT_PROBLEMS): an empty file or
    # a directory is not reported as absent.
    evidence = [
        {
            "kind": "artifact",
            "id": e.get("id"),
            "path": e.get("path"),
            "label": e.get("problem") or "missing",
        }
        for e in missing
    ]
    if all((e.get("problem") or "missing") == "missing" for e in missing):
        summary = "required artifact(s) missing: " + ", ".join(_ids(missing))
    else:
        summary = "required artifact(s) not produced: " + ", ".join(
            f"{e.get('id')} ({describe_problem(e.get('problem'))})" for e in missing
        )
    # A required file that is there but fails a check is evidence too, after the misses.
    checked = _invalid_evidence([e for e in invalid if e.get("required", True)])
    return Outcome(
        "failed",
        "run.failed.missing_artifact",
        summary,
        [*evidence, *checked, *outcome.evidence],
        metadata,
    )


def _invalid_evidence(invalid: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One evidence entry per failed check: which artifact, which check, what was found."""
    return [
        {
            "kind": "artifact",
            "id": e.get("id"),
            "path": e.get("path"),
            "check": f.get("check"),
            "found": f.get("found"),
            "label": f"{e.get('path')}: {f.get('found')}",
        }
        for e in invalid
        for f in e.get("failures") or ()
        if isinstance(f, Mapping)
    ]


def _invalid_outcome(
    outcome: Outcome, invalid: list[Mapping[str, Any]], metadata: dict[str, Any]
) -> Outcome:
    """Every required artifact is there, but one fails a content check."""
    required = [e for e in invalid if e.get("required", True)]
    evidence = _invalid_evidence(required)
    summary = "required artifact(s) failed a check: " + "; ".join(
        f"{e['id']} {e['check']} ({e['found']})" for e in evidence
    )
    return Outcome(
        "failed",
        "run.failed.artifact_invalid",
        summary,
        [*evidence, *outcome.evidence],
        metadata,
    )


# --- step 8: escalation ---------------------------------------------------------------------


def apply_escalation(outcome: Outcome, facts: OutcomeFacts) -> Outcome:
    """Step 8: escalations demote only an otherwise completed outcome."""
    escalations = [dict(e) for e in facts.escalated_evidence]
    if not escalations:
        return outcome
    metadata = {**outcome.metadata, "escalation_count": len(escalations)}
    if outcome.status != "completed":
        return replace(outcome, metadata=metadata)
    first = escalations[0]
    label = first.get("label") or first.get("id") or first.get("kind") or ""
    summary = f"escalated: {label}" if label else "escalated"
    return Outcome(
        "failed", "run.failed.escalated", summary, [*escalations, *outcome.evidence], metadata
    )


# --- the decision ---------------------------------------------------------------------------

Step = Callable[[Outcome, OutcomeFacts], Outcome]
STEPS: tuple[Step, ...] = (
    reconcile_linked_engine,
    apply_artifact_verification,
    apply_completion_gate,
    apply_escalation,
    note_work,
)


def _run_steps(facts: OutcomeFacts, steps: Sequence[Step]) -> Outcome:
    outcome = base_outcome(facts)
    for step in steps:
        outcome = step(outcome, facts)
    return outcome


def outcome_before_gate(facts: OutcomeFacts) -> Outcome:
    """Steps 3, 5 and 6: what the completion-evidence gate would see."""
    return _run_steps(facts, STEPS[:2])


def gate_applies(facts: OutcomeFacts) -> bool:
    """Whether step 7 will look at assistant output / git evidence for these facts."""
    return outcome_before_gate(facts).status == "completed" and not produced_any(facts)


def needs_change_check(facts: OutcomeFacts) -> bool:
    """Whether step 7 needs the cwd compared with the start snapshot (the caller's I/O)."""
    return gate_applies(facts) and wants_change_check(facts)


def decide_outcome(facts: OutcomeFacts) -> Outcome:
    """design.md D4 steps 3 and 5-8 in their fixed order; the extras close the evidence list."""
    outcome = _run_steps(facts, STEPS)
    metadata = {**facts.extra_metadata, **outcome.metadata}
    if facts.engine_session_uid:
        metadata["engine_session_uid"] = facts.engine_session_uid
    evidence = [*outcome.evidence, *(dict(e) for e in facts.extra_evidence)]
    return replace(outcome, evidence=evidence, metadata=metadata)
