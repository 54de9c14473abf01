"""``li worker``: fire due schedules, run queued work, reap lapsed leases.

Threads of one worker process:

- the main thread (``Worker.run``) fires due schedules: it sleeps until the earliest due
  time (no fixed tick), waking early when a definition changes or a signal comes; each
  due schedule's rows come from the pure ``firing.decide_fires`` and are inserted through
  the unique key (of any number of workers exactly one gets each row), then
  ``next_due_at`` moves by compare-and-set; a due poll is only claimed there (the same
  compare-and-set) and its command runs on a poll thread (``poll_pool``), so a slow poll
  delays no other schedule;
- the transport's thread (``transport.serve``) hands queued runs to ``Runner.handle``,
  at most ``concurrency`` at once;
- the heartbeat thread renews the worker row and the leases of its runs, fails the runs
  whose lease lapsed (any worker's: a worker killed or cut off) and the queued runs past
  their start deadline, and stops this worker's runs when it cannot prove its lease;
- the lease's fence (``exec/fence.py``): the worker's guard process, fed after each
  renewal, kills the runs' processes at ``lease - margin`` after the last renewal when no
  other came: a frozen worker or a dead database cannot keep a copy running past the lease.

SIGTERM (or SIGINT, SIGHUP): claim nothing more, kill the running poll commands (a
poll is cheap to repeat; the next due time polls again), let running work finish for
``grace`` seconds, then cancel it (``schedule.cancelled.worker_stopped``); a second signal cancels
at once.
"""

from __future__ import annotations

import select
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from lirun.exec.fence import Fence
from lirun.liveness import current_owner
from lirun.logs import get_logger
from lirun.record.reap_schedule_runs import fail_lapsed_run, fail_past_start_deadline
from lirun.schedules.chaining import SWEEP_EVERY, chain_schedules, sweep_chains
from lirun.schedules.definition import stored_definition
from lirun.schedules.firing import FireFacts, decide_fires
from lirun.schedules.live import LiveWorker as LiveWorker
from lirun.schedules.live import live_workers as live_workers
from lirun.schedules.outcomes import LEASE_LOST
from lirun.schedules.poll_pool import PollPool
from lirun.schedules.polling import poll_due
from lirun.schedules.runner import Runner, RunnerConfig
from lirun.schedules.transport import Transport, transport_for
from lirun.settings import Settings
from lirun.signals import SignalTrap
from lirun.store import Store, open_store
from lirun.store.bounds import answer_by
from lirun.store.rows import ScheduleRunRow

log = get_logger(__name__)

# How often the firing loop looks for changed definitions while it sleeps (seconds).
DEFINITION_POLL = 0.25
# How long one firing pass, and the worker's last write (its row marked stopped), may wait
# for the database: a signal is seen between passes, so a database that is away (a
# failover) must not hold a stopping worker for the 30 s a write may wait out an outage.
# A pass cut short is the next pass's to finish (the unique key fires each due time once).
DB_WAIT_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    db_url: str
    concurrency: int = 1
    grace: float = 30.0
    allow_roots: tuple[str, ...] = ()
    lease_seconds: float = 60.0
    settings: Settings | None = None  # every run's; None: the environment's, read once (Runner)


