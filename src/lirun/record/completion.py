"""Step 7 of the teardown decision: the completion-evidence gate (docs/outcome.md).

A run still ``completed`` with no declared artifact produced must show evidence of work:
an agent's reply, or a change in the cwd since the run's start snapshot; an agent whose
own stream shows it did nothing is ``completed_empty`` even when the cwd cannot tell. A
command (``OutcomeFacts.command``) that exited 0 is completed by its exit code, unless
it asked for evidence of work (``require_change``, declared artifacts): then only a
change or a produced artifact counts, never its stdout. Pure: the facts come in whole.

Whichever evidence the gate needed, ``note_work`` (the last step) records every kind the
facts hold: the reply, and what the cwd's comparison saw (a change or none, with the
commits' ids and the files changed), so a record tells work from talk (``record.work``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from lirun.reasons import describe
from lirun.record.outcome_types import Outcome, OutcomeFacts
from lirun.record.work import describe_work

__all__ = [
    "COMMAND_EXITED_0",
    "apply_completion_gate",
    "exit_code_decides",
    "note_work",
    "produced_any",
    "wants_change_check",
]

COMMAND_EXITED_0 = "command exited 0"
REPLY = "non-empty assistant message"


def produced_any(facts: OutcomeFacts) -> bool:
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
            "commit_ids",
            "files_changed",
        )
        entry.update({k: evidence.get(k) for k in keys if k in evidence})
    return entry


def _reply_entry(counted: bool) -> dict[str, Any]:
    """The agent replied; ``counted``: the gate took the reply as evidence of work."""
    label = REPLY if counted else f"{REPLY} (not counted as work)"
    return {"kind": "assistant_output", "label": label, "counted": counted}


def _reply_counts(facts: OutcomeFacts) -> bool:
    """A reply is evidence of work for an agent; a command's stdout is output, never."""
    return facts.has_assistant_output and not facts.require_change and not facts.command


def _declared_artifacts(facts: OutcomeFacts) -> bool:
    """The run declared at least one artifact (produced or not): it asked for evidence."""
    result = facts.verification or {}
    return any(result.get(key) for key in ("produced", "missing_required", "missing_optional"))


def exit_code_decides(facts: OutcomeFacts) -> bool:
    """A command's exit code 0 is its verdict unless it asked for evidence of work
    (``require_change``, declared artifacts): then the gate applies as to an agent. A
    command with no exit code known gets the gate too (nothing says it exited 0)."""
    return (
        facts.command
        and facts.exit_code == 0
        and not facts.require_change
        and not _declared_artifacts(facts)
    )


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


def wants_change_check(facts: OutcomeFacts) -> bool:
    """Whether step 7, once it applies (``outcome.gate_applies``), reads the cwd's change."""
    if exit_code_decides(facts):
        return False
    return not _reply_counts(facts) or _all_denied(facts)


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


def _exit_code_verdict(outcome: Outcome) -> Outcome:
    """A command that exited 0 and asked for no evidence of work: completed, its exit
    code the evidence (labelled as the verdict, so a reader can tell it from a change)."""
    evidence = [
        {**e, "label": COMMAND_EXITED_0} if e.get("kind") == "exit_code" else e
        for e in outcome.evidence
    ]
    summary = outcome.summary
    if outcome.reason_code == "run.completed.ok":
        summary = f"completed: {COMMAND_EXITED_0}"
    return replace(outcome, summary=summary, evidence=evidence)


def apply_completion_gate(outcome: Outcome, facts: OutcomeFacts) -> Outcome:
    """Step 7: a completed run without a produced file needs a reply or a change since start.

    A command that exited 0 needs neither (its exit code is the verdict) unless it asked
    for evidence of work; then only a change or a produced file counts, never its stdout.

    ``checked=False`` (no cwd, a failed probe, a capped fingerprint that cannot tell) is
    "no opinion": the run stays completed, but its summary says no evidence was seen.
    """
    if outcome.status != "completed" or produced_any(facts):
        return outcome
    if exit_code_decides(facts):
        return _exit_code_verdict(outcome)
    checked = facts.completion_evidence
    metadata = dict(outcome.metadata)
    if checked is not None:
        metadata["completion_evidence"] = dict(checked)
    if facts.start_snapshot is not None:
        # the per-file content ids are teardown's working data, not the record's
        metadata["start_snapshot"] = {
            k: v for k, v in facts.start_snapshot.items() if k != "dirty_at_start"
        }
    change = _change_seen(checked)
    empty = _agent_did_nothing(facts, change)
    if empty is not None:
        return _completed_empty(empty, outcome, facts, metadata)
    found: list[dict[str, Any]] = []
    if _reply_counts(facts):
        found.append(_reply_entry(True))
    if change and checked is not None:
        found.append(_work_evidence(checked))
    if found:
        seen = describe_work(found).summary
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


def note_work(outcome: Outcome, facts: OutcomeFacts) -> Outcome:
    """The last step: every kind of evidence of work the facts hold is recorded, whichever
    the gate needed (or none: a command's exit code, a produced artifact, a failure).

    An agent's reply the gate did not count, and the cwd's comparison when it ran and no
    entry of it is there yet (no change seen, or a run the gate never judged), are added
    after the others. The status and reason never change here.
    """
    kinds = {e.get("kind") for e in outcome.evidence}
    added: list[dict[str, Any]] = []
    if facts.has_assistant_output and not facts.command and "assistant_output" not in kinds:
        added.append(_reply_entry(False))
    checked = facts.completion_evidence
    if checked is not None and checked.get("checked") and not kinds & {"git", "cwd"}:
        added.append(_work_evidence(checked))
    if not added:
        return outcome
    metadata = dict(outcome.metadata)
    if checked is not None:
        metadata.setdefault("completion_evidence", dict(checked))
    return replace(outcome, evidence=[*outcome.evidence, *added], metadata=metadata)
