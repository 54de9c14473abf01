"""What the two PostgreSQL connectors share, whichever driver runs the SQL.

The URL's own ``schema=`` parameter, the settings every session gets, the one table that
turns a SQLSTATE into a lirun error, the schema check (and migration) on open, and the
reads that replace a connection the server dropped. ``postgres.py`` runs it on psycopg,
``postgres_libpq.py`` on libpq through ctypes; each supplies only how to connect, run a
statement and tell a dropped connection.

No driver, ``urllib`` or ``re`` here: the libpq connector is on `li wait`'s start-up path.
"""

from __future__ import annotations

from contextlib import suppress

from lirun.errors import (
    ConflictError,
    DatabaseBusyError,
    DatabaseConnectionLostError,
    DatabaseError,
    DatabaseMissingError,
    DatabaseUnavailableError,
    LirunError,
    SchemaTooNewError,
)
from lirun.hints import Any
from lirun.store.connector import Params, Row, Tx, apply_migrations
from lirun.store.queries import latest_version
from lirun.store.retry import write_retry_seconds

MIGRATION_LOCK_KEY = 0x6C6972756E  # "lirun": serializes concurrent migrators
UNIQUE_VIOLATION = "23505"
LOCK_NOT_AVAILABLE = "55P03"
UNDEFINED_TABLE = "42P01"
# SQLSTATE classes psycopg raises as OperationalError (psycopg.errors._base_exc_map): the
# server or the connection failed, not the statement; lirun calls them a lost connection.
_OPERATIONAL = frozenset(
    ("08", "27", "28", "2F", "38", "39", "3B", "40", "53", "54", "55", "57", "58", "F", "H")
)
_SCHEMA_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz_")
_SCHEMA_REST = _SCHEMA_FIRST | frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")


def is_operational(sqlstate: str | None) -> bool:
    """True for a SQLSTATE of a class that means the server or connection failed."""
    return bool(sqlstate) and (sqlstate[:2] in _OPERATIONAL or sqlstate[:1] in _OPERATIONAL)  # type: ignore[index]


def translate(sqlstate: str | None, text: str, url: str, *, operational: bool) -> LirunError:
    """The lirun error for a driver error: its SQLSTATE, its first line, and whether the
    driver saw the connection (not the statement) fail."""
    from lirun.store.urls import redact_url

    if sqlstate == UNIQUE_VIOLATION:
        return ConflictError(f"a record with that id already exists ({text})")
    if sqlstate == LOCK_NOT_AVAILABLE:
        return DatabaseBusyError(
            f"a record at {redact_url(url)} stayed locked by another session past the lock "
            f"timeout ({text}); find the long transaction, stop it, and retry"
        )
    if operational:
        return DatabaseConnectionLostError(
            f"cannot use PostgreSQL at {redact_url(url)}: {text}; check the URL, the server "
            "and the credentials"
        )
    return DatabaseError(f"database error on {redact_url(url)}: {text}")


def first_line(text: str, fallback: str) -> str:
    text = text.strip()
    return text.splitlines()[0] if text else fallback


def _unquote(text: str) -> str:
    """``%XX`` and ``+`` decoded as ``urllib.parse.parse_qsl`` does."""
    text = text.replace("+", " ")
    if "%" not in text:
        return text
    head, *rest = text.split("%")
    out = bytearray(head.encode())
    for part in rest:
        if len(part) >= 2 and part[0] in _HEX and part[1] in _HEX:
            out += bytes.fromhex(part[:2]) + part[2:].encode()
        else:  # not an escape: kept as written
            out += b"%" + part.encode()
    return out.decode("utf-8", "replace")


def split_schema(url: str) -> tuple[str, str | None]:
    """Remove lirun's own ``schema=`` query parameter; return (conninfo URL, schema).

    The other parameters are kept as written (libpq and psycopg decode them).
    """
    base, hashmark, fragment = url.partition("#")
    base, question, query = base.partition("?")
    items = query.split("&") if question else []
    kept = [item for item in items if item and _unquote(item.split("=", 1)[0]) != "schema"]
    given = [i.partition("=")[2] for i in items if i and i not in kept]
    schema = _unquote(given[0]) if given else None
    if schema is not None and not is_schema_name(schema):
        raise DatabaseUnavailableError(
            f"schema {schema!r} in the database URL is not a plain lower-case identifier"
        )
    rest = base + (f"?{'&'.join(kept)}" if kept else "")
    return rest + (hashmark + fragment), schema


def is_schema_name(text: str) -> bool:
    """``[a-z_][a-z0-9_]{0,62}``: safe to quote into ``search_path`` and DDL."""
    return 0 < len(text) <= 63 and text[0] in _SCHEMA_FIRST and set(text) <= _SCHEMA_REST


# TCP settings every connection gets unless the URL sets them: a peer gone silent (a cut
# link, a frozen host) shows as a lost connection within about 20 s instead of after the
# kernel's ~15 minutes of retransmits, so a worker learns well within its lease that it
# cannot renew it. ``tcp_user_timeout`` (unacknowledged data) needs libpq 12 or newer.
KEEPALIVES = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
}
USER_TIMEOUT_MS = "20000"


def tcp_settings(given: dict[str, Any], *, user_timeout: bool) -> dict[str, str]:
    """The TCP settings the URL (parsed into ``given``) does not set itself."""
    wanted = dict(KEEPALIVES)
    if user_timeout:
        wanted["tcp_user_timeout"] = USER_TIMEOUT_MS
    return {key: value for key, value in wanted.items() if not given.get(key)}


