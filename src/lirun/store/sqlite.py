"""SQLite backend: WAL, ``BEGIN IMMEDIATE`` writes, busy timeout, file mode 0600.

Each connector holds two connections: one for write transactions and one for reads. In
WAL mode a read never waits for a writer, and a separate read connection means a read in
this process is not queued behind a write of this process that is itself waiting for
another process's lock (an async caller reading while a write is pending).
"""

from __future__ import annotations

import _thread
import os
import sqlite3
import time
from _json import encode_basestring_ascii
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress

from lirun.errors import (
    ConflictError,
    DatabaseBusyError,
    DatabaseCorruptError,
    DatabaseError,
    DatabaseMissingError,
    DatabaseUnavailableError,
    LirunError,
    SchemaTooNewError,
)
from lirun.store.connector import Params, Row, apply_migrations
from lirun.store.dbfile import ensure_database_file, file_kind, readonly_uri
from lirun.store.queries import latest_version
from lirun.store.retry import write_retry_seconds

BUSY_TIMEOUT_S = 30.0
# Writers retry BEGIN IMMEDIATE themselves with jittered sleeps that grow to 20 ms: SQLite's
# own busy handler climbs to 100 ms sleeps, so under contention a waiter oversleeps a lock
# held for a fraction of a millisecond while newcomers take it (8 contending processes saw
# single writes wait 700 ms; with this loop, under 300 ms at the same throughput).
_RETRY_BASE_S = 0.001
_RETRY_CAP_S = 0.02


def _is_busy(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "")
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in str(exc)


