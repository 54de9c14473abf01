"""One supervised execution, shared by ``li run`` and ``li agent``.

prepare (checks that need no row: cwd, branch to resume, invocation, id collision) →
allocate the run → ``setup_persist`` (run.json + the running row with owner identity and
a lease) → supervise one leg (two with ``--resume-on-timeout``) while a heartbeat thread
renews the lease and a recorder thread persists stream messages → ``teardown_persist``.

Signals to ``li`` are trapped from allocation to the end of teardown, so the terminal
write is committed before ``li`` exits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from lirun.exec.heartbeat import Heartbeat
from lirun.exec.legs import Echo, Leg, LegContext, LegOutcome, Program
from lirun.exec.preflight import Resume, preflight
from lirun.exec.recorder import Recorder
from lirun.exec.supervisor import Limits, ProcessResult, supervise
from lirun.lifecycle import EXIT_CODE_BY_STATUS
from lirun.rundir import RUN_ID_ENV_VARS, RunDir, allocate_run
from lirun.signals import SignalTrap
from lirun.store import Store, open_store

if TYPE_CHECKING:
    from lirun.exec.stream import Event, Message

__all__ = [
    "ExecutionRequest",
    "ExecutionResult",
    "Resume",
    "child_env",
    "execute",
    "exit_code_for",
    "prepare",
]

# Assistant messages longer than this are cut (the tail is kept): the row is a record,
# the stream buffer holds everything.
_MAX_RESPONSE_CHARS = 64 * 1024


@dataclass(slots=True)
class ExecutionRequest:
    """Everything an execution needs, already validated by the CLI."""

    program: Program
    cwd: str
    limits: Limits = field(default_factory=Limits)
    save_dir: str | None = None
    run_id: str | None = None
    db_url: str | None = None
    artifact_contract: Mapping[str, Any] | None = None
    invocation_id: str | None = None
    resume_branch: str | None = None
    resume_on_timeout: bool = False
    echo: Echo = field(default_factory=Echo)
    stdin: int | IO[Any] | None = subprocess.DEVNULL
    on_event: Callable[[str, Event], None] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    heartbeat_interval: float | None = None


@dataclass(slots=True)
class ExecutionResult:
    """How the execution ended, as ``li`` reports it (``--json``)."""

    run_id: str
    status: str
    reason: str | None
    run_dir: str
    artifact_dir: str
    exit_code: int
    branch_id: str
    engine_session_uid: str | None = None
    response_text: str = ""
    recorded: bool = True

    def summary(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "reason": self.reason,
            "run_dir": self.run_dir,
            "artifact_dir": self.artifact_dir,
            "exit_code": self.exit_code,
            "branch_id": self.branch_id,
            "engine_session_uid": self.engine_session_uid,
        }


def exit_code_for(status: str) -> int:
    """``li``'s exit code for a final status; anything unexpected is unsuccessful (1)."""
    return EXIT_CODE_BY_STATUS.get(status, 1)