def session_options(given: str | None, schema: str | None) -> str:
    """The ``options`` of every session: the URL's own first, then lirun's (which win).

    A writer waits for a row lock as long as a SQLite writer waits for the file lock.
    """
    settings = [given or ""]
    settings.append(f"-c lock_timeout={max(1, int(write_retry_seconds() * 1000))}")
    if schema:
        settings.append(f"-c search_path={schema}")
    return " ".join(s for s in settings if s)


class PgConnectorBase:
    """The driver-free half of a PostgreSQL connector (see the module docstring).

    A write connection and a read connection (opened on first read), each with a lock.
    Reads get their own connection so that a read in this process never queues behind a
    write of this process that waits for another process's row lock. A subclass sets
    ``_driver_error`` and implements ``connect``, ``_rows``, ``_is_broken``,
    ``_translate``, ``_current_version`` and ``write``.
    """

    dialect = "postgres"
    supports_notify = True
    runs_inline = False  # every call waits on the network
    _driver_error: type[BaseException] = Exception
    url: str
    readonly: bool
    schema: str | None
    _conn: Any
    _read_conn: Any
    _read_lock: Any
    _lock: Any
    _closed: bool

    @property
    def display_url(self) -> str:
        """The URL with its passwords masked (computed when first printed)."""
        shown = self.__dict__.get("_display_url")
        if shown is None:
            from lirun.store.urls import redact_url

            shown = self.__dict__["_display_url"] = redact_url(self.url)
        return str(shown)

    def _open(self) -> None:
        """Connect the writer, check (and migrate) the schema; a reader keeps one connection."""
        self._read_conn = None
        self._closed = False  # closed by its owner: never reconnect
        self._conn = self.connect()
        try:
            self._check_and_migrate()
        except BaseException:
            self._conn.close()
            raise
        if self.readonly:  # a reader never writes: its one connection serves the reads
            self._read_conn, self._conn = self._conn, None

    # -- driver hooks ---------------------------------------------------------------

    def connect(self) -> Any:
        raise NotImplementedError

    def _rows(self, conn: Any, sql: str, params: Params | None) -> list[Row]:
        raise NotImplementedError

    def _is_broken(self, conn: Any) -> bool:
        raise NotImplementedError

    def _translate(self, exc: BaseException) -> LirunError:
        raise NotImplementedError

    def _current_version(self) -> int:
        raise NotImplementedError

    def write(self, *, wait_seconds: float | None = None) -> Any:
        raise NotImplementedError

    # -- opening --------------------------------------------------------------------

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
        with self.write() as tx:
            tx.query("SELECT pg_advisory_xact_lock(:key)", {"key": MIGRATION_LOCK_KEY})
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
                    return self._rows(self._read_conn, sql, params)
                except self._driver_error as exc:
                    stale = self._discard_broken("_read_conn")
                    if not (stale and first_try):
                        raise self._translate(exc) from exc
            raise AssertionError("unreachable")

    def _discard_broken(self, attr: str) -> bool:
        """Forget the connection in ``attr`` if the server dropped it; True if it did."""
        conn = getattr(self, attr)
        if conn is None or not self._is_broken(conn):
            return False
        with suppress(Exception):  # a broken connection has nothing to release
            conn.close()
        setattr(self, attr, None)
        return True

    def change_token(self) -> object:
        return None

    def listen(self, channel: str) -> PgListener:
        """A new connection listening on ``channel`` (errors: typed, as everywhere here)."""
        return self._listener(self, channel)

    _listener: type[PgListener]

    def close(self) -> None:
        self._closed = True
        with self._lock:
            if self._conn is not None:
                self._conn.close()
        with self._read_lock:
            if self._read_conn is not None:
                self._read_conn.close()


class PgListener:
    """LISTEN on its own connection, every driver error translated (``li wait``'s waker).

    ``fileno()`` lets a waiter sleep in ``select`` on the connection and a stop pipe
    together; ``take()`` returns the payloads that arrived, without blocking. A driver
    implements ``_payloads``.
    """

    def __init__(self, connector: PgConnectorBase, channel: str) -> None:
        self._connector = connector
        self._conn = connector.connect()
        try:
            self._conn.execute(f"LISTEN {channel}")
        except connector._driver_error as exc:
            self.close()
            raise connector._translate(exc) from exc

    def fileno(self) -> int:
        try:
            return int(self._conn.fileno())
        except self._connector._driver_error as exc:  # the connection is lost
            raise self._connector._translate(exc) from exc

    def wait_readable(self, other: int | None, timeout: float) -> list[int]:
        """Block until the connection (or ``other``) is readable; the ready descriptors."""
        return wait_readable(self.fileno(), other, timeout, self._connector.display_url)

    def take(self) -> list[str]:
        """Payloads received so far (reading what the socket holds; never blocks)."""
        try:
            return self._payloads()
        except self._connector._driver_error as exc:
            raise self._connector._translate(exc) from exc

    def _payloads(self) -> list[str]:
        raise NotImplementedError

    def close(self) -> None:
        with suppress(Exception):  # a broken connection has nothing to release
            self._conn.close()


def wait_readable(fileno: int, other: int | None, timeout: float, display_url: str) -> list[int]:
    """Block until ``fileno`` (or ``other``) is readable; the ready descriptors."""
    import select

    fds = [fileno, *([] if other is None else [other])]
    try:
        return select.select(fds, [], [], timeout)[0]
    except (OSError, ValueError) as exc:  # the socket went away under us
        raise DatabaseConnectionLostError(
            f"lost the listening connection to {display_url}: {exc}"
        ) from exc
