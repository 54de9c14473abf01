"""The firing step (``lirun.schedules.worker.fire_due``) on SQLite and PostgreSQL: two
workers firing the same moment make one row per due time; the policies' skips and the
disabling are recorded rows and history."""

from __future__ import annotations

import time
from pathlib import Path

from lirun.schedules.triggers import every_trigger
from lirun.schedules.worker import fire_due
from lirun.store import Store, open_store
from support.workerkit import add_schedule, due_at


def test_two_workers_firing_the_same_moment_make_one_row_per_due_time(
    store: Store, tmp_path: Path
) -> None:
    now = int(time.time())
    schedule = add_schedule(
        store, tmp_path, "tick", ["run", "echo", "ok"], trigger=every_trigger("10s", now - 30),
        now=now - 30, overlap="allow",
    )  # fmt: skip
    other = open_store(store.url)
    queued: list[str] = []
    try:
        made = fire_due(store, now, queued.append)
        made += fire_due(other, now, queued.append)
    finally:
        other.close()
    runs = store.schedules.list_runs(schedule.id)
    dues = sorted(due_at(r) for r in runs)
    assert dues == [now - 20, now - 10, now]
    assert made == 3
    by_due = {r.due_at: r for r in runs}
    assert queued == [by_due[now].id]  # the current due time runs, once
    assert {by_due[now - 20].status_reason_code, by_due[now - 10].status_reason_code} == {
        "schedule.skipped.missed_fire"
    }
    row = store.schedules.get("tick")
    assert row is not None
    assert row.next_due_at == now + 10


def test_overlap_and_max_runs_are_recorded_skips(store: Store, tmp_path: Path) -> None:
    now = int(time.time())
    schedule = add_schedule(
        store, tmp_path, "once", ["run", "echo", "ok"], trigger=every_trigger("10s", now - 10),
        now=now - 10, max_runs=1,
    )  # fmt: skip
    queued: list[str] = []
    fire_due(store, now, queued.append)
    (first,) = store.schedules.list_runs(schedule.id)
    assert first.status == "queued"
    assert queued == [first.id]
    fire_due(store, now + 10, queued.append)  # still queued: overlap
    skipped = [r for r in store.schedules.list_runs(schedule.id) if r.status == "skipped"]
    assert [r.status_reason_code for r in skipped] == ["schedule.skipped.overlap"]
    assert store.schedules.claim_run(first.id, worker_id="w", lease_seconds=60)
    store.update_status(
        "schedule_run", first.id, new_status="completed", reason_code="schedule.completed.ok"
    )
    fire_due(store, now + 20, queued.append)  # one run started: max reached
    codes = [r.status_reason_code for r in store.schedules.list_runs(schedule.id)]
    assert codes.count("schedule.skipped.max_runs") == 1
    row = store.schedules.get("once")
    assert row is not None
    assert row.status == "disabled"
    assert row.next_due_at is None
    history = [t.reason_code for t in store.list_transitions("schedule", row.id)]
    assert history[-1] == "schedule_definition.disabled.max_runs"
    assert len(queued) == 1