def fire_due(store: Store, now: int, enqueue: Any, polls: PollPool | None = None) -> int:
    """Insert the rows of every due schedule (``decide_fires``) and move it on; returns
    the number of rows this worker inserted. A due poll is claimed here and run on
    ``polls``' threads (its runs are not counted); without ``polls``, here and now."""
    made = sweep_chains(store, enqueue)
    for row in store.schedules.list_due(now):
        definition = stored_definition(row)
        if definition is None or row.next_due_at is None:
            continue
        if definition.trigger.kind == "poll":
            if polls is not None:
                polls.submit(store, row, definition, now)
            else:
                made += poll_due(store, row, definition, now, enqueue)
            continue
        policies = definition.policies
        since = policies.budget_since(now)
        usd, tokens = store.schedules.usage(row.id, since=since)
        facts = FireFacts(
            next_due_at=int(row.next_due_at),
            now=now,
            active_runs=store.schedules.count_active_runs(row.id),
            runs_started=store.schedules.count_started_runs(row.id),
            usd_spent=usd,
            tokens_spent=tokens,
        )
        plan = decide_fires(definition.trigger, policies, facts)
        for fire in plan.fires:
            queued = fire.action == "run"
            summary = f"{fire.count} more missed due times" if fire.count > 1 else ""
            new = store.schedules.insert_due_run(
                schedule_id=row.id,
                due_at=fire.due_at,
                action_kind=row.action_kind,
                status="queued" if queued else "skipped",
                reason_code=fire.reason_code,
                reason_summary=summary,
            )
            if new is None:
                continue  # another worker fired this due time
            made += 1
            late = time.time() - fire.due_at
            what = "queued" if queued else f"skipped reason={fire.reason_code}"
            log.info(
                f"fire {row.name} due={fire.due_at} (+{late:.2f}s) run {new.id} {what}",
                extra={"event": "schedule.fired", "run_id": new.id, "schedule": row.name},
            )
            if queued:
                enqueue(new.id)
        if plan.budget_blind:
            log.warning(
                f"schedule {row.name}: no run recorded a cost; --budget-usd cannot see them"
            )
        if plan.disable_reason is not None:
            store.schedules.change(
                row.id,
                new_status="disabled",
                reason_code=plan.disable_reason,
                fields={"next_due_at": None},
                expected_statuses={"enabled"},
                expected_updated_at=row.updated_at,
                source="system",
            )
        else:
            store.schedules.advance_next_due(
                row.id, expected=facts.next_due_at, new=plan.next_due_at
            )
    return made


def reap(
    store: Store,
    runner: Runner,
    now: float,
    seen: dict[tuple[str, float], float] | None = None,
) -> None:
    """Fail the runs whose lease lapsed (and their executions), and the queued runs past
    their start deadline; each ended run is retried and notified through ``finish``.

    ``seen`` (the worker's memory, by run id and expiry: when this worker first saw it
    lapsed) makes a lapse count only once it was seen for half its lease: after an outage
    every worker finds every lease lapsed at once, and the owners, alive, renew theirs at
    their next beat and record how their runs really ended. Without ``seen``: at once."""
    lapsed = store.schedules.list_lapsed_runs(now)
    if seen is not None:
        lapsed = _confirmed(lapsed, seen)
    for run in lapsed:
        summary = (
            f"worker {run.worker_id} stopped renewing its lease "
            f"(expired {now - float(run.lease_expires_at or 0):.1f}s ago)"
        )
        if fail_lapsed_run(store, run, summary):
            runner.finish(store, run.id)
    for run in store.schedules.list_queued_runs(limit=500):
        if fail_past_start_deadline(store, run, now):
            runner.finish(store, run.id)


def _confirmed(
    lapsed: list[ScheduleRunRow], seen: dict[tuple[str, float], float]
) -> list[ScheduleRunRow]:
    now = time.monotonic()
    keys = {(r.id, float(r.lease_expires_at or 0)): r for r in lapsed}
    for key in list(seen):
        if key not in keys:
            del seen[key]  # renewed or ended meanwhile
    confirmed = []
    for key, run in keys.items():
        first = seen.setdefault(key, now)
        beat = run.heartbeat_at
        lease = key[1] - float(beat) if beat is not None else 0.0
        if now - first >= lease / 2:
            confirmed.append(run)
    return confirmed


