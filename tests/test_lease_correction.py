"""A record a reaper inferred from a lapsed lease is corrected by what the owner saw.

On both backends: the session (teardown) and the schedule run (``correct_inferred_end``)
a reaper failed by lease end as their work really did, audited as actor ``lirun``; a
retry the inference queued is cancelled while it waits and marked a repeat once it
started; an ending that was a stop, or a record ended for another cause, stands.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lirun.record.context import PersistContext
from lirun.record.correction import correction_for
from lirun.record.reap_schedule_runs import EXECUTION_LAPSED, fail_lapsed_run
from lirun.record.rundir import RunDir, allocate_run
from lirun.record.teardown import setup_persist_sync, teardown_persist_sync
from lirun.schedules.actions import parse_action
from lirun.schedules.correct import correct_inferred_end
from lirun.schedules.definition import make_policies
from lirun.schedules.outcomes import Outcome
from lirun.schedules.submit import submit
from lirun.store import Store
from lirun.store.rows import ScheduleRunRow
from support.teardownkit import GIT_ENV, finalize_as, make_repo

COMPLETED = Outcome("completed", "schedule.completed.ok", "", exit_code=0)


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)


def lapsed_run(store: Store, tmp_path: Path, retries: int = 1) -> ScheduleRunRow:
    """A run a worker claimed, then failed by another worker's reaper, its retry queued."""
    action = parse_action(["run", "true"], base=str(tmp_path))
    run = submit(store, action, policies=make_policies({"retries": retries}, None))
    assert store.schedules.claim_run(run.id, worker_id="w-frozen", lease_seconds=4)
    claimed = store.schedules.get_run(run.id)
    assert claimed is not None
    assert fail_lapsed_run(store, claimed, "its worker's lease lapsed")
    failed = store.schedules.get_run(run.id)
    assert failed is not None
    assert store.schedules.queue_retry(failed) is not None
    return failed


def events(store: Store, entity_id: str) -> list[tuple[str, str | None]]:
    return [(e.event_type, e.actor) for e in store.list_admin_events(entity_id)]


def test_a_run_whose_work_ended_by_itself_is_corrected(store: Store, tmp_path: Path) -> None:
    run = lapsed_run(store, tmp_path)
    corrected = correct_inferred_end(store, run.id, COMPLETED, retries=1)
    assert corrected is not None
    assert (corrected.status, corrected.status_reason_code) == (
        "completed",
        "schedule.completed.ok",
    )
    assert corrected.exit_code == 0
    history = [t.status for t in store.list_transitions("schedule_run", run.id)]
    assert history == ["queued", "running", "failed", "completed"]  # the inference kept
    assert events(store, run.id) == [("status_transition_override", "lirun")]
    (retry,) = store.schedules.retries_of(run.id)
    assert (retry.status, retry.status_reason_code) == (
        "cancelled",
        "schedule.cancelled.superseded",
    )
    assert "schedule.failed.lease_lapsed" in str(corrected.status_evidence_refs)


def test_a_retry_that_started_is_marked_a_repeat(store: Store, tmp_path: Path) -> None:
    run = lapsed_run(store, tmp_path)
    (retry,) = store.schedules.retries_of(run.id)
    assert store.schedules.claim_run(retry.id, worker_id="w-other", lease_seconds=4)
    assert correct_inferred_end(store, run.id, COMPLETED, retries=1) is not None
    (after,) = store.schedules.retries_of(run.id)
    assert after.status == "running"  # its own worker records how it ends
    assert events(store, retry.id) == [("schedule_run_repeat", "lirun")]
    (event,) = store.list_admin_events(retry.id)
    assert event.payload == {"repeat_of": run.id}


@pytest.mark.parametrize(
    "outcome",
    [
        Outcome("cancelled", "schedule.cancelled.lease_lost", "stopped by its lease"),
        Outcome("cancelled", "schedule.cancelled.worker_stopped", ""),
    ],
)
def test_a_stop_does_not_correct_the_record(store: Store, tmp_path: Path, outcome: Outcome) -> None:
    run = lapsed_run(store, tmp_path)
    assert correct_inferred_end(store, run.id, outcome, retries=1) is None
    after = store.schedules.get_run(run.id)
    assert after is not None
    assert after.status_reason_code == "schedule.failed.lease_lapsed"
    (retry,) = store.schedules.retries_of(run.id)
    assert retry.status == "queued"
    assert events(store, run.id) == []


