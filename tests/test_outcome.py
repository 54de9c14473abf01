"""The teardown decision as a table: one row per rule and per interaction between rules."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from lirun.provider_errors import (
    ProviderError,
    ProviderNonRetryableError,
    ProviderRetryableError,
)
from lirun.reasons import validate_reason
from lirun.record.outcome import (
    OutcomeFacts,
    decide_outcome,
    find_provider_error,
    gate_applies,
    linked_row_refusal,
    needs_change_check,
    needs_linked_engine,
)
from lirun.store.rows import SessionRow

# --- fact builders ----------------------------------------------------------------------------


def verification(
    *,
    failed: tuple[str, ...] = (),
    optional: tuple[str, ...] = (),
    produced: tuple[str, ...] = (),
    invalid: tuple[str, ...] = (),
    invalid_optional: tuple[str, ...] = (),
) -> dict[str, Any]:
    status = (
        "failed" if failed or invalid else "warning" if optional or invalid_optional else "passed"
    )
    result = {
        "status": status,
        "checked_at": 1.0,
        "missing_required": [{"id": i, "path": f"{i}.md", "required": True} for i in failed],
        "missing_optional": [{"id": i, "path": f"{i}.md", "required": False} for i in optional],
        "produced": [{"id": i, "path": f"{i}.md", "size": 3, "present": True} for i in produced],
    }
    bad = [(i, True) for i in invalid] + [(i, False) for i in invalid_optional]
    if bad:
        result["invalid"] = [
            {
                "id": i,
                "path": f"{i}.md",
                "size": 3,
                "required": required,
                "failures": [{"check": "min_bytes", "found": "3 bytes, fewer than min_bytes 9"}],
            }
            for i, required in bad
        ]
    return result


def git_evidence(*, dirty: bool = False, ahead: int = 0, checked: bool = True) -> dict[str, Any]:
    if not checked:
        return {
            "checked": False,
            "ahead_of_base": None,
            "commits_ahead": None,
            "dirty": None,
            "base_ref": None,
            "reason": "not a git repository",
        }
    return {
        "checked": True,
        "ahead_of_base": ahead > 0,
        "commits_ahead": ahead,
        "dirty": dirty,
        "base_ref": "main",
        "reason": f"{'dirty' if dirty else 'clean'} working tree; {ahead} commit(s) ahead of main",
    }


def since_start(
    changed: bool | None,
    *,
    commits: int | None = 0,
    dirty: bool | None = False,
    ahead: int | None = 0,
    scope: str = "git",
    capped: str | None = None,
) -> dict[str, Any]:
    """Evidence measured against a start snapshot (``check_completion_evidence(start=...)``)."""
    tree_changed = changed if not commits else False
    return {
        "checked": True,
        "ahead_of_base": None if ahead is None else ahead > 0,
        "commits_ahead": ahead,
        "dirty": dirty,
        "base_ref": "main" if scope == "git" else None,
        "reason": f"{commits} commit(s) since start",
        "since_start": True,
        "scope": scope,
        "changed": changed,
        "commits_since_start": commits,
        "tree_changed": tree_changed,
        "capped": capped,
    }


SNAPSHOT = {"checked": True, "scope": "git", "head": "abc", "branch": "main", "reason": "x"}
UNCHANGED = since_start(False)
DIRTY_BEFORE = since_start(False, dirty=True)
AHEAD_BEFORE = since_start(False, ahead=1)
COMMIT_ON_TRUNK = since_start(True, commits=1, ahead=None)
TREE_CHANGED = since_start(True, dirty=True)
DIR_UNCHANGED = since_start(False, commits=None, dirty=None, ahead=None, scope="dir")
DIR_CHANGED = since_start(True, commits=None, dirty=None, ahead=None, scope="dir")
CAPPED = since_start(None, capped="stopped at 20000 files")
NO_START = {**git_evidence(checked=False), "reason": "no start snapshot (git timed out)"}
DENIED_ALL = {"tool_calls": 1, "permission_denials": 1}
CLEAN = git_evidence()
DIRTY = git_evidence(dirty=True)
AHEAD = git_evidence(ahead=2)
NO_OPINION = git_evidence(checked=False)
ESCALATION = ({"kind": "escalation", "id": "esc-1", "label": "needs a human"},)


def unclassified() -> ProviderError:
    return ProviderError("stream ended without a terminal event", provider="claude")


def retryable() -> ProviderRetryableError:
    return ProviderRetryableError("429 rate limited", provider="claude")


def nonretryable() -> ProviderNonRetryableError:
    return ProviderNonRetryableError("prompt too long", provider="codex")


def caused_by(inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as outer:
        return outer


def in_context_of(inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException:
            raise KeyError("raised while handling")  # noqa: B904 - the implicit context is the point
    except KeyError as outer:
        return outer


def session_row(**given: Any) -> SessionRow:
    """A ``sessions`` row with ``given`` columns, every other one NULL."""
    return SessionRow.from_row({**dict.fromkeys(SessionRow._fields), **given})


def linked(status: str, reason: str | None = None, **more: Any) -> SessionRow:
    given = {
        "id": "engine-row",
        "status": status,
        "status_reason_code": reason,
        "status_reason_summary": more.pop("summary", ""),
        "status_evidence_refs": more.pop("evidence", None),
    }
    return session_row(**{**given, **more})


def execution(status: str, reason: str | None = None, **more: Any) -> SessionRow:
    """Another execution of the same conversation: it has a run directory of its own."""
    return linked(status, reason, id="R1", run_dir="/runs/R1", **more)


LINKED = {"exception": unclassified(), "engine_session_uid": "uid-1"}


@dataclass(frozen=True)
class Row:
    id: str
    facts: OutcomeFacts
    status: str
    reason: str
    kinds: tuple[str, ...] | None = None  # evidence kinds, in order
    metadata: Mapping[str, Any] = field(default_factory=dict)  # subset that must be present


def F(**kw: Any) -> OutcomeFacts:
    return OutcomeFacts(**kw)


def CMD(**kw: Any) -> OutcomeFacts:
    """A command (``li run``, a command leg, a gate) that exited 0 unless ``kw`` says so."""
    return OutcomeFacts(**{"command": True, "exit_code": 0, **kw})


ROWS: list[Row] = [
    # step 3: base reason (design.md §5)
    Row("completed", F(), "completed", "run.completed.ok", ()),
    Row(
        "completed_empty",
        F(status="completed_empty"),
        "completed_empty",
        "run.completed_empty.no_evidence",
    ),
    Row("timed_out", F(status="timed_out"), "timed_out", "run.timed_out.deadline"),
    Row(
        "timed_out idle",
        F(status="timed_out", idle_timeout=True),
        "timed_out",
        "run.timed_out.idle",
    ),
    Row(
        "aborted",
        F(status="aborted", signal_name="SIGINT"),
        "aborted",
        "run.cancelled.sigint",
        ("signal",),
    ),
    Row(
        "cancelled sigterm",
        F(status="cancelled", signal_name="SIGTERM"),
        "cancelled",
        "run.cancelled.sigterm",
        ("signal",),
    ),
    Row(
        "cancelled sigint",
        F(status="cancelled", signal_name="SIGINT"),
        "cancelled",
        "run.cancelled.sigint",
    ),
    Row(
        "cancelled other",
        F(status="cancelled", cancel_cause="parent shut down"),
        "cancelled",
        "run.cancelled.system",
        (),
        {"cancel_cause": "parent shut down"},
    ),
    Row(
        "failed exception",
        F(status="failed", exception=ValueError("boom")),
        "failed",
        "run.failed.exception",
        ("exception",),
    ),
    Row("failed bare", F(status="failed"), "failed", "run.failed.exception", ()),
    Row(
        "failed retryable",
        F(status="failed", exception=retryable()),
        "failed",
        "run.failed.provider_retryable",
        ("provider_error",),
    ),
    Row(
        "failed nonretryable",
        F(status="failed", exception=nonretryable()),
        "failed",
        "run.failed.provider_nonretryable",
        ("provider_error",),
    ),
    Row(
        "failed base ProviderError retryable",
        F(status="failed", exception=ProviderError("x", provider="claude", retryable=True)),
        "failed",
        "run.failed.provider_retryable",
    ),
    Row(
        "provider error as __cause__",
        F(status="failed", exception=caused_by(retryable())),
        "failed",
        "run.failed.provider_retryable",
    ),
    Row(
        "provider error as __context__",
        F(status="failed", exception=in_context_of(nonretryable())),
        "failed",
        "run.failed.provider_nonretryable",
    ),
    Row(
        "provider error in a group",
        F(status="failed", exception=ExceptionGroup("g", [ValueError(), retryable()])),
        "failed",
        "run.failed.provider_retryable",
    ),
    Row(
        "exit nonzero",
        F(status="failed", exit_code=3),
        "failed",
        "run.failed.exit_nonzero",
        ("exit_code",),
    ),
    Row(
        "exit zero but failed",
        F(status="failed", exit_code=0),
        "failed",
        "run.failed.exception",
        ("exit_code",),
    ),
    Row(
        "provider beats exit code",
        F(status="failed", exception=nonretryable(), exit_code=2),
        "failed",
        "run.failed.provider_nonretryable",
        ("provider_error", "exit_code"),
    ),
    Row(
        "timed out keeps exit code",
        F(status="timed_out", exit_code=-15),
        "timed_out",
        "run.timed_out.deadline",
        ("exit_code",),
    ),
    Row(
        "unknown status is a failure",
        F(status="running"),
        "failed",
        "run.failed.exception",
        (),
        {"in_memory_status": "running"},
    ),
    # step 6: artifacts
    Row(
        "completed + missing required",
        F(verification=verification(failed=("report",))),
        "failed",
        "run.failed.missing_artifact",
        ("artifact",),
        {"artifact_verification_status": "failed", "missing_required_artifact_ids": ["report"]},
    ),
    Row(
        "completed + required fails a check",
        F(verification=verification(invalid=("report",))),
        "failed",
        "run.failed.artifact_invalid",
        ("artifact",),
        {"artifact_verification_status": "failed", "invalid_artifact_ids": ["report"]},
    ),
    Row(
        "completed + one missing, one fails a check: missing wins, both are evidence",
        F(verification=verification(failed=("a",), invalid=("b",))),
        "failed",
        "run.failed.missing_artifact",
        ("artifact", "artifact"),
        {"missing_required_artifact_ids": ["a"], "invalid_artifact_ids": ["b"]},
    ),
    Row(
        "timed_out + required fails a check",
        F(status="timed_out", verification=verification(invalid=("a",))),
        "timed_out",
        "run.timed_out.deadline",
        (),
        {"invalid_artifact_ids": ["a"]},
    ),
    Row(
        "optional fails a check + produced",
        F(
            verification=verification(invalid_optional=("notes",), produced=("report",)),
            completion_evidence=CLEAN,
        ),
        "completed",
        "run.completed.ok",
        ("git",),
        {"artifact_verification_status": "warning", "invalid_artifact_ids": ["notes"]},
    ),
    Row(
        "failed + missing required",
        F(
            status="failed",
            exception=ValueError("x"),
            verification=verification(failed=("report",)),
        ),
        "failed",
        "run.failed.exception",
        ("exception",),
        {"artifact_verification_status": "failed", "missing_required_artifact_ids": ["report"]},
    ),
    Row(
        "timed_out + missing required",
        F(status="timed_out", verification=verification(failed=("a", "b"))),
        "timed_out",
        "run.timed_out.deadline",
        (),
        {"missing_required_artifact_ids": ["a", "b"]},
    ),
    Row(
        "aborted + missing required",
        F(status="aborted", verification=verification(failed=("a",))),
        "aborted",
        "run.cancelled.sigint",
        (),
        {"artifact_verification_status": "failed"},
    ),
    Row(
        "cancelled + missing required",
        F(status="cancelled", signal_name="SIGTERM", verification=verification(failed=("a",))),
        "cancelled",
        "run.cancelled.sigterm",
        ("signal",),
        {"missing_required_artifact_ids": ["a"]},
    ),
    Row(
        "provider failure + missing required",
        F(status="failed", exception=retryable(), verification=verification(failed=("a",))),
        "failed",
        "run.failed.provider_retryable",
        ("provider_error",),
        {"missing_required_artifact_ids": ["a"]},
    ),
    Row(
        "optional missing + produced",
        F(
            verification=verification(optional=("notes",), produced=("report",)),
            completion_evidence=CLEAN,
        ),
        "completed",
        "run.completed.ok",
        ("git",),
        {"artifact_verification_status": "warning", "missing_optional_artifact_ids": ["notes"]},
    ),
    Row(
        "optional missing + no evidence",
        F(verification=verification(optional=("notes",)), completion_evidence=CLEAN),
        "completed_empty",
        "run.completed_empty.no_evidence",
        ("git",),
        {"artifact_verification_status": "warning"},
    ),
    Row(
        "missing required + no evidence",
        F(verification=verification(failed=("r",)), completion_evidence=CLEAN),
        "failed",
        "run.failed.missing_artifact",
        ("artifact", "git"),
    ),
    Row(
        "produced file skips the gate",
        F(verification=verification(produced=("r",)), completion_evidence=CLEAN),
        "completed",
        "run.completed.ok",
        ("git",),
    ),
    Row(
        "empty contract, nothing produced, clean",
        F(verification=verification(), completion_evidence=CLEAN),
        "completed_empty",
        "run.completed_empty.no_evidence",
        ("git",),
        {"artifact_verification_status": "passed"},
    ),
    # step 7: completion evidence
    Row(
        "assistant output keeps completed",
        F(has_assistant_output=True, completion_evidence=CLEAN),
        "completed",
        "run.completed.ok",
        ("assistant_output", "git"),
    ),
    Row(
        "dirty tree keeps completed",
        F(completion_evidence=DIRTY),
        "completed",
        "run.completed.ok",
        ("git",),
        {"completion_evidence": DIRTY},
    ),
    Row(
        "commits ahead keep completed",
        F(completion_evidence=AHEAD),
        "completed",
        "run.completed.ok",
        ("git",),
    ),
    Row(
        "clean and silent is empty",
        F(completion_evidence=CLEAN),
        "completed_empty",
        "run.completed_empty.no_evidence",
        ("git",),
        {"completion_evidence": CLEAN},
    ),
    Row(
        "checked=False never demotes",
        F(completion_evidence=NO_OPINION),
        "completed",
        "run.completed.ok",
        (),
        {"completion_evidence": NO_OPINION},
    ),
    Row("not checked never demotes", F(), "completed", "run.completed.ok", ()),
    Row(
        "gate never promotes completed_empty",
        F(status="completed_empty", has_assistant_output=True),
        "completed_empty",
        "run.completed_empty.no_evidence",
    ),
    Row(
        "gate ignores failures",
        F(status="failed", completion_evidence=CLEAN),
        "failed",
        "run.failed.exception",
    ),
    # step 8: escalation
    Row(
        "escalation demotes completed",
        F(has_assistant_output=True, escalated_evidence=ESCALATION),
        "failed",
        "run.failed.escalated",
        ("escalation", "assistant_output"),
        {"escalation_count": 1},
    ),
    Row(
        "escalation after artifact failure",
        F(verification=verification(failed=("r",)), escalated_evidence=ESCALATION),
        "failed",
        "run.failed.missing_artifact",
        ("artifact",),
        {"escalation_count": 1},
    ),
    Row(
        "escalation after empty",
        F(completion_evidence=CLEAN, escalated_evidence=ESCALATION),
        "completed_empty",
        "run.completed_empty.no_evidence",
        ("git",),
    ),
    Row(
        "escalation after timeout",
        F(status="timed_out", escalated_evidence=ESCALATION),
        "timed_out",
        "run.timed_out.deadline",
    ),
    Row(
        "escalation after exception",
        F(status="failed", exception=ValueError("x"), escalated_evidence=ESCALATION),
        "failed",
        "run.failed.exception",
        ("exception",),
    ),
    # step 5: linked engine
    Row(
        "linked completed",
        F(
            status="failed",
            linked_row=linked(
                "completed", "run.completed.ok", evidence=[{"kind": "commit", "ref": "abc"}]
            ),
            has_assistant_output=True,
            **LINKED,
        ),
        "completed",
        "run.completed.ok",
        ("linked_session", "commit", "assistant_output"),
        {
            "linked_session": {"id": "engine-row", "status": "completed"},
            "engine_session_uid": "uid-1",
        },
    ),
    Row(
        "linked failed keeps its reason",
        F(
            status="failed",
            linked_row=linked("failed", "run.failed.provider_retryable", summary="overloaded"),
            **LINKED,
        ),
        "failed",
        "run.failed.provider_retryable",
        ("linked_session",),
    ),
    Row(
        "linked unknown reason falls back",
        F(
            status="failed",
            linked_row=linked("completed", "bogus.code.x"),
            has_assistant_output=True,
            **LINKED,
        ),
        "completed",
        "run.completed.linked_engine",
    ),
    Row(
        "linked timed_out without reason",
        F(status="failed", linked_row=linked("timed_out"), **LINKED),
        "timed_out",
        "run.timed_out.deadline",
    ),
    Row(
        "linked running suppresses failure",
        F(status="failed", linked_row=linked("running", "run.running.started"), **LINKED),
        "running",
        "run.running.linked_engine",
        ("linked_session", "provider_error"),
    ),
    Row(
        "linked missing: failed stands",
        F(status="failed", **LINKED),
        "failed",
        "run.failed.provider_nonretryable",
        ("provider_error",),
        {"linked_session": None, "engine_session_uid": "uid-1"},
    ),
    Row(
        "subclass is not reconciled",
        F(
            status="failed",
            exception=retryable(),
            engine_session_uid="uid-1",
            linked_row=linked("completed", "run.completed.ok"),
        ),
        "failed",
        "run.failed.provider_retryable",
    ),
    Row(
        "no uid, no reconciliation",
        F(
            status="failed",
            exception=unclassified(),
            linked_row=linked("completed", "run.completed.ok"),
        ),
        "failed",
        "run.failed.provider_nonretryable",
    ),
    Row(
        "wrapped ProviderError is not exact",
        F(
            status="failed",
            exception=caused_by(unclassified()),
            engine_session_uid="u",
            linked_row=linked("completed", "run.completed.ok"),
        ),
        "failed",
        "run.failed.provider_nonretryable",
    ),
    Row(
        "timed_out is not reconciled",
        F(
            status="timed_out",
            exception=unclassified(),
            engine_session_uid="u",
            linked_row=linked("completed", "run.completed.ok"),
        ),
        "timed_out",
        "run.timed_out.deadline",
    ),
    Row(
        "linked completed + missing required",
        F(
            status="failed",
            linked_row=linked("completed", "run.completed.ok"),
            verification=verification(failed=("r",)),
            **LINKED,
        ),
        "failed",
        "run.failed.missing_artifact",
        ("artifact", "linked_session"),
    ),
    Row(
        "linked completed + no evidence",
        F(
            status="failed",
            linked_row=linked("completed", "run.completed.ok"),
            completion_evidence=CLEAN,
            **LINKED,
        ),
        "completed_empty",
        "run.completed_empty.no_evidence",
        ("git", "linked_session"),
    ),
    Row(
        "linked running + missing required",
        F(
            status="failed",
            linked_row=linked("running"),
            verification=verification(failed=("r",)),
            **LINKED,
        ),
        "running",
        "run.running.linked_engine",
        None,
        {"missing_required_artifact_ids": ["r"]},
    ),
    Row(
        "linked failed + missing required",
        F(
            status="failed",
            linked_row=linked("failed", "run.failed.exception"),
            verification=verification(failed=("r",)),
            **LINKED,
        ),
        "failed",
        "run.failed.exception",
        ("linked_session",),
        {"artifact_verification_status": "failed"},
    ),
    Row(
        "linked completed + escalation",
        F(
            status="failed",
            linked_row=linked("completed", "run.completed.ok"),
            has_assistant_output=True,
            escalated_evidence=ESCALATION,
            **LINKED,
        ),
        "failed",
        "run.failed.escalated",
        ("escalation", "linked_session", "assistant_output"),
    ),
    # step 5: only this execution's own evidence (docs/outcome.md §4)
    Row(
        "another execution's completed row is not borrowed",
        F(status="failed", linked_row=execution("completed", "run.completed.ok"), **LINKED),
        "failed",
        "run.failed.provider_nonretryable",
        ("provider_error",),
        {
            "linked_session": None,
            "linked_session_ignored": {"id": "R1", "why": "another execution's record"},
        },
    ),
    Row(
        "another execution running does not keep a crash running",
        F(status="failed", linked_row=execution("running", "run.running.started"), **LINKED),
        "failed",
        "run.failed.provider_nonretryable",
        ("provider_error",),
    ),
    Row(
        "another execution's failure reason is not inherited",
        F(
            status="failed",
            linked_row=execution(
                "failed", "run.failed.provider_retryable", summary="API Error: 529 overloaded"
            ),
            **LINKED,
        ),
        "failed",
        "run.failed.provider_nonretryable",
        ("provider_error",),
    ),
    Row(
        "another execution's completion does not empty a crash either",
        F(
            status="failed",
            linked_row=execution("completed", "run.completed.ok"),
            completion_evidence=CLEAN,
            **LINKED,
        ),
        "failed",
        "run.failed.provider_nonretryable",
    ),
    Row(
        "a mirror created before this execution started is ignored",
        F(
            status="failed",
            linked_row=linked("completed", "run.completed.ok", created_at=5.0),
            started_at=10.0,
            has_assistant_output=True,
            **LINKED,
        ),
        "failed",
        "run.failed.provider_nonretryable",
        None,
        {
            "linked_session_ignored": {
                "id": "engine-row",
                "why": "created before this execution started",
            }
        },
    ),
    Row(
        "a mirror created during this execution still counts",
        F(
            status="failed",
            linked_row=linked("completed", "run.completed.ok", created_at=12.0),
            started_at=10.0,
            has_assistant_output=True,
            **LINKED,
        ),
        "completed",
        "run.completed.ok",
        ("linked_session", "assistant_output"),
    ),
    # step 7: change since the start snapshot (docs/outcome.md §1)
    Row(
        "dirty before the start and unchanged is empty",
        F(completion_evidence=DIRTY_BEFORE, start_snapshot=SNAPSHOT),
        "completed_empty",
        "run.completed_empty.no_evidence",
        ("git",),
        {"start_snapshot": SNAPSHOT, "completion_evidence": DIRTY_BEFORE},
    ),
    Row(
        "a commit from before the start is not this run's work",
        F(completion_evidence=AHEAD_BEFORE),
        "completed_empty",
        "run.completed_empty.no_evidence",
        ("git",),
    ),
    Row(
        "a commit on the base branch during the run counts",
        F(completion_evidence=COMMIT_ON_TRUNK),
        "completed",
        "run.completed.ok",
        ("git",),
    ),
    Row(
        "a working tree changed during the run counts",
        F(completion_evidence=TREE_CHANGED),
        "completed",
        "run.completed.ok",
        ("git",),
    ),
    Row(
        "outside git: nothing changed and no reply is empty",
        F(completion_evidence=DIR_UNCHANGED),
        "completed_empty",
        "run.completed_empty.no_evidence",
        ("cwd",),
    ),
    Row(
        "outside git: a changed cwd counts",
        F(completion_evidence=DIR_CHANGED),
        "completed",
        "run.completed.ok",
        ("cwd",),
    ),
    Row(
        "outside git: a reply counts",
        F(completion_evidence=DIR_UNCHANGED, has_assistant_output=True),
        "completed",
        "run.completed.ok",
        ("assistant_output", "cwd"),
    ),
    Row(
        "a capped fingerprint that cannot tell is no opinion",
        F(completion_evidence=CAPPED),
        "completed",
        "run.completed.ok",
        ("git",),
        {"completion_evidence": CAPPED},
    ),
    Row(
        "no start snapshot is no opinion",
        F(completion_evidence=NO_START),
        "completed",
        "run.completed.ok",
        (),
    ),
    # step 7: an agent's own activity (docs/outcome.md §2)
    Row(
        "every tool call denied, a reply, nothing changed",
        F(has_assistant_output=True, completion_evidence=UNCHANGED, **DENIED_ALL),
        "completed_empty",
        "run.completed_empty.permission_denied",
        ("git", "agent_activity", "assistant_output"),
    ),
    Row(
        "every tool call denied, cwd not comparable",
        F(completion_evidence=NO_START, tool_calls=2, permission_denials=2),
        "completed_empty",
        "run.completed_empty.permission_denied",
        ("agent_activity",),
    ),
    Row(
        "every tool call denied but the tree changed",
        F(completion_evidence=TREE_CHANGED, **DENIED_ALL),
        "completed",
        "run.completed.ok",
        ("git",),
    ),
    Row(
        "some tool calls allowed and a reply",
        F(
            has_assistant_output=True,
            completion_evidence=UNCHANGED,
            tool_calls=3,
            permission_denials=1,
        ),
        "completed",
        "run.completed.ok",
        ("assistant_output", "git"),
    ),
    Row(
        "no tool call, no reply, nothing changed",
        F(completion_evidence=UNCHANGED, tool_calls=0, permission_denials=0),
        "completed_empty",
        "run.completed_empty.no_activity",
        ("git", "agent_activity"),
    ),
    Row(
        "no tool call, no reply, cwd not comparable",
        F(completion_evidence=CAPPED, tool_calls=0),
        "completed_empty",
        "run.completed_empty.no_activity",
        ("git", "agent_activity"),
    ),
    Row(
        "no tool call but a reply",
        F(completion_evidence=UNCHANGED, has_assistant_output=True, tool_calls=0),
        "completed",
        "run.completed.ok",
        ("assistant_output", "git"),
    ),
    Row(
        "tool calls, no reply, nothing changed",
        F(completion_evidence=UNCHANGED, tool_calls=2),
        "completed_empty",
        "run.completed_empty.no_evidence",
        ("git", "agent_activity"),
    ),
    Row(
        "denials never touch a produced artifact",
        F(verification=verification(produced=("r",)), **DENIED_ALL),
        "completed",
        "run.completed.ok",
        (),
    ),
    Row(
        "denials never touch a failure",
        F(status="failed", exception=retryable(), **DENIED_ALL),
        "failed",
        "run.failed.provider_retryable",
    ),
    # step 7: --require-change (docs/outcome.md §3)
    Row(
        "require_change: stdout alone is not work",
        F(has_assistant_output=True, require_change=True, completion_evidence=UNCHANGED),
        "completed_empty",
        "run.completed_empty.no_evidence",
        ("git", "assistant_output"),
    ),
    Row(
        "require_change: a change counts",
        F(has_assistant_output=True, require_change=True, completion_evidence=TREE_CHANGED),
        "completed",
        "run.completed.ok",
        ("git", "assistant_output"),
    ),
    Row(
        "require_change: a produced artifact counts",
        F(require_change=True, verification=verification(produced=("r",))),
        "completed",
        "run.completed.ok",
    ),
    # step 7: a command's exit code is its verdict (docs/outcome.md §3)
    Row(
        "command exit 0: completed by its exit code",
        CMD(),
        "completed",
        "run.completed.ok",
        ("exit_code",),
    ),
    Row(
        "command exit 0, nothing changed: still completed",
        CMD(completion_evidence=UNCHANGED),
        "completed",
        "run.completed.ok",
        ("exit_code", "git"),
    ),
    Row(
        "command exit 0 outside git, nothing changed",
        CMD(completion_evidence=DIR_UNCHANGED),
        "completed",
        "run.completed.ok",
        ("exit_code", "cwd"),
    ),
    Row(
        "command output is no reply: no assistant_output evidence",
        CMD(has_assistant_output=True, completion_evidence=UNCHANGED),
        "completed",
        "run.completed.ok",
        ("exit_code", "git"),
    ),
    Row(
        "command non-zero exit fails whatever the mark",
        CMD(status="failed", exit_code=2),
        "failed",
        "run.failed.exit_nonzero",
        ("exit_code",),
    ),
    Row(
        "command timed out stays timed out",
        CMD(status="timed_out", exit_code=-15),
        "timed_out",
        "run.timed_out.deadline",
    ),
    Row(
        "command missing required artifact fails",
        CMD(verification=verification(failed=("r",))),
        "failed",
        "run.failed.missing_artifact",
        ("artifact", "exit_code"),
    ),
    Row(
        "command escalated is demoted",
        CMD(escalated_evidence=ESCALATION),
        "failed",
        "run.failed.escalated",
        ("escalation", "exit_code"),
    ),
    Row(
        "command require_change, nothing changed: completed_empty",
        CMD(require_change=True, completion_evidence=UNCHANGED),
        "completed_empty",
        "run.completed_empty.no_evidence",
        ("git", "exit_code"),
    ),
    Row(
        "command require_change: its output never counts",
        CMD(require_change=True, has_assistant_output=True, completion_evidence=UNCHANGED),
        "completed_empty",
        "run.completed_empty.no_evidence",
        ("git", "exit_code"),
    ),
    Row(
        "command require_change: a change counts",
        CMD(require_change=True, completion_evidence=TREE_CHANGED),
        "completed",
        "run.completed.ok",
        ("exit_code", "git"),
    ),
    Row(
        "command require_change: unknown change is no opinion",
        CMD(require_change=True, completion_evidence=CAPPED),
        "completed",
        "run.completed.ok",
        ("exit_code", "git"),
    ),
    Row(
        "command declared an artifact it produced",
        CMD(verification=verification(produced=("r",))),
        "completed",
        "run.completed.ok",
        ("exit_code",),
    ),
    Row(
        "command declared an optional artifact, none produced, nothing changed",
        CMD(verification=verification(optional=("o",)), completion_evidence=UNCHANGED),
        "completed_empty",
        "run.completed_empty.no_evidence",
        ("git", "exit_code"),
    ),
    Row(
        "command declared an optional artifact, none produced, a change",
        CMD(verification=verification(optional=("o",)), completion_evidence=DIR_CHANGED),
        "completed",
        "run.completed.ok",
        ("exit_code", "cwd"),
    ),
    Row(
        "command with no exit code known gets the gate",
        F(command=True, completion_evidence=UNCHANGED),
        "completed_empty",
        "run.completed_empty.no_evidence",
        ("git",),
    ),
    Row(
        "no command mark: a clean exit 0 with nothing is the ADR's completed_empty",
        F(exit_code=0, completion_evidence=UNCHANGED),
        "completed_empty",
        "run.completed_empty.no_evidence",
        ("git", "exit_code"),
    ),
    Row(
        "no command mark: a reply still counts (the ADR's gate)",
        F(exit_code=0, has_assistant_output=True, completion_evidence=UNCHANGED),
        "completed",
        "run.completed.ok",
        ("exit_code", "assistant_output", "git"),
    ),
    # extras close the list; decision metadata wins over caller metadata
    Row(
        "extras",
        F(
            has_assistant_output=True,
            extra_evidence=({"kind": "stream", "path": "s.jsonl"},),
            extra_metadata={"cost": 0.5, "in_memory_status": "spoofed"},
        ),
        "completed",
        "run.completed.ok",
        ("assistant_output", "stream"),
        {"cost": 0.5, "in_memory_status": "completed"},
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_decision_table(row: Row) -> None:
    outcome = decide_outcome(row.facts)
    assert (outcome.status, outcome.reason_code) == (row.status, row.reason)
    validate_reason(outcome.reason_code, "session")
    assert outcome.summary.strip()
    if row.kinds is not None:
        assert tuple(e["kind"] for e in outcome.evidence) == row.kinds
    for key, value in row.metadata.items():
        assert outcome.metadata.get(key, "<absent>") == value, key


def test_table_ids_are_unique() -> None:
    assert len({r.id for r in ROWS}) == len(ROWS)


def test_missing_artifact_evidence_names_each_entry() -> None:
    outcome = decide_outcome(F(verification=verification(failed=("a", "b"), optional=("c",))))
    assert [(e["id"], e["path"]) for e in outcome.evidence] == [("a", "a.md"), ("b", "b.md")]
    assert outcome.metadata["missing_optional_artifact_ids"] == ["c"]
    assert "a, b" in outcome.summary


def test_exit_code_is_the_evidence() -> None:
    outcome = decide_outcome(F(status="failed", exit_code=3))
    assert outcome.evidence == [{"kind": "exit_code", "exit_code": 3}]
    assert "3" in outcome.summary


def test_linked_terminal_summary_carries_its_summary() -> None:
    row = linked("failed", "run.failed.provider_retryable", summary="overloaded")
    outcome = decide_outcome(F(status="failed", linked_row=row, **LINKED))
    assert "engine-row" in outcome.summary
    assert "overloaded" in outcome.summary
    assert outcome.evidence[0] == {
        "kind": "linked_session",
        "id": "engine-row",
        "status": "failed",
        "engine_session_uid": "uid-1",
    }


def test_decision_is_pure() -> None:
    facts = F(status="failed", verification=verification(failed=("r",)), **LINKED)
    first, second = decide_outcome(facts), decide_outcome(facts)
    assert first == second
    first.evidence.append({"kind": "mutated"})
    first.metadata["x"] = 1
    assert decide_outcome(facts) == second


def test_exception_chain_cycle_terminates() -> None:
    a, b = ValueError("a"), ValueError("b")
    a.__context__, b.__context__ = b, a
    assert find_provider_error(a) is None
    err = retryable()
    b.__cause__ = err
    assert find_provider_error(a) is err


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (F(status="failed", **LINKED), True),
        (F(status="failed", exception=unclassified()), False),
        (F(status="failed", exception=retryable(), engine_session_uid="u"), False),
        (F(status="completed", **LINKED), False),
        (F(status="failed", exception=caused_by(unclassified()), engine_session_uid="u"), False),
    ],
)
def test_needs_linked_engine(facts: OutcomeFacts, expected: bool) -> None:
    assert needs_linked_engine(facts) is expected


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (F(), True),
        (F(verification=verification(produced=("r",))), False),
        (F(verification=verification(failed=("r",))), False),
        (F(verification=verification(optional=("o",))), True),
        (F(status="timed_out"), False),
        (F(status="failed", linked_row=linked("completed", "run.completed.ok"), **LINKED), True),
        (F(status="failed", linked_row=linked("running"), **LINKED), False),
    ],
)
def test_gate_applies(facts: OutcomeFacts, expected: bool) -> None:
    assert gate_applies(facts) is expected


@pytest.mark.parametrize(
    "facts",
    [F(), F(completion_evidence=NO_OPINION), F(completion_evidence=CAPPED)],
    ids=["not checked", "checked=False", "capped"],
)
def test_a_summary_never_claims_evidence_that_was_not_seen(facts: OutcomeFacts) -> None:
    outcome = decide_outcome(facts)
    assert outcome.status == "completed"
    assert "evidence of work" not in outcome.summary.replace("no evidence of work", "")
    assert "no evidence of work was seen" in outcome.summary


def test_a_summary_names_the_evidence_it_saw() -> None:
    outcome = decide_outcome(F(has_assistant_output=True, completion_evidence=TREE_CHANGED))
    assert outcome.summary == "completed: reply, working tree changed"
    committed = {**COMMIT_ON_TRUNK, "commit_ids": ["abc1234"], "files_changed": 3}
    work = decide_outcome(F(has_assistant_output=True, completion_evidence=committed))
    assert work.summary == "completed: reply, 1 commit (abc1234), 3 files changed"
    talk = decide_outcome(F(has_assistant_output=True, completion_evidence=UNCHANGED))
    assert talk.summary == "completed: reply only"


def test_every_kind_of_evidence_is_recorded_whichever_the_gate_needed() -> None:
    """A reply decides, but what the cwd's comparison saw is kept beside it, and an
    uncounted reply is kept (labelled so) beside the change that decided."""
    talk = decide_outcome(F(has_assistant_output=True, completion_evidence=UNCHANGED))
    assert [e["kind"] for e in talk.evidence] == ["assistant_output", "git"]
    assert talk.evidence[0]["counted"] is True
    assert talk.evidence[1]["changed"] is False
    strict = decide_outcome(
        F(has_assistant_output=True, require_change=True, completion_evidence=COMMIT_ON_TRUNK)
    )
    assert [e["kind"] for e in strict.evidence] == ["git", "assistant_output"]
    assert strict.evidence[1] == {
        "kind": "assistant_output",
        "label": "non-empty assistant message (not counted as work)",
        "counted": False,
    }
    failed = decide_outcome(F(status="failed", exit_code=1, completion_evidence=COMMIT_ON_TRUNK))
    assert failed.status == "failed"
    assert "git" in [e["kind"] for e in failed.evidence]


def test_a_command_that_exited_0_says_so_and_keeps_its_exit_code_as_evidence() -> None:
    outcome = decide_outcome(CMD(has_assistant_output=True))
    assert outcome.summary == "completed: command exited 0"
    assert outcome.evidence == [{"kind": "exit_code", "exit_code": 0, "label": "command exited 0"}]
    assert "assistant" not in outcome.summary
    assert "reply" not in outcome.summary


def test_a_command_that_asked_for_a_change_names_the_change_never_its_output() -> None:
    outcome = decide_outcome(
        CMD(require_change=True, has_assistant_output=True, completion_evidence=TREE_CHANGED)
    )
    assert outcome.status == "completed"
    assert outcome.summary.startswith("completed: ")
    assert "assistant" not in outcome.summary
    assert "command exited 0" not in outcome.summary
    assert all("label" not in e for e in outcome.evidence if e["kind"] == "exit_code")


def test_denied_summary_counts_the_calls() -> None:
    outcome = decide_outcome(F(completion_evidence=UNCHANGED, tool_calls=3, permission_denials=3))
    assert "3 of 3 tool call(s) denied" in outcome.summary
    assert outcome.evidence[-1] == {
        "kind": "agent_activity",
        "tool_calls": 3,
        "permission_denials": 3,
        "reply": False,
    }


@pytest.mark.parametrize(
    ("row", "started_at", "refusal"),
    [
        ({"id": "x", "run_dir": "/runs/x"}, None, "another execution's record"),
        ({"id": "x", "created_at": 1.0}, 2.0, "created before this execution started"),
        ({"id": "x", "created_at": 3.0}, 2.0, None),
        ({"id": "x", "created_at": 1.0}, None, None),
    ],
)
def test_linked_row_refusal(
    row: dict[str, Any], started_at: float | None, refusal: str | None
) -> None:
    assert linked_row_refusal(session_row(**row), started_at) == refusal


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (F(), True),
        (F(has_assistant_output=True), False),
        (F(has_assistant_output=True, require_change=True), True),
        (F(has_assistant_output=True, **DENIED_ALL), True),
        (F(has_assistant_output=True, tool_calls=2, permission_denials=1), False),
        (F(verification=verification(produced=("r",))), False),
        (F(status="failed"), False),
        (CMD(), False),  # its exit code decides: the cwd is never compared
        (CMD(has_assistant_output=True), False),
        (CMD(require_change=True), True),
        (CMD(require_change=True, has_assistant_output=True), True),
        (CMD(verification=verification(optional=("o",))), True),
        (F(command=True), True),  # no exit code known: the gate
    ],
)
def test_needs_change_check(facts: OutcomeFacts, expected: bool) -> None:
    assert needs_change_check(facts) is expected