class Worker:
    def __init__(self, options: WorkerOptions) -> None:
        self.options = options
        self.worker_id = ""

    def run(self) -> int:
        """Run until a signal; returns the exit code (0)."""

        opts = self.options
        store = open_store(opts.db_url)
        transport = transport_for(store)
        registered = time.monotonic()
        self.worker_id = store.workers.register(
            owner=current_owner(),
            concurrency=opts.concurrency,
            transport=type(transport).__name__,
            lease_seconds=opts.lease_seconds,
        )
        config = RunnerConfig(
            db_url=opts.db_url,
            worker_id=self.worker_id,
            lease_seconds=opts.lease_seconds,
            allow_roots=opts.allow_roots,
            settings=opts.settings,
        )
        # The lease's fence: the guard kills this worker's runs when it cannot renew in time.
        fence = Fence(opts.lease_seconds).start(started=registered)
        runner = Runner(config, enqueue=transport.enqueue, fence=fence)
        log.info(
            f"worker {self.worker_id} started: pid {current_owner()['owner_pid']}, "
            f"concurrency {opts.concurrency}, {type(transport).__name__}, "
            f"lease {opts.lease_seconds:g}s, db {store.display_url}"
        )
        serve_stop, beat_stop = threading.Event(), threading.Event()
        serving = threading.Thread(
            target=self._serve, args=(transport, runner, serve_stop), name="lirun-serve"
        )
        beating = threading.Thread(
            target=self._heartbeat, args=(runner, beat_stop), name="lirun-heartbeat"
        )
        polls = PollPool(opts.db_url, transport.enqueue)
        try:
            with SignalTrap() as trap:
                serving.start()
                beating.start()
                self._fire_loop(store, transport, polls, trap)
                log.info(f"worker {self.worker_id}: {trap.signal_name}: claiming nothing more")
                polls.close()  # kills the running poll commands: none outlives the worker
                serve_stop.set()
                transport.close()
                self._drain(serving, runner, trap)
        finally:
            polls.close()
            serve_stop.set()
            beat_stop.set()
            if serving.is_alive():
                runner.stop_all(signal.SIGTERM)
                runner.closing.set()
                serving.join()
            if beating.is_alive():
                beating.join()
            runner.close()  # the run threads' stores: no run is running any more
            fence.close()
            try:
                with answer_by(time.monotonic() + DB_WAIT_SECONDS):
                    store.workers.stop(self.worker_id)
            except Exception as exc:  # the database is gone: the row's heartbeat ages out
                log.warning(f"cannot mark worker {self.worker_id} stopped: {exc}")
            store.close()
            log.info(f"worker {self.worker_id} stopped")
        return 0

    def _serve(self, transport: Transport, runner: Runner, stop: threading.Event) -> None:
        try:
            transport.serve(runner.handle, concurrency=self.options.concurrency, stop=stop)
        except Exception as exc:
            log.warning(f"transport stopped: {type(exc).__name__}: {exc}")

    def _drain(self, serving: threading.Thread, runner: Runner, trap: SignalTrap) -> None:
        """Let running work finish for ``grace`` (a second signal ends it), then cancel."""
        deadline = time.monotonic() + self.options.grace
        count = trap.count
        while serving.is_alive() and time.monotonic() < deadline and trap.count == count:
            _wait(trap, min(0.1, max(0.0, deadline - time.monotonic())))
        if serving.is_alive():
            if runner.running:
                log.warning(f"grace over: cancelling {', '.join(runner.running)}")
            runner.stop_all(signal.SIGTERM)
            runner.closing.set()
            serving.join()

    def _fire_loop(
        self, store: Store, transport: Transport, polls: PollPool, trap: SignalTrap
    ) -> None:
        signature = None
        while trap.received is None:
            now = time.time()
            try:
                with answer_by(time.monotonic() + DB_WAIT_SECONDS):
                    fire_due(store, int(now), transport.enqueue, polls)
                    due = store.schedules.earliest_due()
                    if chain_schedules(store):  # their parents end at no due time: sweep often
                        soon = int(now + SWEEP_EVERY) + 1
                        due = min(due, soon) if due is not None else soon
                    signature = store.schedules.signature()
            except Exception as exc:  # the database may be gone for a while: keep trying
                log.warning(f"firing: {type(exc).__name__}: {exc}")
                _wait(trap, 1.0)
                continue
            wake = float(due) if due is not None else now + 3600.0
            if wake <= time.time():
                # Still due after this pass: another worker is moving it on, or a row
                # holds no definition it could fire. Look again shortly, never spin.
                wake = time.time() + 0.2
            while trap.received is None and time.time() < wake:
                _wait(trap, min(DEFINITION_POLL, max(0.0, wake - time.time())))
                try:
                    with answer_by(time.monotonic() + DB_WAIT_SECONDS):
                        changed = store.schedules.signature() != signature
                    if changed:
                        break
                except Exception:
                    break

    def _heartbeat(self, runner: Runner, stop: threading.Event) -> None:
        opts = self.options
        fence = runner.fence
        assert fence is not None
        interval = max(0.05, opts.lease_seconds / 4)
        last_ok = time.monotonic()
        stopped_runs = False
        lapsed_seen: dict[tuple[str, float], float] = {}
        store: Store | None = None
        # Wake at the fence's deadline too (to stop the runs then), never spin after it.
        while not stop.wait(
            interval if fence.expired() else max(0.05, min(interval, fence.remaining()))
        ):
            if fence.expired() and not stopped_runs:
                # Past the fence's deadline this worker cannot prove the lease is still its
                # own: its guard is killing the runs' processes; it records them as
                # stopped and claims nothing until a renewal succeeds again.
                log.warning("lease lost: stopping this worker's runs, claiming none")
                runner.stop_all(signal.SIGTERM, LEASE_LOST)
                stopped_runs = True
            started = time.monotonic()
            # A beat that cannot land while the lease holds is no use: a server that does
            # not answer (frozen) is given up on then, and tried again on the next tick.
            try:
                with answer_by(started + max(interval, fence.remaining())):
                    if store is None:
                        store = open_store(opts.db_url)
                    # Only the runs in hand: a row that merely carries this worker's id
                    # (its ending lost in a failover) lapses and is reaped.
                    if not store.workers.beat(
                        self.worker_id, lease_seconds=opts.lease_seconds, runs=runner.held
                    ):
                        raise RuntimeError("the worker row is stopped or gone")
                fence.renewed(started)
                last_ok = time.monotonic()
                self._stop_runs_taken_over(store, runner)
                if stopped_runs:
                    log.info("lease renewed again: running work again")
                    runner.resume()
                    stopped_runs = False
                reap(store, runner, time.time(), lapsed_seen)
                runner.trim()  # an idle worker keeps no connections it does not use
            except Exception as exc:
                lost = time.monotonic() - last_ok
                log.warning(f"heartbeat failed ({lost:.1f}s): {type(exc).__name__}: {exc}")
                if store is not None:
                    store.close()
                    store = None
        if store is not None:
            store.close()

    def _stop_runs_taken_over(self, store: Store, runner: Runner) -> None:
        """A run another worker failed by lease while this one could not renew (its link
        was cut) is no longer this worker's: its execution stops instead of going on."""
        for run_id in runner.running:
            row = store.schedules.get_run(run_id)
            if row and row.status == "running" and row.worker_id == self.worker_id:
                continue
            held = f"{row.status} ({row.status_reason_code})" if row else "gone"
            log.warning(f"run {run_id} is no longer this worker's: {held}; stopping it")
            runner.stop_run(run_id, signal.SIGTERM)


def _wait(trap: SignalTrap, timeout: float) -> None:
    if timeout <= 0:
        return
    if trap.received is not None:  # its wake-up byte may still be unread: do not spin
        time.sleep(timeout)
        return
    try:
        select.select([trap.fileno()], [], [], timeout)
    except (OSError, ValueError):
        time.sleep(timeout)
