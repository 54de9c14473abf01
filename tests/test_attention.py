"""What needs a person (``ui/attention.py``): the decision table-tested as a pure
function, then the facts the store gathers on both backends (plays, flows, schedule
runs, dead owners, outcomes pending in a spool)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lirun.store import Store
from lirun.store.rows import (
    AttentionFlowRow,
    AttentionPlayRow,
    AttentionScheduleRunRow,
    ScheduleRow,
)
from lirun.ui.attention import OVERDUE_GRACE_SECONDS, Facts, needs_you
from lirun.ui.attention_facts import attention_items, gather
from support.storekit import raw_write, row_of

NOW = 1_800_000_000.0


def _play(status: str, **more: Any) -> AttentionPlayRow:
    given = {"id": f"p-{status}", "show_id": "sh1", "name": "api", "topic": "auth",
             "status": status, "status_reason_code": f"play.{status}.x",
             "updated_at": NOW - 5, "show_status": "active", **more}  # fmt: skip
    return AttentionPlayRow.from_row({**dict.fromkeys(AttentionPlayRow._fields), **given})


def _failed_flow(**given: Any) -> AttentionFlowRow:
    return AttentionFlowRow.from_row({**dict.fromkeys(AttentionFlowRow._fields), **given})


def _failed_run(**given: Any) -> AttentionScheduleRunRow:
    fields = dict.fromkeys(AttentionScheduleRunRow._fields)
    return AttentionScheduleRunRow.from_row({**fields, **given})


def _schedule(
    name: str, due: float | None, status: str = "enabled", poll: str | None = None
) -> ScheduleRow:
    given = {"id": f"id-{name}", "name": name, "status": status, "next_due_at": due}
    if poll is not None:
        given.update(last_poll_reason=poll, last_poll_at=NOW - 5, last_poll_detail="exited 1")
    return ScheduleRow.from_row({**dict.fromkeys(ScheduleRow._fields), **given})


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (Facts(), []),
        (Facts(plays=[_play("escalated")]), [("play", "p-escalated")]),
        (Facts(plays=[_play("gate_failed")]), [("play", "p-gate_failed")]),
        (
            Facts(flows=[_failed_flow(id="f1", status="failed", skill="/x/fan.yaml")]),
            [("flow", "f1")],
        ),
        # An overdue schedule needs a person only when no worker is live to fire it.
        (
            Facts(schedules=[_schedule("tick", NOW - OVERDUE_GRACE_SECONDS - 1)]),
            [("overdue_schedule", "id-tick")],
        ),
        (Facts(schedules=[_schedule("tick", NOW - 600)], live_workers=1), []),
        (Facts(schedules=[_schedule("tick", NOW - 5)]), []),  # within the grace
        (Facts(schedules=[_schedule("off", NOW - 600, status="disabled")]), []),
        (Facts(schedules=[_schedule("done", None)]), []),  # an `at` that fired
        # A poll schedule whose last poll failed, until a poll succeeds.
        (
            Facts(schedules=[_schedule("prs", NOW + 5, poll="schedule.poll.failed_exit")]),
            [("poll_failed", "id-prs")],
        ),
        (Facts(schedules=[_schedule("prs", NOW + 5, poll="schedule.poll.ok")]), []),
        (
            Facts(
                schedules=[
                    _schedule("prs", NOW + 5, status="disabled", poll="schedule.poll.timed_out")
                ]
            ),
            [],
        ),
        (
            Facts(dead_owners=[{"kind": "session", "id": "r1", "summary": "pid 9 is gone"}]),
            [("dead_owner", "r1")],
        ),
        (
            Facts(dead_owners=[{"kind": "show", "id": "sh9", "summary": "pid 9 is gone"}]),
            [("dead_owner", "sh9")],
        ),
        (
            Facts(pending=[{"run_id": "r2", "status": "failed", "reason_code": "x"}]),
            [("pending_outcome", "r2")],
        ),
    ],
)
def test_each_rule(facts: Facts, expected: list[tuple[str, str]]) -> None:
    assert [(i.kind, i.id) for i in needs_you(facts, NOW)] == expected


def test_a_schedules_failures_are_one_item_naming_the_last_and_how_many() -> None:
    runs = [
        _failed_run(id=f"r{i}", schedule_id="s1", schedule_name="tick", status="failed",
                    status_reason_code="run.failed.exit_nonzero", updated_at=NOW - 10 + i)
        for i in range(3)
    ]  # fmt: skip
    [item] = needs_you(Facts(schedule_runs=runs), NOW)
    assert item.kind == "schedule"
    assert item.id == "r2"
    assert item.since == NOW - 8
    assert "3 runs failed since its last success" in item.what
    assert item.href == "/schedules/tick"
    assert item.do == "li logs r2; li schedule runs tick"


def test_what_blocks_work_comes_first_and_each_says_what_to_do() -> None:
    facts = Facts(
        plays=[_play("escalated")],
        flows=[_failed_flow(id="f1", status="timed_out")],
        schedules=[_schedule("tick", NOW - 3600)],
        dead_owners=[{"kind": "invocation", "id": "f2", "summary": "no heartbeat for 90s"}],
        pending=[{"run_id": "r2", "status": "completed", "reason_code": "run.completed.ok"}],
    )
    items = needs_you(facts, NOW)
    assert [i.kind for i in items] == [
        "play", "dead_owner", "pending_outcome", "overdue_schedule", "flow"
    ]  # fmt: skip
    assert [i.do for i in items] == [
        "li show status sh1", "li reap", "li status r2", "li worker",
        "li logs f1; li flow resume f1",
    ]  # fmt: skip
    assert items[1].href == "/flows/f2"
    assert "nobody reaped it" in items[1].what
    assert items[4].what.startswith("flow f1 timed_out")
    assert "no worker is live" in items[3].what


def _flow(store: Store, status: str, *, age: float = 0.0, resumed_from: str | None = None) -> str:
    inv = store.invocations.create(skill="/tmp/work/fan.yaml")
    raw_write(
        store,
        "UPDATE invocations SET kind = 'flow', status = :s, created_at = :at, "
        "updated_at = :at, resumed_from = :r WHERE id = :id",
        {"s": status, "at": time.time() - age, "r": resumed_from, "id": inv.id},
    )
    return str(inv.id)


def _schedule_run(store: Store, schedule_id: str, status: str, at: float) -> str:
    run = store.schedules.create_run(action_kind="run", schedule_id=schedule_id)
    raw_write(
        store,
        "UPDATE schedule_runs SET status = :s, created_at = :at, updated_at = :at WHERE id = :id",
        {"s": status, "at": at, "id": run.id},
    )
    return run.id


def test_the_store_gathers_what_a_person_must_act_on(store: Store, db_url: str) -> None:
    now = time.time()
    show = store.shows.create(topic="auth")
    aborted = store.shows.create(topic="old")
    plays = {}
    for show_id, name, status in (
        (show.id, "api", "escalated"),
        (show.id, "gate", "gate_failed"),
        (show.id, "models", "merged"),
        (aborted.id, "gone", "escalated"),
    ):
        play = store.shows.create_play(show_id=show_id, name=name)
        raw_write(
            store, "UPDATE plays SET status = :s WHERE id = :id", {"s": status, "id": play.id}
        )
        plays[name] = play.id
    raw_write(store, "UPDATE shows SET status = 'aborted' WHERE id = :id", {"id": aborted.id})
    failed = _flow(store, "failed")
    resumed = _flow(store, "failed")
    _flow(store, "completed", resumed_from=resumed)
    _flow(store, "failed", age=30 * 86400)  # aged out
    raw_write(
        store,
        "INSERT INTO schedules (id, name, spec, action_kind, enabled, status, created_at, "
        "updated_at) VALUES ('s1', 'tick', 'every 1s', 'run', 1, 'enabled', :now, :now), "
        "('s2', 'fine', 'every 1s', 'run', 1, 'enabled', :now, :now)",
        {"now": now},
    )
    _schedule_run(store, "s1", "failed", now - 30)
    _schedule_run(store, "s1", "completed", now - 20)
    late = _schedule_run(store, "s1", "timed_out", now - 10)
    _schedule_run(store, "s2", "failed", now - 30)
    _schedule_run(store, "s2", "completed", now - 20)
    rows = store.lists.attention_rows(since=now - 7 * 86400)
    assert sorted((r.id, r.show_status) for r in rows.plays) == sorted(
        [(plays["api"], "active"), (plays["gate"], "active"), (plays["gone"], "aborted")]
    )
    assert [r.id for r in rows.flows] == [failed]
    assert [(r.id, r.schedule_name) for r in rows.schedule_runs] == [(late, "tick")]
    kinds = [(i.kind, i.id) for i in attention_items(store, db_url, now)]
    assert ("flow", failed) in kinds
    assert ("schedule", late) in kinds
    assert {("play", plays["api"]), ("play", plays["gate"])} <= set(kinds)
    assert ("play", plays["gone"]) not in kinds  # its show was aborted: a person gave it up


def test_a_running_record_whose_owner_died_is_found_and_not_reaped(
    store: Store, db_url: str
) -> None:
    from lirun.liveness import boot_id, host_name, process_start_time

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    started = process_start_time(gone.pid)
    gone.wait()
    store.sessions.create(
        id="orphan", owner_pid=gone.pid, owner_host=host_name(), owner_boot_id=boot_id(),
        owner_start_time=started,
    )  # fmt: skip
    store.sessions.create(id="alive")  # this process owns it
    facts = gather(store, db_url, time.time())
    assert [(d["kind"], d["id"]) for d in facts.dead_owners] == [("session", "orphan")]
    assert row_of(store, "session", "orphan")["status"] == "running"


def test_an_outcome_pending_in_the_spool_is_listed(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    from lirun.record.spool import SpooledOutcome, database_identity, write_spool

    store.sessions.create(id="spooled")
    outcome = SpooledOutcome(
        run_id="spooled", database=database_identity(db_url), status="failed",
        reason_code="run.failed.exit_nonzero", reason_summary="exit 1",
        cause="the database was unreachable", spooled_at=time.time(),
    )  # fmt: skip
    write_spool(db_url, tmp_path, outcome)
    items = attention_items(store, db_url, time.time())
    [item] = [i for i in items if i.kind == "pending_outcome"]
    assert item.id == "spooled"
    assert "the database was unreachable" in item.what
    assert item.do == "li status spooled"


def test_a_flow_is_named_by_its_files_name() -> None:
    facts = Facts(flows=[_failed_flow(id="f1", status="failed", skill="/tmp/x/fan.yaml")])
    [item] = needs_you(facts, NOW)
    assert item.what.startswith("flow fan.yaml failed")
    assert "/tmp/x" not in item.what


def test_a_show_whose_owner_died_is_resumed_not_reaped() -> None:
    dead = [{"kind": "show", "id": "sh9", "summary": "owner pid 9 on h is gone"}]
    [item] = needs_you(Facts(dead_owners=dead), NOW)
    assert item.do == "li show resume sh9"
    assert item.href == "/shows/sh9"
    assert item.what.endswith("owner pid 9 on h is gone; no process runs it")
