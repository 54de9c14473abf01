"""``setup_persist`` / ``teardown_persist``: the I/O around ``decide_outcome`` (ADR D1, D4, D5).

Setup is best-effort (ADR D1) with one exception: a malformed artifact contract or an
unknown session field is the caller's mistake and raises *before* anything is written,
so a run never starts against expectations that cannot be checked. Any other setup
failure (database unreachable, run directory unwritable, id collision) is logged as a
warning and gives ``None``; the run goes on without a durable record.

Teardown never raises: a failure while finalizing is logged and the in-memory status is
returned. The synchronous twins are the implementation; the async functions run them in
a worker thread so a busy SQLite lock never blocks an event loop.
"""

from __future__ import annotations

import copy
import functools
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from lirun.artifacts import contract_warnings, validate_artifact_contract
from lirun.errors import NotFoundError, TransitionRejectedError, UsageError, ValidationError
from lirun.evidence import StartSnapshot, take_start_snapshot, unchecked_snapshot
from lirun.facts import TeardownExtras, gather_facts
from lirun.lifecycle import EXIT_CODE_BY_STATUS, is_terminal
from lirun.outcome import Outcome, OutcomeFacts, decide_outcome
from lirun.paths import lirun_home
from lirun.rundir import RunDir
from lirun.store import StateDB, Store, open_store
from lirun.store.core import SESSION_FIELDS

T = TypeVar("T")

__all__ = [
    "PersistContext",
    "setup_persist",
    "setup_persist_sync",
    "teardown_persist",
    "teardown_persist_sync",
]

log = logging.getLogger(__name__)

DbArg = StateDB | Store | str | os.PathLike[str] | None

# Set from the RunDir (one execution, one id: DESIGN §4.1), never by the caller.
_RESERVED_FIELDS = frozenset(
    {"id", "status", "run_id", "run_dir", "artifacts_path", "artifact_contract_json"}
)


@dataclass(slots=True)
class PersistContext:
    """One execution's durable record handle, from ``setup_persist`` to ``teardown_persist``.

    ``snapshot_status`` is the row's status as teardown last read it (the CAS guard).
    ``start_snapshot`` is the cwd when the run started (DESIGN §4.9), the baseline of the
    completion evidence. The linked-engine lookup knobs and ``sleep``/``clock`` are
    injectable for tests.
    """

    store: Store
    session_id: str
    run: RunDir
    artifact_contract: dict[str, Any] | None
    owned: bool
    started_at: float
    cwd: str | None = None
    start_snapshot: StartSnapshot | None = None
    snapshot_status: str | None = "running"
    linked_lookup_retries: int = 3
    linked_lookup_interval: float = 0.1
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    closed: bool = False

    @property
    def run_dir(self) -> str:
        return str(self.run.state_root)

    @property
    def artifacts_path(self) -> str:
        return str(self.run.artifact_root)

    def close(self) -> None:
        """Close the database handle if this context opened it; idempotent, never raises."""
        if self.owned and not self.closed:
            try:
                self.store.close()
            except Exception:
                log.debug("closing the state database failed", exc_info=True)
        self.closed = True


# --- setup ----------------------------------------------------------------------------------


def _check_session_fields(fields: Mapping[str, Any]) -> None:
    reserved = sorted(set(fields) & _RESERVED_FIELDS)
    if reserved:
        raise UsageError(
            f"setup_persist sets {', '.join(reserved)} from the RunDir; do not pass them"
        )
    unknown = sorted(set(fields) - SESSION_FIELDS)
    if unknown:
        raise ValidationError(
            f"setup_persist does not accept session field(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(SESSION_FIELDS - _RESERVED_FIELDS))}"
        )


def _open_db(db: DbArg) -> tuple[Store, bool]:
    """The Store to use and whether this context owns (and so closes) it."""
    if isinstance(db, Store):
        return db, False
    if isinstance(db, StateDB):
        return db.sync, False
    return open_store(db), True


