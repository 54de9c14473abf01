"""The schedules page says what is true: the cost per run is per run (not the total),
and a next fire time already past says no worker is live to fire it (both backends)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lirun.schedules import registry
from lirun.schedules.actions import parse_action
from lirun.schedules.definition import Definition, make_policies
from lirun.schedules.triggers import poll_trigger
from lirun.store import Store
from lirun.ui.app import create_app
from support.storekit import raw_write
from support.uikit import add_hourly_schedule


@pytest.fixture
def client(store: Store, db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(db_url, watch=False)) as c:
        yield c


def test_cost_per_run_is_per_run_and_a_past_due_fire_says_no_worker_runs(
    store: Store, client: TestClient, li_env: dict[str, str]
) -> None:
    schedule = add_hourly_schedule(store, li_env)
    for cost in (0.25, 0.5, 0.75):
        inv = store.invocations.create(skill="scheduled")
        raw_write(
            store,
            "UPDATE invocations SET cost_usd = :c WHERE id = :id",
            {"c": cost, "id": inv.id},
        )
        run = store.schedules.create_run(
            action_kind="run", schedule_id=schedule.id, invocation_id=inv.id
        )
        store.update_status(
            "schedule_run", run.id, new_status="completed", reason_code="schedule.completed.ok"
        )
    page = client.get("/schedules").text
    assert '<span class="per-run">$0.5000</span>' in page
    assert "$1.5000 over 3 runs" in page
    assert "past due" not in page  # due in an hour
    assert 'id="no-worker"' in page  # but nothing will fire it
    # an hour later, still no worker: the due time is in the past
    raw_write(store, "UPDATE schedules SET next_due_at = :t", {"t": time.time() - 600})
    page = client.get("/schedules").text
    assert "past due: no worker is live to fire it" in page
    data = client.get("/api/schedules").json()
    assert data["live_workers"] == 0
    [shown] = data["schedules"]
    assert shown["overdue"] is True
    assert shown["cost_per_run_usd"] == pytest.approx(0.5)


def test_a_poll_schedules_page_shows_its_last_poll_and_the_run_each_event_started(
    store: Store, client: TestClient, tmp_path: Path
) -> None:
    trigger = poll_trigger("false", int(time.time()), key="number")
    definition = Definition(
        name="prs",
        trigger=trigger,
        action=parse_action(["run", "echo", "{{ event.number }}"], base=str(tmp_path)),
        policies=make_policies({}, trigger),
    )
    schedule = registry.add(store, definition, now=int(time.time()))
    store.events.record(schedule_id=schedule.id, event_key="1", event_json="{}")
    _, run_id, _ = store.events.record(
        schedule_id=schedule.id, event_key="2", event_json='{"number": 2}', action_kind="run"
    )
    store.events.record_poll(
        schedule.id, reason="schedule.poll.failed_exit", detail="the poll command exited 1"
    )
    page = client.get("/schedules/prs").text
    assert "schedule.poll.failed_exit" in page
    assert "the poll command exited 1" in page
    assert "2 seen, 1 fired a run" in page
    assert f">{run_id}</a>" in page
    assert "baseline: seen on the first poll, not fired" in page
    data = client.get("/api/schedules/prs").json()
    assert data["events"]["seen"] == 2
    assert [e["event_key"] for e in data["events"]["recent"]] == ["2", "1"]
