"""PostgreSQL on psycopg 3 (imported only when this connector is opened).

The fallback when libpq cannot be loaded through ctypes (``postgres_libpq.py``), or the
driver ``LIRUN_PG_DRIVER=psycopg`` asks for. What both connectors share (the URL's schema,
session settings, error translation, the schema check, reads) is in ``pgshared.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from typing import Any

from lirun.errors import (
    DatabaseUnavailableError,
    LirunError,
    MissingDriverError,
    UsageError,
)
from lirun.store.connector import Params, Row
from lirun.store.pgshared import (
    UNDEFINED_TABLE,
    PgConnectorBase,
    PgListener,
    first_line,
    session_options,
    split_schema,
    tcp_settings,
    translate,
)
from lirun.store.queries import to_pyformat
from lirun.store.urls import check_url

__all__ = ["Listener", "PostgresConnector", "import_psycopg", "split_schema"]


def import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise MissingDriverError(
            "a PostgreSQL URL needs the psycopg driver (or libpq), which is not installed; "
            "run: pip install 'lirun[postgres]'"
        ) from exc
    return psycopg


def _first_line(exc: BaseException) -> str:
    return first_line(str(exc), type(exc).__name__)


def _translate(exc: BaseException, url: str) -> LirunError:
    psycopg = import_psycopg()
    operational = isinstance(exc, psycopg.OperationalError)
    return translate(getattr(exc, "sqlstate", None), _first_line(exc), url, operational=operational)


class _PgTx:
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def query(self, sql: str, params: Params | None = None) -> list[Row]:
        cur = self._conn.execute(to_pyformat(sql), params or {})
        return list(cur.fetchall()) if cur.description else []

    def execute(self, sql: str, params: Params | None = None) -> int:
        return int(self._conn.execute(to_pyformat(sql), params or {}).rowcount)


class Listener(PgListener):
    def _payloads(self) -> list[str]:
        return [note.payload for note in self._conn.notifies(timeout=0)]


class PostgresConnector(PgConnectorBase):
    """PostgreSQL through psycopg: the shared connector (``PgConnectorBase``) on its
    connections, with psycopg's transactions and errors."""

    _listener = Listener

    def __init__(self, url: str, *, readonly: bool = False) -> None:
        check_url(url)
        self.url = url
        self.readonly = readonly
        self.conninfo, self.schema = split_schema(url)
        self._psycopg = import_psycopg()
        self._driver_error = self._psycopg.Error
        self._lock = threading.RLock()
        self._read_lock = threading.Lock()
        self._open()

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
        # The URL's own options and connect_timeout are kept (ours come after, and win).
        try:
            return self._psycopg.connect(
                self.conninfo,
                autocommit=True,
                row_factory=dict_row,
                connect_timeout=given.get("connect_timeout") or 10,
                options=session_options(str(given.get("options") or ""), self.schema),
                **tcp_settings(given, user_timeout=self._psycopg.pq.version() >= 120000),
                **kwargs,
            )
        except self._psycopg.Error as exc:
            raise _translate(exc, self.url) from None

    def _rows(self, conn: Any, sql: str, params: Params | None) -> list[Row]:
        return _PgTx(conn).query(sql, params)

    def _is_broken(self, conn: Any) -> bool:
        if conn.broken or conn.closed:
            return True
        # An exception a signal handler raised mid-statement leaves the statement running
        # and the connection busy for good: stop it on the server, replace the connection.
        if conn.info.transaction_status == self._psycopg.pq.TransactionStatus.ACTIVE:
            with suppress(Exception):
                conn.cancel_safe(timeout=5)
            return True
        return False

    def _translate(self, exc: BaseException) -> LirunError:
        return _translate(exc, self.url)

    def _current_version(self) -> int:
        """The schema version in one round trip (outside a transaction: a missing table
        only fails this statement)."""
        sql = "SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations"
        try:
            return int(_PgTx(self._conn).query(sql)[0]["v"])
        except self._psycopg.Error as exc:
            if getattr(exc, "sqlstate", None) == UNDEFINED_TABLE:
                return 0
            raise _translate(exc, self.url) from exc

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
            except BaseException:
                self._discard_broken("_conn")  # a statement cut short by a signal: stop it
                raise

    def bind_list(self, values: Sequence[str]) -> object:
        return list(values)  # psycopg sends a list as an array: = ANY(CAST(:ids AS TEXT[]))
