"""PostgreSQL through psycopg 3: lirun's one PostgreSQL connector.

``store/__init__.py`` imports this module (and so psycopg) only when a ``postgresql://``
URL is opened: a SQLite user, ``import lirun`` and ``li --help`` never pay for the driver.

A write connection and a read connection (opened on first read), each with a lock: a read
in this process never queues behind a write of this process that waits for another
process's row lock. A server restart breaks both; each is replaced on its next use, so
callers (the status-write retry, ``li wait``) see one error per outage, not forever.
Errors are typed by ``pg_errors.translate``; the connection settings come from
``pg_connect``.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from lirun.errors import (
    DatabaseConnectionLostError,
    DatabaseMissingError,
    DatabaseUnavailableError,
    LirunError,
    SchemaTooNewError,
    UsageError,
)
from lirun.store.bounds import unbounded
from lirun.store.connector import Params, Row, Tx, apply_migrations
from lirun.store.pg_bounded import BoundedConnection
from lirun.store.pg_connect import (
    connect_settings,
    host_list_problem,
    session_options,
    split_schema,
    tcp_settings,
    writable_target,
)
from lirun.store.pg_errors import (
    NO_ANSWER,
    NO_PRIMARY,
    PASSFILE_MISSING,
    PASSFILE_OPEN,
    UNDEFINED_TABLE,
    first_line,
    translate,
)
from lirun.store.queries import latest_version, to_pyformat
from lirun.store.retry import retry_write, until_primary
from lirun.store.urls import check_url, redact_url, scrub

__all__ = ["Listener", "PostgresConnector"]

# Concurrent migrators of one schema take turns; migrators of different schemas (one
# database shared by several lirun homes, or tests) do not wait for each other.
MIGRATION_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext(:name))"


def _first_line(exc: BaseException) -> str:
    return first_line(str(exc), type(exc).__name__)


def _translate(exc: BaseException, url: str, passfile: str | None = None) -> LirunError:
    """psycopg's error as a lirun error: an OperationalError is a lost connection (unless
    the server wanted a password: then ``passfile`` is the file the URL named, if any)."""
    operational = isinstance(exc, psycopg.OperationalError)
    return translate(
        getattr(exc, "sqlstate", None),
        _first_line(exc),
        url,
        operational=operational,
        passfile=passfile,
        passfile_problem=_passfile_problem(passfile) if passfile else None,
    )


def _no_answer(exc: BaseException) -> bool:
    """The server did not answer in time: a new connection now would not fare better
    (a connection broken by an earlier restart is replaced at once instead)."""
    return str(exc).startswith(NO_ANSWER)


def _passfile_problem(path: str) -> str | None:
    """What keeps libpq from reading the password file ``path``, if anything."""
    try:
        with open(path, "rb"):
            mode = os.stat(path).st_mode
    except OSError:
        return PASSFILE_MISSING
    return PASSFILE_OPEN if mode & 0o077 else None


class _PgTx:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def query(self, sql: str, params: Params | None = None) -> list[Row]:
        cur = self._conn.execute(to_pyformat(sql), params or {})
        return list(cur.fetchall()) if cur.description else []

    def execute(self, sql: str, params: Params | None = None) -> int:
        return int(self._conn.execute(to_pyformat(sql), params or {}).rowcount)


class PostgresConnector:
    """PostgreSQL through psycopg (see the module docstring)."""

    dialect = "postgres"
    supports_notify = True

    def __init__(self, url: str, *, readonly: bool = False) -> None:
        check_url(url)
        self.url = url
        self.readonly = readonly
        self.display_url = redact_url(url)
        self.conninfo, self.schema = split_schema(url)
        self._lock = threading.RLock()
        self._read_lock = threading.Lock()
        self._read_conn: Any = None
        self._closed = False  # closed by its owner: never reconnect
        self._conn: Any = self.connect()
        try:
            self._check_and_migrate()
        except BaseException:
            self._conn.close()
            raise
        if self.readonly:  # a reader never writes: its one connection serves the reads
            self._read_conn, self._conn = self._conn, None

    def connect(self, *, part: str | None = None, **kwargs: Any) -> psycopg.Connection[Any]:
        """A new autocommit connection with lirun's search path and bounds (also used by
        listeners: ``part`` names the connection's use in its ``application_name``)."""
        try:
            given = conninfo_to_dict(self.conninfo)
        except psycopg.Error as exc:
            raise UsageError(
                f"the database URL {self.display_url} is not valid: "
                f"{scrub(_first_line(exc), self.url)}"
            ) from None
        problem = host_list_problem(given)
        if problem:
            raise UsageError(f"the database URL {self.display_url} names {problem}")
        # The URL's own options and connect_timeout are kept (ours come after, and win).
        extra: dict[str, Any] = {
            **tcp_settings(given, user_timeout=psycopg.pq.version() >= 120000),
            **writable_target(given),
            **connect_settings(given, part=part),
            **kwargs,
        }
        options = session_options(str(given.get("options") or ""), self.schema)
        try:
            return until_primary(
                lambda: BoundedConnection.connect(
                    self.conninfo, autocommit=True, row_factory=dict_row, options=options, **extra
                ),
                no_primary=lambda exc: NO_PRIMARY in str(exc),
                where=self.display_url,
            )
        except psycopg.Error as exc:
            passfile = given.get("passfile")
            raise _translate(exc, self.url, str(passfile) if passfile else None) from None

    # -- opening --------------------------------------------------------------------

    def _current_version(self) -> int:
        """The schema version in one round trip (outside a transaction: a missing table
        only fails this statement)."""
        sql = "SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations"
        try:
            return int(_PgTx(self._conn).query(sql)[0]["v"])
        except psycopg.Error as exc:
            if getattr(exc, "sqlstate", None) == UNDEFINED_TABLE:
                return 0
            raise _translate(exc, self.url) from exc

    @staticmethod
    def _schema_version(tx: Tx) -> int:
        rows = tx.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")
        if not rows[0]["present"]:
            return 0
        return int(tx.query("SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations")[0]["v"])

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
        with unbounded(), self.write() as tx:  # DDL on a big table may take its time
            tx.execute("SET LOCAL statement_timeout = 0")
            tx.query(MIGRATION_LOCK_SQL, {"name": f"lirun migrations {self.schema or ''}"})
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

    # -- reading --------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise DatabaseUnavailableError(f"the connection to {self.display_url} was closed")

    def read(self, sql: str, params: Params | None = None) -> list[Row]:
        """A read-only store fails fast (its callers poll); a writer's reads come before
        its guarded writes, so they wait out a lost connection like the writes do."""
        self._check_open()
        if self.readonly:
            return self._read_once(sql, params)
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
                except psycopg.Error as exc:
                    stale = self._discard_broken("_read_conn")
                    if not (stale and first_try) or _no_answer(exc):
                        raise _translate(exc, self.url) from exc
            raise AssertionError("unreachable")

    @staticmethod
    def _is_broken(conn: psycopg.Connection[Any]) -> bool:
        if conn.broken or conn.closed:
            return True
        # An exception a signal handler raised mid-statement leaves the statement running
        # and the connection busy for good: stop it on the server, replace the connection.
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.ACTIVE:
            with suppress(Exception):
                conn.cancel_safe(timeout=5)
            return True
        return False

    def _discard_broken(self, attr: str) -> bool:
        """Forget the connection in ``attr`` if the server dropped it; True if it did."""
        conn = getattr(self, attr)
        if conn is None or not self._is_broken(conn):
            return False
        with suppress(Exception):  # a broken connection has nothing to release
            conn.close()
        setattr(self, attr, None)
        return True

    # -- writing --------------------------------------------------------------------

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
            except psycopg.Error as exc:
                with suppress(psycopg.Error):
                    stack.close()
                stale = self._discard_broken("_conn")
                if not (stale and first_try) or _no_answer(exc):
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
            except psycopg.Error as exc:
                self._discard_broken("_conn")
                raise _translate(exc, self.url) from exc
            except BaseException:
                self._discard_broken("_conn")  # a statement cut short by a signal: stop it
                raise

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

    ``wait_readable`` lets a waiter sleep in ``select`` on the connection and a stop pipe
    together; ``take()`` returns the payloads that arrived, without blocking.
    """

    def __init__(self, connector: PostgresConnector, channel: str) -> None:
        self._url = connector.url
        self._display_url = connector.display_url
        self._conn = connector.connect(part="listen")
        try:
            self._conn.execute(f"LISTEN {channel}")
        except psycopg.Error as exc:
            self.close()
            raise _translate(exc, self._url) from exc

    def fileno(self) -> int:
        try:
            return int(self._conn.fileno())
        except psycopg.Error as exc:  # the connection is lost
            raise _translate(exc, self._url) from exc

    def wait_readable(self, other: int | None, timeout: float) -> list[int]:
        """Block until the connection (or ``other``) is readable; the ready descriptors."""
        fds = [self.fileno(), *([] if other is None else [other])]
        try:
            return select.select(fds, [], [], timeout)[0]
        except (OSError, ValueError) as exc:  # the socket went away under us
            raise DatabaseConnectionLostError(
                f"lost the listening connection to {self._display_url}: {exc}"
            ) from exc

    def take(self) -> list[str]:
        """Payloads received so far (reading what the socket holds; never blocks)."""
        try:
            return [note.payload for note in self._conn.notifies(timeout=0)]
        except psycopg.Error as exc:
            raise _translate(exc, self._url) from exc

    def close(self) -> None:
        with suppress(Exception):  # a broken connection has nothing to release
            self._conn.close()
