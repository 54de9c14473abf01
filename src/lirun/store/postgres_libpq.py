"""PostgreSQL on libpq through ctypes: the connector every ``li`` command and the library
(``StateDB`` included) use when libpq can be loaded (``libpq.py`` says from where);
psycopg (``postgres.py``) otherwise. ``LIRUN_PG_DRIVER=libpq`` or ``=psycopg`` forces one
(``store/__init__.py`` chooses).

Why a second driver: importing psycopg costs about 95 ms (its package pulls in asyncio,
logging, ssl and its whole type system), nine times the start of the interpreter, and a
short-lived ``li wait`` paid it on every call. This connector needs only the standard
library and the C library psycopg itself wraps. Why one rule for every process rather
than psycopg for long-lived ones: lirun uses nothing of psycopg that this lacks, and one
driver per machine is one set of behaviours to reason about; both pass the same tests.

It is the same connector as ``postgres.py``: the shared half
(``pgshared.PgConnectorBase``: schema check and migration, reads that replace a dropped
connection, error translation by SQLSTATE), the same named statements with ``:name``
placeholders bound as text parameters (``$n``, never written into the SQL), and rows
equal to psycopg's, value for value and type for type. Transactions are ``BEGIN`` /
``COMMIT`` on the write connection, ``ROLLBACK`` when the block raises.
"""

from __future__ import annotations

import _thread
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress

from lirun.errors import DatabaseUnavailableError, LirunError, MissingDriverError, UsageError
from lirun.store import libpq
from lirun.store.connector import Params, Row
from lirun.store.pgshared import (
    UNDEFINED_TABLE,
    PgConnectorBase,
    PgListener,
    is_operational,
    session_options,
    split_schema,
    tcp_settings,
    translate,
)
from lirun.store.queries import to_numbered

INSTALL_HINT = (
    "install the libpq5 package of your system (it provides libpq.so.5), or "
    "pip install 'lirun[postgres]' (its psycopg-binary wheel bundles libpq)"
)


def _statement(sql: str, params: Params | None) -> tuple[str, list[object]]:
    """``sql`` with ``$n`` placeholders, and the values in that order."""
    text, names = to_numbered(sql)
    given = params or {}
    missing = [name for name in names if name not in given]
    if missing:
        raise libpq.PqError(f"query parameter missing: {', '.join(missing)}")
    return text, [given[name] for name in names]


class _LibpqTx:
    def __init__(self, connector: LibpqConnector, conn: libpq.PgConn) -> None:
        self._connector = connector
        self._conn = conn

    def _run(self, sql: str, params: Params | None) -> libpq.Result:
        try:
            return self._conn.execute(*_statement(sql, params))
        except libpq.PqError as exc:
            raise self._connector._translate(exc) from exc

    def query(self, sql: str, params: Params | None = None) -> list[Row]:
        return self._run(sql, params).rows

    def execute(self, sql: str, params: Params | None = None) -> int:
        return self._run(sql, params).rowcount


class Listener(PgListener):
    def _payloads(self) -> list[str]:
        return list(self._conn.notifies())


