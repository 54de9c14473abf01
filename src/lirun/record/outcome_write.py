"""The guarded write of an execution's outcome (design.md D5), or its spool.

``write_outcome``: compare-and-set on the status teardown read; a writer that loses the
race gets the persisted winner back; a correction (``record.correction``) replaces a
terminal row a reaper inferred from the owner's lapsed lease, audited. ``spool``: the
database refused past the retry bound, so the decided outcome waits in a pending file
(``lirun.record.spool``) for the next command on that database.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from lirun.errors import (
    DatabaseError,
    NotFoundError,
    OutcomeNotRecordedError,
    TransitionRejectedError,
)
from lirun.lifecycle import EXIT_CODE_BY_STATUS, is_terminal
from lirun.logs import get_logger
from lirun.record.context import PersistContext
from lirun.record.correction import ACTOR as CORRECTION_ACTOR
from lirun.record.correction import Correction
from lirun.record.outcome import Outcome, OutcomeFacts
from lirun.record.spool import SpooledOutcome, database_identity, write_spool
from lirun.store.retry import write_retry_seconds

T = TypeVar("T")

__all__ = ["STORE_ERRORS", "Finalized", "spool", "with_retry", "write_outcome"]

log = get_logger(__name__)

# What a database that cannot be written raises (the driver's ENOSPC may arrive as OSError).
STORE_ERRORS = (DatabaseError, OSError)


@dataclass(frozen=True, slots=True)
class Finalized:
    """How teardown ended: what the record says, and what this invocation decided.

    ``status`` / ``reason_code``: the record's (another writer's when it won the race or
    the row was already terminal), so the caller needs no second read. ``decided``: this
    invocation's ``decide_outcome`` (summary, evidence, metadata). ``spool`` is set when
    the database could not be written within the retry bound and the decided outcome
    waits in a pending file (``lirun.record.spool``); ``cause`` says why.
    """

    status: str
    reason_code: str | None
    decided: Outcome
    spool: Path | None = None
    cause: str | None = None
    # The row was terminal before teardown read it: ``decided`` was not written.
    already_terminal: bool = False


def with_retry(ctx: PersistContext, call: Callable[[], T]) -> T:
    """``call`` until it succeeds or the retry bound is spent (then its error propagates).

    The store already retries a status write within the same bound; this loop covers the
    reads and field writes around it, and one deadline bounds them all.
    """

    deadline = time.monotonic() + write_retry_seconds()
    delay = 0.1
    while True:
        try:
            return call()
        except STORE_ERRORS as exc:
            if time.monotonic() + delay > deadline:
                raise
            log.warning("run %s: database write failed (%s); retrying", ctx.session_id, exc)
        ctx.sleep(delay)
        delay = min(delay * 2, 2.0)


def _extra_fields(outcome: Outcome, facts: OutcomeFacts, ended_at: float) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if facts.verification is not None:
        extra["artifact_verification_json"] = dict(facts.verification)
    if facts.engine_session_uid:
        extra["engine_session_uid"] = facts.engine_session_uid
    if is_terminal("session", outcome.status):
        extra["ended_at"] = ended_at  # this run's own clock; the store sets exit_code
    return extra


def write_outcome(
    ctx: PersistContext,
    snapshot: str,
    outcome: Outcome,
    facts: OutcomeFacts,
    ended_at: float,
    correction: Correction | None = None,
) -> Finalized:
    """design.md D5 for teardown: CAS on the snapshot; a lost race returns the persisted winner.

    Verification, engine uid, ``ended_at`` and exit code commit in the same transaction as
    the status, so a writer that loses the race leaves the winner's record untouched.
    ``correction``: the terminal row a reaper inferred from the owner's lapsed lease is
    replaced by this owner's outcome, audited (``record.correction``).
    """
    extra = _extra_fields(outcome, facts, ended_at)
    evidence = [*outcome.evidence, correction.evidence] if correction else outcome.evidence
    audit: dict[str, Any] = {}
    if correction is not None:
        log.warning("run %s: a reaper recorded %s; its work ended %s: correcting",
                    ctx.session_id, snapshot, outcome.status)  # fmt: skip
        audit = {
            "actor": CORRECTION_ACTOR,
            "override": True,
            "override_actor": CORRECTION_ACTOR,
            "override_justification": correction.justification,
        }
    try:
        applied = with_retry(
            ctx,
            lambda: ctx.store.update_status(
                "session",
                ctx.session_id,
                new_status=outcome.status,
                reason_code=outcome.reason_code,
                reason_summary=outcome.summary,
                evidence_refs=evidence,
                metadata=outcome.metadata,
                expected_statuses={snapshot},
                extra_fields=extra,
                **audit,
            ),
        )
    except TransitionRejectedError as exc:
        log.debug(
            "run %s became terminal before teardown wrote it (%s)", ctx.session_id, exc,
            extra={"event": "run.lost_race", "run_id": ctx.session_id},
        )  # fmt: skip
        applied = False
    if applied:
        return Finalized(outcome.status, outcome.reason_code, outcome)
    winner = ctx.store.sessions.get(ctx.session_id)
    if winner is None:
        raise NotFoundError(f"execution {ctx.session_id} vanished during teardown")
    log.debug(
        "run %s was finalized by another writer as %s; teardown computed %s",
        ctx.session_id, winner.status, outcome.status,
        extra={"event": "run.lost_race", "run_id": ctx.session_id},
    )  # fmt: skip
    return Finalized(winner.status, winner.status_reason_code, outcome)


def spool(
    ctx: PersistContext,
    snapshot: str,
    outcome: Outcome,
    facts: OutcomeFacts,
    ended_at: float,
    cause: BaseException,
) -> Finalized:
    """The database refused past the retry bound: keep the decided outcome in a spool."""

    url = ctx.store.url
    spooled = SpooledOutcome(
        run_id=ctx.session_id,
        database=database_identity(url),
        status=outcome.status,
        reason_code=outcome.reason_code,
        reason_summary=outcome.summary,
        evidence=list(outcome.evidence),
        metadata=dict(outcome.metadata),
        extra_fields=_extra_fields(outcome, facts, ended_at),
        expected_status=snapshot,
        cause=str(cause),
        spooled_at=ended_at,
    )
    try:
        path = write_spool(url, ctx.run.state_root, spooled)
    except OSError as exc:
        error = OutcomeNotRecordedError(
            f"run {ctx.session_id} ended {outcome.status} ({outcome.reason_code}) but neither "
            f"the database ({cause}) nor the spool ({exc.strerror or exc}) could record it; "
            "free space or stop the process holding the database, then check `li status`"
        )
        # The run started: li exits with its outcome's code, never 2 ("nothing started").
        error.exit_code = EXIT_CODE_BY_STATUS.get(outcome.status, 1)
        raise error from exc
    return Finalized(outcome.status, outcome.reason_code, outcome, spool=path, cause=str(cause))
