"""PostgreSQL backend (psycopg 3, imported only when a PostgreSQL URL is opened)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from lirun.errors import (
    ConflictError,
    DatabaseBusyError,
    DatabaseConnectionLostError,
    DatabaseError,
    DatabaseMissingError,
    DatabaseUnavailableError,
    LirunError,
    MissingDriverError,
    SchemaTooNewError,
    UsageError,
)
from lirun.hints import Any
from lirun.store.connector import Params, Row, apply_migrations
from lirun.store.queries import latest_version, to_pyformat
from lirun.store.retry import write_retry_seconds
from lirun.store.urls import check_url, redact_url

_MIGRATION_LOCK_KEY = 0x6C6972756E  # "lirun": serializes concurrent migrators
_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def split_schema(url: str) -> tuple[str, str | None]:
    """Remove lirun's own ``schema=`` query parameter; return (conninfo URL, schema)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    rest = [(k, v) for k, v in query if k != "schema"]
    if schema is not None and not _SCHEMA_RE.match(schema):
        raise DatabaseUnavailableError(
            f"schema {schema!r} in the database URL is not a plain lower-case identifier"
        )
    return urlunsplit(parts._replace(query=urlencode(rest, quote_via=quote))), schema


def import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise MissingDriverError(
            "a PostgreSQL URL needs the psycopg driver, which is not installed; "
            "run: pip install 'lirun[postgres]'"
        ) from exc
    return psycopg


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _translate(exc: Exception, url: str) -> LirunError:
    psycopg = import_psycopg()
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, psycopg.errors.UniqueViolation):
        return ConflictError(f"a record with that id already exists ({text})")
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        return DatabaseBusyError(
            f"a record at {redact_url(url)} stayed locked by another session past the lock "
            f"timeout ({text}); find the long transaction, stop it, and retry"
        )
    if isinstance(exc, psycopg.OperationalError):
        return DatabaseConnectionLostError(
            f"cannot use PostgreSQL at {redact_url(url)}: {text}; check the URL, the server "
            "and the credentials"
        )
    return DatabaseError(f"database error on {redact_url(url)}: {text}")


class _PgTx:
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def query(self, sql: str, params: Params | None = None) -> list[Row]:
        cur = self._conn.execute(to_pyformat(sql), params or {})
        return list(cur.fetchall()) if cur.description else []

    def execute(self, sql: str, params: Params | None = None) -> int:
        return int(self._conn.execute(to_pyformat(sql), params or {}).rowcount)


