"""Run a flow: one invocation row, one supervised execution per leg (docs/flow-engine.md).

``run_flow`` creates the invocation (kind ``flow``, owned by this process, heartbeating,
the resolved flow stored with it) and its run directory, then loops in the caller's
thread: legs whose dependencies have ended become instances (fan-outs expand then), ready
instances start on worker threads up to ``parallel``, each ending is logged, checkpointed
and may stop dependents (or, with ``fail_fast``, everything). A signal seen on ``stop``
or the flow's deadline stops every running leg. When nothing runs any more the pure
``decide_flow`` names the outcome, the legs' usage is summed onto the invocation and its
status written through the guarded ``update_status``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lirun.errors import ConflictError, UsageError
from lirun.flows.dag import draw_dag
from lirun.flows.decide import LEASE_LOST_SIGNAL, NOT_RUN, FlowFacts, decide_flow
from lirun.flows.jobs import LegJob, LegResult, LegWorkers
from lirun.flows.log import FlowLog
from lirun.flows.preview import can_branch
from lirun.flows.report import FlowReport, flow_report, report_from_store, resumable_legs
from lirun.flows.spec import FlowSpec
from lirun.flows.state import (
    DONE,
    RUNNING,
    FlowState,
    Instance,
    RenderStopped,
    ReusedLeg,
    TemplateError,
)
from lirun.liveness import DEFAULT_LEASE_SECONDS, HEARTBEAT_INTERVAL
from lirun.orchestra.checkpoint import write_checkpoint
from lirun.orchestra.lease import OwnerLease
from lirun.record.reap_flows import reap_flow_if_orphaned
from lirun.record.rundir import allocate_run, new_run_id
from lirun.settings import Settings
from lirun.signals import SignalTrap
from lirun.store import Store, open_store
from lirun.store.rows import TeamRow
from lirun.teams import membership
from lirun.teams.membership import TeamSetting

__all__ = ["DEFAULT_PARALLEL", "FlowOptions", "flow_report", "resume_flow", "run_flow"]

DEFAULT_PARALLEL = 4
_TICK = 0.2  # how often the loop looks at signals, the deadline and the clock


@dataclass(frozen=True)
class FlowOptions:
    """``parallel`` overrides the flow file's; ``timeout`` is the whole flow's deadline
    in seconds; ``on_progress`` gets one human line per leg event (for stderr);
    ``retry_delay``: seconds before a retry (times the attempt number); ``settings``: every
    leg's (``RunRequest.settings``), None: the environment's, read once per flow."""

    parallel: int | None = None
    timeout: float | None = None
    on_progress: Callable[[str], None] | None = None
    retry_delay: float = 1.0
    settings: Settings | None = None


def _parallel(spec: FlowSpec, options: FlowOptions) -> int:
    value = options.parallel or spec.parallel or DEFAULT_PARALLEL
    if value < 1:
        raise UsageError(f"parallel must be at least 1, got {value}")
    return int(value)


class _FlowRun:
    """One flow invocation from creation to its terminal write."""

    def __init__(
        self,
        spec: FlowSpec,
        store: Store,
        options: FlowOptions,
        invocation_id: str,
        resumed_from: str | None,
        reuse: Mapping[str, ReusedLeg],
    ) -> None:
        self.spec = spec
        self.store = store
        self.options = options
        self.state = FlowState(spec, parallel=_parallel(spec, options), reuse=reuse)
        self.run = allocate_run(run_id=invocation_id)
        self.run.ensure_artifact_dir()
        self.id = self.run.run_id
        self.resumed_from = resumed_from
        self.running: dict[str, Instance] = {}
        self.halt: str | None = None  # "signal" | "timeout" | "fail_fast"
        self.signal_name: str | None = None
        self.lease = OwnerLease(None)  # this owner's, taken when the loop starts
        self._git: dict[str, bool] = {}  # cwd -> can a leg there get a worktree
        self._stopped = False  # the workers were told to stop their legs
        self.log = FlowLog(self.run.flow_log_path, options.on_progress)
        self.team: TeamRow | None = None  # the team its agents share, if any

    # -- records --

    def stored_flow(self) -> dict[str, Any]:
        return {
            "spec": self.spec.to_dict(),
            "parallel": self.state.parallel,
            "graph": self.state.graph(),
            "fan_out": dict(self.state.fan_out_sizes),
        }

    def create(self) -> None:
        self.store.invocations.create_flow(
            id=self.id,
            skill=self.spec.path or "flow",
            flow=self.stored_flow(),
            flow_digest=self.spec.digest,
            run_dir=str(self.run.state_root),
            artifacts_path=str(self.run.artifact_dir),
            resumed_from=self.resumed_from,
        )
        origin = f" (resuming {self.resumed_from})" if self.resumed_from else ""
        self.log.line(f"flow {self.id} started{origin}: {len(self.spec.legs)} legs")
        if self.spec.team is not None:
            self.join_team(self.spec.team)

    def join_team(self, setting: TeamSetting) -> None:
        """Make or join the team; the agent legs without fan-out join now, each fan-out
        instance when it starts (``job``)."""
        label = os.path.splitext(os.path.basename(self.spec.path or "flow"))[0]
        agents = [leg.id for leg in self.spec.legs if leg.task.is_agent and not leg.for_each]
        joined = membership.join(
            self.store, setting, owner_type="invocation", owner_id=self.id, label=label,
            members=agents, resumed_from=self.resumed_from,
        )  # fmt: skip
        self.team = joined.team
        for line in filter(None, (joined.existing, membership.li_warning())):
            self.log.line(line)
        self.log.line(f"team {self.team.name} ({self.team.id}): {len(agents)} members")

    def checkpoint(self) -> None:
        legs = {
            inst.id: {
                "leg": inst.leg.id,
                "item": inst.item,
                "session_id": inst.session_id,
                "status": inst.status,
                "reason_code": inst.reason_code,
                "attempts": inst.attempts,
                "reused": inst.reused,
                "outputs": inst.outputs,
            }
            for inst in self.state.all_instances()
            if inst.state == DONE
        }
        write_checkpoint(
            self.run.checkpoint_path,
            {
                "invocation_id": self.id,
                "resumed_from": self.resumed_from,
                "flow_digest": self.spec.digest,
                "vars": dict(self.spec.vars),
                "legs": legs,
            },
        )

    # -- the loop --

    def can_branch(self, cwd: str) -> bool:
        """The leg's cwd is in a repository with a commit (as --dry-run decides it)."""
        if cwd not in self._git:
            self._git[cwd] = can_branch(cwd)
        return self._git[cwd]

    def job(
        self, inst: Instance, count: int, should_stop: Callable[[], bool] | None = None
    ) -> LegJob:
        leg = inst.leg
        cwd = os.path.join(self.spec.cwd, leg.cwd) if leg.cwd else self.spec.cwd
        beside = self.state.beside(leg.id, count)
        isolation = leg.isolation
        if isolation is None:
            worktree = beside and leg.task.is_agent and self.can_branch(cwd)
            isolation = "worktree" if worktree else "shared"
        prompt, argv = self.state.rendered(inst, should_stop=should_stop)
        env: dict[str, str] = {}
        team: dict[str, str] | None = None
        if self.team is not None and leg.task.is_agent:
            member = membership.member_name(inst.id)
            self.store.teams.add_members(self.team.id, [member])  # a fan-out instance
            team = {"id": self.team.id, "name": self.team.name, "member": member}
            env = membership.child_env(team["id"], member)
            setting = self.spec.team
            on = setting is not None and setting.preamble
            prompt = membership.with_preamble(prompt, team["name"], member, on)
        return LegJob(
            id=inst.id,
            leg=leg,
            item=inst.item,
            cwd=cwd,
            invocation_id=self.id,
            prompt=prompt,
            run_argv=argv,
            isolation=isolation,
            beside=beside,
            retry_delay=self.options.retry_delay,
            env=env,
            team=team,
        )

    def grow(self) -> None:
        created = self.state.materialize()
        for inst in created:
            if inst.reused:
                self.log.line(f"leg {inst.id} reused from session {inst.session_id}")
            elif inst.status == NOT_RUN:
                self.log.line(f"leg {inst.id} not run: {inst.because} did not complete")
            elif inst.state == DONE:
                detail = f": {inst.error}" if inst.error else ""
                self.log.line(f"leg {inst.id} {inst.status} ({inst.reason_code}){detail}")
        if created:  # the stored graph grows with the instances
            self.store.invocations.set_flow_json(self.id, self.stored_flow())
            if any(i.state == DONE for i in created):
                self.checkpoint()
            if any(i.status == "failed" for i in created):  # a fan-out that cannot expand
                self.on_failure()

    def launch(self, workers: LegWorkers, stop: SignalTrap | None = None) -> None:
        """Start pending legs up to the parallel width. A signal seen on ``stop`` ends a
        render in progress and starts nothing more: the next ``watch`` halts the flow."""

        def stopped() -> bool:
            return stop is not None and stop.received is not None

        for inst in self.state.pending():
            if len(self.running) >= self.state.parallel or self.halt or stopped():
                return
            count = len(self.state.instances.get(inst.leg.id, ()))
            try:
                job = self.job(inst, count, stopped)
            except RenderStopped:
                return
            except TemplateError as exc:
                self.finish(inst, LegResult(inst.id, None, "run.failed.setup", error=str(exc)))
                continue
            if stopped():
                return
            inst.state = RUNNING
            self.running[inst.id] = inst
            self.log.line(f"leg {inst.id} started ({job.isolation})")
            workers.submit(job)

    def finish(self, inst: Instance, result: LegResult) -> None:
        self.running.pop(inst.id, None)
        inst.state = DONE
        inst.status = result.status or (
            NOT_RUN if result.reason_code != "run.failed.setup" else "failed"
        )
        inst.reason_code = result.reason_code
        if inst.status == NOT_RUN and self.halt == "fail_fast":
            inst.reason_code = "run.cancelled.fail_fast"  # queued on a worker when it came
        inst.session_id, inst.attempts = result.session_id, result.attempts
        inst.duration_s, inst.cost_usd = result.duration_s, result.cost_usd
        inst.outputs = result.outputs or ({"error": result.error} if result.error else {})
        inst.proof_shared = result.proof_shared
        inst.message = result.message
        inst.interrupted = self.halt is not None and inst.status not in (
            "completed",
            "completed_empty",
        )
        detail = f": {result.error}" if result.error else ""
        took = f" in {result.duration_s:.1f}s" if result.duration_s is not None else ""
        self.log.line(f"leg {inst.id} {inst.status} ({inst.reason_code}){took}{detail}")
        self.checkpoint()
        if inst.status not in ("completed", "completed_empty", NOT_RUN):
            self.on_failure()

    def on_failure(self) -> None:
        if self.spec.fail_fast and self.halt is None:
            self.halt = "fail_fast"
            self.log.line("fail_fast: stopping every running leg")

    def watch(self, workers: LegWorkers, stop: SignalTrap | None, deadline: float | None) -> None:
        """Halt on a signal, the deadline or fail_fast; tell the workers once."""
        signum = int(signal.SIGTERM)
        if self.halt is None and stop is not None and stop.received is not None:
            self.halt, self.signal_name = "signal", stop.received.name
            self.log.line(f"{self.signal_name} received: stopping every running leg")
        elif self.halt is None and self.lease.lapsed():
            self.halt, self.signal_name = "signal", LEASE_LOST_SIGNAL
            self.log.line("the flow's lease is lost (no heartbeat): stopping every running leg")
        elif self.halt is None and deadline is not None and time.monotonic() >= deadline:
            self.halt = "timeout"
            self.log.line(f"flow deadline of {self.options.timeout:g}s passed: stopping legs")
        if self.halt == "signal" and stop is not None and stop.received is not None:
            signum = int(stop.received)
        if self.halt is not None and not self._stopped:
            self._stopped = True
            workers.stop(signum)

    def loop(self, workers: LegWorkers, stop: SignalTrap | None) -> None:
        deadline = None if self.options.timeout is None else time.monotonic() + self.options.timeout
        while True:
            self.watch(workers, stop, deadline)
            if self.halt is None:
                self.grow()
                self.launch(workers, stop)
            if not self.running and (self.halt or not self.state.pending()):
                break  # what is left unmaterialized now can never start: stop_rest names it
            try:
                result = workers.results.get(timeout=_TICK)
            except queue.Empty:
                continue
            self.finish(self.running[result.id], result)

    def stop_rest(self) -> None:
        reason = (
            "run.cancelled.fail_fast" if self.halt == "fail_fast" else "run.cancelled.flow_stopped"
        )
        for inst in self.state.stop_rest(reason):
            self.log.line(f"leg {inst.id} not run ({reason})")

    def conclude(self, error: BaseException | None = None) -> None:
        outcome = decide_flow(
            FlowFacts(
                legs=self.state.facts(),
                signal=self.signal_name,
                timed_out=self.halt == "timeout",
                timeout_s=self.options.timeout,
            )
        )
        status, reason, summary = outcome.status, outcome.reason_code, outcome.summary
        if error is not None and self.signal_name is None:
            status, reason, summary = (
                "failed",
                "run.failed.exception",
                f"flow engine error: {error}",
            )
        # The database may be failing over: these writes wait for it as a status write does.
        self.store.invocations.record_flow_end(self.id, self.stored_flow())
        self.checkpoint()
        self.store.update_status(
            "invocation",
            self.id,
            new_status=status,
            reason_code=reason,
            reason_summary=summary,
            evidence_refs=outcome.evidence or None,
            source="executor",
            expected_statuses={"running"},
        )
        self.log.line(f"flow {self.id} {status} ({reason}): {summary}")


