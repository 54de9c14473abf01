"""A bad database location, file, driver or credential: a clear typed error, nothing changed."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from lirun.errors import (
    DatabaseCorruptError,
    DatabaseUnavailableError,
    LirunError,
    MissingDriverError,
)
from lirun.store import open_store
from support.pg import REQUIRE_PG, make_pg_url
from support.pgcluster import kept_port
from support.userkit import run_as_nobody

SRC = Path(__file__).resolve().parents[1] / "src"


def test_a_path_in_a_missing_directory(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "dir" / "state.db"
    with pytest.raises(DatabaseUnavailableError, match=r"directory .* does not exist") as caught:
        open_store(path)
    assert caught.value.exit_code == 2
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("readonly", [False, True])
def test_a_path_that_is_a_directory(tmp_path: Path, readonly: bool) -> None:
    # A reader once took a directory for "no database yet" and `li status` said "no runs".
    with pytest.raises(DatabaseUnavailableError, match="is a directory, not a lirun database"):
        open_store(tmp_path, readonly=readonly)
    assert list(tmp_path.iterdir()) == [tmp_path / "home"]


def test_the_default_database_directory_is_created(lirun_home: Path) -> None:
    shutil.rmtree(lirun_home)
    store = open_store()
    store.close()
    assert (lirun_home / "state.db").is_file()
    assert stat.S_IMODE(lirun_home.stat().st_mode) == 0o700


def test_database_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    old = os.umask(0)  # even with a permissive umask
    try:
        store = open_store(path)
        store.sessions.create(id="s-1")
        wal = Path(f"{path}-wal")
        assert wal.exists()
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (path, wal)}
        store.close()
    finally:
        os.umask(old)
    assert modes == {"state.db": 0o600, "state.db-wal": 0o600}


# The third header claims WAL (bytes 18 and 19 are 2): SQLite then makes -wal and -shm
# files before it finds the rest unusable, and those must not be left behind.
@pytest.mark.parametrize(
    "header", [b"", b"SQLite format 3\x00", b"SQLite format 3\x00\x10\x00\x02\x02"]
)
def test_a_corrupt_file_is_reported_and_left_alone(tmp_path: Path, header: bytes) -> None:
    path = tmp_path / "state.db"
    garbage = header + os.urandom(8192 - len(header))
    path.write_bytes(garbage)
    for readonly in (False, True):
        with pytest.raises(DatabaseCorruptError, match="move it aside") as caught:
            open_store(path, readonly=readonly)
        assert str(path) in str(caught.value)
    assert path.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "state.db"]


# -- as an unprivileged user: root writes anywhere, so permissions only bite for others ----

_OPEN_AS_USER = """
import os, sys
from lirun.store import open_store
path = sys.argv[1]
os.listdir(os.path.dirname(path))  # the directory is reachable: only writing may fail
try:
    open_store(path).close()
    print("ok")
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}")
"""


def open_as_nobody(path: Path) -> str:
    return run_as_nobody(_OPEN_AS_USER, str(path), home=path.parent)


def test_a_path_in_a_read_only_directory(shared_dir: Path) -> None:
    writable = shared_dir / "rw"
    writable.mkdir()
    writable.chmod(0o777)
    assert open_as_nobody(writable / "state.db") == "ok"  # the same user can open elsewhere

    readonly = shared_dir / "ro"
    readonly.mkdir(mode=0o755)
    result = open_as_nobody(readonly / "state.db")
    assert result.startswith("DatabaseUnavailableError: cannot open")
    assert "Permission denied" in result
    assert "writable" in result
    assert list(readonly.iterdir()) == []


def test_a_database_the_user_cannot_write(shared_dir: Path) -> None:
    owned_by_root = shared_dir / "state.db"
    open_store(owned_by_root).close()
    before = owned_by_root.read_bytes()
    result = open_as_nobody(owned_by_root)
    assert result.startswith("DatabaseUnavailableError: cannot open"), result
    assert owned_by_root.read_bytes() == before


# -- PostgreSQL URLs --------------------------------------------------------------------

_WITHOUT_PSYCOPG = """
import sys
sys.modules["psycopg"] = None  # as if the extra were not installed
from lirun.errors import LirunError
from lirun.store import open_store
try:
    open_store(sys.argv[1])
