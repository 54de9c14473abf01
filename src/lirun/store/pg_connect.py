"""What every PostgreSQL connection is opened with: the URL's own ``schema=`` parameter
taken out, lirun's session options, and TCP settings that notice a silent peer.

Pure functions of the URL and the settings (no driver here); ``postgres.py`` hands
their results to psycopg, and the schedule queue opens its connections with them too.
"""

from __future__ import annotations

import time
from typing import Any

from lirun.errors import DatabaseUnavailableError
from lirun.paths import is_keyword_conninfo
from lirun.store import conninfo
from lirun.store.bounds import connect_seconds, process_name
from lirun.store.retry import write_retry_seconds

_SCHEMA_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz_")
_SCHEMA_REST = _SCHEMA_FIRST | frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")


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

    The other parameters are kept exactly as written (psycopg hands them to libpq, which
    decodes them); ``urllib`` would re-encode them and drop an empty host's ``//``.
    A keyword string (``host=… schema=s``) loses its ``schema`` word the same way.
    """
    if is_keyword_conninfo(url):
        schema = conninfo.last_value(url, "schema")
        _check_schema(schema)
        return conninfo.without(url, "schema"), schema
    base, hashmark, fragment = url.partition("#")
    base, question, query = base.partition("?")
    items = query.split("&") if question else []
    kept = [item for item in items if item and _unquote(item.split("=", 1)[0]) != "schema"]
    given = [i.partition("=")[2] for i in items if i and i not in kept]
    schema = _unquote(given[0]) if given else None
    _check_schema(schema)
    rest = base + (f"?{'&'.join(kept)}" if kept else "")
    return rest + (hashmark + fragment), schema


def _check_schema(schema: str | None) -> None:
    if schema is not None and not is_schema_name(schema):
        raise DatabaseUnavailableError(
            f"schema {schema!r} in the database URL is not a plain lower-case identifier"
        )


def writable_target(given: dict[str, Any]) -> dict[str, str]:
    """``target_session_attrs=read-write`` when the URL (parsed into ``given``) names
    several hosts and does not say which it wants: libpq then tries them in order and
    keeps the first that accepts writes (lirun always writes), so a URL naming a standby
    first, or a primary that failed over, still reaches the primary."""
    several = any("," in str(given.get(key) or "") for key in conninfo.MULTI_HOST_KEYS)
    if several and not given.get("target_session_attrs"):
        return {"target_session_attrs": "read-write"}
    return {}


def host_list_problem(given: dict[str, Any]) -> str | None:
    """What libpq would refuse in the host and port lists (None: nothing), said before any
    connection: a mistyped list is the user's to fix, not an outage to wait out."""
    hosts = str(given.get("host") or given.get("hostaddr") or "").count(",") + 1
    if given.get("host") and given.get("hostaddr"):
        addrs = str(given["hostaddr"]).count(",") + 1
        if addrs != hosts:
            return f"{hosts} host names but {addrs} host addresses"
    ports = str(given.get("port") or "").count(",") + 1
    if ports not in (1, hosts):
        return f"{ports} ports for {hosts} hosts (give one port, or one per host)"
    return None


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


def statement_seconds() -> float:
    """The server's ``statement_timeout`` of lirun's sessions (0: off): the setting, but
    never shorter than a lock wait (a writer that waits out a held lock must not be cut
    short by it)."""
    from lirun.settings import env_db_statement_timeout

    configured = env_db_statement_timeout()
    if configured <= 0:
        return 0.0
    return max(configured, write_retry_seconds() + 1.0)


def session_options(given: str | None, schema: str | None) -> str:
    """The ``options`` of every session: the URL's own first, then lirun's (which win).

    A writer waits for a row lock as long as a SQLite writer waits for the file lock; a
    statement runs at most ``statement_seconds`` (the client-side limit is longer), unless
    the URL's own options set a ``statement_timeout``: the URL's is kept.
    """
    settings = [given or ""]
    settings.append(f"-c lock_timeout={max(1, int(write_retry_seconds() * 1000))}")
    if "statement_timeout" not in (given or ""):
        settings.append(f"-c statement_timeout={int(statement_seconds() * 1000)}")
    if schema:
        settings.append(f"-c search_path={schema}")
    return " ".join(s for s in settings if s)


def application_name(given: dict[str, Any], part: str | None = None) -> dict[str, str]:
    """``application_name`` for a connection, unless the URL names one."""
    if given.get("application_name"):
        return {}
    return {"application_name": process_name() + (f":{part}" if part else "")}


def connect_settings(given: dict[str, Any], *, part: str | None = None) -> dict[str, Any]:
    """The bounds and the name a connection gets: its connect timeout (the URL's, else
    ``LIRUN_DB_CONNECT_TIMEOUT``; cut to a caller's deadline) and its name (unless the URL
    names it)."""
    from lirun.settings import env_db_connect_timeout

    settings: dict[str, Any] = dict(application_name(given, part))
    try:
        configured = float(given.get("connect_timeout") or env_db_connect_timeout())
    except ValueError:  # libpq refuses it itself, with its own words
        return settings
    seconds = connect_seconds(configured, time.monotonic())
    if seconds:
        settings["connect_timeout"] = seconds
    return settings


def passfile_entry(password: str) -> str:
    """The one line of a libpq password file that gives ``password`` to any server,
    port, database and user (``*``): the file is named only by the URL it was made for.
    ``\\`` and ``:`` are escaped with a backslash, as the format requires; a line break
    cannot be written in the format, so it is refused."""
    if "\n" in password or "\r" in password:
        raise ValueError("a password with a line break cannot be written to a password file")
    escaped = password.replace("\\", "\\\\").replace(":", "\\:")
    return f"*:*:*:*:{escaped}\n"
