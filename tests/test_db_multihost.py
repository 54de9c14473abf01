"""A database URL naming several hosts, end to end (issue 33, item 1): `li run` and
`li wait` through each form libpq accepts, the first host a port nothing listens on and
the second the real server, land on the real server; a mistyped keyword string is a
clear connection error and never a file.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from lirun.store import open_store
from lirun.store.pg_connect import split_schema
from support.cli import li_command
from support.pg import make_pg_url
from support.pgcluster import free_port


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from make_pg_url()


def server_of(url: str) -> dict[str, str]:
    return {k: str(v) for k, v in conninfo_to_dict(split_schema(url)[0]).items()}


def forms(url: str) -> dict[str, str]:
    """The test server at ``url`` named second, after a port nothing listens on."""
    given = server_of(url)
    host, port = given.get("host", "127.0.0.1"), given.get("port", "5432")
    user, dbname = given.get("user", "postgres"), given.get("dbname", "postgres")
    schema = url.rpartition("schema=")[2]
    dead = free_port()
    return {
        "hosts-in-url": (
            f"postgresql://{user}@127.0.0.1:{dead},{host}:{port}/{dbname}?schema={schema}"
        ),
        "hosts-in-query": (
            f"postgresql:///{dbname}?host=127.0.0.1,{host}&port={dead},{port}"
            f"&user={user}&schema={schema}"
        ),
        "keyword": (
            f"host=127.0.0.1,{host} port={dead},{port} dbname={dbname} user={user} schema={schema}"
        ),
    }


def li(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LIRUN_DB_URL"}
    return subprocess.run(
        li_command(*args), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
    )


@pytest.mark.parametrize("form", ["hosts-in-url", "hosts-in-query", "keyword"])
def test_run_and_wait_reach_the_live_host(form: str, pg_url: str, tmp_path: Path) -> None:
    url = forms(pg_url)[form]
    done = li("--db", url, "run", "--run-id", f"mh-{form}", "--", "true", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    started = li(
        "--db", url, "run", "--detach", "--run-id", f"mh-{form}-2", "--", "sleep", "1",
        cwd=tmp_path,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    waited = li("--db", url, "wait", f"mh-{form}-2", "--timeout", "30", cwd=tmp_path)
    assert waited.returncode == 0, waited.stderr
    assert f"mh-{form}-2" in waited.stdout
    assert "completed" in waited.stdout
    store = open_store(pg_url, readonly=True)  # the real server, named alone
    try:
        for run_id in (f"mh-{form}", f"mh-{form}-2"):
            row = store.sessions.get(run_id)
            assert row is not None, run_id
            assert row.status == "completed", run_id
    finally:
        store.close()
    assert [p.name for p in tmp_path.iterdir()] == ["home"]  # no SQLite file anywhere
    assert not (tmp_path / "home" / "state.db").exists()


@pytest.mark.parametrize(
    ("typo", "needle"),
    [
        ("host=127.0.0.1,127.0.0.1 port=1,{port},9", "names 3 ports for 2 hosts"),
        ("hosts=127.0.0.1,127.0.0.1 port=1,{port}", 'invalid connection option "hosts"'),
        ("host=127.0.0.1;127.0.0.1 port={port}", "127.0.0.1;127.0.0.1"),
    ],
)
def test_a_mistyped_keyword_string_is_a_connection_error(
    typo: str, needle: str, pg_url: str, tmp_path: Path
) -> None:
    port = server_of(pg_url).get("port", "5432")
    db = typo.format(port=port) + " dbname=test user=postgres connect_timeout=2"
    for command in (["run", "--", "true"], ["wait", "x", "--timeout", "3"], ["status"]):
        done = li("--db", db, *command, cwd=tmp_path)
        # A name that does not resolve may resolve soon (a DNS name that moves on a
        # failover): `li wait` waits it out and ends at its timeout, saying why.
        transient = command[0] == "wait" and ";" in typo
        assert done.returncode == (3 if transient else 2), (command, done.stdout, done.stderr)
        assert needle in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == (2 if transient else 1), done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["home"]
    assert not (tmp_path / "home" / "state.db").exists()


@pytest.mark.parametrize("value", ["localhost", "db.example.com:5432", "h1:5432,h2:5433"])
def test_a_value_of_no_known_form_creates_nothing(value: str, tmp_path: Path) -> None:
    for command in (["run", "--", "true"], ["wait", "x"], ["status"], ["db", "path"]):
        done = li("--db", value, *command, cwd=tmp_path)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "neither a URL, a keyword string nor a database file" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["home"]