def test_a_retry_the_true_ending_would_have_had_stays(store: Store, tmp_path: Path) -> None:
    run = lapsed_run(store, tmp_path, retries=2)
    rate_limited = Outcome("failed", "run.failed.provider_rate_limit", "429")
    corrected = correct_inferred_end(store, run.id, rate_limited, retries=2)
    assert corrected is not None
    assert corrected.status_reason_code == "run.failed.provider_rate_limit"
    (retry,) = store.schedules.retries_of(run.id)
    assert retry.status == "queued"


def test_a_record_ended_for_another_cause_stands(store: Store, tmp_path: Path) -> None:
    action = parse_action(["run", "true"], base=str(tmp_path))
    run = submit(store, action)
    assert store.schedules.claim_run(run.id, worker_id="w", lease_seconds=4)
    assert store.update_status(
        "schedule_run", run.id, new_status="cancelled", reason_code="schedule.cancelled.user",
        source="admin", actor="alice", expected_statuses={"running"},
    )  # fmt: skip
    assert correct_inferred_end(store, run.id, COMPLETED, retries=0) is None
    after = store.schedules.get_run(run.id)
    assert after is not None
    assert after.status == "cancelled"


# --- the execution (teardown) -------------------------------------------------------------


@pytest.fixture
def started(db_url: str, tmp_path: Path) -> tuple[RunDir, PersistContext]:
    run = allocate_run()
    ctx = setup_persist_sync(run, db=db_url, cwd=str(make_repo(tmp_path / "repo")))
    assert ctx is not None
    return run, ctx


def test_an_execution_a_reaper_failed_is_corrected_by_its_own_exit(
    db_url: str, store: Store, started: tuple[RunDir, PersistContext]
) -> None:
    run, ctx = started
    assert finalize_as(db_url, run.run_id, "failed", EXECUTION_LAPSED)
    status = teardown_persist_sync(ctx, extras={"command": True, "exit_code": 0})
    assert status == "completed"
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert (row["status"], row["status_reason_code"]) == ("completed", "run.completed.ok")
    assert [t.status for t in store.list_transitions("session", run.run_id)] == [
        "running",
        "failed",
        "completed",
    ]
    assert events(store, run.run_id) == [("status_transition_override", "lirun")]
    assert "correction" in str(row["status_evidence_refs"])


@pytest.mark.parametrize(
    ("status", "extras"),
    [
        ("failed", {"command": True, "exit_code": -9}),  # killed: the guard's, maybe
        ("cancelled", {"command": True, "exit_code": 0, "signal": "SIGTERM"}),  # li's stop
    ],
)
def test_an_execution_that_was_stopped_keeps_the_inferred_record(
    db_url: str,
    store: Store,
    started: tuple[RunDir, PersistContext],
    status: str,
    extras: dict[str, object],
) -> None:
    run, ctx = started
    assert finalize_as(db_url, run.run_id, "failed", EXECUTION_LAPSED)
    # (it returns its own decision for a row already terminal: the row is the record)
    teardown_persist_sync(ctx, status=status, extras=extras)
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert row["status_reason_code"] == EXECUTION_LAPSED
    assert events(store, run.run_id) == []


def test_correction_for_is_only_for_an_inferred_ending() -> None:
    lapsed = "schedule.failed.lease_lapsed"
    assert correction_for("failed", lapsed, "completed", "schedule.completed.ok") is not None
    assert correction_for("failed", "schedule.failed.action", "completed", "x") is None
    assert correction_for("failed", lapsed, "cancelled", "schedule.cancelled.lease_lost") is None
    assert correction_for("failed", lapsed, "failed", lapsed) is None
    assert (
        correction_for(
            "failed", EXECUTION_LAPSED, "failed", "run.failed.exit_nonzero", exit_code=-15
        )
        is None
    )