def _execute(
    spec: FlowSpec,
    *,
    db_url: str | None,
    options: FlowOptions,
    invocation_id: str | None,
    stop: SignalTrap | None,
    resumed_from: str | None = None,
    reuse: Mapping[str, ReusedLeg] | None = None,
    store: Store | None = None,
) -> FlowReport:
    own = store is None
    if options.settings is None:  # read once, here, for every leg
        options = dataclasses.replace(options, settings=Settings.from_env())
    db = store if store is not None else open_store(db_url)
    try:
        flow = _FlowRun(spec, db, options, invocation_id or new_run_id(), resumed_from, reuse or {})
        flow.create()
        workers = LegWorkers(
            flow.state.parallel, db_url=db.url, log=flow.log.line, settings=options.settings
        )
        error: BaseException | None = None
        try:
            with contextlib.ExitStack() as held:
                # A flow whose owner cannot renew its lease has its legs killed before
                # anyone may resume it, and stops (``watch``).
                flow.lease = OwnerLease.take(DEFAULT_LEASE_SECONDS)
                held.callback(flow.lease.close)
                held.enter_context(
                    flow.lease.heartbeat(
                        lambda: db.invocations.flow_heartbeat(flow.id), HEARTBEAT_INTERVAL
                    )
                )
                try:
                    flow.loop(workers, stop)
                except BaseException as exc:  # stop the legs, record the flow, then re-raise
                    error = exc
                    if isinstance(exc, KeyboardInterrupt):  # a library caller without a trap
                        flow.halt, flow.signal_name = "signal", "SIGINT"
                    workers.stop(signal.SIGINT if flow.signal_name == "SIGINT" else signal.SIGTERM)
                    while flow.running:
                        result = workers.results.get()
                        flow.finish(flow.running[result.id], result)
                flow.stop_rest()
                flow.conclude(error)
        finally:
            workers.close()
            flow.log.close()
        if error is not None:
            raise error
        report = report_from_store(db, flow.id)
        _draw(report, flow)
        return report
    finally:
        if own:
            db.close()


