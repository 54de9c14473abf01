"""``setup_persist`` / ``teardown_persist``: I/O around ``decide_outcome`` (design.md D1, D4-D5).

Setup: a malformed artifact contract or an unknown session field is the caller's mistake
and raises *before* anything is written. ``setup_record_sync`` (what ``li run`` uses)
raises RecordSetupError for any other failure, so no run starts without a record;
``setup_persist_sync`` keeps the ADR's library contract (a warning, and ``None``).

Teardown retries a write that fails for up to ``$LIRUN_WRITE_RETRY_SECONDS``; if the
database still refuses, the decided outcome is spooled (``lirun.record.spool``) for the next
command on that database to apply. ``finalize_sync`` reports which happened (and raises
when even the spool cannot be written); ``teardown_persist_sync`` never raises and
returns the status. The async functions run the sync twins in a worker thread.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lirun.async_twin import async_twin
from lirun.errors import (
    ConflictError,
    NotFoundError,
    RecordSetupError,
    UsageError,
    ValidationError,
)
from lirun.lifecycle import is_terminal
from lirun.logs import get_logger
from lirun.paths import lirun_home, runs_root
from lirun.record.artifacts import contract_warnings, validate_artifact_contract
from lirun.record.context import PersistContext
from lirun.record.correction import correction_for
from lirun.record.evidence import StartSnapshot, take_start_snapshot, unchecked_snapshot
from lirun.record.facts import TeardownExtras, gather_facts
from lirun.record.outcome import decide_outcome
from lirun.record.outcome_write import STORE_ERRORS, Finalized, spool, with_retry, write_outcome
from lirun.record.rundir import RunDir
from lirun.record.spool import release_reservation, reserve_spool
from lirun.store import StateDB, Store, open_store
from lirun.store.records import SESSION_FIELDS
from lirun.store.retry import retry_write
from lirun.store.urls import redact_url

__all__ = [
    "Finalized",
    "PersistContext",
    "finalize_sync",
    "setup_persist",
    "setup_persist_sync",
    "setup_record_sync",
    "teardown_persist",
    "teardown_persist_sync",
]

log = get_logger(__name__)

DbArg = StateDB | Store | str | os.PathLike[str] | None

# Set from the RunDir (one execution, one id: design.md §4.1), never by the caller.
_RESERVED_FIELDS = frozenset(
    {"id", "status", "run_id", "run_dir", "artifacts_path", "artifact_contract_json"}
)


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


def setup_record_sync(
    run: RunDir,
    *,
    db: DbArg = None,
    artifact_contract: Mapping[str, Any] | None = None,
    **session_fields: Any,
) -> PersistContext:
    """Write ``run.json`` and create the execution row, or raise: no run without a record.

    This is what ``li run`` / ``li agent`` use (design.md §4.8): a setup write that fails
    (a lock held past the retry bound, a full disk, a damaged file) raises
    RecordSetupError (exit 2) and the caller starts nothing. Bad input raises as in
    ``setup_persist_sync``.
    """
    _check_session_fields(session_fields)
    session_fields = {
        k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in session_fields.items()
    }
    validate_artifact_contract(artifact_contract)
    for note in contract_warnings(artifact_contract):
        log.warning("%s", note)
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
        _reserve(store.url, run.run_id)
        _create_record(
            store,
            id=run.run_id,
            run_id=run.run_id,
            run_dir=str(run.state_root),
            artifacts_path=str(run.artifact_dir),
            artifact_contract=contract,
            started_at=started_at,
            **session_fields,
        )
    except Exception as exc:
        if store is not None:
            _release(store.url, run.run_id)
        if store is not None and owned:
            PersistContext(store, run.run_id, run, None, owned, started_at).close()
        raise RecordSetupError(
            f"cannot create the record of run {run.run_id}, so nothing was started: {exc}"
        ) from exc
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


def _create_record(store: Store, **fields: Any) -> None:
    """Create the run's row, trying again through a lost connection or a held lock within
    the write-retry bound (a primary lost in a failover, a cut link): nothing has started
    yet, so waiting is safe. A try whose COMMIT landed before its connection went makes
    the next one conflict; the row it finds, with this run's start time, is this run's."""

    def attempt(_wait_seconds: float, tries: int) -> None:
        try:
            store.sessions.create(**fields)
        except ConflictError:
            row = store.sessions.get(fields["id"]) if tries else None
            if row is None or row.started_at != fields["started_at"]:
                raise

    retry_write(attempt, where=redact_url(store.url))


def _reserve(url: str, run_id: str) -> None:
    """Reserve the space the run's ending needs (its spool), or refuse to start it."""

    reserve_spool(url, run_id)


def _release(url: str, run_id: str) -> None:
    release_reservation(url, run_id)


