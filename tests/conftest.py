"""Shared fixtures. Every store behaviour runs on SQLite (a real file) and PostgreSQL.

PostgreSQL tests use ``$LIRUN_TEST_PG_URL`` (default: the local server's ``test``
database) with a fresh schema per test (``support.pg``), and carry the ``postgres``
marker, so ``-m "not postgres"`` runs without a server. When ``LIRUN_TEST_REQUIRE_PG=1``
(CI sets it), an unreachable server fails the run instead of skipping the PostgreSQL half.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.pg import make_pg_url

# A shell starts a background job (`pytest ... &`, as scripts/test does for the fault suite)
# with SIGINT ignored, and every process the tests start would inherit that: a SIGINT sent
# to `li` would then do nothing. A Python handler is reset to the default at exec, so the
# tests' processes start with SIGINT as a terminal gives it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The fault suite's harness (summary lines), the throwaway PostgreSQL cluster, the tmpfs.
pytest_plugins = ["support.faultkit", "support.pgcluster", "support.pgreplica", "support.diskkit"]

BACKENDS = (
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
)
# Fixtures (defined in test modules) that reach a PostgreSQL server: a test using one
# is a postgres test, so `-m "not postgres"` leaves it out.
POSTGRES_FIXTURES = frozenset(
    {"pg_url", "pg_only_url", "password_server", "pg_cluster", "pg_password_cluster", "pg_pair"}
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if POSTGRES_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "db_url" in metafunc.fixturenames:
        metafunc.parametrize("db_url", BACKENDS, indirect=True)


@pytest.fixture(autouse=True)
def lirun_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own home, so nothing touches ~/.lirun."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("LIRUN_HOME", str(home))
    for var in ("LIRUN_DB_URL", "LIRUN_RUN_ID", "LIONAGI_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory outside root's private tmp, readable by everyone (for ``userkit``)."""
    base = Path(tempfile.mkdtemp(prefix="lirun-perm-", dir="/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base)


@pytest.fixture
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database URL on each backend (see ``pytest_generate_tests``)."""
    if request.param == "sqlite":
        yield str(tmp_path / "state.db")
        return
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
def pg_store() -> Iterator[object]:
    """An open Store on a fresh PostgreSQL schema, for the tests that are PostgreSQL's
    alone (LISTEN/NOTIFY)."""
    from lirun.store import open_store

    for url in make_pg_url():
        store = open_store(url)
        try:
            yield store
        finally:
            store.close()


@pytest.fixture
def li_env(db_url: str, lirun_home: Path) -> dict[str, str]:
    """Environment for running ``li`` in a subprocess against this test's database."""
    env = dict(os.environ)
    env.update({"LIRUN_HOME": str(lirun_home), "LIRUN_DB_URL": db_url, "PYTHONUNBUFFERED": "1"})
    return env


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository with one commit on main (a test module may define its own)."""
    from support.execkit import git_repo

    return git_repo(tmp_path / "repo")


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """A directory holding fake ``claude`` and ``codex`` executables."""
    from support.providerkit import make_fake_bin_dir

    return make_fake_bin_dir(tmp_path / "bin")