def _draw(report: FlowReport, flow: _FlowRun) -> None:
    """``flow_dag.png`` in the invocation's RunDir, coloured by how each leg ended (a
    missing ``dot`` is logged once)."""
    draw_dag(report, flow.run.dag_image_path)


def run_flow(
    spec: FlowSpec,
    *,
    db_url: str | None = None,
    options: FlowOptions = FlowOptions(),
    invocation_id: str | None = None,
    stop: SignalTrap | None = None,
) -> FlowReport:
    """Run ``spec`` as one flow invocation to its end; return its report as recorded.

    ``db_url``: the database (else ``$LIRUN_DB_URL`` or the default); ``invocation_id``:
    the new invocation's id (a safe path component; default a new run id); ``stop``: the
    caller's SignalTrap: a signal on it stops every running leg and ends the flow
    ``aborted`` (SIGINT) or ``cancelled``. The legs' fates are statuses, never exceptions.
    Raises a LirunError (with its exit code) when the database cannot be opened or the
    invocation cannot be created (nothing runs then).
    """
    return _execute(spec, db_url=db_url, options=options, invocation_id=invocation_id, stop=stop)


def resume_flow(
    invocation: str,
    *,
    db_url: str | None = None,
    options: FlowOptions = FlowOptions(),
    invocation_id: str | None = None,
    stop: SignalTrap | None = None,
) -> FlowReport:
    """Resume a flow invocation (its id or a unique prefix) as a NEW invocation with
    ``resumed_from`` set: the stored flow runs again, legs that completed before are
    reused with their outputs (not run), the failed and unfinished ones run.

    A running invocation whose owner is dead is reaped first; one whose owner lives is a
    ConflictError (exit 2). NotFoundError / AmbiguousIdError for an unknown or ambiguous
    id; UsageError when the invocation is not a flow.
    """

    store = open_store(db_url)
    try:
        previous_id = store.resolve_id("invocation", invocation)
        row = store.invocations.get(previous_id)
        if row is None or row.kind != "flow" or not row.flow_json:
            raise UsageError(f"invocation {previous_id} is not a flow; only flows resume")
        reuse = resumable_legs(store, previous_id)  # refused, unchanged, if gc pruned any
        if row.status == "running" and not reap_flow_if_orphaned(store, previous_id):
            raise ConflictError(
                f"flow {previous_id} is still running (its owner process is alive); "
                "wait for it (`li wait`) or stop it before resuming"
            )
        spec = FlowSpec.from_dict(row.flow_json["spec"])
        if options.parallel is None and row.flow_json.get("parallel"):
            # as many legs at once as it ran with (a --parallel given then is not in spec)
            options = dataclasses.replace(options, parallel=int(row.flow_json["parallel"]))
        return _execute(
            spec,
            db_url=db_url,
            options=options,
            invocation_id=invocation_id,
            stop=stop,
            resumed_from=previous_id,
            reuse=reuse,
            store=store,
        )
    finally:
        store.close()
