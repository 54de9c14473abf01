"""Chains (``--after OTHER[:outcome]``) on SQLite and PostgreSQL: each parent run that
ends in the wanted way fires the child once, whichever sweep sees it, also a parent
that ended while no worker ran; the event is the parent's record; cycles and unknown
parents are refused; depth 10 fires nothing (schedules/chains.py, chaining.py)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from lirun.errors import UsageError
from lirun.schedules import registry
from lirun.schedules.actions import parse_action
from lirun.schedules.applyfile import load_apply_file
from lirun.schedules.chaining import sweep_chains
from lirun.schedules.chains import find_cycle, matches, parse_after
from lirun.schedules.definition import Definition, make_policies
from lirun.schedules.submit import fire_now
from lirun.schedules.triggers import every_trigger, parse_trigger
from lirun.store import Store
from lirun.store.rows import ScheduleRunRow

NOW = int(time.time())
ENDS = {
    "completed": "schedule.completed.ok",
    "failed": "schedule.failed.action",
    "timed_out": "schedule.timed_out.deadline",
    "cancelled": "schedule.cancelled.user",
}


def add(
    store: Store, tmp_path: Path, name: str, after: str | None = None, **policies: object
) -> None:
    trigger = parse_trigger(after=after, now=NOW) if after else every_trigger("1h", NOW)
    argv = ["run", "echo", "{{ event.status }}"] if after else ["run", "true"]
    definition = Definition(
        name=name,
        trigger=trigger,
        action=parse_action(argv, base=str(tmp_path)),
        policies=make_policies(dict(policies), trigger),
    )
    registry.add(store, definition, now=NOW)


def end_run(store: Store, name: str, status: str) -> str:
    """A run of ``name`` (fired by hand) that ran and ended ``status``."""
    run = fire_now(store, name)
    store.update_status(
        "schedule_run", run.id, new_status="running", reason_code="schedule.running.started"
    )
    store.update_status("schedule_run", run.id, new_status=status, reason_code=ENDS[status])
    return run.id


def sweep(store: Store) -> list[str]:
    queued: list[str] = []
    sweep_chains(store, queued.append)
    return queued


def child_runs(store: Store, name: str) -> list[ScheduleRunRow]:
    row = store.schedules.get(name)
    assert row is not None
    return store.schedules.list_runs(row.id)


def test_parse_after_and_matches() -> None:
    assert parse_after("nightly") == ("nightly", "completed")
    assert parse_after("nightly:failed") == ("nightly", "failed")
    with pytest.raises(UsageError, match="outcome 'done'"):
        parse_after("nightly:done")
    assert matches("failed", "timed_out")
    assert not matches("failed", "completed")
    assert matches("any", "cancelled")
    assert not matches("any", "skipped")
    assert find_cycle("a", "b", {"b": "a", "a": None}) == ["a", "b", "a"]
    assert find_cycle("a", "b", {"b": "c", "c": None}) is None


@pytest.mark.parametrize(
    ("outcome", "fires"),
    [
        ("completed", {"completed"}),
        ("failed", {"failed", "timed_out"}),
        ("any", {"completed", "failed", "timed_out", "cancelled"}),
    ],
)
def test_outcome_filters(store: Store, tmp_path: Path, outcome: str, fires: set[str]) -> None:
    add(store, tmp_path, "build")
    add(store, tmp_path, "deploy", f"build:{outcome}")
    ended = {status: end_run(store, "build", status) for status in ENDS}
    queued = sweep(store)
    runs = child_runs(store, "deploy")
    assert {r.chain_parent_id for r in runs} == {ended[s] for s in fires}
    assert sorted(queued) == sorted(r.id for r in runs)
    assert all(r.chain_depth == 1 and r.event_key == r.chain_parent_id for r in runs)
    assert sweep(store) == []  # each parent fires once
    assert len(child_runs(store, "deploy")) == len(fires)


def test_parent_that_ended_before_any_worker_fires_and_event_is_its_record(
    store: Store, tmp_path: Path
) -> None:
    add(store, tmp_path, "review")
    add(store, tmp_path, "triage", "review:failed")
    parent = end_run(store, "review", "failed")  # no worker ran: nothing swept yet
    assert child_runs(store, "triage") == []
    assert len(sweep(store)) == 1  # the next worker's first sweep
    (run,) = child_runs(store, "triage")
    event = json.loads(run.event_json or "{}")
    assert event["id"] == parent
    assert event["schedule"] == "review"
    assert event["status"] == "failed"
    assert event["reason"] == "schedule.failed.action"
    assert set(event) >= {"artifact_dir", "exit_code"}


def test_concurrent_sweeps_fire_each_parent_once(store: Store, tmp_path: Path) -> None:
    add(store, tmp_path, "build")
    add(store, tmp_path, "deploy", "build:any")
    parents = {end_run(store, "build", "completed") for _ in range(5)}
    queued: list[str] = []
    threads = [threading.Thread(target=sweep_chains, args=(store, queued.append)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    runs = child_runs(store, "deploy")
    assert sorted(r.chain_parent_id or "" for r in runs) == sorted(parents)
    assert sorted(queued) == sorted(r.id for r in runs)


def test_cycles_and_unknown_parents_are_refused(store: Store, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no schedule named 'ghost'"):
        add(store, tmp_path, "a", "ghost")
    with pytest.raises(UsageError, match="cycle: a → a"):
        add(store, tmp_path, "a", "a")
    add(store, tmp_path, "b")
    add(store, tmp_path, "a", "b")
    rows = store.schedules.list_all()
    b_after_a = Definition(
        name="b",
        trigger=parse_trigger(after="a", now=NOW),
        action=parse_action(["run", "true"], base=str(tmp_path)),
        policies=make_policies({}, parse_trigger(after="a", now=NOW)),
    )
    with pytest.raises(UsageError, match=r"f.yaml:3: .*cycle: b → a → b"):
        registry.plan(rows, [b_after_a], now=NOW, places={"b": "f.yaml:3"})


def test_depth_bound_stores_a_skipped_run(store: Store, tmp_path: Path) -> None:
    add(store, tmp_path, "loop")
    add(store, tmp_path, "next", "loop:any")
    parent = end_run(store, "loop", "completed")
    with store.connector.write() as tx:
        tx.execute("UPDATE schedule_runs SET chain_depth = 10 WHERE id = :id", {"id": parent})
    assert sweep(store) == []
    (run,) = child_runs(store, "next")
    assert run.status == "skipped"
    assert run.status_reason_code == "schedule.skipped.chain_depth"
    assert run.chain_depth == 11


def test_fire_refuses_a_chain_schedule(store: Store, tmp_path: Path) -> None:
    add(store, tmp_path, "build")
    add(store, tmp_path, "deploy", "build")
    with pytest.raises(UsageError, match="ends \\(--after\\)"):
        fire_now(store, "deploy")


def test_runs_before_the_chain_existed_fire_nothing(store: Store, tmp_path: Path) -> None:
    add(store, tmp_path, "build")
    end_run(store, "build", "completed")
    row = store.schedules.get("build")
    assert row is not None
    with store.connector.write() as tx:  # that run was made before the chain schedule
        tx.execute(
            "UPDATE schedule_runs SET created_at = created_at - 100 WHERE schedule_id = :s",
            {"s": row.id},
        )
    add(store, tmp_path, "deploy", "build")
    assert sweep(store) == []


@pytest.mark.parametrize(
    ("second", "line", "says"),
    [
        ("    after: a", 3, "cycle: a → b → a"),
        ("    after: ghost", 7, "no schedule named 'ghost'"),
        ("    after: a:done", 7, "outcome 'done'"),
    ],
)
def test_an_apply_file_names_the_line_of_a_bad_after(
    store: Store, tmp_path: Path, second: str, line: int, says: str
) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text(
        "schedules:\n"
        "  - name: a\n"
        "    after: b:failed\n"
        "    action: run echo '{{ event.status }}'\n"
        "  - name: b\n"
        "    action: run echo '{{ event.id }}'\n"
        f"{second}\n"
    )
    with pytest.raises(UsageError) as caught:
        loaded = load_apply_file(str(path), now=NOW)
        registry.plan(
            store.schedules.list_all(), list(loaded.definitions), now=NOW, places=loaded.places
        )
    assert f"schedules.yaml:{line}:" in str(caught.value)
    assert says in str(caught.value)


def test_an_apply_file_defines_a_chain(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text(
        "schedules:\n"
        "  - name: review\n    every: 1d\n    action: run true\n"
        "  - name: triage\n    after: review:failed\n"
        "    action: run echo '{{ event.reason }}'\n"
    )
    loaded = load_apply_file(str(path), now=NOW)
    changes = registry.plan([], list(loaded.definitions), now=NOW, places=loaded.places)
    registry.apply(store, changes, now=NOW, source=loaded.path)
    row = store.schedules.get("triage")
    assert row is not None
    assert row.spec == "after review fails"


def test_max_runs_skips_later_parents_and_disables(store: Store, tmp_path: Path) -> None:
    add(store, tmp_path, "build")
    add(store, tmp_path, "deploy", "build", max_runs=1)
    end_run(store, "build", "completed")
    end_run(store, "build", "completed")
    assert len(sweep(store)) == 1
    runs = child_runs(store, "deploy")
    assert sorted((r.status, r.status_reason_code) for r in runs) == [
        ("queued", "schedule.queued.created"),
        ("skipped", "schedule.skipped.max_runs"),
    ]
    row = store.schedules.get("deploy")
    assert row is not None
    assert row.status == "disabled"
