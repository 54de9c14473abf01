"""The dashboard shows pruned records greyed (a tombstone, docs/retention.md), on both
backends: the runs list marks the row, the run page says when and by whom, the API
carries ``pruned_at``."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lirun.store import Store
from lirun.ui.app import create_app
from support.uikit import make_run


@pytest.fixture
def client(store: Store, db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(db_url, watch=False)) as c:
        yield c


def row_classes(page: str) -> dict[str, str]:
    return dict(re.findall(r'<tr id="run-([^"]+)" class="([^"]+)"', page))


def test_a_pruned_run_is_greyed_on_the_dashboard(
    store: Store, client: TestClient, lirun_home: Path
) -> None:
    make_run(store, lirun_home, "r-kept")
    make_run(store, lirun_home, "r-gone")
    done = store.retention.write_tombstones(
        "session", ["r-gone"], terminal=["completed"], now=time.time(), actor="ops@host (li gc)"
    )
    assert done == ["r-gone"]
    page = client.get("/")
    assert page.status_code == 200
    assert row_classes(page.text) == {"r-kept": "run", "r-gone": "run pruned"}
    assert page.text.count('class="pruned-tag"') == 1
    css = client.get("/static/app.css").text
    assert "tr.pruned" in css
    assert "opacity" in css
    detail = client.get("/runs/r-gone")
    assert detail.status_code == 200
    assert 'id="run-pruned"' in detail.text
    assert "ops@host (li gc)" in detail.text
    assert 'id="run-prompt"' not in detail.text
    kept = client.get("/runs/r-kept")
    assert 'id="run-pruned"' not in kept.text
    assert 'id="run-prompt"' in kept.text
    assert client.get("/runs/r-gone/transcript").status_code == 200  # no files: no 500
    assert client.get("/runs/r-gone/artifacts/x.txt").status_code == 404
    runs = {r["id"]: r for r in client.get("/api/runs").json()["runs"]}
    assert runs["r-gone"]["pruned_at"]
    assert runs["r-kept"]["pruned_at"] is None
