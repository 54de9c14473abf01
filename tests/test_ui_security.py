"""The dashboard is safe by default: artifacts stay inside their run's root and can never
run script in the dashboard's origin; a token, when set, guards every request (header or
the cookie a browser gets from ?token= once); a local bind answers local Host names only;
everything is read-only."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lirun.store import Store
from lirun.ui.app import create_app
from lirun.ui.security import LOCAL_HOSTS
from support.cli import li_command
from support.storekit import row_of
from support.uikit import XSS_NAME, XSS_SCRIPT, make_run

TOKEN = "s3cret-token-0123456789"


@pytest.fixture
def client(store: Store, db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(db_url, watch=False)) as c:
        yield c


@pytest.fixture
def run_with_files(store: Store, lirun_home: Path, tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the run")
    row = make_run(
        store,
        lirun_home,
        "art",
        artifacts={
            "page.html": XSS_SCRIPT.encode(),
            "pic.svg": b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>',
            "img.png": b"\x89PNG\r\n\x1a\n",
            "blob.bin": b"\x00\x01",
            "notes/readme.md": b"# notes",
            XSS_NAME: b"named",
        },
    )
    root = Path(row["artifacts_path"])
    os.symlink(secret, root / "escape.txt")
    os.symlink(tmp_path, root / "outdir")
    return root


def test_artifacts_open_as_inert_content(client: TestClient, run_with_files: Path) -> None:
    html = client.get("/runs/art/artifacts/page.html")
    assert html.status_code == 200
    assert html.content == XSS_SCRIPT.encode()
    assert html.headers["content-type"].startswith("text/plain")
    assert html.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in html.headers["content-security-policy"]
    svg = client.get("/runs/art/artifacts/pic.svg")
    assert svg.headers["content-type"].startswith("text/plain")
    assert client.get("/runs/art/artifacts/img.png").headers["content-type"] == "image/png"
    blob = client.get("/runs/art/artifacts/blob.bin")
    assert blob.headers["content-type"] == "application/octet-stream"
    assert blob.headers["content-disposition"].startswith("attachment")
    assert client.get("/runs/art/artifacts/notes/readme.md").text == "# notes"


@pytest.mark.parametrize(
    "path",
    [
        "../run.json",
        "..%2f..%2fstate.db",
        "%2e%2e/%2e%2e/state.db",
        "notes/../../run.json",
        "escape.txt",
        "outdir/secret.txt",
        "%2Fetc%2Fpasswd",
        "notes",
        "missing.txt",
    ],
)
def test_traversal_and_symlink_escapes_are_refused(
    client: TestClient, run_with_files: Path, path: str
) -> None:
    answer = client.get(f"/runs/art/artifacts/{path}")
    assert answer.status_code == 404, answer.text
    assert "outside the run" not in answer.text
    assert "root:" not in answer.text


def test_a_fifo_a_device_or_a_directory_is_never_read(
    client: TestClient, run_with_files: Path
) -> None:
    os.mkfifo(run_with_files / "pipe.txt")  # opened blocking, it would hang the server
    os.symlink("/dev/zero", run_with_files / "zero")
    os.symlink("notes/readme.md", run_with_files / "inside.md")  # a link, even inside
    for name in ("pipe.txt", "zero", "inside.md", "notes", "notes/", "a//b"):
        assert client.get(f"/runs/art/artifacts/{name}").status_code == 404, name
    listed = [f["path"] for f in client.get("/api/runs/art").json()["artifacts"]]
    assert "pipe.txt" not in listed
    assert "inside.md" not in listed
    assert "notes/readme.md" in listed


def test_only_the_runs_own_artifact_directory_is_served(
    store: Store, client: TestClient, lirun_home: Path, tmp_path: Path, li_env: dict[str, str]
) -> None:
    """A run made with --save DIR keeps its artifacts where its owner chose (/etc, say),
    and a record's path can be edited in the database: the dashboard (perhaps root)
    serves neither, nor a run directory whose artifacts directory is a link out."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("outside the run")
    ran = subprocess.run(
        li_command("run", "--save", str(elsewhere), "--", "true"),
        env=li_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    [saved] = [r["id"] for r in client.get("/api/runs").json()["runs"]]
    assert row_of(store, "session", saved)["artifacts_path"] == str(elsewhere)
    answer = client.get(f"/runs/{saved}/artifacts/secret.txt")
    assert answer.status_code == 404
    assert "--save" in answer.text
    data = client.get(f"/api/runs/{saved}").json()
    assert data["artifacts"] == []
    assert "outside its own run directory" in data["artifacts_served"]
    assert 'id="artifacts-not-served"' in client.get(f"/runs/{saved}").text
    # A record pointing at /etc (as `--save /etc` records, or a path edited in the database).
    make_run(store, lirun_home, "etc", artifacts_path="/etc", with_files=False)
    for name in ("passwd", "shadow", "hostname"):
        refused = client.get(f"/runs/etc/artifacts/{name}")
        assert refused.status_code == 404
        assert "root:" not in refused.text
    assert client.get("/api/runs/etc").json()["artifacts"] == []
    # The run's own directory, but its artifacts directory is a link out of it.
    make_run(store, lirun_home, "linked", artifacts={"x.txt": b"x"})
    own = lirun_home / "runs" / "linked" / "artifacts"
    shutil.rmtree(own)
    os.symlink(elsewhere, own)
    assert client.get("/runs/linked/artifacts/secret.txt").status_code == 404
    assert client.get("/api/runs/linked").json()["artifacts"] == []


def test_the_run_page_links_each_artifact_and_escapes_file_names(
    client: TestClient, run_with_files: Path
) -> None:
    page = client.get("/runs/art").text
    assert 'href="/runs/art/artifacts/notes/readme.md"' in page
    assert "<img src=x" not in page
    assert "&lt;img src=x onerror=alert(4)&gt;.html" in page
    named = client.get("/runs/art/artifacts/%3Cimg%20src%3Dx%20onerror%3Dalert(4)%3E.html")
    assert named.status_code == 200
    assert named.headers["content-type"].startswith("text/plain")


@pytest.fixture
def guarded(store: Store, db_url: str) -> Iterator[TestClient]:
    app = create_app(db_url, token=TOKEN, allowed_hosts=None, watch=False)
    with TestClient(app, follow_redirects=False) as c:
        yield c


def test_a_token_guards_every_request(guarded: TestClient) -> None:
    for path in ("/", "/api/runs", "/events", "/static/app.js", "/api/openapi.json"):
        refused = guarded.get(path)
        assert refused.status_code == 401, path
        assert "token" in refused.text
    assert guarded.get("/?token=wrong").status_code == 401
    assert guarded.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert guarded.get("/", headers={"Authorization": "Bearer nope"}).status_code == 401


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "bEaReR"])
def test_the_bearer_scheme_is_case_insensitive(guarded: TestClient, scheme: str) -> None:
    """RFC 7235: an auth scheme's name is case-insensitive; the token itself is not."""
    ok = guarded.get("/api/runs", headers={"Authorization": f"{scheme} {TOKEN}"})
    assert ok.status_code == 200
    for wrong in (f"{scheme} {TOKEN.upper()}", f"Basic {TOKEN}", f"{scheme}{TOKEN}", scheme):
        assert guarded.get("/api/runs", headers={"Authorization": wrong}).status_code == 401


def test_presenting_the_token_once_sets_a_strict_cookie(guarded: TestClient) -> None:
    first = guarded.get(f"/api/runs?status=failed&token={TOKEN}")
    assert first.status_code == 303
    assert first.headers["location"] == "/api/runs?status=failed"  # the token leaves the URL
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    assert "Path=/" in cookie
    assert guarded.get("/api/runs?status=failed").status_code == 200  # the cookie rides along
    guarded.cookies.clear()
    assert guarded.get("/api/runs").status_code == 401
    # The redirect never leaves the dashboard, whatever the path looks like.
    away = guarded.get(f"http://testserver//evil.example/x?token={TOKEN}")
    assert away.status_code == 303
    assert away.headers["location"] == "/evil.example/x"


def test_a_local_bind_answers_local_host_names_only(store: Store, db_url: str) -> None:
    app = create_app(db_url, allowed_hosts=LOCAL_HOSTS, watch=False)
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:
        assert c.get("/").status_code == 200
        assert c.get("/", headers={"Host": "localhost:8765"}).status_code == 200
        rebound = c.get("/", headers={"Host": "evil.example:8765"})
        assert rebound.status_code == 400


def test_everything_is_read_only(client: TestClient) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert client.request(method, "/api/runs").status_code == 405