def _start_snapshot(run: RunDir, cwd: object) -> StartSnapshot | None:
    """The cwd before the work starts, li's own files left out; never raises.

    The run's state directory and the lirun home (other runs, a SQLite database) change
    during any run when they sit inside the cwd: they are never the work. A cwd inside the
    home is a worktree lirun made for a flow leg or a play: there only the runs are
    lirun's own, or the work itself would be left out.
    """
    if not isinstance(cwd, str) or not cwd:
        return None

    home = lirun_home()
    inside = Path(os.path.abspath(cwd)).is_relative_to(os.path.abspath(home))
    own = runs_root() if inside else home
    try:
        return take_start_snapshot(cwd, exclude=(run.state_root, own))
    except Exception as exc:  # the run must not fail for want of a baseline
        log.warning("no start snapshot of %s (%s: %s)", cwd, type(exc).__name__, exc)
        return unchecked_snapshot(f"start snapshot failed: {type(exc).__name__}: {exc}")


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
    failure: a warning is logged, what was opened is closed, and None is returned (the
    ADR's contract for library callers, kept; ``li run`` uses ``setup_record_sync``,
    which refuses to run without a record).
    """
    try:
        return setup_record_sync(run, db=db, artifact_contract=artifact_contract, **session_fields)
    except RecordSetupError as exc:
        cause = exc.__cause__ or exc
        log.warning(
            "could not set up the durable record for run %s (%s: %s); the run goes on without one",
            run.run_id,
            type(cause).__name__,
            cause,
        )
        return None


# The ADR's async API: the sync functions above and below, run in a worker thread.
setup_persist = async_twin(setup_persist_sync, "setup_persist")


# --- teardown -----------------------------------------------------------------------------


def _finalize(ctx: PersistContext, **request: Any) -> Finalized:
    """Read the row, gather facts, decide, then write (or spool) unless already terminal."""
    ended_at = ctx.clock()
    try:
        session = with_retry(ctx, lambda: ctx.store.sessions.get(ctx.session_id))
    except STORE_ERRORS as exc:
        # Unreadable: decide from what this process knows (the row was running).
        snapshot = ctx.snapshot_status or "running"
        facts = gather_facts(ctx, None, offline=True, **request)
        return spool(ctx, snapshot, decide_outcome(facts), facts, ended_at, exc)
    if session is None:
        raise NotFoundError(f"no execution row {ctx.session_id} to finalize")
    snapshot = session.status
    ctx.snapshot_status = snapshot
    try:
        facts = gather_facts(ctx, session, **request)
    except STORE_ERRORS:
        facts = gather_facts(ctx, session, offline=True, **request)
    outcome = decide_outcome(facts)
    if is_terminal("session", snapshot):
        correction = correction_for(
            snapshot,
            session.status_reason_code,
            outcome.status,
            outcome.reason_code,
            exit_code=facts.exit_code,
            evidence=outcome.evidence,
            recorded_at=session.ended_at,
        )
        if correction is not None:
            return write_outcome(ctx, snapshot, outcome, facts, ended_at, correction)
        # Terminal records are immutable (design.md D5): the durable row is the answer.
        if outcome.status != snapshot:
            log.warning(
                "run %s is already %s; this invocation computed %s (not written)",
                ctx.session_id,
                snapshot,
                outcome.status,
            )
        return Finalized(snapshot, session.status_reason_code, outcome, already_terminal=True)
    try:
        return write_outcome(ctx, snapshot, outcome, facts, ended_at)
    except STORE_ERRORS as exc:
        return spool(ctx, snapshot, outcome, facts, ended_at, exc)


def finalize_sync(
    ctx: PersistContext,
    *,
    status: str = "completed",
    exception: BaseException | None = None,
    extras: TeardownExtras | None = None,
    escalated_evidence: Sequence[Mapping[str, Any]] | None = None,
    cwd: str | None = None,
    engine_session_uid: str | None = None,
) -> Finalized:
    """Teardown for ``li run`` (typed: ``extras`` is already a TeardownExtras): the outcome
    is written, or spooled, or this raises; returns the record's status and reason and the
    decided Outcome.

    Raises OutcomeNotRecordedError (its exit code the outcome's: the run started) when
    neither the database nor the spool could take it (the spool's space is reserved at
    setup, so only when that was taken away), NotFoundError when the row is gone. Closes
    the context.
    """
    try:
        return _finalize(
            ctx,
            status=status,
            exception=exception,
            extras=extras if extras is not None else TeardownExtras(),
            escalated_evidence=escalated_evidence or (),
            cwd=cwd,
            engine_session_uid=engine_session_uid,
        )
    finally:
        # Written (the space is not needed), spooled (it became the spool) or raising.
        _release(ctx.store.url, ctx.session_id)
        ctx.close()


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
    """Finalize the execution row (design.md D4 order, D5 race handling); return the final status.

    ``ctx`` None: the in-memory ``status``. ``defer_terminal``: ``status`` with no database
    change and the handle left open for the resumed leg, which owns finalization. A write
    that cannot land is spooled (see ``finalize_sync``); this never raises. ``extras`` is
    the one lenient boundary: it is parsed once here (``TeardownExtras.parse``), a bad
    hint is logged and dropped.
    """
    if ctx is None:
        return status
    if defer_terminal:
        return status
    if ctx.closed:
        log.warning("run %s was already finalized; nothing to do", ctx.session_id)
        return status
    try:
        done = finalize_sync(
            ctx,
            status=status,
            exception=exception,
            extras=TeardownExtras.parse(extras),
            escalated_evidence=escalated_evidence,
            cwd=cwd,
            engine_session_uid=engine_session_uid,
        )
        if done.spool is not None:  # li run says it itself; a library caller is told here
            log.warning(
                "run %s ended %s but the database could not be written (%s); the "
                "outcome is spooled in %s",
                ctx.session_id,
                done.status,
                done.cause,
                done.spool,
            )
        # A row terminal before teardown: its own verdict, as library callers always got.
        return done.decided.status if done.already_terminal else done.status
    except Exception:
        log.warning(
            "finalizing run %s failed; returning the in-memory status %s",
            ctx.session_id,
            status,
            exc_info=True,
        )
        return status
    finally:
        ctx.close()


teardown_persist = async_twin(teardown_persist_sync, "teardown_persist")