class PostgresConnector:
    """A write connection and a read connection (opened on first read), each with a lock.

    Reads get their own connection so that a read in this process never queues behind a
    write of this process that waits for another process's row lock.
    """

    dialect = "postgres"
    supports_notify = True
    runs_inline = False  # every call waits on the network

    def __init__(self, url: str, *, readonly: bool = False) -> None:
        check_url(url)
        self.url = url
        self.display_url = redact_url(url)
        self.readonly = readonly
        self.conninfo, self.schema = split_schema(url)
        self._psycopg = import_psycopg()
        self._lock = threading.RLock()
        self._read_lock = threading.Lock()
        self._read_conn: Any = None
        self._closed = False  # closed by its owner: never reconnect
        self._conn = self.connect()
        try:
            self._check_and_migrate()
        except BaseException:
            self._conn.close()
            raise
        if readonly:  # a reader never writes: its one connection serves the reads
            self._read_conn, self._conn = self._conn, None

    def connect(self, **kwargs: Any) -> Any:
        """A new autocommit connection with lirun's search path (also used by listeners)."""
        from psycopg.conninfo import conninfo_to_dict
        from psycopg.rows import dict_row

        try:
            given = conninfo_to_dict(self.conninfo)
        except self._psycopg.Error as exc:
            raise UsageError(
                f"the database URL {self.display_url} is not valid: {_first_line(exc)}"
            ) from None
        # A writer waits for a row lock as long as a SQLite writer waits for the file lock;
        # the URL's own options and connect_timeout are kept (ours come after, and win).
        settings = [str(given.get("options") or "")]
        settings.append(f"-c lock_timeout={max(1, int(write_retry_seconds() * 1000))}")
        if self.schema:
            settings.append(f"-c search_path={self.schema}")
        try:
            return self._psycopg.connect(
                self.conninfo,
                autocommit=True,
                row_factory=dict_row,
                connect_timeout=given.get("connect_timeout") or 10,
                options=" ".join(s for s in settings if s),
                **kwargs,
            )
        except self._psycopg.Error as exc:
            raise _translate(exc, self.url) from None

    def _schema_version(self, tx: _PgTx) -> int:
        rows = tx.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")
        if not rows[0]["present"]:
            return 0
        return int(tx.query("SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations")[0]["v"])

    def _current_version(self) -> int:
        """The schema version in one round trip (outside a transaction: a missing table
        only fails this statement)."""
        try:
            return self._schema_version_unchecked()
        except self._psycopg.errors.UndefinedTable:
            return 0
        except self._psycopg.Error as exc:
            raise _translate(exc, self.url) from exc

    def _schema_version_unchecked(self) -> int:
        sql = "SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations"
        return int(_PgTx(self._conn).query(sql)[0]["v"])

    def _check_and_migrate(self) -> None:
        latest = latest_version(self.dialect)
        current = self._current_version()
        if current == latest:
            return
        if current > latest:
            raise SchemaTooNewError(
                f"the database at {self.display_url} has schema version {current}, newer than "
                f"this lirun understands ({latest}); upgrade lirun to use it"
            )
        if self.readonly and current == 0:
            raise DatabaseMissingError(
                f"no lirun tables in the database at {self.display_url}; run a job first, "
                "or `li db migrate`, or point --db / LIRUN_DB_URL at the database you mean"
            )
        if self.readonly:
            raise DatabaseUnavailableError(
                f"the database at {self.display_url} is at schema version {current}, older "
                f"than {latest}; run `li db migrate`"
            )
        with self.write() as tx:
            tx.query("SELECT pg_advisory_xact_lock(:key)", {"key": _MIGRATION_LOCK_KEY})
            if self.schema:
                tx.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            tx.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                "name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
            )
            current = self._schema_version(tx)
            if current > latest:
                raise SchemaTooNewError(
                    f"the database at {self.display_url} has schema version {current}; "
                    f"this lirun understands {latest}; upgrade lirun"
                )
            apply_migrations(tx, self.dialect, current)

    # A server restart breaks both connections; each is replaced on its next use, so
    # callers (the status-write retry, `li wait`) see one error per outage, not forever.

    def _check_open(self) -> None:
        if self._closed:
            raise DatabaseUnavailableError(f"the connection to {self.display_url} was closed")

    def read(self, sql: str, params: Params | None = None) -> list[Row]:
        """A read-only store fails fast (its callers poll); a writer's reads come before
        its guarded writes, so they wait out a lost connection like the writes do."""
        self._check_open()
        if self.readonly:
            return self._read_once(sql, params)
        from lirun.store.retry import retry_write

        return retry_write(
            lambda _wait, _tries: self._read_once(sql, params), where=self.display_url
        )

    def _read_once(self, sql: str, params: Params | None) -> list[Row]:
        with self._read_lock:
            for first_try in (True, False):
                if self._read_conn is None:
                    self._read_conn = self.connect()
                try:
                    return _PgTx(self._read_conn).query(sql, params)
                except self._psycopg.Error as exc:
                    stale = self._discard_broken("_read_conn")
                    if not (stale and first_try):
                        raise _translate(exc, self.url) from exc
            raise AssertionError("unreachable")

    def _discard_broken(self, attr: str) -> bool:
        """Forget the connection in ``attr`` if the server dropped it; True if it did."""
        conn = getattr(self, attr)
        if conn is None or not (conn.broken or conn.closed):
            return False
        with suppress(Exception):
            conn.close()
        setattr(self, attr, None)
        return True

    def _begin(self, wait_seconds: float | None) -> tuple[Any, ExitStack]:
        """A connection inside an open transaction; a stale connection is replaced once."""
        for first_try in (True, False):
            if self._conn is None:
                self._conn = self.connect()
            stack = ExitStack()
            try:
                stack.enter_context(self._conn.transaction())
                if wait_seconds is not None:
                    ms = str(max(1, int(wait_seconds * 1000)))
                    self._conn.execute("SELECT set_config('lock_timeout', %s, true)", [ms])
                return self._conn, stack
            except self._psycopg.Error as exc:
                with suppress(self._psycopg.Error):
                    stack.close()
                stale = self._discard_broken("_conn")
                if not (stale and first_try):
                    raise _translate(exc, self.url) from exc
        raise AssertionError("unreachable")

    @contextmanager
    def write(self, *, wait_seconds: float | None = None) -> Iterator[_PgTx]:
        if self.readonly:
            raise DatabaseUnavailableError(f"{self.display_url} was opened read-only")
        self._check_open()
        with self._lock:
            conn, stack = self._begin(wait_seconds)
            try:
                with stack:
                    yield _PgTx(conn)
            except self._psycopg.Error as exc:
                self._discard_broken("_conn")
                raise _translate(exc, self.url) from exc

    def bind_list(self, values: Sequence[str]) -> object:
        return list(values)  # psycopg sends a list as an array: = ANY(CAST(:ids AS TEXT[]))

    def change_token(self) -> object:
        return None

    def listen(self, channel: str) -> Listener:
        """A new connection listening on ``channel`` (errors: typed, as everywhere here)."""
        return Listener(self, channel)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            if self._conn is not None:
                self._conn.close()
        with self._read_lock:
            if self._read_conn is not None:
                self._read_conn.close()


class Listener:
    """LISTEN on its own connection, every driver error translated (``li wait``'s waker).

    ``fileno()`` lets a waiter sleep in ``select`` on the connection and a stop pipe
    together; ``take()`` returns the payloads that arrived, without blocking.
    """

    def __init__(self, connector: PostgresConnector, channel: str) -> None:
        self._connector = connector
        self._conn = connector.connect()
        try:
            self._conn.execute(f"LISTEN {channel}")
        except connector._psycopg.Error as exc:
            self.close()
            raise _translate(exc, connector.url) from exc

    def fileno(self) -> int:
        try:
            return int(self._conn.fileno())
        except self._connector._psycopg.Error as exc:  # the connection is lost
            raise _translate(exc, self._connector.url) from exc

    def wait_readable(self, other: int | None, timeout: float) -> list[int]:
        """Block until the connection (or ``other``) is readable; the ready descriptors."""
        import select

        fds = [self.fileno(), *([] if other is None else [other])]
        try:
            return select.select(fds, [], [], timeout)[0]
        except (OSError, ValueError) as exc:  # the socket went away under us
            raise DatabaseConnectionLostError(
                f"lost the listening connection to {self._connector.display_url}: {exc}"
            ) from exc

    def take(self) -> list[str]:
        """Payloads received so far (reading what the socket holds; never blocks)."""
        try:
            return [note.payload for note in self._conn.notifies(timeout=0)]
        except self._connector._psycopg.Error as exc:
            raise _translate(exc, self._connector.url) from exc

    def close(self) -> None:
        with suppress(Exception):  # a broken connection has nothing to release
            self._conn.close()