except LirunError as exc:
    print(type(exc).__name__, exc.exit_code, exc)
"""


def test_a_postgres_url_without_the_driver() -> None:
    url = "postgresql://lirun:s3cret-pw@127.0.0.1:5432/test"
    out = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PSYCOPG, url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert out.startswith("MissingDriverError 2 "), out
    assert "pip install 'lirun[postgres]'" in out
    assert "s3cret" not in out
    assert issubclass(MissingDriverError, LirunError)


def test_an_unreachable_server(tmp_path: Path) -> None:
    port = free_port()
    url = f"postgresql://lirun:s3cret-pw@127.0.0.1:{port}/test"
    with pytest.raises(DatabaseUnavailableError) as caught:
        open_store(url)
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message
    assert "s3cret" not in message
    assert "lirun:***@" in message


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


PG_BIN = Path("/usr/lib/postgresql/15/bin")
PASSWORD = "right-horse-battery"


@pytest.fixture(scope="module")
def password_server() -> Iterator[int]:
    """A throwaway PostgreSQL that requires a password (the shared one trusts everyone)."""
    if not (PG_BIN / "initdb").exists() or shutil.which("setpriv") is None:
        if REQUIRE_PG:
            pytest.fail(f"PostgreSQL binaries are required at {PG_BIN}")
        pytest.skip(f"no PostgreSQL binaries at {PG_BIN}")
    base = Path(tempfile.mkdtemp(prefix="lirun-pgpw-", dir="/tmp"))
    shutil.chown(base, "postgres", "postgres")
    as_postgres_cmd = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]
    pwfile = base / "pw"
    pwfile.write_text(PASSWORD + "\n")
    shutil.chown(pwfile, "postgres", "postgres")
    port = kept_port()
    data = base / "data"

    def as_postgres(tool: str, *args: str) -> None:
        subprocess.run(
            [*as_postgres_cmd, str(PG_BIN / tool), *args],
            check=True,
            capture_output=True,
            timeout=120,
            cwd=base,
        )

    as_postgres("initdb", "-D", str(data), "-U", "lirun", "--no-sync", "--auth=scram-sha-256",
                f"--pwfile={pwfile}")  # fmt: skip
    options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"
    as_postgres("pg_ctl", "-D", str(data), "-o", options, "-w", "-l", str(base / "log"), "start")
    try:
        yield port
    finally:
        subprocess.run(
            [*as_postgres_cmd, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(base, ignore_errors=True)


def test_a_wrong_password_is_reported_without_echoing_it(password_server: int) -> None:
    wrong = "hunter2-wrong"
    url = f"postgresql://lirun:{wrong}@127.0.0.1:{password_server}/postgres"
    with pytest.raises(DatabaseUnavailableError) as caught:
        open_store(url)
    message = str(caught.value)
    assert "password authentication failed" in message
    assert wrong not in message
    assert PASSWORD not in message
    assert "lirun:***@" in message
    cause = caught.value.__cause__
    assert cause is None or wrong not in repr(cause)


def test_the_right_password_opens_the_same_server(password_server: int) -> None:
    url = f"postgresql://lirun:{PASSWORD}@127.0.0.1:{password_server}/postgres?schema=lirun_t"
    store = open_store(url)
    try:
        assert store.sessions.create(id="s-1").status == "running"
        assert PASSWORD not in store.connector.display_url
    finally:
        store.close()


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from make_pg_url()


def test_a_postgresql_url_keeps_its_own_options(pg_url: str) -> None:
    store = open_store(f"{pg_url}&options=-c%20statement_timeout%3D1234")
    try:
        assert store.connector.read("SHOW statement_timeout") == [{"statement_timeout": "1234ms"}]
        assert store.connector.read("SHOW lock_timeout") == [{"lock_timeout": "30s"}]
    finally:
        store.close()
