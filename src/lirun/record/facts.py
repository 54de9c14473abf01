"""Gathering ``OutcomeFacts`` at teardown: the row, the artifact root, messages, the cwd.

Only the facts the decision needs are fetched from the database: the linked engine row
only in the narrow ProviderError case, an agent's reply only while the candidate outcome
is completed with no artifact file produced. The cwd's change since the start snapshot
is compared for every run with a cwd (bounded git calls, the start's fingerprint caps;
not when the start's fingerprint was capped and the gate does not need it), so the
record says what the run did whichever evidence the gate needed (``note_work``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from lirun.logs import get_logger
from lirun.record.artifacts import verify_artifact_contract
from lirun.record.evidence import check_completion_evidence
from lirun.record.outcome import (
    OutcomeFacts,
    gate_applies,
    linked_row_refusal,
    needs_change_check,
    needs_linked_engine,
)
from lirun.store.rows import SessionRow

if TYPE_CHECKING:
    from lirun.record.context import PersistContext

__all__ = ["EXTRAS_KEYS", "TeardownExtras", "find_linked_row", "gather_facts"]

log = get_logger(__name__)

EXTRAS_KEYS = frozenset(
    {
        "exit_code",
        "signal",
        "cancel_cause",
        "assistant_output",
        "assistant_text",
        "idle_timeout",
        "evidence",
        "metadata",
        "base_ref",
        "summary_note",
        "provider_retrying",
        "tool_calls",
        "permission_denials",
        "require_change",
        "command",
    }
)


@dataclass(frozen=True, slots=True)
class TeardownExtras:
    """The ``extras`` mapping of ``teardown_persist``, typed.

    ``exit_code``: a generic command's own exit code (kept as evidence); ``signal``:
    ``SIGINT``/``SIGTERM``; ``cancel_cause``: free text for a cancellation;
    ``assistant_output`` / ``assistant_text``: the reply seen in memory; ``idle_timeout``:
    the idle watchdog fired; ``evidence`` / ``metadata``: added to the outcome;
    ``base_ref``: the git base for completion evidence; ``summary_note``: what the
    provider was doing when li stopped it (retries), added to the summary;
    ``provider_retrying``: li's timer fired while the provider was retrying an API call
    (``run.timed_out.provider_retrying``); ``tool_calls`` /
    ``permission_denials``: an agent's own counts from its stream; ``require_change``: a
    reply alone does not count as evidence of work; ``command``: the execution is a
    command, not an agent (``li run``, command legs and plays, gates and schedule ``run``
    actions say so; a library caller says so with ``extras={"command": True}``): exit 0
    is completed by its exit code unless ``require_change`` or an artifact contract asks
    for evidence of work, and its stdout is output, never evidence. Without the mark a
    clean exit with no reply, change or artifact is ``completed_empty`` (the ADR's gate).
    """

    exit_code: int | None = None
    signal: str | None = None
    cancel_cause: str | None = None
    assistant_output: bool = False
    idle_timeout: bool = False
    evidence: tuple[dict[str, Any], ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    base_ref: str | None = None
    summary_note: str | None = None
    provider_retrying: bool = False
    tool_calls: int | None = None
    permission_denials: int | None = None
    require_change: bool = False
    command: bool = False

    @classmethod
    def parse(cls, extras: Mapping[str, Any] | None) -> TeardownExtras:
        """Lenient by design: teardown must not fail on a bad hint, so bad values are dropped."""
        raw = dict(extras or {})
        unknown = sorted(set(raw) - EXTRAS_KEYS)
        if unknown:
            log.warning("teardown ignores unknown extras %s", ", ".join(unknown))
        text = raw.get("assistant_text")
        evidence = raw.get("evidence") or ()
        metadata = raw.get("metadata")
        return cls(
            exit_code=_typed(raw, "exit_code", int),
            signal=_typed(raw, "signal", str),
            cancel_cause=_typed(raw, "cancel_cause", str),
            assistant_output=bool(raw.get("assistant_output"))
            or (isinstance(text, str) and text.strip() != ""),
            idle_timeout=bool(raw.get("idle_timeout")),
            evidence=tuple(dict(e) for e in evidence if isinstance(e, Mapping)),
            metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
            base_ref=_typed(raw, "base_ref", str),
            summary_note=_typed(raw, "summary_note", str),
            provider_retrying=bool(raw.get("provider_retrying")),
            tool_calls=_typed(raw, "tool_calls", int),
            permission_denials=_typed(raw, "permission_denials", int),
            require_change=bool(raw.get("require_change")),
            command=bool(raw.get("command")),
        )


def _typed(raw: Mapping[str, Any], key: str, kind: type) -> Any:
    value = raw.get(key)
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    log.warning("teardown ignores extras[%r]=%r (expected %s)", key, value, kind.__name__)
    return None


def find_linked_row(ctx: PersistContext, uid: str) -> SessionRow | None:
    """One read, then bounded retries: the mirror row may lag, teardown must not spin.

    A row that is not this execution's own evidence (another execution sharing the engine
    session) does not end the wait for a mirror; it is returned last so the decision can
    say it was ignored.
    """
    row = None
    for attempt in range(ctx.linked_lookup_retries + 1):
        if attempt:
            ctx.sleep(ctx.linked_lookup_interval)
        row = ctx.store.sessions.find_by_engine_uid(uid, exclude_id=ctx.session_id)
        if row is not None and linked_row_refusal(row, ctx.started_at) is None:
            return row
    return row


def _cheap(start: Mapping[str, Any] | None) -> bool:
    """Whether to compare the cwd when the gate does not need it: not when the start's
    fingerprint was capped (it spent its whole budget and can prove little)."""
    return start is None or not start.get("capped")


def gather_facts(
    ctx: PersistContext,
    row: SessionRow | None,
    *,
    status: str,
    exception: BaseException | None,
    extras: TeardownExtras,
    escalated_evidence: Sequence[Mapping[str, Any]],
    cwd: str | None,
    engine_session_uid: str | None,
    offline: bool = False,
) -> OutcomeFacts:
    """Facts for ``decide_outcome``; reads the database, the artifact root and git.

    ``row``: the execution as read now, None when it cannot be read. ``offline``: the
    database cannot be read; decide from memory, files and git alone.
    """
    # The persisted snapshot is authoritative; a flow may have appended planned legs to it.
    contract = (row.artifact_contract_json if row is not None else None) or ctx.artifact_contract
    facts = OutcomeFacts(
        status=status,
        exception=exception,
        signal_name=extras.signal,
        cancel_cause=extras.cancel_cause,
        exit_code=extras.exit_code,
        idle_timeout=extras.idle_timeout,
        verification=verify_artifact_contract(contract, artifacts_root=ctx.artifact_dir),
        has_assistant_output=extras.assistant_output,
        escalated_evidence=tuple(escalated_evidence),
        engine_session_uid=engine_session_uid,
        extra_evidence=extras.evidence,
        extra_metadata=extras.metadata,
        summary_note=extras.summary_note,
        provider_retrying=extras.provider_retrying,
        start_snapshot=ctx.start_snapshot,
        started_at=ctx.started_at,
        tool_calls=extras.tool_calls,
        permission_denials=extras.permission_denials,
        require_change=extras.require_change,
        command=extras.command,
    )
    if engine_session_uid and needs_linked_engine(facts) and not offline:
        facts = replace(facts, linked_row=find_linked_row(ctx, engine_session_uid))
    # A command's stdout is output, never evidence: only an agent's reply is looked for.
    if gate_applies(facts) and not facts.has_assistant_output and not facts.command and not offline:
        facts = replace(
            facts, has_assistant_output=ctx.store.sessions.has_assistant_text(ctx.session_id)
        )
    if needs_change_check(facts) or (bool(cwd or ctx.cwd) and _cheap(ctx.start_snapshot)):
        evidence = check_completion_evidence(
            cwd or ctx.cwd,
            base_ref=extras.base_ref,
            start=ctx.start_snapshot,
        )
        facts = replace(facts, completion_evidence=evidence)
    return facts
