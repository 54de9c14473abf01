"""``decide_outcome``: the teardown decision as a pure function of facts (ADR D4, DESIGN §5).

The order of the steps is part of the contract (it decides which reason scripts see):

3. base status and reason from the in-memory status, exception, signal and exit code;
5. linked-engine reconciliation (failed + exactly ``ProviderError`` + an engine uid), with
   evidence of this execution only: another execution's row never lends its verdict;
6. artifact verification: a missing required file fails an otherwise completed run and is
   only recorded in metadata when an earlier, more specific outcome already stands;
7. completion-evidence gate (still completed, no artifact file produced): a reply, or a
   change since the run's start snapshot (docs/outcome.md has the table of cases);
8. escalation (demotes only an otherwise completed outcome).

Each step is ``(Outcome, OutcomeFacts) -> Outcome``. A step that changes the reason puts
its own evidence first and keeps the earlier evidence after it. Nothing here does I/O:
``teardown`` gathers the facts (and fetches only those the decision needs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from lirun.hints import Any
from lirun.lifecycle import SESSION_TERMINAL_STATUSES
from lirun.provider_errors import FAILURE_CLASSES, ProviderError, find_provider_error
from lirun.reasons import describe, is_registered, reason_domain, resolve_run_reason
from lirun.record.artifacts import describe_problem
from lirun.values import dataclass, field, replace

__all__ = [
    "STEPS",
    "Outcome",
    "OutcomeFacts",
    "decide_outcome",
    "find_provider_error",
    "gate_applies",
    "linked_row_refusal",
    "needs_change_check",
    "needs_linked_engine",
    "outcome_before_gate",
]

_MAX_MESSAGE = 500


@dataclass(frozen=True, slots=True)
class OutcomeFacts:
    """Everything teardown knows about one execution when it ends.

    ``completion_evidence`` None means "not checked"; ``linked_row`` None means "no linked
    engine row was found" (the caller fetched it only when ``needs_linked_engine``).
    ``start_snapshot``: the cwd when the run started (``take_start_snapshot``), which the
    completion evidence was measured against; ``started_at``: when this execution began.
    ``tool_calls`` / ``permission_denials``: an agent's own counts from its stream (None
    for a command); ``require_change``: a reply alone is not evidence of work.
    """

    status: str = "completed"
    exception: BaseException | None = None
    signal_name: str | None = None
    cancel_cause: str | None = None
    exit_code: int | None = None
    idle_timeout: bool = False
    verification: Mapping[str, Any] | None = None
    completion_evidence: Mapping[str, Any] | None = None
    has_assistant_output: bool = False
    linked_row: Mapping[str, Any] | None = None
    escalated_evidence: Sequence[Mapping[str, Any]] = ()
    engine_session_uid: str | None = None
    extra_evidence: Sequence[Mapping[str, Any]] = ()
    extra_metadata: Mapping[str, Any] = field(default_factory=dict)
    # What the provider was doing when li stopped it ("... retried the API 7 times").
    summary_note: str | None = None
    # li's timer fired while the provider was retrying an API call.
    provider_retrying: bool = False
    start_snapshot: Mapping[str, Any] | None = None
    started_at: float | None = None
    tool_calls: int | None = None
    permission_denials: int | None = None
    require_change: bool = False


@dataclass(frozen=True, slots=True)
class Outcome:
    """What teardown writes: status, reason code, summary, evidence and transition metadata."""

    status: str
    reason_code: str
    summary: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


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


def _linked_reason(row: Mapping[str, Any], status: str) -> str:
    code = row.get("status_reason_code")
    if (
        isinstance(code, str)
        and is_registered(code)
        and reason_domain(code) in ("run", "session")
        and code.split(".")[1] != "running"
    ):
        return code
    fallback = f"run.{status}.linked_engine"
    return fallback if is_registered(fallback) else resolve_run_reason(status)


def linked_row_refusal(row: Mapping[str, Any], started_at: float | None) -> str | None:
    """Why ``row`` is not this execution's own engine evidence (None: it may be used).

    Every execution row has a run directory; a row with one is another execution (an
    earlier leg of the branch, a concurrent resume) whose verdict is not ours. An engine
    mirror created before this execution started speaks of an earlier turn.
    """
    if row.get("run_dir"):
        return "another execution's record"
    created = row.get("created_at")
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
            metadata["linked_session_ignored"] = {"id": row.get("id"), "why": refusal}
        return replace(outcome, metadata=metadata)
    status = str(row.get("status"))
    pointer = {
        "kind": "linked_session",
        "id": row.get("id"),
        "status": status,
        "engine_session_uid": facts.engine_session_uid,
    }
    metadata = {**outcome.metadata, "linked_session": {"id": row.get("id"), "status": status}}
    if status in SESSION_TERMINAL_STATUSES:
        theirs = row.get("status_evidence_refs")
        theirs_list = [dict(e) for e in theirs if isinstance(e, Mapping)] if theirs else []
        summary = f"linked engine session {row.get('id')} {status}"
        if row.get("status_reason_summary"):
            summary += f": {row['status_reason_summary']}"
        return Outcome(
            status, _linked_reason(row, status), summary, [pointer, *theirs_list], metadata
        )
    if status == "running":
        summary = f"linked engine session {row.get('id')} is still running"
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
    if result.get("status") != "failed" or outcome.status != "completed":
        return replace(outcome, metadata=metadata)
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
    return Outcome(
        "failed", "run.failed.missing_artifact", summary, [*evidence, *outcome.evidence], metadata
    )


# --- step 7: completion evidence -----------------------------------------------------------


def _produced_any(facts: OutcomeFacts) -> bool:
    return bool(facts.verification and facts.verification.get("produced"))


def _change_seen(evidence: Mapping[str, Any] | None) -> bool | None:
    """True / False: a change was / was not seen in the cwd; None: no opinion."""
    if evidence is None or not evidence.get("checked"):
        return None
    if evidence.get("since_start"):
        changed = evidence.get("changed")
        return None if changed is None else bool(changed)
    # No start snapshot (a library caller without a cwd at setup): the ADR's rule.
    return bool(evidence.get("ahead_of_base") or evidence.get("dirty"))


def _work_evidence(evidence: Mapping[str, Any]) -> dict[str, Any]:
    entry = {
        "kind": "cwd" if evidence.get("scope") == "dir" else "git",
        "dirty": evidence.get("dirty"),
        "commits_ahead": evidence.get("commits_ahead"),
        "base_ref": evidence.get("base_ref"),
        "label": evidence.get("reason", ""),
    }
    if evidence.get("since_start"):
        keys = (
            "changed",
            "commits_since_start",
            "tree_changed",
            "capped",
            "head_at_start",
            "head",
            "branch_at_start",
            "branch",
        )
        entry.update({k: evidence.get(k) for k in keys if k in evidence})
    return entry


def _reply_counts(facts: OutcomeFacts) -> bool:
    return facts.has_assistant_output and not facts.require_change


def _all_denied(facts: OutcomeFacts) -> bool:
    denied = facts.permission_denials or 0
    return facts.tool_calls is not None and denied > 0 and denied >= facts.tool_calls


def _agent_did_nothing(facts: OutcomeFacts, change: bool | None) -> str | None:
    """The reason when an agent's own stream shows it did nothing and no change was seen.

    An agent acts through tool calls: with every call denied, or none and no reply, it
    cannot have done the work, even when the cwd could not be compared.
    """
    if change or facts.tool_calls is None:
        return None
    if _all_denied(facts):
        return "run.completed_empty.permission_denied"
    if facts.tool_calls == 0 and not facts.has_assistant_output:
        return "run.completed_empty.no_activity"
    return None


def needs_change_check(facts: OutcomeFacts) -> bool:
    """Whether step 7 needs the cwd compared with the start snapshot (the caller's I/O)."""
    return gate_applies(facts) and (not _reply_counts(facts) or _all_denied(facts))


def _empty_detail(reason: str, facts: OutcomeFacts, evidence: Mapping[str, Any] | None) -> str:
    cwd = str(evidence.get("reason", "")) if evidence else "cwd not checked"
    if reason == "run.completed_empty.permission_denied":
        return f"{facts.permission_denials} of {facts.tool_calls} tool call(s) denied; {cwd}"
    if reason == "run.completed_empty.no_activity":
        return f"no tool call, no reply; {cwd}"
    return cwd


def _completed_empty(
    reason: str, outcome: Outcome, facts: OutcomeFacts, metadata: dict[str, Any]
) -> Outcome:
    checked = facts.completion_evidence
    evidence: list[dict[str, Any]] = []
    if checked is not None and checked.get("checked"):
        evidence.append(_work_evidence(checked))
    if facts.tool_calls is not None:
        evidence.append(
            {
                "kind": "agent_activity",
                "tool_calls": facts.tool_calls,
                "permission_denials": facts.permission_denials or 0,
                "reply": facts.has_assistant_output,
            }
        )
    detail = _empty_detail(reason, facts, checked)
    summary = f"{describe(reason)} ({detail})".replace(" ()", "")
    return Outcome("completed_empty", reason, summary, [*evidence, *outcome.evidence], metadata)


def apply_completion_gate(outcome: Outcome, facts: OutcomeFacts) -> Outcome:
    """Step 7: a completed run without a produced file needs a reply or a change since start.

    ``checked=False`` (no cwd, a failed probe, a capped fingerprint that cannot tell) is
    "no opinion": the run stays completed, but its summary says no evidence was seen.
    """
    if outcome.status != "completed" or _produced_any(facts):
        return outcome
    checked = facts.completion_evidence
    metadata = dict(outcome.metadata)
    if checked is not None:
        metadata["completion_evidence"] = dict(checked)
    if facts.start_snapshot is not None:
        metadata["start_snapshot"] = dict(facts.start_snapshot)
    change = _change_seen(checked)
    empty = _agent_did_nothing(facts, change)
    if empty is not None:
        return _completed_empty(empty, outcome, facts, metadata)
    found: list[dict[str, Any]] = []
    if _reply_counts(facts):
        found.append({"kind": "assistant_output", "label": "non-empty assistant message"})
    if change and checked is not None:
        found.append(_work_evidence(checked))
    if found:
        seen = "; ".join(str(e["label"]) for e in found)
        summary = f"completed: {seen}" if outcome.reason_code == "run.completed.ok" else None
        return replace(
            outcome,
            summary=summary or outcome.summary,
            evidence=[*outcome.evidence, *found],
            metadata=metadata,
        )
    if change is None:
        cause = str(checked.get("reason", "")) if checked is not None else "not checked"
        summary = f"completed; no evidence of work was seen (cwd: {cause or 'not checked'})"
        return replace(outcome, summary=summary, metadata=metadata)
    return _completed_empty("run.completed_empty.no_evidence", outcome, facts, metadata)


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
    return outcome_before_gate(facts).status == "completed" and not _produced_any(facts)


def decide_outcome(facts: OutcomeFacts) -> Outcome:
    """ADR D4 steps 3 and 5-8 in their fixed order; the extras close the evidence list."""
    outcome = _run_steps(facts, STEPS)
    metadata = {**facts.extra_metadata, **outcome.metadata}
    if facts.engine_session_uid:
        metadata["engine_session_uid"] = facts.engine_session_uid
    evidence = [*outcome.evidence, *(dict(e) for e in facts.extra_evidence)]
    return replace(outcome, evidence=evidence, metadata=metadata)