class LibpqConnector(PgConnectorBase):
    """PostgreSQL through libpq: the shared connector (``PgConnectorBase``) on ``PgConn``s,
    with ``BEGIN``/``COMMIT`` on the write connection."""

    _driver_error = libpq.PqError
    _listener = Listener

    def __init__(self, url: str, *, readonly: bool = False) -> None:
        if libpq.load() is None:
            raise MissingDriverError(f"libpq cannot be loaded; {INSTALL_HINT}")
        self.url = url
        self.readonly = readonly
        self.conninfo, self.schema = split_schema(url)
        self._params, self._timeout = self._connect_params()
        self._lock = _thread.RLock()  # _thread, not threading: `li wait` starts faster
        self._read_lock = _thread.allocate_lock()
        self._open()

    def _connect_params(self) -> tuple[dict[str, str], float | None]:
        """libpq's connection settings: the URL, then lirun's session options (the URL's
        own options come first in them), UTF-8, and the connect timeout (default 10 s)."""
        try:
            given = libpq.parse_conninfo(self.conninfo)
        except libpq.PqError as exc:
            from lirun.store.urls import check_url

            check_url(self.url)  # its message, where urlsplit refuses the URL too
            raise UsageError(f"the database URL {self.display_url} is not valid: {exc}") from None
        for port in given.get("port", "").split(","):
            if port and not (port.isdigit() and int(port) <= 65535):
                from lirun.store.urls import check_url

                check_url(self.url)
                raise UsageError(f"the database URL {self.display_url} has a bad port {port!r}")
        timeout = float(given.get("connect_timeout") or 10)
        params = {
            "dbname": self.conninfo,
            "options": session_options(given.get("options"), self.schema),
            "client_encoding": "UTF8",
            # PQresultMemorySize came with libpq 12, as tcp_user_timeout did
            **tcp_settings(given, user_timeout=hasattr(libpq.load(), "PQresultMemorySize")),
        }
        return params, (timeout if timeout > 0 else None)

    def connect(self) -> libpq.PgConn:
        """A new connection with lirun's session settings (also used by listeners)."""
        try:
            return libpq.PgConn(self._params, self._timeout)
        except libpq.PqError as exc:
            raise self._translate(exc) from None

    def _rows(self, conn: libpq.PgConn, sql: str, params: Params | None) -> list[Row]:
        return conn.execute(*_statement(sql, params)).rows

    def _is_broken(self, conn: libpq.PgConn) -> bool:
        return conn.broken

    def _translate(self, exc: BaseException) -> LirunError:
        sqlstate = getattr(exc, "sqlstate", None)
        lost = bool(getattr(exc, "lost", False))
        return translate(sqlstate, str(exc), self.url, operational=lost or is_operational(sqlstate))

    def _current_version(self) -> int:
        """The schema version in one round trip (outside a transaction: a missing table
        only fails this statement)."""
        sql = "SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations"
        try:
            return int(self._rows(self._conn, sql, None)[0]["v"])
        except libpq.PqError as exc:
            if exc.sqlstate == UNDEFINED_TABLE:
                return 0
            raise self._translate(exc) from exc

    def _begin(self, wait_seconds: float | None) -> libpq.PgConn:
        """The write connection inside an open transaction; a stale one is replaced once."""
        for first_try in (True, False):
            if self._conn is None:
                self._conn = self.connect()
            conn = self._conn
            try:
                conn.execute("BEGIN")
                if wait_seconds is not None:
                    ms = str(max(1, int(wait_seconds * 1000)))
                    conn.execute("SELECT set_config('lock_timeout', $1, true)", [ms])
                return conn
            except libpq.PqError as exc:
                self._rollback(conn)
                stale = self._discard_broken("_conn")
                if not (stale and first_try):
                    raise self._translate(exc) from exc
        raise AssertionError("unreachable")

    @staticmethod
    def _rollback(conn: libpq.PgConn) -> None:
        if not conn.broken:
            with suppress(libpq.PqError):
                conn.execute("ROLLBACK")

    @contextmanager
    def write(self, *, wait_seconds: float | None = None) -> Iterator[_LibpqTx]:
        if self.readonly:
            raise DatabaseUnavailableError(f"{self.display_url} was opened read-only")
        self._check_open()
        with self._lock:
            conn = self._begin(wait_seconds)
            try:
                yield _LibpqTx(self, conn)
                conn.execute("COMMIT")
            except libpq.PqError as exc:  # the COMMIT failed
                self._rollback(conn)
                self._discard_broken("_conn")
                raise self._translate(exc) from exc
            except BaseException:
                self._rollback(conn)
                self._discard_broken("_conn")
                raise

    def bind_list(self, values: Sequence[str]) -> object:
        """An array literal for ``CAST(:ids AS TEXT[])``, each element quoted."""
        quoted = ('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
        return "{" + ",".join(quoted) + "}"
