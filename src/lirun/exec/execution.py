"""One supervised execution, shared by ``li run`` and ``li agent``.

apply pending outcomes of this database → prepare (checks that need no row: cwd, branch
to resume, invocation, id collision) → allocate the run → ``setup_record_sync`` (run.json
+ the running row with owner identity and a lease; if it fails nothing starts, exit 2) →
supervise one leg (two with ``--resume-on-timeout``) while a heartbeat thread renews the
lease and a recorder thread persists stream messages → ``finalize_sync`` (the outcome is
written, or spooled when the database stays unwritable) → what the last leg's child left
running is ended after its grace, and what needed SIGKILL then is added to the record
(``ending``): the outcome lands before that grace, so an owner killed during it leaves
the record true.

Signals to ``li`` are trapped from before prepare to the end of teardown (``li run`` holds
them until the process exits), so the exit code is that of the stored status.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lirun.errors import DatabaseError, StartInterruptedError
from lirun.exec import cgroup as cgroups
from lirun.exec import lease_note
from lirun.exec.ending import Ending
from lirun.exec.environment import child_env
from lirun.exec.heartbeat import Heartbeat
from lirun.exec.legs import Leg, LegContext, LegOutcome
from lirun.exec.message import Message
from lirun.exec.preflight import Resume, preflight
from lirun.exec.recorder import Recorder
from lirun.exec.request import RunRequest, RunResult, settings_of
from lirun.exec.supervisor import ProcessResult, supervise
from lirun.lifecycle import exit_code_for_status
from lirun.liveness import (
    DEFAULT_LEASE_SECONDS,
    HEARTBEAT_INTERVAL,
    current_owner,
    process_start_time,
)
from lirun.logs import get_logger
from lirun.record import credential
from lirun.record.rundir import RunDir, allocate_run
from lirun.record.spool import apply_pending
from lirun.record.teardown import finalize_sync, setup_record_sync, teardown_persist_sync
from lirun.signals import SignalTrap
from lirun.store import Store, open_store

log = get_logger(__name__)

if TYPE_CHECKING:
    from lirun.record.facts import TeardownExtras
    from lirun.record.teardown import Finalized, PersistContext

__all__ = [
    "Resume",
    "child_env",
    "execute",
    "prepare",
]

# Assistant messages longer than this are cut (the tail is kept): the row is a record,
# the stream buffer holds everything.
_MAX_RESPONSE_CHARS = 64 * 1024


def prepare(request: RunRequest, store: Store) -> Resume | None:
    """Every check that must fail before a row exists (exit 2, nothing created), a bad
    ``LIRUN_*`` setting among them when the request carries no settings."""
    return preflight(
        store,
        cwd=request.cwd,
        run_id=settings_of(request).run_id,
        invocation_id=request.invocation_id,
        resume_branch=request.resume_branch,
        provider=request.program.provider,
    )


# --- the execution ----------------------------------------------------------------------------


def _run_fields(
    request: RunRequest, run: RunDir, resume: Resume | None, lease: float
) -> dict[str, Any]:
    program = request.program
    resume_uid = resume.engine_session_uid if resume else None
    return {
        "provider": program.provider,
        "model": program.model,
        "command_json": program.command_line(resume_uid),
        "cwd": request.cwd,
        "branch_id": resume.branch_id if resume else run.run_id,
        "resumed_from": resume.resumed_from if resume else None,
        "invocation_id": request.invocation_id,
        "heartbeat_at": time.time(),
        "lease_seconds": lease,
        "metadata_json": request.metadata or None,
        **program.record_fields(),
        **current_owner(),
        **request.row_fields,
    }


def _intervals(request: RunRequest) -> tuple[float, float]:
    """(heartbeat interval, lease): several beats always fit in one lease. The request's
    settings' interval (``$LIRUN_HEARTBEAT_INTERVAL``), else the default."""
    interval = settings_of(request).heartbeat_interval or HEARTBEAT_INTERVAL
    return interval, max(DEFAULT_LEASE_SECONDS, 4 * interval)


