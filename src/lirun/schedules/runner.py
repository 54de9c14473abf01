"""What a schedule run does: the ONE code path, whatever the transport delivered it.

``Runner.handle(run_id)`` (called in a transport's thread):

1. read the run; only a ``queued`` one goes on (a job delivered twice finds it running);
2. a run queued longer than its start deadline fails (``schedule.failed.start_deadline``);
3. ``queued → running`` by compare-and-set with this worker's id and a lease: the loser
   of a race does nothing;
4. the checks on this machine (``--allow-root``, the cwd, the flow/show file against
   its digest at ``add``) fail the run with a typed reason;
5. the action runs in-process: ``execute`` (agent/run), ``run_flow``, ``run_show``, each
   under a SignalTrap of this thread that the worker stops with ``deliver``; the run is
   linked to the session / invocation / show before it starts;
6. the run's status follows the execution's (``outcomes.run_outcome``), a retryable
   failure queues attempt n+1, ``--notify`` runs, and one line goes to stderr.

``finish`` (steps 6) is shared with the lease reaper, so a run failed by lease lapse is
retried and notified exactly like one that failed by itself.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lirun.errors import DatabaseError, LirunError, StartInterruptedError
from lirun.exec.execution import execute
from lirun.exec.fence import Fence
from lirun.exec.task import build_request
from lirun.flows.engine import FlowOptions, run_flow
from lirun.flows.load import load_flow
from lirun.logs import get_logger
from lirun.reasons import describe
from lirun.record.retention import GcOptions, collect_garbage, default_actor
from lirun.record.retention_rules import RetentionPolicy
from lirun.record.rundir import new_run_id
from lirun.schedules import fence_token
from lirun.schedules.actions import Action, sha256_of
from lirun.schedules.correct import correct_inferred_end
from lirun.schedules.outcomes import (
    LEASE_LOST,
    WORKER_STOPPED,
    Outcome,
    StartFacts,
    notify_env,
    run_outcome,
    should_retry,
    start_refusal,
)
from lirun.schedules.run_context import RunContext
from lirun.settings import EVENT_ENV, EVENT_KEY_ENV, LI_ENV, Settings, li_path
from lirun.shows.engine import ShowOptions, run_show
from lirun.shows.load import load_show
from lirun.signals import SignalTrap
from lirun.store import Store
from lirun.store.pool import StorePool
from lirun.store.rows import ScheduleRunRow

log = get_logger(__name__)

# How often a run's end is written again while the database is away (seconds).
END_RETRY_SECONDS = 0.5
# Idle stores a worker keeps for its run threads (never more than ran at once).
STORES_KEPT = 64


@dataclass(frozen=True, slots=True)
class RunnerConfig:
    db_url: str
    worker_id: str
    lease_seconds: float = 60.0
    allow_roots: tuple[str, ...] = ()
    settings: Settings | None = None  # the runs' (agent, command, flow, show); None: env's


class Runner:
    """Runs schedule runs for one worker; ``stop_all`` cancels the ones running."""

    def __init__(
        self,
        config: RunnerConfig,
        *,
        enqueue: Callable[[str], None] = lambda run_id: None,
        fence: Fence | None = None,
    ) -> None:
        self.config = config
        # Read once, for every run this worker handles (a library caller's Runner with no
        # settings: the environment's, as `li worker` reads them).
        self.settings = config.settings if config.settings is not None else Settings.from_env()
        self.fence = fence
        self.enqueue = enqueue
        self._traps: dict[str, SignalTrap] = {}
        # Why this worker stopped a run, kept per run from the moment it sent the signal:
        # a renewal may resume the worker before the run's ending is judged, and the
        # guard's note may find the child already gone (this worker's signal, not its own
        # end), so neither ``stopping`` nor the note can say it afterwards.
        self._stopped: dict[str, str] = {}
        # The runs in hand, from before their claim until their end is recorded: what the
        # heartbeat renews (a row that only carries this worker's id is not its own: its
        # ending was lost in a failover), and what this worker never claims twice.
        self._held: set[str] = set()
        self._guard = threading.Lock()
        self.stopping: int | None = None
        self.closing = threading.Event()  # the worker is going away: stop retrying writes
        self.stop_reason = WORKER_STOPPED
        # The run threads' open stores: a run borrows one instead of opening its own.
        self._stores = StorePool(config.db_url, keep=STORES_KEPT)

    @property
    def running(self) -> list[str]:
        with self._guard:
            return list(self._traps)

    @property
    def held(self) -> list[str]:
        """The runs this worker has in hand: claimed (or being claimed), end not recorded."""
        with self._guard:
            return list(self._held)

    def stop_all(self, signum: int, reason: str = WORKER_STOPPED) -> None:
        """Deliver ``signum`` to every running execution (and to those about to start);
        they end ``cancelled`` with ``reason``. No run starts until ``resume``."""
        with self._guard:
            self.stopping = signum
            self.stop_reason = reason
            for run_id, trap in self._traps.items():
                self._stopped.setdefault(run_id, reason)
                trap.deliver(signum, describe(reason))

    def stop_run(self, run_id: str, signum: int) -> None:
        """Stop one running execution: its run is no longer this worker's."""
        with self._guard:
            trap = self._traps.get(run_id)
            if trap is not None:
                self._stopped.setdefault(run_id, LEASE_LOST)
        if trap is not None:
            trap.deliver(signum, "another worker took its run over: this worker's lease lapsed")

    def resume(self) -> None:
        """Start runs again (the lease is renewed after it was lost)."""
        with self._guard:
            self.stopping = None

    # -- handle ----------------------------------------------------------------------

    def handle(self, run_id: str) -> None:
        """The run path for ``run_id`` (see the module's docstring). Never raises: an
        error is logged and, when the run was claimed, recorded as its failure."""
        if self.stopping is not None:
            return  # stopping (or the lease is lost): claim nothing
        try:
            with self._stores.store() as store:
                self._handle(store, run_id)
        except LirunError as exc:
            log.warning(f"run {run_id}: {type(exc).__name__}: {exc}")
        except Exception as exc:  # a worker thread must never die silently
            log.warning(f"run {run_id}: {type(exc).__name__}: {exc}")

    def trim(self) -> None:
        """Close the run threads' stores that no run used for a while."""
        self._stores.trim()

    def close(self) -> None:
        """Close the stores the run threads kept (the worker stops; runs have ended)."""
        self._stores.close()

    def _handle(self, store: Store, run_id: str) -> None:
        run = store.schedules.get_run(run_id)
        if run is None or run.status != "queued" or self.stopping is not None:
            return
        if self.fence is not None and self.fence.lost():
            return  # the worker cannot prove its lease: it starts nothing
        ctx = RunContext(store, run)
        facts = self._start_facts(ctx)
        refusal = start_refusal(facts) if facts is not None else None
        if refusal is not None and refusal[0] == "schedule.failed.start_deadline":
            if self._end(store, run_id, Outcome("failed", *refusal), expected="queued"):
                self.finish(store, run_id)
            return
        with self._guard:
            if run_id in self._held:
                return  # its claim was lost while its copy runs here: never a second copy
            self._held.add(run_id)
        try:
            ran = self._claim_and_run(store, ctx, refusal)
        finally:
            with self._guard:
                self._held.discard(run_id)
        if ran is None:
            return  # another worker (or a second delivery) has it
        outcome, recorded = ran
        if recorded:
            self.finish(store, run_id)
            return
        corrected = correct_inferred_end(store, run_id, outcome, retries=ctx.policies.retries)
        if corrected is not None and ctx.policies.notify:
            self._notify(store, RunContext(store, corrected))  # its true line, once more

    def _claim_and_run(
        self, store: Store, ctx: RunContext, refusal: tuple[str, str] | None
    ) -> tuple[Outcome, bool] | None:
        """Claim the run, run it, record its end: the outcome and whether its end was
        recorded; None when the claim was lost."""
        epoch = self._claim(store, ctx.run)
        if epoch is None:
            return None
        if ctx.action is None:
            outcome = Outcome("failed", "schedule.failed.no_action", "the run has no action")
        elif ctx.render_error is not None:
            outcome = Outcome("failed", "schedule.failed.setup", ctx.render_error)
        elif refusal is not None:
            outcome = Outcome("failed", *refusal)
        else:
            outcome = self._execute(store, ctx, ctx.action, epoch)
        return outcome, self._end_running(store, ctx.run.id, outcome)

    def _claim(self, store: Store, run: ScheduleRunRow) -> int | None:
        """Claim the run as read (its lease epoch), else None. A row changed since it was
        read but still queued is read once more and claimed as it is then."""
        config = self.config
        claim = store.schedules.claim
        epoch = claim(run, worker_id=config.worker_id, lease_seconds=config.lease_seconds)
        if epoch is not None:
            return epoch
        again = store.schedules.get_run(run.id)
        if again is None or again.updated_at == run.updated_at or self.stopping is not None:
            return None
        return claim(again, worker_id=config.worker_id, lease_seconds=config.lease_seconds)

    def _end_running(self, store: Store, run_id: str, outcome: Outcome) -> bool:
        """Record the end of a run this worker ran, trying again while the database is
        away (an outage must not leave it to the lease reaper, which cannot know how it
        ended): the worker keeps renewing its lease meanwhile, so nobody else fails it.
        Gives up when the worker stops."""
        while True:
            try:
                return self._end(store, run_id, outcome, expected="running")
            except Exception as exc:
                if self.closing.is_set():
                    raise
                log.warning(
                    f"run {run_id}: its end is not recorded yet ({type(exc).__name__}); retrying"
                )
                self.closing.wait(END_RETRY_SECONDS)

    def _start_facts(self, ctx: RunContext) -> StartFacts | None:
        action = ctx.action
        if action is None:
            return None
        digest: str | None = None
        if action.file is not None:
            try:
                digest = sha256_of(action.file)
            except OSError:
                digest = None
        return StartFacts(
            now=time.time(),
            queued_at=ctx.run.created_at,
            start_deadline=float(ctx.policies.start_deadline),
            cwd=action.cwd,
            cwd_exists=os.path.isdir(action.cwd),
            # gc runs nothing in a directory: --allow-root (where code may run) is moot
            allow_roots=() if action.kind == "gc" else self.config.allow_roots,
            file=action.file,
            file_sha256=digest,
            snapshot_sha256=action.sha256,
        )

    def _end(self, store: Store, run_id: str, outcome: Outcome, *, expected: str) -> bool:
        return store.update_status(
            "schedule_run",
            run_id,
            new_status=outcome.status,
            reason_code=outcome.reason_code,
            reason_summary=outcome.summary[:2000],
            source="system",
            expected_statuses={expected},
            extra_fields={"exit_code": outcome.exit_code}
            if outcome.exit_code is not None
            else None,
        )

    # -- the action --------------------------------------------------------------------

    def _execute(self, store: Store, ctx: RunContext, action: Action, epoch: int) -> Outcome:
        run_id = ctx.run.id
        with SignalTrap() as trap:
            with self._guard:
                self._traps[run_id] = trap
                if self.stopping is not None:
                    self._stopped.setdefault(run_id, self.stop_reason)
                    trap.deliver(self.stopping, describe(self.stop_reason))
            began = time.monotonic()
            try:
                outcome = self._dispatch(store, ctx, action, trap, epoch)
                return self._fenced(outcome, began)
            except StartInterruptedError as exc:
                # This worker stopped the run as it started (its lease lost, or the worker
                # stopping): nothing ran, so it ends for that cause, retried where it may.
                stopped = self._stopped.get(run_id)
                if stopped is None:
                    return Outcome("failed", "schedule.failed.setup", str(exc))
                return Outcome("cancelled", stopped, str(exc))
            except LirunError as exc:
                return Outcome("failed", "schedule.failed.setup", str(exc))
            except Exception as exc:
                return Outcome("failed", "schedule.failed.setup", f"{type(exc).__name__}: {exc}")
            finally:
                with self._guard:
                    self._traps.pop(run_id, None)
                    self._stopped.pop(run_id, None)

    def _fenced(self, outcome: Outcome, began: float) -> Outcome:
        """A run that did not complete because the lease lapsed while its work ran was
        stopped by the lease's guard (or by this worker for it): it ends ``lease_lost``.
        Work that ended by itself before the lapse keeps its own outcome, even when the
        database took it only after the lapse: the guard's note says which it was, else
        the lapse is compared with when the work was last watched."""
        if outcome.status == "completed" or self.fence is None:
            return outcome
        lapse = outcome.lapse
        if lapse is not None and lapse.leader_ended:
            return outcome
        if lapse is None and not self.fence.lapsed_since(began, until=outcome.work_ended):
            return outcome
        fence = self.fence
        summary = (
            f"the worker could not renew its lease within {fence.lease - fence.margin:g}s "
            f"(lease {fence.lease:g}s); its guard stopped the run ({outcome.reason_code})"
        )
        return Outcome("cancelled", LEASE_LOST, summary, outcome.exit_code)

    def _dispatch(
        self, store: Store, ctx: RunContext, action: Action, trap: SignalTrap, epoch: int
    ) -> Outcome:
        url, run_id = self.config.db_url, ctx.run.id
        stopping = lambda: self._stopped.get(run_id)  # noqa: E731
        # The run's settings: the worker's, with the fence of the claim this worker holds
        # (``LIRUN_FENCE`` of every execution the run starts: ``li lease check``).
        settings = self.settings.with_flags(
            fence=fence_token.token(run_id, epoch, self.config.worker_id)
        )
        if action.kind in ("agent", "run"):
            assert action.task is not None
            session_id = new_run_id()
            store.schedules.link_run(run_id, session_id=session_id)
            request = build_request(
                action.task,
                cwd=action.cwd,
                db_url=url,
                run_id=session_id,
                metadata={"schedule_run_id": run_id},
                settings=settings,
                env=_event_env(ctx.run),  # the event a run is for never changes
            )
            result = execute(request, store=store, trap=trap)
            summary = _run_summary(store, session_id)
            outcome = run_outcome(result.status, result.reason, summary, stopped_by=stopping())
            return outcome._replace(
                exit_code=result.exit_code,
                work_ended=result.supervised_until,
                lapse=result.lease_lapse,
            )
        if action.kind == "gc":
            return self._collect_garbage(store, run_id, action)
        assert action.file is not None
        if action.kind == "flow":
            spec = load_flow(Path(action.file), cwd=action.cwd)
            invocation_id = new_run_id()
            store.schedules.link_run(run_id, invocation_id=invocation_id)
            options = FlowOptions(settings=settings)
            report = run_flow(
                spec, db_url=url, options=options, invocation_id=invocation_id, stop=trap
            )
            return run_outcome(
                report.status,
                report.reason_code,
                report.reason_summary or "",
                stopped_by=stopping(),
            )

        show = load_show(Path(action.file))
        show_id = new_run_id()
        store.schedules.link_run(run_id, show_id=show_id)
        show_options = ShowOptions(settings=settings)
        show_report = run_show(show, db_url=url, options=show_options, show_id=show_id, stop=trap)
        status = {"active": "failed", "aborted": "cancelled"}.get(
            show_report.status, show_report.status
        )
        if show_report.status == "aborted" and not show_report.interrupted:
            status = "failed"
        summary = show_report.reason_summary or (
            "the show waits for a person: " + ", ".join(show_report.needs_person)
            if show_report.status == "active"
            else ""
        )
        return run_outcome(status, show_report.reason_code, summary, stopped_by=stopping())

    def _collect_garbage(self, store: Store, run_id: str, action: Action) -> Outcome:
        """The retention policy of a ``gc`` action, applied to this worker's database."""
        assert action.retention is not None
        policy = RetentionPolicy.from_dict(action.retention)
        options = GcOptions(actor=default_actor(f"schedule run {run_id}"))
        tally = collect_garbage(store, policy, options)
        summary = (
            f"pruned {tally.pruned.get('session', 0)} run(s) and "
            f"{tally.pruned.get('invocation', 0)} flow invocation(s); "
            f"{len(tally.refused)} still in use"
        )
        if tally.problems:
            return Outcome("failed", "schedule.failed.action", f"{summary}; {tally.problems[0]}")
        return run_outcome("completed", None, summary)

    # -- after the end -----------------------------------------------------------------

    def finish(self, store: Store, run_id: str) -> None:
        """After a run ended (by itself or by the reaper): retry, notify, log."""
        run = store.schedules.get_run(run_id)
        if run is None:
            return
        ctx = RunContext(store, run)
        status, reason = run.status, str(run.status_reason_code)
        attempt = int(run.attempt or 1)
        retry = None
        if should_retry(status, reason, attempt, ctx.policies.retries):
            retry = self._retry(store, ctx, attempt)
        started = run.started_at
        took = f" in {run.ended_at - started:.1f}s" if started and run.ended_at else ""
        again = f"; retry {retry} (attempt {attempt + 1})" if retry else ""
        log.info(
            f"run {run_id} {status} reason={reason}{took} ({ctx.label()}, attempt {attempt})"
            + again,
            extra={"event": "schedule_run.ended", "run_id": run_id, "status": status},
        )
        if ctx.policies.notify:
            self._notify(store, ctx)

    def _retry(self, store: Store, ctx: RunContext, attempt: int) -> str | None:
        row = store.schedules.queue_retry(ctx.run)
        if row is None:
            return None  # another worker queued this attempt already
        try:
            self.enqueue(row.id)
        except DatabaseError as exc:  # the queue is away, or this worker stopping
            log.warning(
                f"run {row.id} is queued, but the workers could not be told at once ({exc}); "
                "a serving worker offers it again"
            )
        return row.id

    def _notify(self, store: Store, ctx: RunContext) -> None:
        run = ctx.run
        artifact_dir = None
        if run.session_id:
            session = store.sessions.get(run.session_id)
            artifact_dir = session.artifacts_path if session else None
        env = {**os.environ, **notify_env(run, schedule=ctx.name, artifact_dir=artifact_dir)}
        li = li_path()  # the hook may call `li status` / `li logs` too
        if li is not None:
            env[LI_ENV] = li
        command = str(ctx.policies.notify)
        try:
            done = subprocess.run(
                command, shell=True, env=env, stdin=subprocess.DEVNULL, timeout=300, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning(f"run {run.id}: --notify {command!r} failed: {exc}")
            return
        if done.returncode != 0:
            log.warning(f"run {run.id}: --notify {command!r} exited {done.returncode}")


def _event_env(run: ScheduleRunRow | None) -> dict[str, str]:
    """``LIRUN_EVENT`` (the event as JSON) and ``LIRUN_EVENT_KEY`` for an event's run."""
    if run is None or run.event_key is None:
        return {}
    return {EVENT_ENV: run.event_json or "{}", EVENT_KEY_ENV: run.event_key}


def _run_summary(store: Store, session_id: str) -> str:
    try:
        session = store.sessions.get(session_id)
    except Exception:  # the database is away: the status and reason are known already
        return ""
    return (session.status_reason_summary or "") if session is not None else ""
