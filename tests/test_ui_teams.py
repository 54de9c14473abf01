"""The dashboard's team pages and JSON API through Starlette's TestClient, on both
backends: the list, one team's conversation with receipts and sender runs, the show
page's conversation, escaping, the OpenAPI entries, and the SSE notice of new messages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lirun.store import Store
from lirun.ui.app import create_app
from lirun.ui.events import Hub, TeamNotice
from support.uikit import XSS_IMG, XSS_SCRIPT, make_run


@pytest.fixture
def client(store: Store, db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(db_url, watch=False)) as c:
        yield c


def test_teams_pages_and_api(store: Store, client: TestClient) -> None:
    team = store.teams.create_with_members("crew", ["api", "web"])
    store.teams.send_message(team.id, sender="api", recipient="all", text=XSS_SCRIPT,
                            run_id="run-abc")  # fmt: skip
    store.teams.send_message(team.id, sender="web", recipient="api", text=XSS_IMG)
    store.teams.read_inbox(team.id, "web")
    listing = client.get("/api/teams").json()
    assert [(t["name"], t["members"], t["message_count"]) for t in listing["teams"]] == [
        ("crew", 2, 2)
    ]
    page = client.get("/teams")
    assert page.status_code == 200
    assert f'href="/teams/{team.id}"' in page.text
    data = client.get(f"/api/teams/{team.id}").json()
    assert [m["body"] for m in data["messages"]] == [XSS_SCRIPT, XSS_IMG]
    assert data["messages"][0]["read_by"] == ["web"]
    assert data["messages"][1]["read_by"] == []
    assert data["messages"][0]["run_href"] == "/runs/run-abc"
    assert {m["member"]: m["unread"] for m in data["members"]} == {"api": 1, "web": 0}
    assert [t["reason_code"] for t in data["transitions"]] == ["team.active.created"]
    # like every /api answer, no "schema" key: that is the --json outputs' (docs/json.md)
    assert "schema" not in listing
    assert "schema" not in data
    assert "schema" not in client.get("/api/workers").json()
    html = client.get(f"/teams/{team.id}").text
    assert XSS_SCRIPT not in html
    assert XSS_IMG not in html
    assert "&lt;script&gt;window.__pwned = 1;" in html
    assert 'href="/runs/run-abc"' in html
    assert "read by web" in html
    assert f'data-live="{team.id}"' in html
    assert client.get("/teams/nope").status_code == 404
    assert client.get("/api/teams/nope").status_code == 404


HIDDEN = "invoice\u202efdp.exe \u200b\u2066x\u2069\ufeff\x1b[31m\u00ad\U000e0041"
SHOWN = "invoice\\u202efdp.exe \\u200b\\u2066x\\u2069\\ufeff\\x1b[31m\\xad\\U000e0041"


def test_pages_show_invisible_characters_as_escapes(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    """A bidirectional override, zero-width characters, a byte order mark, a control or a
    tag character in a message or a prompt is drawn as its escape, in the
    text and in attributes; the JSON keeps the text as stored. Line breaks stay lines."""
    team = store.teams.create_with_members("crew", ["api", "web"])
    store.teams.send_message(team.id, sender="api", recipient="all", text=f"{HIDDEN}\nline 2")
    make_run(store, lirun_home, "bidi", prompt=HIDDEN, reply=HIDDEN, summary=HIDDEN)
    pages = {
        path: client.get(path).text
        for path in (f"/teams/{team.id}", "/teams", "/", "/runs/bidi", "/attention")
    }
    for path, html in pages.items():
        hidden = [hex(ord(c)) for c in html if c not in "\n\r\t" and not c.isprintable()]
        assert hidden == [], path
    assert f"{SHOWN}\nline 2</pre>" in pages[f"/teams/{team.id}"]
    assert f'title="{SHOWN}"' in pages["/"]  # an attribute too
    assert f'<pre id="run-prompt">{SHOWN}</pre>' in pages["/runs/bidi"]
    data = client.get(f"/api/teams/{team.id}").json()
    assert data["messages"][0]["body"] == f"{HIDDEN}\nline 2"


def test_the_show_page_shows_its_teams_conversation(store: Store, client: TestClient) -> None:
    show = store.shows.create(topic="pair")
    store.shows.create_play(show_id=show.id, name="first")
    assert client.get(f"/api/shows/{show.id}").json()["team"] is None
    team = store.teams.create_with_members("pair-x", ["first"], owner_type="show", owner_id=show.id)
    store.teams.send_message(team.id, sender="lirun", recipient="all", text="play first merged")
    data = client.get(f"/api/shows/{show.id}").json()
    assert data["team"]["team"]["id"] == team.id
    assert [m["body"] for m in data["team"]["messages"]] == ["play first merged"]
    html = client.get(f"/shows/{show.id}").text
    assert 'id="team-talk"' in html
    assert "play first merged" in html
    assert team.id in html.split('data-live="', 1)[1].split('"', 1)[0]
    team_page = client.get(f"/teams/{team.id}").text
    assert f'href="/shows/{show.id}"' in team_page


def test_openapi_lists_the_team_routes(client: TestClient) -> None:
    paths = client.get("/api/openapi.json").json()["paths"]
    assert paths["/api/teams"]["get"]["operationId"] == "teams"
    assert paths["/api/teams/{team_id}"]["get"]["parameters"][0]["name"] == "team_id"


def test_the_watcher_announces_a_team_with_new_messages(store: Store, db_url: str) -> None:
    team = store.teams.create_with_members("crew", ["api"])
    hub = Hub(db_url)
    hub._check_teams(store)  # the first look only remembers
    got: list[TeamNotice] = []
    hub.publish = got.extend  # type: ignore[method-assign,assignment]  # collects what it sends
    hub._check_teams(store)
    assert got == []
    store.teams.send_message(team.id, sender="api", recipient="all", text="x")
    hub._check_teams(store)
    assert got == [TeamNotice(team.id)]
    assert got[0].to_sse() == f'event: team\ndata: {{"id": "{team.id}"}}\n\n'