def setup_persist_sync(
    run: RunDir,
    *,
    db: DbArg = None,
    artifact_contract: Mapping[str, Any] | None = None,
    **session_fields: Any,
) -> PersistContext | None:
    """Write ``run.json`` and create the execution row (id = run id) before work starts.

    Raises ArtifactContractError / ArtifactPathError for a malformed contract and
    UsageError / ValidationError for bad session fields, before any write. Any other
    failure: a warning is logged, what was opened is closed, and None is returned.
    """
    _check_session_fields(session_fields)
    session_fields = {
        k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in session_fields.items()
    }
    validate_artifact_contract(artifact_contract)
    for note in contract_warnings(artifact_contract):
        log.warning("lirun: %s", note)
    contract = copy.deepcopy(dict(artifact_contract)) if artifact_contract is not None else None
    started_at = float(session_fields.pop("started_at", None) or time.time())
    start_snapshot = _start_snapshot(run, session_fields.get("cwd"))
    store: Store | None = None
    owned = False
    try:
        run.write_manifest(
            {"session_id": run.run_id, "started_at": started_at, **session_fields}
            | ({"artifact_contract": contract} if contract is not None else {})
            | ({"start_snapshot": start_snapshot} if start_snapshot is not None else {})
        )
        store, owned = _open_db(db)
        store.create_session(
            id=run.run_id,
            run_id=run.run_id,
            run_dir=str(run.state_root),
            artifacts_path=str(run.artifact_root),
            artifact_contract=contract,
            started_at=started_at,
            **session_fields,
        )
    except Exception as exc:
        log.warning(
            "lirun: could not set up the durable record for run %s (%s: %s); the run goes on "
            "without one",
            run.run_id,
            type(exc).__name__,
            exc,
        )
        if store is not None and owned:
            PersistContext(store, run.run_id, run, None, owned, started_at).close()
        return None
    return PersistContext(
        store=store,
        session_id=run.run_id,
        run=run,
        artifact_contract=contract,
        owned=owned,
        started_at=started_at,
        cwd=session_fields.get("cwd"),
        start_snapshot=start_snapshot,
    )


def _start_snapshot(run: RunDir, cwd: object) -> StartSnapshot | None:
    """The cwd before the work starts, li's own files left out; never raises.

    The run's state directory and the lirun home (other runs, a SQLite database) change
    during any run when they sit inside the cwd: they are never the work.
    """
    if not isinstance(cwd, str) or not cwd:
        return None
    try:
        return take_start_snapshot(cwd, exclude=(run.state_root, lirun_home()))
    except Exception as exc:  # the run must not fail for want of a baseline
        log.warning("lirun: no start snapshot of %s (%s: %s)", cwd, type(exc).__name__, exc)
        return unchecked_snapshot(f"start snapshot failed: {type(exc).__name__}: {exc}")


async def _in_thread(call: Callable[[], T]) -> T:
    import asyncio  # on first use: the CLI calls the sync twins and need not pay for it

    return await asyncio.to_thread(call)


async def setup_persist(
    run: RunDir,
    *,
    db: DbArg = None,
    artifact_contract: Mapping[str, Any] | None = None,
    **session_fields: Any,
) -> PersistContext | None:
    """Async ``setup_persist_sync`` (run in a worker thread)."""
    call = functools.partial(
        setup_persist_sync, run, db=db, artifact_contract=artifact_contract, **session_fields
    )
    return await _in_thread(call)


# --- teardown: the guarded write ----------------------------------------------------------


