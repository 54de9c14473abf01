"""The lease reaper (``lirun.schedules.worker.reap``) on SQLite and PostgreSQL: a run
whose lease lapsed fails with its executions, and is retried as a new attempt when its
schedule allows; a queued run past its start deadline fails."""

from __future__ import annotations

import logging
import signal
import threading
import time
from pathlib import Path

import pytest

from lirun.exec.fence import Fence
from lirun.schedules.actions import parse_action
from lirun.schedules.definition import make_policies
from lirun.schedules.outcomes import LEASE_LOST
from lirun.schedules.runner import RunContext, Runner, RunnerConfig
from lirun.schedules.submit import submit
from lirun.schedules.triggers import every_trigger, poll_trigger
from lirun.schedules.worker import reap
from lirun.store import Store
from support.workerkit import add_schedule, run_row


def runner(store: Store) -> Runner:
    return Runner(RunnerConfig(db_url=store.url, worker_id="reaper"))


def test_a_lapsed_lease_fails_the_run_and_its_remote_session_then_retries(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="lirun.schedules.runner")
    now = int(time.time())
    schedule = add_schedule(
        store, tmp_path, "nightly", ["run", "echo", "ok"], trigger=every_trigger("1d", now),
        retries=1,
    )  # fmt: skip
    run = store.schedules.insert_due_run(
        schedule_id=schedule.id, due_at=now + 86400, action_kind="run"
    )
    assert run is not None
    assert store.schedules.claim_run(run.id, worker_id="gone", lease_seconds=1)
    # Its session belongs to a worker on another machine, heartbeating until just now:
    # no process probe can judge it from here, only the run's lapsed lease.
    store.sessions.create(
        id="s-remote", owner_pid=4242, owner_host="elsewhere", owner_boot_id="b",
        owner_start_time=1.0, heartbeat_at=time.time(), lease_seconds=600,
    )  # fmt: skip
    store.schedules.link_run(run.id, session_id="s-remote")
    reap(store, runner(store), time.time())  # lease still valid: nothing happens
    assert run_row(store, run.id)["status"] == "running"
    reap(store, runner(store), time.time() + 5)
    failed = run_row(store, run.id)
    assert (failed["status"], failed["status_reason_code"]) == (
        "failed",
        "schedule.failed.lease_lapsed",
    )
    session = store.get_entity("session", "s-remote")
    assert session is not None
    assert (session["status"], session["status_reason_code"]) == (
        "failed",
        "session.failed.lease_lapsed",
    )
    (retry,) = [r for r in store.schedules.list_runs(schedule.id) if r.retry_of]
    assert (retry.status, retry.attempt, retry.due_at) == ("queued", 2, now + 86400)
    assert retry.retry_of == run.id
    lines = caplog.messages  # the runner logs each end (lirun.schedules.runner)
    assert any("lease_lapsed" in line and "retry" in line for line in lines), lines
    reap(store, runner(store), time.time() + 10)  # a second reaper: no second retry
    assert len(store.schedules.list_runs(schedule.id)) == 2


def test_the_retry_of_an_events_run_is_for_that_event_too(store: Store, tmp_path: Path) -> None:
    """A polled event's run whose worker died is retried with the same event: the retry
    names it (key and JSON) and its action sees it, as the first attempt did."""
    now = int(time.time())
    schedule = add_schedule(
        store, tmp_path, "prs", ["run", "echo", "{{ event.title }}"],
        trigger=poll_trigger("true", now, key="number"), retries=1,
    )  # fmt: skip
    recorded = store.events.record(
        schedule_id=schedule.id, event_key="7", event_json='{"number":7,"title":"Fix 7"}',
        action_kind="run", subject_key="7",
    )  # fmt: skip
    assert recorded.stored
    run_id = recorded.run_id
    assert run_id is not None
    assert store.schedules.claim_run(run_id, worker_id="gone", lease_seconds=1)
    reap(store, runner(store), time.time() + 5)
    assert run_row(store, run_id)["status_reason_code"] == "schedule.failed.lease_lapsed"
    (retry,) = store.schedules.retries_of(run_id)
    assert (retry.status, retry.attempt, retry.schedule_id) == ("queued", 2, schedule.id)
    assert (retry.event_key, retry.event_json) == ("7", '{"number":7,"title":"Fix 7"}')
    assert retry.subject_key == "7"  # --overlap counts the retry as active for its subject
    assert (retry.chain_parent_id, retry.chain_depth, retry.due_at) == (None, 0, None)
    assert int(retry.lease_epoch or 0) == 1  # its claims count on from the first attempt's
    action = RunContext(store, retry).action
    assert action is not None
    assert action.task is not None
    assert action.task.run == ("echo", "Fix 7")
    assert store.events.count(schedule.id) == (1, 1)  # one event, one first run


