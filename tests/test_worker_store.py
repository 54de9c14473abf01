"""The store half of the workers (store/worker_records.py) on SQLite and PostgreSQL: the
workers table and its heartbeat, the queued → running compare-and-set with its lease,
lapsed leases, ad-hoc runs, links and a schedule's recorded usage."""

from __future__ import annotations

import time
from pathlib import Path

from lirun.liveness import current_owner
from lirun.schedules import registry
from lirun.schedules.actions import parse_action
from lirun.schedules.definition import Definition, make_policies
from lirun.schedules.triggers import every_trigger
from lirun.store import Store
from lirun.store.rows import ScheduleRow, ScheduleRunRow, WorkerRow

NOW = int(time.time())


def add_schedule(store: Store, tmp_path: Path, name: str = "poll") -> ScheduleRow:
    trigger = every_trigger("1h", NOW)
    definition = Definition(
        name=name,
        trigger=trigger,
        action=parse_action(["run", "true"], base=str(tmp_path)),
        policies=make_policies({}, trigger),
    )
    return registry.add(store, definition, now=NOW)


def test_workers_register_beat_and_list_with_their_runs(store: Store, tmp_path: Path) -> None:
    first = store.workers.register(
        owner=current_owner(), concurrency=2, transport="LocalTransport", lease_seconds=60
    )
    second = store.workers.register(
        owner=current_owner(), concurrency=1, transport="LocalTransport", lease_seconds=60
    )
    run = store.schedules.insert_queued_run(action_kind="run", action={"kind": "run", "cwd": "/"})
    assert store.schedules.claim_run(run.id, worker_id=first, lease_seconds=60)
    live = {w.id: w for w in store.workers.list_live(since=time.time() - 10)}
    assert set(live) == {first, second}
    assert live[first].running == (run.id,)
    assert live[second].running == ()
    assert live[first].concurrency == 2
    assert live[first].pid == current_owner()["owner_pid"]
    store.workers.stop(second)
    assert [w.id for w in store.workers.list_live(since=time.time() - 10)] == [first]
    assert store.workers.beat(first, lease_seconds=60, runs=[run.id]) is True
    assert (
        store.workers.beat(second, lease_seconds=60, runs=[]) is False
    )  # stopped: no lease renewed
    assert store.workers.list_live(since=time.time() + 10) == []


def test_claim_is_a_compare_and_set_the_loser_gets_false(store: Store) -> None:
    run = store.schedules.insert_queued_run(action_kind="run", action={"kind": "run", "cwd": "/"})
    assert run.status == "queued"
    assert run.due_at is None
    assert run.attempt == 1
    assert store.schedules.claim_run(run.id, worker_id="w1", lease_seconds=30) is True
    assert store.schedules.claim_run(run.id, worker_id="w2", lease_seconds=30) is False
    row = store.get_entity("schedule_run", run.id)
    assert row is not None
    assert row["status"] == "running"
    assert row["worker_id"] == "w1"
    assert row["lease_expires_at"] > time.time() + 25
    assert row["started_at"] is not None
    history = [(t.status, t.reason_code) for t in store.list_transitions("schedule_run", run.id)]
    assert history == [
        ("queued", "schedule.queued.created"),
        ("running", "schedule.running.started"),
    ]


def test_a_lease_lapses_unless_the_heartbeat_renews_it(store: Store) -> None:
    worker = store.workers.register(
        owner=current_owner(), concurrency=1, transport="LocalTransport", lease_seconds=1
    )
    run = store.schedules.insert_queued_run(action_kind="run", action={"kind": "run", "cwd": "/"})
    assert store.schedules.claim_run(run.id, worker_id=worker, lease_seconds=1)
    assert store.schedules.list_lapsed_runs(time.time()) == []
    later = time.time() + 5
    assert [r.id for r in store.schedules.list_lapsed_runs(later)] == [run.id]
    assert store.workers.beat(worker, lease_seconds=60, runs=[run.id])
    assert store.schedules.list_lapsed_runs(later) == []  # renewed by the beat