def child_env(run: RunDir, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: where to put deliverables, and which run is its parent.

    A nested ``li`` must not inherit this run's id, so the run id variables are removed.
    """
    env = dict(os.environ if base is None else base)
    for var in RUN_ID_ENV_VARS:
        env.pop(var, None)
    env["LIRUN_PARENT_RUN_ID"] = run.run_id
    env["LIRUN_ARTIFACT_DIR"] = str(run.artifact_root)
    return env


def prepare(request: ExecutionRequest, store: Store) -> Resume | None:
    """Every check that must fail before a row exists (exit 2, nothing created)."""
    return preflight(
        store,
        cwd=request.cwd,
        run_id=request.run_id,
        invocation_id=request.invocation_id,
        resume_branch=request.resume_branch,
        provider=request.program.provider,
    )


# --- the execution ----------------------------------------------------------------------------


def _session_fields(
    request: ExecutionRequest, run: RunDir, resume: Resume | None, lease: float
) -> dict[str, Any]:
    from lirun.liveness import current_owner

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
    }


def _intervals(request: ExecutionRequest) -> tuple[float, float]:
    """(heartbeat interval, lease): several beats always fit in one lease."""
    from lirun.liveness import DEFAULT_LEASE_SECONDS, HEARTBEAT_INTERVAL

    interval = request.heartbeat_interval or HEARTBEAT_INTERVAL
    return interval, max(DEFAULT_LEASE_SECONDS, 4 * interval)


class _Execution:
    """State of one execution between setup and teardown."""

    def __init__(
        self, request: ExecutionRequest, store: Store, run: RunDir, resume: Resume | None
    ) -> None:
        self.request = request
        self.store = store
        self.run = run
        self.resume = resume
        self.branch_id = resume.branch_id if resume else run.run_id
        self.engine_uid: str | None = resume.engine_session_uid if resume else None
        self.recorder = Recorder()
        self.recorded = False
        self.saw_assistant_text = False

    # -- database writes that go through the recorder thread --

    def record(self, message: Message) -> None:
        if message.role == "assistant":
            self.saw_assistant_text = True
        if self.recorded:
            sid = self.run.run_id
            self.recorder.submit(
                lambda: self.store.append_message(sid, role=message.role, content=message.content)
            )

    def join_branch(self) -> None:
        """This execution is now the branch's last one (a new branch: the run id)."""
        self.store.upsert_branch(
            self.branch_id, session_id=self.run.run_id, provider=self.request.program.provider
        )

    def on_spawn(self, pid: int) -> None:
        """Record the child (its own group leader) so a reaper can stop it if li dies."""
        from lirun.liveness import process_start_time

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

    def on_engine_uid(self, uid: str) -> None:
        self.engine_uid = uid
        if self.recorded:
            self.recorder.submit(lambda: self._link_engine(uid))

    def _link_engine(self, uid: str) -> None:
        sid = self.run.run_id
        self.store.update_fields("session", sid, {"engine_session_uid": uid})
        self.store.upsert_branch(
            self.branch_id,
            session_id=sid,
            provider=self.request.program.provider,
            engine_session_uid=uid,
        )

    # -- legs --

    def run_leg(self, trap: SignalTrap, *, continuation: bool) -> LegOutcome:
        ctx = LegContext(
            run=self.run,
            branch_id=self.branch_id,
            echo=self.request.echo,
            record=self.record,
            on_engine_uid=self.on_engine_uid,
            on_event=self.request.on_event,
            resume_uid=self.engine_uid,
            continuation=continuation,
        )
        leg = self.request.program.new_leg(ctx)
        try:
            return self._supervise(leg, trap)
        finally:
            leg.close()

    def _supervise(self, leg: Leg, trap: SignalTrap) -> LegOutcome:
        if trap.signal_name is not None:  # stopped before the child started
            return leg.judge(None, trap.signal_name)
        result: ProcessResult = supervise(
            leg.argv,
            stdout=leg.stdout,
            stderr=leg.stderr,
            limits=self.request.limits,
            cwd=self.request.cwd,
            env=child_env(self.run),
            stdin=leg.stdin if leg.stdin is not None else self.request.stdin,
            trap=trap,
            terminal_seen=leg.terminal_seen,
            on_spawn=self.on_spawn,
        )
        return leg.judge(result, trap.signal_name)


def _should_resume(ex: _Execution, outcome: LegOutcome, trap: SignalTrap) -> bool:
    """Once, after a timeout li did not cause by a signal; an agent needs its session id."""
    if not ex.request.resume_on_timeout or outcome.status != "timed_out":
        return False
    is_agent = ex.request.program.provider != "command"
    return trap.received is None and (ex.engine_uid is not None or not is_agent)


def _run_legs(ex: _Execution, trap: SignalTrap, ctx: Any) -> tuple[LegOutcome, list[LegOutcome]]:
    from lirun.teardown import teardown_persist_sync

    legs: list[LegOutcome] = []
    while True:
        try:
            outcome = ex.run_leg(trap, continuation=bool(legs))
        except Exception as exc:  # SpawnError, or a buffer that cannot be written
            # The row exists: it must still be finalized, with the cause as evidence.
            outcome = LegOutcome(status="failed", exception=exc)
            sys.stderr.write(f"li: error: {exc}\n")
        legs.append(outcome)
        if len(legs) > 1 or not _should_resume(ex, outcome, trap):
            return outcome, legs
        # ADR D4: the first leg defers; the resumed leg owns finalization (one row, one id).
        teardown_persist_sync(ctx, status=outcome.status, defer_terminal=True)
        sys.stderr.write(f"li: run {ex.run.run_id} timed out; resuming once\n")


def _final_extras(outcome: LegOutcome, legs: list[LegOutcome]) -> dict[str, Any]:
    extras = dict(outcome.extras)
    if outcome.summary_note:
        extras["summary_note"] = outcome.summary_note
    if len(legs) > 1:
        leg_facts = [leg.leg_evidence(n) for n, leg in enumerate(legs, start=1)]
        extras["evidence"] = [*extras.get("evidence", []), *leg_facts]
        extras["metadata"] = {**extras.get("metadata", {}), "legs": len(legs)}
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
    """A reply the stream did not carry as a message (a command's stdout, a bare result)."""
    text = outcome.response_text
    if not text.strip() or ex.saw_assistant_text:
        return
    from lirun.exec.stream import Message

    ex.record(Message("assistant", text[-_MAX_RESPONSE_CHARS:]))


def _supervised(ex: _Execution, trap: SignalTrap) -> tuple[str, LegOutcome]:
    from lirun.teardown import setup_persist_sync, teardown_persist_sync

    interval, lease = _intervals(ex.request)
    fields = _session_fields(ex.request, ex.run, ex.resume, lease)
    ctx = setup_persist_sync(
        ex.run, db=ex.store, artifact_contract=ex.request.artifact_contract, **fields
    )
    ex.recorded = ctx is not None
    if ctx is None:
        sys.stderr.write(f"li: warning: run {ex.run.run_id} has no durable record\n")
    heartbeat = Heartbeat(lambda: ex.store.heartbeat(ex.run.run_id), interval)
    # Between setup and teardown every write goes through the recorder or the heartbeat,
    # which report failures instead of raising: the row must reach teardown.
    with ex.recorder:
        if ex.recorded:
            ex.recorder.submit(ex.join_branch)
            heartbeat.start()
        try:
            outcome, legs = _run_legs(ex, trap, ctx)
        finally:
            heartbeat.stop()
        _persist_response(ex, outcome)
        _persist_record(ex, legs)
        ex.recorder.flush()
    status = teardown_persist_sync(
        ctx,
        status=outcome.status,
        exception=outcome.exception,
        extras=_final_extras(outcome, legs),
        cwd=ex.request.cwd,
        engine_session_uid=outcome.engine_session_uid or ex.engine_uid,
    )
    return status, outcome


def _unrecorded_reason(outcome: LegOutcome) -> str:
    """With no row to read, the base reason the in-memory facts give (DESIGN §5)."""
    from lirun.outcome import OutcomeFacts, base_outcome

    extras = outcome.extras
    facts = OutcomeFacts(
        status=outcome.status,
        exception=outcome.exception,
        signal_name=extras.get("signal"),
        exit_code=extras.get("exit_code"),
        idle_timeout=bool(extras.get("idle_timeout")),
    )
    return base_outcome(facts).reason_code


def _result(ex: _Execution, status: str, outcome: LegOutcome) -> ExecutionResult:
    row = ex.store.get_entity("session", ex.run.run_id) if ex.recorded else None
    reason = row.get("status_reason_code") if row else _unrecorded_reason(outcome)
    return ExecutionResult(
        run_id=ex.run.run_id,
        status=status,
        reason=reason,
        run_dir=str(ex.run.state_root),
        artifact_dir=str(ex.run.artifact_root),
        exit_code=exit_code_for(status),
        branch_id=ex.branch_id,
        engine_session_uid=outcome.engine_session_uid or ex.engine_uid,
        response_text=outcome.response_text,
        recorded=ex.recorded,
    )


def execute(request: ExecutionRequest, *, store: Store | None = None) -> ExecutionResult:
    """Run the request to its end and return how it ended (never raises for the child's fate).

    Raises a LirunError (exit code 2) before anything is created when a check fails.
    """
    own = store is None
    db = store if store is not None else open_store(request.db_url)
    try:
        resume = prepare(request, db)
        with SignalTrap() as trap:
            run = allocate_run(request.save_dir, request.run_id)
            run.ensure_artifact_root()  # the work's deliverables go there: it must exist
            ex = _Execution(request, db, run, resume)
            status, outcome = _supervised(ex, trap)
            return _result(ex, status, outcome)
    finally:
        if own:
            db.close()