def test_a_queued_run_past_its_deadline_fails_without_a_retry(store: Store, tmp_path: Path) -> None:
    now = int(time.time())
    schedule = add_schedule(
        store, tmp_path, "late", ["run", "echo", "ok"], trigger=every_trigger("1d", now),
        start_deadline="1s", retries=2,
    )  # fmt: skip
    run = store.schedules.insert_queued_run(action_kind="run", schedule_id=schedule.id)
    reap(store, runner(store), time.time())
    assert run_row(store, run.id)["status"] == "queued"
    reap(store, runner(store), time.time() + 5)
    row = run_row(store, run.id)
    assert (row["status"], row["status_reason_code"]) == (
        "failed",
        "schedule.failed.start_deadline",
    )
    assert row["started_at"] is None


def test_a_run_the_worker_stopped_for_its_lease_keeps_that_cause_after_a_renewal(
    store: Store, tmp_path: Path
) -> None:
    """The worker stops its runs when its fence's deadline passes and starts again once a
    renewal lands: a run stopped that way ends ``lease_lost`` (and is retried) even when
    the renewal resumed the worker before the run's ending was judged, and whatever the
    guard's note found (the child gone already: this worker's signal, not its own end)."""
    (tmp_path / "started").unlink(missing_ok=True)
    action = parse_action(["run", "sh", "-c", "touch started; exec sleep 30"], base=str(tmp_path))
    run = submit(store, action, policies=make_policies({"retries": 1}, None))
    worker = Runner(RunnerConfig(db_url=store.url, worker_id="w1"), fence=Fence(60))
    thread = threading.Thread(target=worker.handle, args=(run.id,))
    thread.start()
    deadline = time.monotonic() + 20
    while not (tmp_path / "started").exists() or not worker.running:
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.02)
    worker.stop_all(signal.SIGTERM, LEASE_LOST)
    worker.resume()  # the renewal lands before the run's ending is judged
    thread.join(30)
    assert not thread.is_alive()
    ended = run_row(store, run.id)
    assert (ended["status"], ended["status_reason_code"]) == ("cancelled", LEASE_LOST)
    (retry,) = store.schedules.retries_of(run.id)
    assert retry.attempt == 2


def test_a_run_stopped_for_its_lease_as_it_starts_ends_lease_lost_and_is_retried(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker loses its lease between claiming a run and starting its execution: the
    execution refuses to start (nothing ran), and the run ends ``lease_lost`` and is
    retried, not failed as a setup error with its work never done."""
    action = parse_action(["run", "true"], base=str(tmp_path))
    run = submit(store, action, policies=make_policies({"retries": 1}, None))
    worker = Runner(RunnerConfig(db_url=store.url, worker_id="w1"), fence=Fence(60))
    claim = type(store.schedules).claim  # the claim of the row the run path read

    def claim_then_lose_the_lease(self: object, row: object, **kwargs: object) -> int | None:
        won = claim(self, row, **kwargs)  # type: ignore[arg-type]
        worker.stop_all(signal.SIGTERM, LEASE_LOST)  # the fence's deadline passed
        return won

    monkeypatch.setattr(type(store.schedules), "claim", claim_then_lose_the_lease)
    worker.handle(run.id)
    ended = run_row(store, run.id)
    assert (ended["status"], ended["status_reason_code"]) == ("cancelled", LEASE_LOST)
    assert "was not started" in ended["status_reason_summary"]
    (retry,) = store.schedules.retries_of(run.id)
    assert (retry.attempt, retry.status) == (2, "queued")