def _translate(exc: sqlite3.Error, path: str) -> LirunError:
    text = str(exc)
    if isinstance(exc, sqlite3.IntegrityError) and "UNIQUE" in text:
        return ConflictError(f"a record with that id already exists ({text})")
    if isinstance(exc, sqlite3.DatabaseError) and (
        "not a database" in text or "malformed" in text or "corrupt" in text
    ):
        return DatabaseCorruptError(
            f"{path} is not a usable lirun database ({text}); move it aside and retry"
        )
    if _is_busy(exc):
        return DatabaseBusyError(
            f"{path} stayed locked by another process past the busy timeout; find the "
            "process holding a long transaction, stop it, and retry"
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


def _connect(target: str, *, uri: bool = False) -> sqlite3.Connection:
    return sqlite3.connect(
        target,
        timeout=BUSY_TIMEOUT_S,
        isolation_level=None,
        check_same_thread=False,
        uri=uri,
    )


def _side_files(path: str) -> set[str]:
    """The write-ahead log and shared-memory files beside ``path`` that exist now."""
    return {side for side in (f"{path}-wal", f"{path}-shm") if os.path.exists(side)}


class SQLiteConnector:
    """A write connection and a read connection, each guarded by its own thread lock."""

    dialect = "sqlite"
    supports_notify = False

    def __init__(
        self, path: str | os.PathLike[str], *, readonly: bool = False, create_parent: bool = False
    ) -> None:
        self.path = os.fspath(path)
        self.url = self.display_url = self.path
        self.readonly = readonly
        # _thread, not threading: the same locks without threading's import on start-up.
        self._write_lock = _thread.RLock()
        self._read_lock = _thread.allocate_lock()
        self._write_conn: sqlite3.Connection | None = None
        self._immutable_seen: tuple[int, ...] | None = None
        present = _side_files(self.path)
        try:
            self._open(readonly, create_parent)
        except DatabaseCorruptError:
            # SQLite makes -wal and -shm beside a file whose header says WAL before it finds
            # the rest unusable: the refused file is left exactly as it was found.
            for side in _side_files(self.path) - present:
                with suppress(OSError):
                    os.unlink(side)
            raise

    # -- opening -------------------------------------------------------------

    def _open(self, readonly: bool, create_parent: bool) -> None:
        if readonly:
            self._read_conn = self._open_readonly()
            return
        writer = self._open_writer(create_parent)
        try:
            current = self._check_version(writer)
            self._set_wal(writer)
            # Busy time of writers is spent in _begin, not in SQLite's own handler.
            writer.execute("PRAGMA busy_timeout = 0")
            self._write_conn = writer
            if current < latest_version(self.dialect):
                self._migrate()  # only then: opening must not wait for a busy writer
            self._read_conn = _connect(self.path)
        except sqlite3.Error as exc:
            writer.close()
            raise _translate(exc, self.path) from exc
        except BaseException:
            writer.close()
            raise

    def _open_writer(self, create_parent: bool) -> sqlite3.Connection:
        parent = os.path.dirname(self.path) or "."
        if create_parent:
            try:
                os.makedirs(parent, mode=0o700, exist_ok=True)
            except OSError as exc:
                raise DatabaseUnavailableError(
                    f"cannot create the directory {parent} for the database: "
                    f"{exc.strerror or exc}; LIRUN_HOME must name a directory you can write "
                    "(or one that can be created), or pass --db / set LIRUN_DB_URL"
                ) from exc
        try:
            if not os.path.isdir(parent):
                raise DatabaseUnavailableError(
                    f"cannot create the database {self.path}: directory {parent} does not "
                    "exist; create it or choose another path with --db / LIRUN_DB_URL"
                )
            ensure_database_file(self.path)
        except OSError as exc:
            raise DatabaseUnavailableError(
                f"cannot open {self.path} for writing: {exc.strerror or exc}; it must be a "
                f"writable file (or not exist yet) in a writable directory ({parent}); or "
                "choose another path with --db / LIRUN_DB_URL"
            ) from exc
        try:
            return _connect(self.path)
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc

    def _open_readonly(self) -> sqlite3.Connection:
        try:
            kind = file_kind(self.path)
        except OSError as exc:
            raise DatabaseUnavailableError(
                f"cannot read {self.path}: {exc.strerror or exc}; pass --db / set LIRUN_DB_URL "
                "to the database you mean"
            ) from exc
        if kind is None:
            raise DatabaseMissingError(
                f"no lirun database at {self.path}; run a job first, or pass --db / set "
                "LIRUN_DB_URL to the database you mean"
            )
        if os.stat(self.path).st_size == 0:
            raise DatabaseCorruptError(
                f"{self.path} is empty (0 bytes), not a lirun database; the next writing li "
                "command keeps it aside and creates a new one"
            )
        try:
            return self._readonly_connection(immutable=False)
        except sqlite3.Error as exc:
            if not self._cannot_share_memory(exc):
                raise _translate(exc, self.path) from exc
        # A reader of a directory it cannot write, with no writer around: nothing is in a
        # WAL, so the file alone is the database. Opened immutable, and reopened whenever
        # the file changes (see read), because an immutable connection never looks again.
        self._immutable_seen = self._file_signature()
        try:
            return self._readonly_connection(immutable=True)
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc

    def _readonly_connection(self, *, immutable: bool) -> sqlite3.Connection:
        conn = _connect(readonly_uri(self.path, immutable=immutable), uri=True)
        try:
            current = self._check_version(conn)
            if current < latest_version(self.dialect):
                raise DatabaseUnavailableError(
                    f"{self.path} has schema version {current}, older than "
                    f"{latest_version(self.dialect)}; run `li db migrate` (any writing li "
                    "command migrates it)"
                )
        except BaseException:
            conn.close()
            raise
        return conn

    def _cannot_share_memory(self, exc: sqlite3.Error) -> bool:
        """The read-only open failed only because the -shm file cannot be created here."""
        text = str(exc)
        return (
            ("readonly" in text or "unable to open" in text)
            and not os.access(os.path.dirname(self.path) or ".", os.W_OK)
            and not os.path.exists(f"{self.path}-wal")
        )

    def _file_signature(self) -> tuple[int, ...]:
        """Changes whenever a writer touches the file or starts a WAL next to it."""
        try:
            st = os.stat(self.path)
        except OSError:
            return ()
        has_wal = os.path.exists(f"{self.path}-wal")
        return (st.st_ino, st.st_size, st.st_mtime_ns, int(has_wal))

    def _refresh_immutable(self) -> None:
        """Reopen an immutable reader whose file changed (caller holds the read lock)."""
        seen = self._immutable_seen
        if seen is None or self._file_signature() == seen:
            return
        self._immutable_seen = None  # set again only if the reopen is immutable too
        try:
            fresh = self._open_readonly()  # a writer may be there now: a normal reader first
        except BaseException:
            self._immutable_seen = seen
            raise
        self._read_conn.close()
        self._read_conn = fresh

    @staticmethod
    def _set_wal(conn: sqlite3.Connection) -> None:
        # Switching to WAL needs a moment of exclusive access; a concurrent opener may hold it.
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL").fetchall()
                break
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        # NORMAL in WAL mode syncs at checkpoints, not at every commit: a committed write
        # survives a crash of any process; only an OS crash or power loss may lose the last
        # few transactions (never corrupt the file). FULL would cost an fsync per status write.
        conn.execute("PRAGMA synchronous=NORMAL")

    def _check_version(self, conn: sqlite3.Connection) -> int:
        """The schema version (``user_version`` or ``schema_migrations``); refuse a newer one."""
        current = int(conn.execute("PRAGMA user_version").fetchone()[0])
        has_table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
        ).fetchone()
        if has_table:
            recorded = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0]
            current = max(current, int(recorded or 0))
        latest = latest_version(self.dialect)
        if current > latest:
            raise SchemaTooNewError(
                f"{self.path} has schema version {current}, newer than this lirun understands "
                f"({latest}); upgrade lirun to use this database"
            )
        return current

    def _migrate(self) -> None:
        latest = latest_version(self.dialect)
        with self.write() as tx:
            # Re-read under the write lock: a concurrent opener may have migrated meanwhile.
            assert self._write_conn is not None
            current = self._check_version(self._write_conn)
            if current == latest:
                return
            tx.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            apply_migrations(tx, self.dialect, current)
            tx.execute(f"PRAGMA user_version = {int(latest)}")

    # -- running -------------------------------------------------------------

    def read(self, sql: str, params: Params | None = None) -> list[Row]:
        with self._read_lock:
            try:
                self._refresh_immutable()
                return _SQLiteTx(self._read_conn).query(sql, params)
            except sqlite3.Error as exc:
                raise _translate(exc, self.path) from exc

    def _begin(self, conn: sqlite3.Connection, wait_seconds: float) -> None:
        """``BEGIN IMMEDIATE``, retried with jittered sleeps for up to ``wait_seconds``."""
        deadline = 0.0
        attempt = 0
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                now = time.monotonic()
                deadline = deadline or now + wait_seconds
                if not _is_busy(exc) or now >= deadline:
                    raise
            import random  # only when contended: keep `import lirun.store` light

            time.sleep(random.uniform(0, min(_RETRY_CAP_S, _RETRY_BASE_S * 2**attempt)))
            attempt = min(attempt + 1, 16)

    @contextmanager
    def write(self, *, wait_seconds: float | None = None) -> Iterator[_SQLiteTx]:
        conn = self._write_conn
        if conn is None:
            raise DatabaseUnavailableError(f"{self.path} was opened read-only")
        with self._write_lock:
            try:
                self._begin(conn, write_retry_seconds() if wait_seconds is None else wait_seconds)
            except sqlite3.Error as exc:
                raise _translate(exc, self.path) from exc
            try:
                yield _SQLiteTx(conn)
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback(conn)
                raise _translate(exc, self.path) from exc
            except BaseException:
                self._rollback(conn)
                raise

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        # SQLite may already have rolled back (disk full, I/O error); don't mask the cause.
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")

    def bind_list(self, values: Sequence[str]) -> object:
        # A JSON array for json_each(:ids), written without importing json (and re) on
        # `li wait`'s path.
        return "[" + ", ".join(encode_basestring_ascii(v) for v in values) + "]"

    def change_token(self) -> object:
        with self._read_lock:
            if self._immutable_seen is not None:
                return self._file_signature()
            try:
                return self._read_conn.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error as exc:  # ProgrammingError once closed, among others
                raise _translate(exc, self.path) from exc

    def close(self) -> None:
        with self._write_lock:
            if self._write_conn is not None:
                self._write_conn.close()
        with self._read_lock:
            self._read_conn.close()
