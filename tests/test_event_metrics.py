"""Event metrics (issue 32, item 5) on SQLite and PostgreSQL: events seen, fired and
skipped per schedule and source, polls and poll failures per reason code, read from the
database after real polls (real poll commands), a webhook delivery's store write and a
chain sweep; a deleted schedule's series go away."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from starlette.testclient import TestClient

from lirun.schedules import registry
from lirun.schedules.actions import parse_action
from lirun.schedules.chaining import sweep_chains
from lirun.schedules.definition import Definition, make_policies
from lirun.schedules.submit import fire_now
from lirun.schedules.triggers import Trigger, every_trigger, parse_trigger, poll_trigger
from lirun.schedules.worker import fire_due
from lirun.store import Store
from lirun.ui.app import create_app
from lirun.ui.metrics import render
from support.cli import li_command
from test_metrics import samples, value

NOW = int(time.time())
FAILURES = ("schedule.poll.failed_exit", "schedule.poll.timed_out", "schedule.poll.bad_output")


def add(store: Store, tmp_path: Path, name: str, trigger: Trigger, **policies: object) -> str:
    argv = ["run", "echo", "{{ event.id }}"] if trigger.kind != "every" else ["run", "true"]
    definition = Definition(
        name=name,
        trigger=trigger,
        action=parse_action(argv, base=str(tmp_path)),
        policies=make_policies(dict(policies), trigger),
    )
    return registry.add(store, definition, now=NOW).id


def poll(store: Store, name: str) -> None:
    """One poll of ``name`` as a worker makes it (the poll command runs for real)."""
    row = store.schedules.get(name)
    assert row is not None
    assert row.next_due_at is not None
    fire_due(store, int(row.next_due_at), lambda _run: None)


def scrape(store: Store, db_url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return samples(render(store, db_url).decode())


def test_polls_count_events_seen_fired_skipped_and_failures(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "source.sh"
    items = [{"id": n} for n in (1, 2)]
    source.write_text(f"echo '{json.dumps(items)}'\n")
    prs = add(store, tmp_path, "prs", poll_trigger(f"sh {source}", NOW, every="1s",
              timeout="1s"), max_runs=1)  # fmt: skip
    poll(store, "prs")  # the baseline: 2 seen, nothing fired
    found = scrape(store, db_url)
    assert value(found, "lirun_schedule_events_seen_total", schedule="prs", source="poll") == 2
    assert value(found, "lirun_schedule_events_fired_total", schedule="prs", source="poll") == 0
    assert value(found, "lirun_schedule_polls_total", schedule="prs") == 1
    for reason in FAILURES:
        assert value(found, "lirun_schedule_poll_failing", schedule="prs", reason=reason) == 0

    for bad in ("exit 3", "sleep 5", "echo 'not json'", "exit 4"):
        source.write_text(bad + "\n")
        poll(store, "prs")
    found = scrape(store, db_url)
    failures = "lirun_schedule_poll_failures_total"
    assert value(found, failures, schedule="prs", reason="schedule.poll.failed_exit") == 2
    assert value(found, failures, schedule="prs", reason="schedule.poll.timed_out") == 1
    assert value(found, failures, schedule="prs", reason="schedule.poll.bad_output") == 1
    assert value(found, failures, schedule="prs", reason="schedule.poll.ok") == 0
    assert value(found, "lirun_schedule_polls_total", schedule="prs") == 5
    failing = "lirun_schedule_poll_failing"
    assert value(found, failing, schedule="prs", reason="schedule.poll.failed_exit") == 1
    assert value(found, failing, schedule="prs", reason="schedule.poll.bad_output") == 0

    # two new items: the first fires, the second meets --max-runs 1 and is skipped
    items += [{"id": 3}, {"id": 4}]
    source.write_text(f"echo '{json.dumps(items)}'\n")
    poll(store, "prs")
    found = scrape(store, db_url)
    assert value(found, "lirun_schedule_events_seen_total", schedule="prs", source="poll") == 4
    assert value(found, "lirun_schedule_events_fired_total", schedule="prs", source="poll") == 1
    skipped = {"schedule": "prs", "source": "poll", "reason": "schedule.skipped.max_runs"}
    assert value(found, "lirun_schedule_events_skipped_total", **skipped) == 1
    # li schedule show and the dashboard count fired as the metric does: a run queued
    assert store.events.count(prs) == (4, 1)
    show = subprocess.run(li_command("schedule", "show", "prs"), capture_output=True, text=True)
    assert "4 seen, 1 fired a run" in show.stdout, show.stderr
    with TestClient(create_app(db_url, watch=False)) as client:
        assert "4 seen, 1 fired a run" in client.get("/schedules/prs").text
        assert client.get("/api/schedules/prs").json()["events"]["fired"] == 1
    assert value(found, "lirun_schedule_polls_total", schedule="prs") == 6
    assert value(found, failures, schedule="prs", reason="schedule.poll.failed_exit") == 2
    assert value(found, failing, schedule="prs", reason="schedule.poll.failed_exit") == 0


def test_webhook_and_chain_events_count_by_source_and_a_deleted_schedule_goes(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    hook = add(store, tmp_path, "hook", parse_trigger(now=NOW, webhook=True, secret_env="S"))
    for key in ("d1", "d2", "d1"):  # a redelivery of d1 is the same event
        store.events.record(
            schedule_id=hook, event_key=key, event_json="{}", source="webhook", action_kind="run"
        )
    add(store, tmp_path, "build", every_trigger("1h", NOW))
    add(store, tmp_path, "deploy", parse_trigger(after="build:any", now=NOW))
    for _ in range(3):
        run = fire_now(store, "build")
        store.update_status(
            "schedule_run", run.id, new_status="running", reason_code="schedule.running.started"
        )
        store.update_status(
            "schedule_run", run.id, new_status="completed", reason_code="schedule.completed.ok"
        )
    assert sweep_chains(store, lambda _run: None) == 3
    found = scrape(store, db_url)
    seen, fired = "lirun_schedule_events_seen_total", "lirun_schedule_events_fired_total"
    assert value(found, seen, schedule="hook", source="webhook") == 2
    assert value(found, fired, schedule="hook", source="webhook") == 2
    assert value(found, seen, schedule="deploy", source="chain") == 3
    assert value(found, fired, schedule="deploy", source="chain") == 3
    assert value(found, seen, schedule="build", source="chain") == 0
    # no poll schedule: no poll series at all
    assert not [k for k in found if k[0].startswith("lirun_schedule_poll")]

    registry.delete(store, "hook")
    found = scrape(store, db_url)
    assert not [k for k in found if dict(k[1]).get("schedule") == "hook"]
    assert value(found, seen, schedule="deploy", source="chain") == 3
