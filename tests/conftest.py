"""Shared fixtures. Every store behaviour runs on SQLite (a real file) and PostgreSQL.

PostgreSQL tests use ``$LIRUN_TEST_PG_URL`` (default: the local server's ``test``
database) with a fresh schema per test. When ``LIRUN_TEST_REQUIRE_PG=1`` (CI sets it), an
unreachable server fails the run instead of skipping the PostgreSQL half.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# The fault suite's harness (summary lines), the throwaway PostgreSQL cluster, the tmpfs.
pytest_plugins = ["faultkit", "pgcluster", "diskkit"]

PG_URL = os.environ.get("LIRUN_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
REQUIRE_PG = os.environ.get("LIRUN_TEST_REQUIRE_PG") == "1"
BACKENDS = ("sqlite", "postgres")
TESTS_DIR = Path(__file__).resolve().parent

_pg_error: str | None = None
_pg_checked = False


def _pg_unavailable() -> str | None:
    """None when PostgreSQL answers, else why not (checked once per session)."""
    global _pg_checked, _pg_error
    if not _pg_checked:
        _pg_checked = True
        try:
            import psycopg

            with psycopg.connect(PG_URL, connect_timeout=5) as conn:
                conn.execute("SELECT 1")
        except Exception as exc:
            _pg_error = f"{type(exc).__name__}: {exc}"
    return _pg_error


def _admin_execute(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql)


@pytest.fixture(autouse=True)
def lirun_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own home, so nothing touches ~/.lirun."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("LIRUN_HOME", str(home))
    for var in ("LIRUN_DB_URL", "LIRUN_RUN_ID", "LIONAGI_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    return home


def make_pg_url() -> Iterator[str]:
    reason = _pg_unavailable()
    if reason:
        if REQUIRE_PG:
            pytest.fail(f"PostgreSQL is required (LIRUN_TEST_REQUIRE_PG=1) but: {reason}")
        pytest.skip(f"PostgreSQL unavailable: {reason}")
    schema = f"t_{uuid.uuid4().hex[:16]}"
    sep = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{sep}schema={schema}"
    _admin_execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory outside root's private tmp, readable by everyone (for ``userkit``)."""
    base = Path(tempfile.mkdtemp(prefix="lirun-perm-", dir="/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base)


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database URL on each backend."""
    if request.param == "sqlite":
        yield str(tmp_path / "state.db")
    else:
        yield from make_pg_url()


@pytest.fixture
def store(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """An open synchronous Store on each backend; ``$LIRUN_DB_URL`` points at it too."""
    from lirun.store import open_store

    monkeypatch.setenv("LIRUN_DB_URL", db_url)
    s = open_store(db_url)
    yield s
    s.close()


@pytest.fixture
def li_env(db_url: str, lirun_home: Path) -> dict[str, str]:
    """Environment for running ``li`` in a subprocess against this test's database."""
    env = dict(os.environ)
    env.update({"LIRUN_HOME": str(lirun_home), "LIRUN_DB_URL": db_url, "PYTHONUNBUFFERED": "1"})
    return env


def li_command(*args: str) -> list[str]:
    """The argv that runs ``li`` with this interpreter (works without the console script)."""
    return [sys.executable, "-m", "lirun", *args]
