"""Database URLs made safe to print: no backend module, no driver, imported by the CLI."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from lirun.errors import UsageError

_SECRET_PARAMS = ("password", "sslpassword")
_PG_SCHEMES = ("postgresql://", "postgres://")


def redact_url(url: str) -> str:
    """The URL with every password (user-info or ``?password=``) replaced by ``***``."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            host = netloc.rsplit("@", 1)[-1]
            netloc = f"{parts.username or ''}:***@{host}"
    except ValueError:  # not parseable (a broken IPv6 host): mask by pattern instead
        masked = re.sub(r"(://[^/@]*?:)[^/@]*@", r"\1***@", url)
        return re.sub(r"((?:ssl)?password=)[^&#]*", r"\1***", masked, flags=re.IGNORECASE)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(k.lower() in _SECRET_PARAMS for k, _ in query):
        safe = [(k, "***" if k.lower() in _SECRET_PARAMS else v) for k, v in query]
        parts = parts._replace(query=urlencode(safe, quote_via=quote, safe="*"))
    return urlunsplit(parts._replace(netloc=netloc))


def check_url(url: str) -> None:
    """Refuse a URL ``urlsplit`` cannot read, naming it without its password."""
    try:
        urlsplit(url).port  # noqa: B018 (parses host and port: a bad IPv6 host raises)
    except ValueError as exc:
        raise UsageError(
            f"the database URL {redact_url(url)} is not valid ({exc}); write it as "
            "postgresql://user:password@host:port/dbname"
        ) from None


def url_without_credentials(url: str) -> str | None:
    """The database URL with no password (user-info or query); None if it cannot be parsed.

    A SQLite path holds none. A nested ``li`` connects with it when the server needs no
    password from the URL (trust or peer auth, ``PGPASSFILE``, ``PGPASSWORD``).
    """
    if not url.startswith(_PG_SCHEMES):
        import os  # absolute: the child may run in another directory (--cwd)

        return url if url.startswith("sqlite:") else os.path.abspath(url)
    try:
        parts = urlsplit(url)
        host = parts.netloc.rsplit("@", 1)[-1]
        user = parts.netloc.rsplit("@", 1)[0].split(":", 1)[0] if "@" in parts.netloc else ""
        query = [
            (k, v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if k.lower() not in _SECRET_PARAMS
        ]
        netloc = f"{user}@{host}" if user else host
        return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query, quote_via=quote)))
    except ValueError:
        return None


def url_password(url: str) -> str | None:
    """The password a PostgreSQL URL gives (user-info, else ``?password=``), decoded as
    libpq decodes it; None when it gives none (or an empty one) or is not a PostgreSQL
    URL."""
    if not url.startswith(_PG_SCHEMES):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    userinfo = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else ""
    if ":" in userinfo:
        return unquote(userinfo.split(":", 1)[1]) or None
    # libpq decodes %XX only (a + stays a +), so parse_qsl would change the password.
    pairs = [item.partition("=") for item in parts.query.split("&")]
    given = [unquote(value) for key, _, value in pairs if unquote(key) == "password"]
    return (given[-1] or None) if given else None


def with_passfile(url: str, path: str) -> str:
    """The PostgreSQL ``url`` (one without a password) that reads its password from the
    libpq password file ``path``: ``?passfile=`` in place of any the URL had."""
    base, _, fragment = url.partition("#")
    base, _, query = base.partition("?")
    kept = [item for item in query.split("&") if item and unquote(item.split("=")[0]) != "passfile"]
    kept.append(f"passfile={quote(path, safe='/')}")
    return f"{base}?{'&'.join(kept)}" + (f"#{fragment}" if fragment else "")