class _Execution:
    """State of one execution between setup and teardown."""

    def __init__(
        self, request: RunRequest, store: Store, run: RunDir, resume: Resume | None
    ) -> None:
        self.request = request
        self.store = store
        self.run = run
        self.resume = resume
        self.branch_id = resume.branch_id if resume else run.run_id
        self.engine_uid: str | None = resume.engine_session_uid if resume else None
        self.recorder = Recorder()
        self.recorded = True
        self.saw_assistant_text = False
        self.retries_before = 0  # the provider's retries in earlier legs (a resume)
        self.supervised_until: float | None = None  # when the last leg's watch ended
        self.lease_lapse: lease_note.LeaseNote | None = None  # what the guard saw (last leg)
        self.passfile: Path | None = None  # the child's credential file, while it runs
        self.ending: Ending | None = None  # the last leg's leftovers, ended after the record

    def end_leftovers(self) -> list[dict[str, Any]]:
        """End what the last leg's child left (after its grace); the evidence of what
        needed SIGKILL."""
        ending, self.ending = self.ending, None
        return ending.finish() if ending is not None else []

    # -- database writes that go through the recorder thread --

    def record(self, message: Message) -> None:
        if message.role == "assistant":
            self.saw_assistant_text = True
        if self.recorded:
            sid = self.run.run_id
            self.recorder.submit(
                lambda: self.store.sessions.append_message(
                    sid, role=message.role, content=message.content
                ),
                size=len(message.content),
            )

    def join_branch(self) -> None:
        """This execution is now the branch's last one (a new branch: the run id)."""
        self.store.sessions.upsert_branch(
            self.branch_id, session_id=self.run.run_id, provider=self.request.program.provider
        )

    def on_spawn(self, pid: int) -> None:
        """Record the child (its own group leader) so a reaper can stop it if li dies."""

        if self.recorded:
            sid = self.run.run_id
            self.recorder.submit(
                lambda: self.store.update_fields(
                    "session",
                    sid,
                    {"child_pid": pid, "child_start_time": process_start_time(pid)},
                    touch=False,
                )
            )

    def on_progress(self, fields: dict[str, Any]) -> None:
        """Retries so far (every leg's), the last error, the model, the version: on the
        row while the agent runs (the final record overwrites them when its legs end)."""
        retries = fields.get("provider_retries")
        if retries is not None:
            fields = {**fields, "provider_retries": retries + self.retries_before}
        sid, update = self.run.run_id, self.store.update_fields
        if self.recorded:
            self.recorder.submit(lambda: update("session", sid, fields, touch=False))

    def on_engine_uid(self, uid: str) -> None:
        self.engine_uid = uid
        if self.recorded:
            self.recorder.submit(lambda: self._link_engine(uid))

    def _link_engine(self, uid: str) -> None:
        sid = self.run.run_id
        self.store.update_fields("session", sid, {"engine_session_uid": uid})
        self.store.sessions.upsert_branch(
            self.branch_id,
            session_id=sid,
            provider=self.request.program.provider,
            engine_session_uid=uid,
        )

    # -- legs --

    def child_env(self) -> dict[str, str]:
        """The child's environment; the credential file is written before the first leg
        (removed by ``_supervised`` when the legs ended)."""
        if self.request.db_credential and self.passfile is None:
            self.passfile = credential.give(self.run.state_root, self.store.url)
        fence = settings_of(self.request).fence  # a worker's run's (li lease check)
        env = child_env(self.run, db_url=self.store.url, passfile=self.passfile, fence=fence)
        return {**env, **self.request.env}

    def _leg_env(self, leg: Leg) -> dict[str, str]:
        env = self.child_env()  # + what the program adds; the request's own env wins
        return {**env, **leg.extra_env(env), **self.request.env}

    def run_leg(self, trap: SignalTrap, *, continuation: bool) -> LegOutcome:
        ctx = LegContext(
            run=self.run,
            branch_id=self.branch_id,
            echo=self.request.echo,
            record=self.record,
            on_engine_uid=self.on_engine_uid,
            on_event=self.request.on_event,
            on_progress=self.on_progress,
            resume_uid=self.engine_uid,
            continuation=continuation,
        )
        leg = self.request.program.new_leg(ctx)
        try:
            return self._supervise(leg, trap)
        finally:
            self.supervised_until = time.monotonic()
            leg.close()

    def _supervise(self, leg: Leg, trap: SignalTrap) -> LegOutcome:
        if trap.signal_name is not None:  # stopped before the child started
            return leg.judge(None, trap.signal_name)
        began = time.time()
        result: ProcessResult = supervise(
            leg.argv,
            stdout=leg.stdout,
            stderr=leg.stderr,
            limits=self.request.limits,
            cwd=self.request.cwd,
            env=self._leg_env(leg),
            stdin=leg.stdin if leg.stdin is not None else self.request.stdin,
            trap=trap,
            terminal_seen=leg.terminal_seen,
            on_spawn=self.on_spawn,
            progress=leg.stream_progress(),
            note_dir=self.run.state_root,
            settings=settings_of(self.request),
            defer_ending=True,
        )
        self.ending = result.ending
        # The owner's guard, if the lease lapsed meanwhile, says whether it stopped the child.
        self.lease_lapse = lease_note.take(self.run.state_root, since=began)
        return lease_note.judged(leg.judge(result, result.signal_name), self.lease_lapse)


