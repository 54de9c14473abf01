"""What a chain schedule (``--after``) shows, on SQLite and PostgreSQL: ``li schedule
runs`` names each run's parent run and depth (PARENT, DEPTH; only for a chain), its
``--json`` carries ``chain_parent_id`` and ``chain_depth`` as its schema says, and the
dashboard's schedule page says the trigger in words and lists the parent runs, each
with the run it fired, both linked (``/api/schedules/NAME`` the same)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from starlette.testclient import TestClient

from lirun.cli.main import main
from lirun.schedules import registry
from lirun.schedules.actions import parse_action
from lirun.schedules.chaining import sweep_chains
from lirun.schedules.definition import Definition, make_policies
from lirun.schedules.submit import fire_now
from lirun.schedules.triggers import every_trigger, parse_trigger
from lirun.schemas import load_schema
from lirun.store import Store
from lirun.ui.app import create_app

NOW = int(time.time())
ENDS = {"completed": "schedule.completed.ok", "failed": "schedule.failed.action"}


def add(store: Store, tmp_path: Path, name: str, after: str | None = None) -> None:
    trigger = parse_trigger(after=after, now=NOW) if after else every_trigger("1h", NOW)
    argv = ["run", "echo", "{{ event.status }}"] if after else ["run", "true"]
    definition = Definition(
        name=name,
        trigger=trigger,
        action=parse_action(argv, base=str(tmp_path)),
        policies=make_policies({}, trigger),
    )
    registry.add(store, definition, now=NOW)


def end_run(store: Store, status: str, session_id: str | None = None) -> str:
    """A run of ``build`` (fired by hand) that ran (``session_id``: the run it made) and
    ended ``status``."""
    run = fire_now(store, "build")
    if session_id is not None:
        store.schedules.link_run(run.id, session_id=session_id)
    store.update_status(
        "schedule_run", run.id, new_status="running", reason_code="schedule.running.started"
    )
    store.update_status("schedule_run", run.id, new_status=status, reason_code=ENDS[status])
    return run.id


@pytest.fixture
def chain(store: Store, tmp_path: Path) -> dict[str, str]:
    """build, and deploy after build ends: a parent that completed (it ran a run) and
    one that failed, each swept into a deploy run. Returns parent id -> child id."""
    add(store, tmp_path, "build")
    add(store, tmp_path, "deploy", "build:any")
    made = store.sessions.create(provider="claude")
    parents = [end_run(store, "completed", made.id), end_run(store, "failed")]
    assert sweep_chains(store, lambda _run: None) == 2
    deploy = store.schedules.get("deploy")
    assert deploy is not None
    children = {str(r.chain_parent_id): r.id for r in store.schedules.list_runs(deploy.id)}
    assert set(children) == set(parents)
    return children


def li(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["schedule", *args]) == 0
    return capsys.readouterr().out


def test_runs_of_a_chain_name_the_parent_and_depth(
    store: Store, chain: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    header, *lines = li(capsys, "runs", "deploy").splitlines()
    assert header.split()[-3:] == ["PARENT", "DEPTH", "REASON"]
    assert "EVENT" not in header
    rows = {line.split()[0]: line.split() for line in lines}
    assert {rows[child][-3] for child in chain.values()} == set(chain)
    for parent, child in chain.items():
        assert rows[child][-3:-1] == [parent, "1"]
    # a time schedule keeps its EVENT column and has no PARENT
    header = li(capsys, "runs", "build").splitlines()[0]
    assert "EVENT" in header
    assert "PARENT" not in header

    found = json.loads(li(capsys, "runs", "deploy", "--json"))
    assert {r["chain_parent_id"]: r["id"] for r in found} == chain
    assert {r["chain_depth"] for r in found} == {1}
    validator = jsonschema.Draft202012Validator(load_schema("schedule_run"))
    for row in found + json.loads(li(capsys, "runs", "build", "--json")):
        assert not list(validator.iter_errors(row)), row
    wrong = {**found[0], "chain_depth": "1"}
    assert list(validator.iter_errors(wrong))  # the schema checks the field's type


@pytest.fixture
def client(store: Store, db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(db_url, watch=False)) as c:
        yield c


def test_the_schedule_page_lists_parent_runs_with_the_run_each_fired(
    store: Store, chain: dict[str, str], client: TestClient
) -> None:
    (ran,) = [p for p in chain if (r := store.schedules.get_run(p)) and r.session_id]
    session_id = store.schedules.get_run(ran).session_id  # type: ignore[union-attr]
    page = client.get("/schedules/deploy").text
    assert 'after <a href="/schedules/build">build</a> ends' in page
    assert "completed or failed or timed_out or cancelled" in page
    assert "last poll" not in page  # a chain does not poll
    assert "none: a run of build that ends fires it" in page  # no due time
    assert "2 seen, 2 fired a run" in page
    assert 'id="schedule-parents"' in page
    assert 'id="schedule-events"' not in page
    assert f'<a class="rid" href="/runs/{session_id}">{ran}</a>' in page  # what it ran
    for parent, child in chain.items():
        assert f'id="parent-{parent}"' in page
        assert f">{child}</a>" in page
    data = client.get("/api/schedules/deploy").json()
    assert data["after"] == {
        "schedule": "build",
        "outcome": "any",
        "verb": "ends",
        "statuses": ["completed", "failed", "timed_out", "cancelled"],
        "href": "/schedules/build",
    }
    recent = data["events"]["recent"]
    assert {e["parent"]["id"]: e["schedule_run_id"] for e in recent} == chain
    assert {e["parent"]["id"]: e["parent"]["status"] for e in recent} == {
        p: store.schedules.get_run(p).status  # type: ignore[union-attr]
        for p in chain
    }
    assert {e["chain_depth"] for e in recent} == {1}
    assert [e["parent"]["href"] for e in recent if e["parent"]["id"] == ran] == [
        f"/runs/{session_id}"
    ]
    # the parent schedule's page is a time schedule's: no events, no parents
    build = client.get("/api/schedules/build").json()
    assert "events" not in build
    assert "after" not in build