def _write_outcome(
    ctx: PersistContext, snapshot: str, outcome: Outcome, facts: OutcomeFacts, ended_at: float
) -> str:
    """ADR D5 for teardown: CAS on the snapshot; a lost race returns the persisted winner.

    Verification, engine uid, ``ended_at`` and exit code commit in the same transaction as
    the status, so a writer that loses the race leaves the winner's record untouched.
    """
    extra: dict[str, Any] = {}
    if facts.verification is not None:
        extra["artifact_verification_json"] = dict(facts.verification)
    if facts.engine_session_uid:
        extra["engine_session_uid"] = facts.engine_session_uid
    if is_terminal("session", outcome.status):
        extra["ended_at"] = ended_at
        extra["exit_code"] = EXIT_CODE_BY_STATUS.get(outcome.status)
    try:
        applied = ctx.store.update_status(
            "session",
            ctx.session_id,
            new_status=outcome.status,
            reason_code=outcome.reason_code,
            reason_summary=outcome.summary,
            evidence_refs=outcome.evidence,
            metadata=outcome.metadata,
            expected_statuses={snapshot},
            extra_fields=extra,
        )
    except TransitionRejectedError as exc:
        log.info("lirun: run %s became terminal before teardown wrote it (%s)", ctx.session_id, exc)
        applied = False
    if applied:
        return outcome.status
    winner = ctx.store.get_entity("session", ctx.session_id)
    if winner is None:
        raise NotFoundError(f"execution {ctx.session_id} vanished during teardown")
    log.info(
        "lirun: run %s was finalized by another writer as %s; teardown computed %s",
        ctx.session_id,
        winner["status"],
        outcome.status,
    )
    return str(winner["status"])


def _finalize(ctx: PersistContext, **request: Any) -> str:
    ended_at = ctx.clock()
    row = ctx.store.get_entity("session", ctx.session_id)
    if row is None:
        raise NotFoundError(f"no execution row {ctx.session_id} to finalize")
    snapshot = str(row["status"])
    ctx.snapshot_status = snapshot
    facts = gather_facts(ctx, row, **request)
    outcome = decide_outcome(facts)
    if is_terminal("session", snapshot):
        # Terminal records are immutable (ADR D5): keep the durable row, report our verdict.
        if outcome.status != snapshot:
            log.warning(
                "lirun: run %s is already %s; this invocation computed %s (not written)",
                ctx.session_id,
                snapshot,
                outcome.status,
            )
        return outcome.status
    return _write_outcome(ctx, snapshot, outcome, facts, ended_at)


def teardown_persist_sync(
    ctx: PersistContext | None,
    *,
    status: str = "completed",
    exception: BaseException | None = None,
    extras: Mapping[str, Any] | None = None,
    escalated_evidence: Sequence[Mapping[str, Any]] | None = None,
    cwd: str | None = None,
    engine_session_uid: str | None = None,
    defer_terminal: bool = False,
) -> str:
    """Finalize the execution row (ADR D4 order, D5 race handling); return the final status.

    ``ctx`` None: the in-memory ``status``. ``defer_terminal``: ``status`` with no database
    change and the handle left open for the resumed leg, which owns finalization.
    """
    if ctx is None:
        return status
    if defer_terminal:
        return status
    if ctx.closed:
        log.warning("lirun: run %s was already finalized; nothing to do", ctx.session_id)
        return status
    try:
        return _finalize(
            ctx,
            status=status,
            exception=exception,
            extras=TeardownExtras.parse(extras),
            escalated_evidence=escalated_evidence or (),
            cwd=cwd,
            engine_session_uid=engine_session_uid,
        )
    except Exception:
        log.warning(
            "lirun: finalizing run %s failed; returning the in-memory status %s",
            ctx.session_id,
            status,
            exc_info=True,
        )
        return status
    finally:
        ctx.close()


async def teardown_persist(
    ctx: PersistContext | None,
    *,
    status: str = "completed",
    exception: BaseException | None = None,
    extras: Mapping[str, Any] | None = None,
    escalated_evidence: Sequence[Mapping[str, Any]] | None = None,
    cwd: str | None = None,
    engine_session_uid: str | None = None,
    defer_terminal: bool = False,
) -> str:
    """Async ``teardown_persist_sync`` (run in a worker thread)."""
    call = functools.partial(
        teardown_persist_sync,
        ctx,
        status=status,
        exception=exception,
        extras=extras,
        escalated_evidence=escalated_evidence,
        cwd=cwd,
        engine_session_uid=engine_session_uid,
        defer_terminal=defer_terminal,
    )
    return await _in_thread(call)
