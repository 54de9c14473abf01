"""The queue schema on PostgreSQL: where procrastinate's tables live, and the one-time
making and version stamp of it. The SQL is in ``sql/postgres/queue/queue.sql``.

The store knows nothing of procrastinate: ``ensure_queue_schema`` is handed the text of
procrastinate's schema and its version by the caller (``schedules/procrastinate_adapter``).
Imported only when a PostgreSQL queue is used (it imports psycopg at the top).
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import psycopg
from psycopg import sql

from lirun.errors import DatabaseConnectionLostError, DatabaseError
from lirun.store.bounds import unbounded
from lirun.store.pg_bounded import BoundedConnection
from lirun.store.pg_connect import (
    application_name,
    split_schema,
    statement_seconds,
    writable_target,
)
from lirun.store.queries import parse_queries, to_pyformat

DEFAULT_QUEUE_SCHEMA = "lirun_queue"
# TCP settings of queue connections: a cut link is noticed in seconds, not minutes.
TCP_SETTINGS = {
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
    "connect_timeout": "5",
}
_STAMP_PREFIX = "procrastinate "


@cache
def queue_queries() -> dict[str, str]:
    path = os.path.join(os.path.dirname(__file__), "sql", "postgres", "queue", "queue.sql")
    with open(path, encoding="utf-8") as file:
        return parse_queries(file.read())


def queue_schema_for(schema: str | None) -> str:
    """The schema of procrastinate's tables for lirun's ``schema`` (None: the default)."""
    if not schema:
        return DEFAULT_QUEUE_SCHEMA
    return f"{schema[: 63 - len('_queue')]}_queue"


def queue_conninfo(url: str) -> tuple[str, str]:
    """(conninfo of the queue's connections, queue schema) for a lirun PostgreSQL URL."""
    rest, schema = split_schema(url)
    queue_schema = queue_schema_for(schema)
    params = psycopg.conninfo.conninfo_to_dict(rest)
    timeout = f"-c statement_timeout={int(statement_seconds() * 1000)}"
    options = f"{params.get('options') or ''} {timeout} -c search_path={queue_schema}".strip()
    merged: dict[str, Any] = {
        **TCP_SETTINGS,
        **application_name(params, "queue"),
        **params,
        **writable_target(params),
        "options": options,
    }
    return psycopg.conninfo.make_conninfo("", **merged), queue_schema


def minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def stamp_conflict(queue_schema: str, stamp: str, version: str) -> str | None:
    """Why a schema stamped ``stamp`` cannot be used with procrastinate ``version`` (pure)."""
    if not stamp.startswith(_STAMP_PREFIX):
        return None
    found = stamp.removeprefix(_STAMP_PREFIX).strip()
    if minor(found) == minor(version):
        return None
    return (
        f"the queue schema {queue_schema} was made by procrastinate {found}, but "
        f"procrastinate {version} is installed; apply procrastinate's "
        "migrations to it (or install the version that made it)"
    )


def _ddl(name: str, **parts: sql.Composable) -> sql.Composed:
    return sql.SQL(queue_queries()[name]).format(**parts)


def ensure_queue_schema(conninfo: str, queue_schema: str, schema_sql: str, version: str) -> None:
    """Make the queue schema and, from ``schema_sql`` (procrastinate's own), its objects,
    once, under an advisory lock; stamp it with ``version``. A schema another minor
    version made is refused (``DatabaseError``)."""
    queries, name = queue_queries(), sql.Identifier(queue_schema)
    try:  # the DDL may take its time (and waits for a concurrent maker's lock)
        with unbounded(), BoundedConnection.connect(conninfo) as conn:
            conn.execute(queries["lift_statement_timeout"])
            conn.execute(
                to_pyformat(queries["lock_queue_schema"]), {"lock_key": f"lirun:{queue_schema}"}
            )
            conn.execute(_ddl("create_queue_schema", schema=name))
            row = conn.execute(
                to_pyformat(queries["queue_schema_state"]), {"schema": queue_schema}
            ).fetchone()
            assert row is not None
            present, stamp = bool(row[0]), row[1] or ""
            if not present:
                conn.execute(schema_sql.encode())
                stamp_text = sql.Literal(_STAMP_PREFIX + version)
                conn.execute(_ddl("stamp_queue_schema", schema=name, stamp=stamp_text))
                return
    except psycopg.OperationalError as exc:
        raise DatabaseConnectionLostError(
            f"the queue schema {queue_schema} could not be checked: {exc}".strip()
        ) from None
    conflict = stamp_conflict(queue_schema, stamp, version)
    if conflict:
        raise DatabaseError(conflict)
