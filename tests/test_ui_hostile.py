"""A hostile dashboard client gets 4xx, never a 500: every query parameter is bounded
(a 100,000-character ``q`` was a ``LIKE or GLOB pattern too complex`` 500 on SQLite) and
checked (NUL, non-finite numbers), on both backends. And the show board reads the
integration head from git: a branch a person moved by hand shows where it really is."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lirun.store import Store
from lirun.ui.app import create_app
from support.gitkit import commit, git, make_repo
from support.uikit import make_run

BIG = "a" * 100_000


def asgi_get(app: Any, path: str, query: bytes = b"") -> int:
    """The status of one GET, sent straight to the ASGI app: an HTTP client refuses a URL
    this long before it leaves, a hostile one does not."""
    sent: list[dict[str, Any]] = []
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return int(sent[0]["status"])


QUERIES = {
    "q of 100,000 characters": b"q=" + BIG.encode(),
    "q of LIKE wildcards": b"q=" + b"%25_" * 30_000,
    "q with a NUL": b"q=x%00y",
    "provider of 100,000 characters": b"provider=" + BIG.encode(),
    "kind of 100,000 characters": b"kind=" + BIG.encode(),
    "since nan": b"since=nan",
    "since 1e400": b"since=1e400",
    "until -inf": b"until=-inf",
    "since of 5,000 digits": b"since=" + b"9" * 5000,
    "cursor nan": b"cursor=nan~x",
    "cursor of 100,000 characters": b"cursor=1~" + BIG.encode(),
}


@pytest.mark.parametrize("query", QUERIES.values(), ids=QUERIES.keys())
def test_a_hostile_query_parameter_is_a_400(store: Store, db_url: str, query: bytes) -> None:
    app = create_app(db_url, watch=False)
    for path in ("/", "/api/runs"):
        assert asgi_get(app, path, query) == 400, (path, query[:40])


def test_ordinary_queries_still_answer(store: Store, db_url: str, lirun_home: Path) -> None:
    make_run(store, lirun_home, "r-1", prompt="fix 100% of the_tests")
    app = create_app(db_url, watch=False)
    for query in (b"q=100%25+of+the_", b"q=" + b"x" * 200, b"since=2026-01-01T00:00", b""):
        assert asgi_get(app, "/api/runs", query) == 200, query


@pytest.mark.parametrize(
    "path",
    [
        "/runs/" + BIG,
        "/api/runs/" + BIG,
        "/flows/" + BIG,
        "/api/shows/" + BIG,
        "/runs/" + BIG + "/transcript",
        "/runs/" + BIG + "/artifacts/x",
        "/runs/x\x00y",
        "/api/flows/x\x00y",
        "/shows/x\x00y",
    ],
    ids=lambda p: p[:12] + ("…" if len(p) > 12 else "") + ("NUL" if "\x00" in p else ""),
)
def test_a_hostile_id_in_the_path_is_a_404(store: Store, db_url: str, path: str) -> None:
    assert asgi_get(create_app(db_url, watch=False), path) == 404


# --- the integration head comes from git ----------------------------------------------------------


@pytest.fixture
def moved_show(store: Store, tmp_path: Path) -> tuple[str, str]:
    """A show whose record says its integration branch is at main's first commit, while
    a person has since moved the branch by hand to a newer commit."""
    repo = make_repo(tmp_path / "repo")
    recorded = git(repo, "rev-parse", "HEAD")
    git(repo, "branch", "show/t", recorded)
    store.shows.create_with_plays(
        id="show-moved",
        fields={
            "topic": "t",
            "repo": str(repo),
            "base": "main",
            "integration": "show/t",
            "integration_head": recorded,
        },
        plays=[],
    )
    commit(repo, "by-hand.txt")
    moved = git(repo, "rev-parse", "HEAD")
    git(repo, "branch", "-f", "show/t", moved)
    return recorded, moved


def test_li_show_status_json_gives_the_head_git_has(
    moved_show: tuple[str, str], li_env: dict[str, str], tmp_path: Path
) -> None:
    recorded, moved = moved_show
    result = subprocess.run(
        [sys.executable, "-m", "lirun", "show", "status", "show-moved", "--json"],
        env=li_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["integration_head"] == moved != recorded
    board = subprocess.run(
        [sys.executable, "-m", "lirun", "show", "status", "show-moved"],
        env=li_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert moved[:7] in board.stdout
    assert recorded[:7] not in board.stdout


def test_the_dashboards_show_page_gives_the_head_git_has(
    moved_show: tuple[str, str], db_url: str
) -> None:
    from starlette.testclient import TestClient

    recorded, moved = moved_show
    with TestClient(create_app(db_url, watch=False)) as client:
        shown = client.get("/api/shows/show-moved").json()
        page = client.get("/shows/show-moved").text
    assert shown["show"]["integration_head"] == moved
    assert moved[:12] in page
    assert recorded[:12] not in page