def test_the_heartbeat_renews_only_the_runs_the_worker_has_in_hand(store: Store) -> None:
    """A row that carries the worker's id but that the worker no longer has in hand (its
    ending lost in a failover) is not renewed: its lease lapses."""
    worker = store.workers.register(
        owner=current_owner(), concurrency=2, transport="LocalTransport", lease_seconds=1
    )
    held, lost = (
        store.schedules.insert_queued_run(action_kind="run", action={"kind": "run", "cwd": "/"})
        for _ in range(2)
    )
    for run in (held, lost):
        assert store.schedules.claim_run(run.id, worker_id=worker, lease_seconds=1)
    later = time.time() + 5
    assert store.workers.beat(worker, lease_seconds=60, runs=[held.id])
    assert [r.id for r in store.schedules.list_lapsed_runs(later)] == [lost.id]
    assert store.workers.beat(worker, lease_seconds=60, runs=[])
    other = store.workers.register(
        owner=current_owner(), concurrency=1, transport="LocalTransport", lease_seconds=1
    )
    assert store.workers.beat(other, lease_seconds=60, runs=[lost.id])  # not its run
    assert [r.id for r in store.schedules.list_lapsed_runs(later)] == [lost.id]


def test_links_and_running_sessions_of_a_run(store: Store) -> None:
    run = store.schedules.insert_queued_run(action_kind="run", action={"kind": "run", "cwd": "/"})
    session = store.sessions.create(provider="command", id="s-linked")
    store.sessions.create(provider="command", id="s-other")
    store.schedules.link_run(run.id, session_id="s-linked")
    row = store.schedules.get_run(run.id)
    assert row is not None
    assert row.session_id == session.id
    assert store.schedules.running_sessions_of_run(row) == ["s-linked"]
    store.schedules.link_run(run.id, invocation_id="inv-1")  # a later link keeps the earlier one
    row = store.schedules.get_run(run.id)
    assert row is not None
    assert (row.session_id, row.invocation_id) == ("s-linked", "inv-1")


def test_started_runs_and_usage_of_a_schedule(store: Store, tmp_path: Path) -> None:
    schedule = add_schedule(store, tmp_path)
    assert store.schedules.usage(schedule.id) == (None, 0)  # nothing recorded: blind
    run = store.schedules.insert_due_run(
        schedule_id=schedule.id, due_at=NOW + 3600, action_kind="run"
    )
    assert run is not None
    assert (
        store.schedules.insert_due_run(
            schedule_id=schedule.id, due_at=NOW + 3600, action_kind="run"
        )
        is None
    )
    assert store.schedules.count_started_runs(schedule.id) == 0
    assert store.schedules.claim_run(run.id, worker_id="w", lease_seconds=60)
    assert store.schedules.count_started_runs(schedule.id) == 1
    store.sessions.create(provider="command", id="s-cost")
    store.update_fields(
        "session", "s-cost", {"cost_usd": 0.25, "input_tokens": 100, "output_tokens": 20}
    )
    store.schedules.link_run(run.id, session_id="s-cost")
    assert store.schedules.usage(schedule.id) == (0.25, 120)
    assert store.schedules.usage(schedule.id, since=time.time() + 60) == (None, 0)
    fired = store.schedules.insert_queued_run(action_kind="run", schedule_id=schedule.id)
    assert fired.action_json is None
    assert fired.schedule_id == schedule.id
    signature = store.schedules.signature()
    registry.set_enabled(store, "poll", False, now=NOW + 1)
    assert store.schedules.signature() != signature


def test_a_worker_row_holds_every_column_of_the_workers_table(store: Store) -> None:
    """``WorkerRow.from_row`` names each column: one the table gains fails here, not later
    as a missing attribute above the store."""
    store.workers.register(
        owner=current_owner(), concurrency=1, transport="LocalTransport", lease_seconds=60
    )
    raw = store.connector.read(store.sql("list_live_workers"), {"since": 0})
    assert set(raw[0]) == set(WorkerRow._fields) - {"running"}
    worker = store.workers.list_live(since=0)[0]
    assert worker.as_dict() == {**dict(raw[0]), "running": []}


def test_a_schedule_run_row_holds_every_column_of_its_table(store: Store) -> None:
    """``ScheduleRunRow.from_row`` names each column of ``schedule_runs``; the JSON of
    ``li submit --json`` is the row's ``as_dict`` (its action decoded)."""
    run = store.schedules.insert_queued_run(action_kind="run", action={"kind": "run", "cwd": "/"})
    raw = store.connector.read(store.sql("list_queued_runs"), {"limit": 10})
    assert set(raw[0]) == set(ScheduleRunRow._fields)
    assert run.as_dict() == {**dict(raw[0]), "action_json": {"kind": "run", "cwd": "/"}}
    assert store.schedules.get_run(run.id) == run
    assert store.schedules.get_run("no-such-run") is None
