"""The dashboard says what each record is (both backends): whole ids; a team member by
its task, not the preamble lirun put before it; a gate run by its play and show beside
its command; a pruned command run still by its command; a pruned flow marked on
``/flows``, ``/api/flows`` and its page; a resumed flow's reused legs in its table; the
show board's dependencies as a sentence, long text inside its cards, no offer of
feedback to a play with no attempt left; a schedule without cost says so, and a skipped
run has no duration."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from lirun.exec.task import Task
from lirun.flows.engine import resume_flow, run_flow
from lirun.flows.spec import FlowSpec, LegSpec
from lirun.store import Store
from lirun.teams.membership import preamble
from lirun.ui.app import create_app
from support.storekit import raw_write
from support.uikit import add_hourly_schedule, make_run

ACTOR = "ops@host (li gc)"


@pytest.fixture
def client(store: Store, db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(db_url, watch=False)) as c:
        yield c


def api_runs(client: TestClient) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in client.get("/api/runs").json()["runs"]}


def row_html(page: str, prefix: str, ident: str) -> str:
    return page.split(f'id="{prefix}-{ident}"', 1)[1].split("</tr>", 1)[0]


def test_ids_are_shown_whole(store: Store, client: TestClient, lirun_home: Path) -> None:
    ids = ["20261204T191523-a1b2c3", "20261204T191523-d4e5f6"]  # alike but for the suffix
    for ident in ids:
        make_run(store, lirun_home, ident)
    flow = store.invocations.create(skill="/work/nightly.yaml")
    raw_write(store, "UPDATE invocations SET kind = 'flow' WHERE id = :id", {"id": flow.id})
    page = client.get("/").text
    for ident in ids:
        assert f'class="run-link rid" href="/runs/{ident}">{ident}</a>' in page
    cells = re.findall(r'<td class="id">(.*?)</td>', page, flags=re.S)
    assert len(cells) == 3
    assert not any("…" in cell for cell in cells)
    flows = client.get("/flows").text
    assert f">{flow.id}</a>" in flows  # a 36-character UUID, not its first 27


def test_a_team_member_is_named_by_its_task(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    team = {"id": "t-1", "name": "refactor-auth", "member": "backend"}
    lead = preamble(team["name"], team["member"])
    make_run(store, lirun_home, "member", prompt=lead + "rewrite the token parser",
             metadata_json={"team": team})  # fmt: skip
    long_task = "split the session module " + "x" * 800
    make_run(store, lirun_home, "member-long", prompt=lead + long_task,
             metadata_json={"team": team})  # fmt: skip
    make_run(store, lirun_home, "solo", prompt="You work in team nothing: kept as typed")
    runs = api_runs(client)
    assert runs["member"]["prompt"] == "rewrite the token parser"
    assert runs["member-long"]["prompt"] == long_task[:500] + "…"
    assert runs["member-long"]["prompt_truncated"] is True
    assert runs["solo"]["prompt"] == "You work in team nothing: kept as typed"
    assert "meta" not in runs["member"]
    page = client.get("/").text
    assert "rewrite the token parser" in row_html(page, "run", "member")
    assert "You work in team" not in row_html(page, "run", "member")
    assert "You work in team" not in row_html(page, "run", "member-long")


def test_a_gate_run_is_named_by_its_play_and_show(store: Store, client: TestClient) -> None:
    show = store.shows.create(topic="add-auth")
    play = store.shows.create_play(show_id=show.id, name="models")
    for ident, role in (("gate-run", "gate"), ("final-run", "final_gate")):
        store.sessions.create(
            id=ident,
            provider="command",
            command_json=["sh", "-c", "pytest -q"],
            owner_pid=None,
            metadata_json={"show_id": show.id, "play_id": play.id, "play": "models",
                           "role": role, "commit": "a" * 40},
        )  # fmt: skip
    runs = api_runs(client)
    assert runs["gate-run"]["label"] == "gate of play models in show add-auth"
    assert runs["gate-run"]["command_line"] == "sh -c 'pytest -q'"
    assert runs["final-run"]["label"] == "final gate of show add-auth"
    row = row_html(client.get("/").text, "run", "gate-run")
    assert "gate of play models in show add-auth" in row
    assert "sh -c &#39;pytest -q&#39;" in row


def test_a_pruned_command_run_keeps_its_command(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    store.sessions.create(id="cmd", provider="command", command_json=["make", "test"],
                          prompt=None, owner_pid=None)  # fmt: skip
    store.update_status("session", "cmd", new_status="completed", reason_code="run.completed.ok")
    huge = ["sh", "-c", "echo " + "y" * 5000]
    store.sessions.create(id="huge", provider="command", command_json=huge, owner_pid=None)
    store.update_status("session", "huge", new_status="completed", reason_code="run.completed.ok")
    make_run(store, lirun_home, "agent", prompt="secret plan",
             command_json=["claude", "-p", "secret plan"])  # fmt: skip
    done = store.retention.write_tombstones(
        "session", ["cmd", "huge", "agent"], terminal=["completed"], now=time.time(), actor=ACTOR
    )
    assert sorted(done) == ["agent", "cmd", "huge"]
    runs = api_runs(client)
    assert runs["cmd"]["pruned_at"]
    assert runs["cmd"]["command_line"] == "make test"
    assert runs["huge"]["command_line"] is None  # bulk, not a name: cleared
    assert runs["agent"]["command_line"] is None  # an agent's argv holds its prompt
    assert "make test" in row_html(client.get("/").text, "run", "cmd")
    assert "make test" in client.get("/runs/cmd").text


def test_a_pruned_flow_is_marked_everywhere(store: Store, client: TestClient) -> None:
    for ident in ("flow-kept", "flow-gone"):
        store.invocations.create(id=ident, skill="/work/nightly.yaml")
        raw_write(store, "UPDATE invocations SET kind = 'flow' WHERE id = :id", {"id": ident})
        store.update_status(
            "invocation", ident, new_status="completed", reason_code="run.completed.ok"
        )
    done = store.retention.write_tombstones(
        "invocation", ["flow-gone"], terminal=["completed"], now=time.time(), actor=ACTOR
    )
    assert done == ["flow-gone"]
    flows = {f["id"]: f for f in client.get("/api/flows").json()["flows"]}
    assert flows["flow-gone"]["pruned_at"]
    assert flows["flow-gone"]["pruned_by"] == ACTOR
    assert flows["flow-kept"]["pruned_at"] is None
    page = client.get("/flows").text
    assert re.search(r'<tr id="flow-flow-gone" class="flow pruned"', page)
    assert 'class="pruned-tag"' in row_html(page, "flow", "flow-gone")
    assert 'class="pruned-tag"' not in row_html(page, "flow", "flow-kept")
    assert 'id="flow-pruned"' in client.get("/flows/flow-gone").text
    assert ACTOR in client.get("/flows/flow-gone").text
    assert 'id="flow-pruned"' not in client.get("/flows/flow-kept").text


def test_a_resumed_flows_legs_include_the_reused_ones(
    store: Store, client: TestClient, db_url: str, tmp_path: Path
) -> None:
    marker = tmp_path / "failed-once"
    once = f'if [ ! -e "{marker}" ]; then : > "{marker}"; exit 1; fi; echo checked'
    spec = FlowSpec(
        legs=(
            LegSpec("plan", Task(run=("echo", "planned"))),
            LegSpec("check", Task(run=("sh", "-c", once)), depends_on=("plan",)),
        ),
        cwd=str(tmp_path),
    )
    first = run_flow(spec, db_url=db_url)
    assert first.status == "failed"
    second = resume_flow(first.invocation_id, db_url=db_url)
    assert second.status == "completed"
    data = client.get(f"/api/flows/{second.invocation_id}").json()
    legs = {s["flow_leg"]: s for s in data["runs"]}
    assert set(legs) == {"plan", "check"}
    assert legs["plan"]["reused_from"] == first.invocation_id
    assert legs["check"]["reused_from"] is None
    page = client.get(f"/flows/{second.invocation_id}").text
    plan_row = row_html(page, "leg", legs["plan"]["id"])
    assert "reused from" in plan_row
    assert first.invocation_id in plan_row
    assert "reused from" not in row_html(page, "leg", legs["check"]["id"])


def _board_card(client: TestClient, show_id: str, play_id: str) -> str:
    page = client.get(f"/shows/{show_id}").text
    return page.split(f'id="play-{play_id}"', 1)[1].split('<div class="card"', 1)[0]


def test_the_show_board_says_dependencies_and_attempts_left(
    store: Store, client: TestClient
) -> None:
    store.shows.create_with_plays(
        id="show-m",
        fields={"topic": "meaning", "integration": "show/meaning", "base": "main"},
        plays=[
            {"id": "show-m.models", "name": "models", "position": 0, "attempts": 2},
            {"id": "show-m.api", "name": "api", "position": 1, "attempts": 2,
             "depends_on_json": ["models", "typo"]},
            {"id": "show-m.ui", "name": "ui", "position": 2, "attempts": 2},
        ],
    )  # fmt: skip
    for play, attempt in (("show-m.ui", 2), ("show-m.models", 1)):
        store.update_status("play", play, new_status="gate_failed",
                            reason_code="play.gate_failed.check")  # fmt: skip
        store.update_fields("play", play, {"feedback": "the test failed", "attempt": attempt})
    api = _board_card(client, "show-m", "show-m.api")
    assert "depends_on_json" not in api
    assert "depends on json" not in api
    assert "['models', 'typo']" not in api
    text = re.sub(r"<[^>]+>", "", api)
    assert "depends on models and typo (no play of that name in this show)" in text
    assert 'href="#play-show-m.models"' in api
    spent = _board_card(client, "show-m", "show-m.ui")
    assert "feedback for its next attempt" not in spent
    assert "no attempt left" in spent
    left = _board_card(client, "show-m", "show-m.models")
    assert "feedback for its next attempt" in left
    assert "no attempt left" not in left
    data = client.get("/api/shows/show-m").json()
    cards = {p["id"]: p for c in data["board"] for p in c["plays"]}
    assert cards["show-m.api"]["depends_on"] == [
        {"name": "models", "id": "show-m.models"},
        {"name": "typo", "id": None},
    ]
    assert cards["show-m.ui"]["no_attempt_left"] is True
    assert cards["show-m.models"]["no_attempt_left"] is False
    css = client.get("/static/app.css").text
    assert re.search(r"\.card \{[^}]*overflow-wrap: anywhere", css)


def test_a_schedule_without_cost_says_so_and_a_skipped_run_has_no_duration(
    store: Store, client: TestClient, li_env: dict[str, str]
) -> None:
    schedule = add_hourly_schedule(store, li_env)
    for status, reason in (
        ("completed", "schedule.completed.ok"),
        ("skipped", "schedule.skipped.overlap"),
    ):
        run = store.schedules.create_run(action_kind="run", schedule_id=schedule.id)
        store.update_status("schedule_run", run.id, new_status=status, reason_code=reason)
    page = client.get("/schedules/tick").text
    assert 'id="cost-chart"' not in page
    assert "No cost recorded yet" in page
    rows = dict(re.findall(r'data-status="(\w+)">(.*?)</tr>', page, flags=re.S))
    assert "0.0 s" not in rows["skipped"]
    assert "—" in rows["skipped"]
    assert " s<" in rows["completed"] or "s</td>" in rows["completed"]
    data = client.get("/api/schedules/tick").json()
    assert data["chart"] == []
    assert [r["duration"] for r in data["runs"] if r["status"] == "skipped"] == [None]
    listing = client.get("/schedules").text
    assert "no cost recorded yet" in listing
    assert '<svg class="chart"' not in listing