def _should_resume(ex: _Execution, outcome: LegOutcome, trap: SignalTrap) -> bool:
    """Once, after a timeout li did not cause by a signal; an agent needs its session id."""
    if not ex.request.resume_on_timeout or outcome.status != "timed_out":
        return False
    is_agent = ex.request.program.provider != "command"
    return trap.received is None and (ex.engine_uid is not None or not is_agent)


def _run_legs(ex: _Execution, trap: SignalTrap, ctx: Any) -> tuple[LegOutcome, list[LegOutcome]]:
    legs: list[LegOutcome] = []
    while True:
        try:
            outcome = ex.run_leg(trap, continuation=bool(legs))
        except Exception as exc:  # SpawnError, or a buffer that cannot be written
            # The row exists: it must still be finalized, with the cause as evidence.
            outcome = LegOutcome(status="failed", exception=exc)
            log.error("%s", exc, extra={"event": "run.leg_failed", "run_id": ex.run.run_id})
        legs.append(outcome)
        ex.retries_before += int(outcome.record.get("provider_retries") or 0)
        if len(legs) > 1 or not _should_resume(ex, outcome, trap):
            return outcome, legs
        ex.end_leftovers()  # nothing of the first leg runs beside the second
        # design.md D4: the first leg defers; the resumed leg owns finalization (one row, one id).
        teardown_persist_sync(ctx, status=outcome.status, defer_terminal=True)
        log.info(
            "run %s timed out; resuming once", ex.run.run_id,
            extra={"event": "run.resumed", "run_id": ex.run.run_id},
        )  # fmt: skip


def _final_extras(outcome: LegOutcome, legs: list[LegOutcome]) -> TeardownExtras:
    """The last leg's extras, with the retry note and, after a resume, one fact per leg."""
    extras = outcome.extras
    if outcome.summary_note:
        extras = replace(extras, summary_note=outcome.summary_note)
    if len(legs) > 1:
        leg_facts = [leg.leg_evidence(n) for n, leg in enumerate(legs, start=1)]
        extras = replace(
            extras,
            evidence=(*extras.evidence, *leg_facts),
            metadata={**extras.metadata, "legs": len(legs)},
        )
    return extras


