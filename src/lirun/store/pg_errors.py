"""The one table that turns a PostgreSQL error into a lirun error.

A pure decision on what the driver reported: the SQLSTATE, the message's first line and
whether the connection (not the statement) failed. ``postgres.py`` reads those off
psycopg's exceptions.
"""

from __future__ import annotations

from lirun.errors import (
    ConflictError,
    DatabaseBusyError,
    DatabaseConnectionLostError,
    DatabaseError,
    LirunError,
)
from lirun.store.urls import redact_url, scrub

UNIQUE_VIOLATION = "23505"
LOCK_NOT_AVAILABLE = "55P03"
UNDEFINED_TABLE = "42P01"


def translate(sqlstate: str | None, text: str, url: str, *, operational: bool) -> LirunError:
    """The lirun error for a driver error: its SQLSTATE, its first line, and whether the
    driver saw the connection (not the statement) fail. That text may echo a piece of
    the URL: the URL's passwords are masked in it too."""
    text = scrub(text, url)
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
    """The first line of a driver's message (``fallback`` when it has none)."""
    text = text.strip()
    return text.splitlines()[0] if text else fallback
