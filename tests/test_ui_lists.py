"""The dashboard's lists and its needs-you page through Starlette's TestClient, on both
backends: /flows, /shows (and /api twins, /api/runs?kind=show), /schedules/NAME and
/attention with the navigation bar's count."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from lirun.store import Store
from lirun.ui.app import create_app
from support.storekit import raw_write


@pytest.fixture
def client(store: Store, db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(db_url, watch=False)) as c:
        yield c


def _flow(store: Store, status: str, at: float) -> str:
    inv = store.invocations.create(skill="/tmp/deep/dir/fan-out.yaml")
    raw_write(
        store,
        "UPDATE invocations SET kind = 'flow', status = :s, created_at = :at, updated_at = :at "
        "WHERE id = :id",
        {"s": status, "at": at, "id": inv.id},
    )
    return str(inv.id)


def test_flows_page_lists_flows_by_their_files_name(store: Store, client: TestClient) -> None:
    now = time.time()
    old = _flow(store, "failed", now - 7200)
    new = _flow(store, "completed", now)
    store.invocations.create(skill="manual")  # an invocation, not a flow
    page = client.get("/flows")
    assert page.status_code == 200
    assert page.text.index(f'id="flow-{new}"') < page.text.index(f'id="flow-{old}"')
    assert "<b>fan-out.yaml</b>" in page.text
    assert f'href="/flows/{new}"' in page.text
    data = client.get("/api/flows", params={"status": "failed"}).json()
    assert [f["id"] for f in data["flows"]] == [old]
    data = client.get("/api/flows", params={"since": str(now - 60)}).json()
    assert [f["id"] for f in data["flows"]] == [new]
    assert client.get("/api/flows", params={"status": "merged"}).status_code == 400
    assert "No flows recorded yet" not in page.text


def test_flows_are_paged_by_keyset(store: Store, client: TestClient) -> None:
    now = time.time()
    made = [_flow(store, "completed", now - i) for i in range(55)]
    first = client.get("/api/flows").json()
    second = client.get("/api/flows", params={"cursor": first["next_cursor"]}).json()
    assert [f["id"] for f in first["flows"] + second["flows"]] == made
    assert second["next_cursor"] is None


def test_shows_page_counts_plays_and_what_needs_you(store: Store, client: TestClient) -> None:
    show = store.shows.create(topic="add-auth")
    for name, status in (("models", "merged"), ("api", "escalated"), ("ui", "pending")):
        play = store.shows.create_play(show_id=show.id, name=name)
        raw_write(
            store, "UPDATE plays SET status = :s WHERE id = :id", {"s": status, "id": play.id}
        )
    page = client.get("/shows").text
    assert f'id="show-{show.id}"' in page
    assert "add-auth" in page
    assert "1 of 3" in page
    [row] = client.get("/api/shows").json()["shows"]
    assert (row["plays_merged"], row["plays_need_you"], row["plays_total"]) == (1, 1, 3)
    runs = client.get("/api/runs", params={"kind": "show"})
    assert runs.status_code == 200
    assert [(r["kind"], r["id"], r["href"]) for r in runs.json()["runs"]] == [
        ("show", show.id, f"/shows/{show.id}")
    ]
    assert client.get("/", params={"kind": "show"}).status_code == 200
    assert client.get("/api/runs", params={"kind": "show", "q": "x"}).status_code == 400
    assert client.get("/api/shows", params={"status": "failed"}).status_code == 400


def _schedule(store: Store, name: str, due: float) -> None:
    raw_write(
        store,
        "INSERT INTO schedules (id, name, spec, action_kind, action_json, trigger_json, "
        "enabled, status, next_due_at, created_at, updated_at) VALUES (:id, :name, "
        "'every 1m', 'run', :action, :trigger, 1, 'enabled', :due, :now, :now)",
        {
            "id": f"id-{name}", "name": name, "due": int(due), "now": time.time(),
            "action": '{"kind": "run", "argv": ["true"]}',
            "trigger": '{"kind": "every", "seconds": 60, "anchor": 0, "tz": "UTC"}',
        },
    )  # fmt: skip


def test_one_schedules_page_has_its_definition_next_fires_runs_success_and_cost(
    store: Store, client: TestClient
) -> None:
    due = (int(time.time()) // 60 + 1) * 60
    _schedule(store, "tick", due)
    for status, cost in (("completed", 0.25), ("failed", 0.75), ("skipped", None)):
        session = store.sessions.create(status="completed" if cost else "running")
        raw_write(store, "UPDATE sessions SET cost_usd = :c WHERE id = :id",
                  {"c": cost, "id": session.id})  # fmt: skip
        run = store.schedules.create_run(action_kind="run", schedule_id="id-tick")
        raw_write(store, "UPDATE schedule_runs SET status = :s, session_id = :sid WHERE id = :id",
                  {"s": status, "sid": session.id, "id": run.id})  # fmt: skip
    data = client.get("/api/schedules/tick").json()
    assert data["next_fires"] == [due + 60 * i for i in range(5)]
    assert data["success_rate"] == 0.5
    assert (data["succeeded"], data["ended"]) == (1, 2)
    assert data["cost_total_usd"] == 1.0
    assert data["cost_per_run_usd"] == 0.5
    assert len(data["runs"]) == 3
    assert len(data["chart"]) == 3
    page = client.get("/schedules/tick").text
    assert "Schedule tick" in page
    assert 'id="no-worker"' in page
    assert "$0.5000 per run" in page
    assert page.count('<tr id="srun-') == 3
    assert 'href="/schedules/tick"' in client.get("/schedules").text
    assert client.get("/schedules/nope").status_code == 404
    assert client.get("/api/schedules/nope").status_code == 404


def test_attention_page_lists_what_needs_you_and_the_bar_counts_it(
    store: Store, client: TestClient
) -> None:
    empty = client.get("/attention")
    assert empty.status_code == 200
    assert 'id="nothing-needs-you"' in empty.text
    assert client.get("/api/attention").json() == {"items": [], "count": 0}
    show = store.shows.create(topic="auth")
    play = store.shows.create_play(show_id=show.id, name="api")
    raw_write(store, "UPDATE plays SET status = 'gate_failed' WHERE id = :id", {"id": play.id})
    _schedule(store, "tick", time.time() - 3600)  # overdue, and no worker is live
    data = client.get("/api/attention").json()
    assert data["count"] == 2
    assert [(i["kind"], i["href"]) for i in data["items"]] == [
        ("play", f"/shows/{show.id}#play-{play.id}"),
        ("overdue_schedule", "/schedules/tick"),
    ]
    page = client.get("/attention").text
    assert f'id="attention-play-{play.id}"' in page
    assert "failed its gate" in page
    assert "<code>li worker</code>" in page
    assert 'id="attention-count"' in client.get("/").text  # every page's bar has it


def test_the_new_routes_are_in_the_openapi_document(client: TestClient) -> None:
    paths = client.get("/api/openapi.json").json()["paths"]
    for path in ("/api/flows", "/api/shows", "/api/schedules/{name}", "/api/attention"):
        assert path in paths