def leg_record(legs: list[LegOutcome]) -> dict[str, Any]:
    """The row's record columns: the last leg's facts; durations and retries add up."""
    record = dict(legs[-1].record)
    for key in ("duration_s", "provider_retries"):
        values = [leg.record[key] for leg in legs if leg.record.get(key) is not None]
        if values:
            record[key] = round(sum(values), 3) if key == "duration_s" else sum(values)
    return record


def _persist_record(ex: _Execution, legs: list[LegOutcome]) -> None:
    """What the execution did, on its row before the terminal write (the row is a record;
    a detached run's answer must not live only in the stream files)."""
    record = leg_record(legs)
    if record and ex.recorded:
        sid = ex.run.run_id
        ex.recorder.submit(lambda: ex.store.update_fields("session", sid, record, touch=False))


def _persist_response(ex: _Execution, outcome: LegOutcome) -> None:
    """A reply the stream did not carry as a message (a bare result), or a command's
    stdout: its ``output``, never an assistant message."""
    text = outcome.reply
    if not text.strip() or ex.saw_assistant_text:
        return

    text = text[-_MAX_RESPONSE_CHARS:]
    ex.record(Message("output", text) if outcome.extras.command else Message("assistant", text))


def _supervised(
    ex: _Execution, trap: SignalTrap, ctx: PersistContext
) -> tuple[Finalized, LegOutcome]:
    """The legs, then the outcome, then the end of what the last leg left running (it
    got its first signal when the child exited): the record lands before their grace."""
    try:
        finalized, outcome = _recorded(ex, trap, ctx)
    finally:
        late = ex.end_leftovers()
    if late and finalized.spool is None:
        _append_late(ex, late)
    return finalized, outcome


def _append_late(ex: _Execution, late: list[dict[str, Any]]) -> None:
    """What needed SIGKILL after the outcome was written joins the record (audited)."""
    try:
        ex.store.sessions.append_evidence(ex.run.run_id, late, source="leftovers")
    except (DatabaseError, OSError) as exc:
        log.warning(
            "run %s: the evidence of the processes killed after its grace was not "
            "recorded (%s)", ex.run.run_id, exc,
            extra={"event": "run.evidence_lost", "run_id": ex.run.run_id},
        )  # fmt: skip


def _recorded(
    ex: _Execution, trap: SignalTrap, ctx: PersistContext
) -> tuple[Finalized, LegOutcome]:
    interval, _ = _intervals(ex.request)
    heartbeat = Heartbeat(lambda: ex.store.sessions.heartbeat(ex.run.run_id), interval)
    # Between setup and teardown every write goes through the recorder or the heartbeat,
    # which report failures instead of raising: the row must reach teardown.
    with ex.recorder:
        ex.recorder.submit(ex.join_branch)
        heartbeat.start()
        try:
            outcome, legs = _run_legs(ex, trap, ctx)
        finally:
            heartbeat.stop()
            if ex.passfile is not None:  # no child is left to use it
                credential.remove(ex.run.state_root)
        _persist_response(ex, outcome)
        _persist_record(ex, legs)
        ex.recorder.flush()
    finalized = finalize_sync(
        ctx,
        status=outcome.status,
        exception=outcome.exception,
        extras=_final_extras(outcome, legs),
        cwd=ex.request.cwd,
        engine_session_uid=outcome.engine_session_uid or ex.engine_uid,
    )
    return finalized, outcome


def _result(ex: _Execution, finalized: Finalized, outcome: LegOutcome) -> RunResult:
    return RunResult(
        run_id=ex.run.run_id,
        status=finalized.status,
        reason=finalized.reason_code,
        run_dir=str(ex.run.state_root),
        artifact_dir=str(ex.run.artifact_dir),
        exit_code=exit_code_for_status(finalized.status),
        branch_id=ex.branch_id,
        engine_session_uid=outcome.engine_session_uid or ex.engine_uid,
        reply=outcome.reply,
        recorded=finalized.spool is None,
        pending=str(finalized.spool) if finalized.spool is not None else None,
        supervised_until=ex.supervised_until,
        lease_lapse=ex.lease_lapse,
    )


