"""SQLite backend: WAL, ``BEGIN IMMEDIATE`` writes, busy timeout, file mode 0600."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lirun.errors import (
    ConflictError,
    DatabaseCorruptError,
    DatabaseError,
    DatabaseUnavailableError,
    LirunError,
    SchemaTooNewError,
)
from lirun.store.connector import Params, Row, split_statements
from lirun.store.queries import latest_version, load_migrations

BUSY_TIMEOUT_S = 30.0


def sqlite_path_from_url(url: str) -> Path:
    """``sqlite:///abs/path``, ``sqlite:rel/path`` or a bare path → a Path."""
    if url.startswith("sqlite://"):
        url = url[len("sqlite://") :]
    elif url.startswith("sqlite:"):
        url = url[len("sqlite:") :]
    return Path(url).expanduser()


def _translate(exc: sqlite3.Error, path: Path) -> LirunError:
    text = str(exc)
    if isinstance(exc, sqlite3.IntegrityError) and "UNIQUE" in text:
        return ConflictError(f"a record with that id already exists ({text})")
    if isinstance(exc, sqlite3.DatabaseError) and (
        "not a database" in text or "malformed" in text or "corrupt" in text
    ):
        return DatabaseCorruptError(
            f"{path} is not a usable lirun database ({text}); move it aside and retry"
        )
    if "unable to open" in text or "readonly" in text or "read-only" in text:
        return DatabaseUnavailableError(
            f"cannot open {path} for writing ({text}); check that its directory exists and is "
            "writable, or pass --db / set LIRUN_DB_URL"
        )
    return DatabaseError(f"database error on {path}: {text}")


class _SQLiteTx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def query(self, sql: str, params: Params | None = None) -> list[Row]:
        cur = self._conn.execute(sql, params or {})
        cols = [d[0] for d in cur.description or ()]
        return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]

    def execute(self, sql: str, params: Params | None = None) -> int:
        return self._conn.execute(sql, params or {}).rowcount


class SQLiteConnector:
    """One connection, guarded by a lock so an async facade may call it from threads."""

    dialect = "sqlite"
    supports_notify = False

    def __init__(self, path: Path, *, readonly: bool = False, create_parent: bool = False) -> None:
        self.path = path
        self.display_url = str(path)
        self.readonly = readonly
        self._lock = threading.RLock()
        self._conn = self._open(create_parent)
        try:
            self._check_and_migrate()
        except BaseException:
            self._conn.close()
            raise

    # -- opening -------------------------------------------------------------

    def _open(self, create_parent: bool) -> sqlite3.Connection:
        if self.readonly:
            return self._open_readonly()
        parent = self.path.parent
        if create_parent:
            parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not parent.is_dir():
            raise DatabaseUnavailableError(
                f"cannot create the database {self.path}: directory {parent} does not exist; "
                "create it or choose another path with --db / LIRUN_DB_URL"
            )
        try:
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        except OSError as exc:
            raise DatabaseUnavailableError(
                f"cannot create the database {self.path}: {exc.strerror}; check that {parent} "
                "is writable, or choose another path with --db / LIRUN_DB_URL"
            ) from exc
        try:
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            self._set_wal(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc
        return conn

    def _open_readonly(self) -> sqlite3.Connection:
        if not self.path.is_file():
            raise DatabaseUnavailableError(
                f"no lirun database at {self.path}; run a job first, or pass --db / set "
                "LIRUN_DB_URL to the database you mean"
            )
        try:
            conn = sqlite3.connect(
                f"file:{self.path}?mode=ro",
                uri=True,
                timeout=BUSY_TIMEOUT_S,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc
        return conn

    @staticmethod
    def _set_wal(conn: sqlite3.Connection) -> None:
        # Switching to WAL needs a moment of exclusive access; a concurrent opener may hold it.
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL").fetchall()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _user_version(self) -> int:
        try:
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc

    def _check_and_migrate(self) -> None:
        latest = latest_version(self.dialect)
        current = self._user_version()
        if current > latest:
            raise SchemaTooNewError(
                f"{self.path} has schema version {current}, newer than this lirun understands "
                f"({latest}); upgrade lirun to use this database"
            )
        if current == latest:
            return
        if self.readonly:
            raise DatabaseUnavailableError(
                f"{self.path} has schema version {current}, older than {latest}; run "
                "`li db migrate` (any writing li command migrates it)"
            )
        self._migrate(latest)

    def _migrate(self, latest: int) -> None:
        with self.write() as tx:
            current = int(tx.query("PRAGMA user_version")[0]["user_version"])
            if current > latest:
                raise SchemaTooNewError(
                    f"{self.path} has schema version {current}, newer than this lirun "
                    f"understands ({latest}); upgrade lirun to use this database"
                )
            tx.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            for version, name, script in load_migrations(self.dialect):
                if version <= current:
                    continue
                for statement in split_statements(script):
                    tx.execute(statement)
                tx.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (version, name, time.time()),  # type: ignore[arg-type]
                )
            tx.execute(f"PRAGMA user_version = {int(latest)}")

    # -- running -------------------------------------------------------------

    def read(self, sql: str, params: Params | None = None) -> list[Row]:
        with self._lock:
            try:
                return _SQLiteTx(self._conn).query(sql, params)
            except sqlite3.Error as exc:
                raise _translate(exc, self.path) from exc

    @contextmanager
    def write(self) -> Iterator[_SQLiteTx]:
        if self.readonly:
            raise DatabaseUnavailableError(f"{self.path} was opened read-only")
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _translate(exc, self.path) from exc
            try:
                yield _SQLiteTx(self._conn)
            except sqlite3.Error as exc:
                self._conn.execute("ROLLBACK")
                raise _translate(exc, self.path) from exc
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._conn.execute("ROLLBACK")
                raise _translate(exc, self.path) from exc

    def change_token(self) -> object:
        with self._lock:
            return self._conn.execute("PRAGMA data_version").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
