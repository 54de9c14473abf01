"""No password in any message: a database URL is printed masked however it is malformed
(issue 22, item 7).

Each hostile URL goes through every door a URL comes in by (``--db``, ``LIRUN_DB_URL``,
``li ui``, ``li worker``, ``li run``, ``li db``, the library's ``open_store``); the
password must appear in no output and no file lirun writes, and the exit code is 2.
Well-formed URLs point at a port nothing listens on, so nothing is sent anywhere.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lirun.errors import LirunError, UsageError
from lirun.store import open_store
from lirun.store.pg_errors import translate
from lirun.store.urls import redact_url, url_without_credentials
from support.cli import li_command

PW = "Pz9secret"
# Each holds PW where a careless reading would print it (a ``password=`` word hides nothing).
HOSTILE = {
    "slash": f"postgresql://u:ab/{PW}@127.0.0.1:1/db",
    "hash": f"postgresql://u:ab#{PW}@127.0.0.1:1/db",
    "question": f"postgresql://u:ab?{PW}@127.0.0.1:1/db",
    "at": f"postgresql://u:ab@{PW}@127.0.0.1:1/db",
    "at-then-slash": f"postgresql://u:a@b/{PW}@127.0.0.1:1/db",
    "space": f"postgresql://u:ab {PW}@127.0.0.1:1/db",
    "bad-escape": f"postgresql://u:ab%zz{PW}@127.0.0.1:1/db",
    "lone-percent": f"postgresql://u:{PW}%@127.0.0.1:1/db",
    "colon": f"postgresql://u:ab:{PW}@127.0.0.1:1/db",
    "encoded": f"postgresql://u:a%40{PW}%2F@127.0.0.1:1/db",
    "ipv6": f"postgresql://u:{PW}@[::1]:1/db",
    "broken-ipv6": f"postgresql://u:{PW}@[::1:1/db",
    "bad-port": f"postgresql://u:{PW}@127.0.0.1:port/db",
    "no-host": f"postgresql://u:{PW}/db",
    "query": f"postgresql://u@127.0.0.1:1/db?connect_timeout=2&password={PW}",
    "query-encoded-name": f"postgresql://u@127.0.0.1:1/db?pass%77ord={PW}",
    "query-ampersand": f"postgresql://u@127.0.0.1:1/db?password=ab&{PW}",
    "query-bad-escape": f"postgresql://u@127.0.0.1:1/db?password=a%zz{PW}",
    "postgres-scheme": f"postgres://u:{PW}@127.0.0.1:1/db",
    "keyword-value": f"host=127.0.0.1 port=1 password={PW} dbname=db",
    "keyword-value-quoted": f"host=127.0.0.1 port=1 password = 'a b {PW}'",
    "keyword-value-escaped": f"host=127.0.0.1 port=1 password='it\\'s {PW}' dbname=db",
    "keyword-value-unterminated": f"host=127.0.0.1 port=1 password='{PW}",
    "keyword-value-several-hosts": f"host=127.0.0.1,127.0.0.2 port=1,1 password={PW}",
    "several-hosts": f"postgresql://u:{PW}@127.0.0.1:1,127.0.0.2:1/db",
    "several-hosts-query": f"postgresql:///db?host=127.0.0.1,127.0.0.2&port=1,1&password={PW}",
}


def li(*args: str, home: Path, cwd: Path, db_env: str | None = None) -> tuple[int, str]:
    env = {**os.environ, "LIRUN_HOME": str(home)}
    env.pop("LIRUN_DB_URL", None)
    if db_env is not None:
        env["LIRUN_DB_URL"] = db_env
    done = subprocess.run(
        li_command(*args), capture_output=True, text=True, timeout=60, env=env, cwd=cwd
    )
    return done.returncode, done.stdout + done.stderr


def written(*roots: Path) -> str:
    """Every file name and text under ``roots``: what lirun left behind."""
    found = []
    for root in roots:
        for path in root.rglob("*"):
            found.append(str(path))
            if path.is_file():
                found.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(found)


def assert_refused(code: int, output: str, *roots: Path) -> None:
    assert PW not in output, output
    assert PW not in written(*roots)
    assert code == 2, output
    assert "Traceback" not in output, output
    assert len(output.strip().splitlines()) == 1, output


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_status_with_db_never_prints_the_password(name: str, tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    cwd.mkdir()
    code, output = li("--db", HOSTILE[name], "status", home=home, cwd=cwd)
    assert_refused(code, output, home, cwd)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_open_store_never_names_the_password(name: str) -> None:
    with pytest.raises(LirunError) as caught:
        open_store(HOSTILE[name]).close()
    assert PW not in str(caught.value)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_redact_url_masks_every_reading(name: str) -> None:
    assert PW not in redact_url(HOSTILE[name])
    assert PW not in (url_without_credentials(HOSTILE[name]) or "")


DOORS = {
    "env": ("status",),
    "ui": ("ui", "--port", "0", "--db", "{url}"),
    "worker": ("worker", "--db", "{url}"),
    "worker-status": ("worker", "status", "--db", "{url}"),
    "run": ("--db", "{url}", "run", "--", "true"),
    "detach": ("--db", "{url}", "run", "--detach", "--", "true"),
    "db-path": ("db", "path", "--db", "{url}"),
    "db-migrate": ("db", "migrate", "--db", "{url}"),
    "flow-resume": ("--db", "{url}", "flow", "resume", "fl-x"),
}


WELL_FORMED = {
    "colon": "postgresql://u:***@127.0.0.1:1/db",
    "keyword-value": "host=127.0.0.1 port=1 password=*** dbname=db",
}


@pytest.mark.parametrize("door", sorted(DOORS))
@pytest.mark.parametrize("name", ["at", "query-ampersand", "colon", "keyword-value"])
def test_every_door_masks_the_password(door: str, name: str, tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    cwd.mkdir()
    url = HOSTILE[name]
    argv = [a.format(url=url) for a in DOORS[door]]
    code, output = li(*argv, home=home, cwd=cwd, db_env=url if door == "env" else None)
    if door == "db-path" and name in WELL_FORMED:  # printed, masked
        assert (code, output.strip()) == (0, WELL_FORMED[name])
        return
    assert_refused(code, output, home, cwd)


def test_a_malformed_url_says_what_to_encode() -> None:
    with pytest.raises(UsageError) as caught:
        open_store(HOSTILE["at-then-slash"])
    message = str(caught.value)
    assert message.startswith("the database URL postgresql://u:***@127.0.0.1:1/db has '/' '@'")
    assert "/ as %2F, @ as %40" in message


def test_a_keyword_value_string_is_not_taken_for_a_path(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    cwd.mkdir()
    db = "dbname=x user=y host=127.0.0.1 port=1 connect_timeout=2"
    code, output = li("--db", db, "run", "--", "true", home=home, cwd=cwd)
    assert code == 2, output
    assert "cannot use PostgreSQL at dbname=x user=y host=127.0.0.1 port=1" in output
    assert list(cwd.iterdir()) == []  # no SQLite file named after it


def test_a_sqlite_url_is_shown_as_it_is() -> None:
    for url in ("sqlite:////tmp/a:b@c/state.db", "/tmp/a:b@c/state.db"):
        assert redact_url(url) == url


def test_a_path_with_an_equals_sign_is_still_a_path(tmp_path: Path) -> None:
    db = tmp_path / "user=me" / "state.db"
    db.parent.mkdir()
    open_store(str(db)).close()
    assert db.exists()


def test_a_driver_message_that_echoes_the_password_is_masked() -> None:
    url = f"postgresql://u:{PW}@db.example:1/db"
    error = translate(None, f'token "{PW}" is not valid', url, operational=True)
    assert PW not in str(error)
    assert 'token "***" is not valid' in str(error)