def _discard(run: RunDir) -> None:
    """Remove the state directory of a run that never started (its id stays free)."""
    shutil.rmtree(run.state_root, ignore_errors=True)


def _setup(ex: _Execution, trap: SignalTrap) -> PersistContext:
    """Create the record, or refuse: nothing starts without one (exit 2, design.md §4.8)."""

    if trap.received is not None:
        _discard(ex.run)
        raise StartInterruptedError(
            f"{trap.signal_name} received while starting; run {ex.run.run_id} was not started "
            "and nothing was recorded"
        )
    _, lease = _intervals(ex.request)
    fields = _run_fields(ex.request, ex.run, ex.resume, lease)
    try:
        ex.run.ensure_artifact_dir()  # the work's deliverables go there: it must exist
        return setup_record_sync(
            ex.run, db=ex.store, artifact_contract=ex.request.artifact_contract, **fields
        )
    except Exception:
        _discard(ex.run)
        raise


def _warn_pending(result: RunResult, finalized: Finalized) -> None:
    log.warning(
        "run %s ended %s but the database could not be written (%s); the outcome is pending "
        "in %s and the next li wait, status, reap or run on this database records it",
        result.run_id, result.status, finalized.cause, finalized.spool,
        extra={"event": "run.outcome_pending", "run_id": result.run_id},
    )  # fmt: skip


def _apply_pending(db: Store) -> None:
    try:
        apply_pending(db)
    except (DatabaseError, OSError) as exc:
        log.warning("pending run outcomes stay spooled (%s)", exc, extra={"event": "spool.kept"})


def execute(
    request: RunRequest, *, store: Store | None = None, trap: SignalTrap | None = None
) -> RunResult:
    """Run one supervised execution to its end: the call ``li run`` and ``li agent`` make.

    ``request`` says what to run (``CommandProgram`` or an agent program), where, under
    which ``Limits``, with which settings (``request.settings``; None: the environment's,
    read once here), among them the database (``settings.db_url``, else the default) and
    the run id (``settings.run_id``, else a new one). ``store``: an open Store to use (not
    closed here); ``trap``: a SignalTrap the caller already holds (``li run``), else one is
    installed for the call, so call it from the main thread.

    Returns an RunResult: the run id, the status and reason the record holds (which
    may be another writer's, e.g. a reaper that won the race), ``exit_code`` as ``li``
    would exit, the run and artifact directories, the engine session uid and the reply
    text. The child's fate (failure, timeout, signal) is a status, never an exception;
    ``result.pending`` names the spool file when the database could not be written and
    the outcome waits for the next ``li`` command on that database.

    Raises a LirunError (each carries the exit code ``li`` uses) before anything is
    created when the database cannot be opened (DatabaseError) or a check fails
    (UsageError, NotFoundError, ConflictError), StartInterruptedError when a signal came
    before the record existed, RecordSetupError when the record cannot be created (no run
    without a record: unlike ``setup_persist`` for library callers, this never runs
    unrecorded), and OutcomeNotRecordedError after the run when neither the database nor
    the spool could take the outcome (its exit code is the outcome's: the run started).
    """
    settings = settings_of(request)  # read once, for the run
    request = replace(request, settings=settings)
    cgroups.prime(settings)  # the child's join into its cgroup, sped up
    own = store is None
    db = store if store is not None else open_store(settings.db_url)
    try:
        _apply_pending(db)
        with contextlib.nullcontext(trap) if trap is not None else SignalTrap() as active:
            resume = prepare(request, db)
            run = allocate_run(request.save_dir, settings.run_id, settings)
            ex = _Execution(request, db, run, resume)
            ctx = _setup(ex, active)
            finalized, outcome = _supervised(ex, active, ctx)
            result = _result(ex, finalized, outcome)
            if finalized.spool is not None:
                _warn_pending(result, finalized)
            return result
    finally:
        if own:
            db.close()
