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
    DatabaseUnavailableError,
    LirunError,
)
from lirun.store.urls import redact_url, scrub

UNIQUE_VIOLATION = "23505"
LOCK_NOT_AVAILABLE = "55P03"
UNDEFINED_TABLE = "42P01"
QUERY_CANCELED = "57014"  # also the server's statement_timeout
# The client-side limit's words (``pg_bounded``) and libpq's when connect_timeout expires:
# the server took the connection but did not answer (a frozen server, whose kernel still
# answers TCP).
NO_ANSWER = "no answer within"
CONNECT_TIMEOUT = "connection timeout expired"
# libpq's words for a server that ``target_session_attrs=read-write`` turned away: a
# standby (or a read-only primary). With no other server taking writes, a failover is
# under way (``retry.until_primary`` waits for the promotion).
NO_PRIMARY = "session is read-only"
# libpq's words when the server asks for a password it was not given, or refuses the one
# given: not a lost connection, so nothing retries it.
NO_PASSWORD = "no password supplied"
WRONG_PASSWORD = "password authentication failed"
# What keeps libpq from reading the password file a URL names (``passfile=``).
PASSFILE_MISSING = "missing or unreadable"
PASSFILE_OPEN = "readable by others"  # libpq ignores a file group or others may read


def translate(
    sqlstate: str | None,
    text: str,
    url: str,
    *,
    operational: bool,
    passfile: str | None = None,
    passfile_problem: str | None = None,
) -> LirunError:
    """The lirun error for a driver error: its SQLSTATE, its first line, and whether the
    driver saw the connection (not the statement) fail; for a password the server asked
    for and did not get, the password file the URL names (``passfile``) and what is wrong
    with it (``passfile_problem``: ``PASSFILE_MISSING``, ``PASSFILE_OPEN``). The text
    may echo a piece of the URL: the URL's passwords are masked in it too."""
    text = scrub(text, url)
    if operational and NO_PASSWORD in text:
        return DatabaseUnavailableError(no_password(url, passfile, passfile_problem))
    if operational and WRONG_PASSWORD in text:
        return DatabaseUnavailableError(
            f"cannot use PostgreSQL at {redact_url(url)}: {text}; check the password"
        )
    if sqlstate == UNIQUE_VIOLATION:
        return ConflictError(f"a record with that id already exists ({text})")
    if sqlstate == LOCK_NOT_AVAILABLE:
        return DatabaseBusyError(
            f"a record at {redact_url(url)} stayed locked by another session past the lock "
            f"timeout ({text}); find the long transaction, stop it, and retry"
        )
    if sqlstate == QUERY_CANCELED:
        return DatabaseBusyError(
            f"a statement at {redact_url(url)} ran past lirun's statement timeout ({text}); "
            "see LIRUN_DB_STATEMENT_TIMEOUT (docs/configuration.md)"
        )
    if operational and (NO_ANSWER in text or CONNECT_TIMEOUT in text):
        return DatabaseConnectionLostError(
            f"PostgreSQL at {redact_url(url)} did not answer ({text}): frozen, overloaded "
            "or cut off? (limits: LIRUN_DB_CONNECT_TIMEOUT, LIRUN_DB_STATEMENT_TIMEOUT)"
        )
    if operational and NO_PRIMARY in text:
        return DatabaseConnectionLostError(
            f"no server at {redact_url(url)} accepts writes ({text}): only a standby "
            "answered, and no primary came within LIRUN_WRITE_RETRY_SECONDS; promote one, "
            "or name the primary in the URL"
        )
    if operational:
        return DatabaseConnectionLostError(
            f"cannot use PostgreSQL at {redact_url(url)}: {text}; check the URL, the server "
            "and the credentials"
        )
    return DatabaseError(f"database error on {redact_url(url)}: {text}")


def no_password(url: str, passfile: str | None, problem: str | None) -> str:
    """What to say when the server asks for a password and the connection had none."""
    where = f"cannot use PostgreSQL at {redact_url(url)}: the server asks for a password"
    if passfile is None:
        return (
            f"{where} and none was given (not in the URL, PGPASSWORD, ~/.pgpass or "
            "PGPASSFILE); inside a run, only an agent of a team is given one, in a "
            "credential file its LIRUN_DB_URL names (docs/teams.md)"
        )
    if problem == PASSFILE_OPEN:
        return (
            f"{where}; the password file {passfile} the URL names is readable by others, "
            f"so libpq ignores it: chmod 600 {passfile}"
        )
    if problem is not None:
        return (
            f"{where} and the password file {passfile} the URL names is {problem} (a "
            "run's credential file exists only while its run runs, and only its user "
            "can read it)"
        )
    return f"{where}; the password file {passfile} the URL names has none for this server"


def first_line(text: str, fallback: str) -> str:
    """The first line of a driver's message (``fallback`` when it has none)."""
    text = text.strip()
    return text.splitlines()[0] if text else fallback
