"""Where lirun keeps its files: under ``$LIRUN_HOME`` (``settings.env_home``, read at call
time, never at import)."""

from __future__ import annotations

import os

from lirun.errors import UsageError
from lirun.settings import env_db_url, env_home

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

# pathlib (with fnmatch, re, urllib.parse) is imported by the functions that return a
# Path; the `li wait` start-up path uses the string forms below only.


def _home() -> str:
    raw = env_home()
    return os.path.expanduser(raw) if raw else os.path.join(os.path.expanduser("~"), ".lirun")


def lirun_home() -> Path:
    """``$LIRUN_HOME`` or ``~/.lirun``."""
    from pathlib import Path

    raw = env_home()
    return Path(raw).expanduser() if raw else Path.home() / ".lirun"


def runs_root() -> Path:
    """``<home>/runs``: one state directory per execution."""
    return lirun_home() / "runs"


def pending_root() -> Path:
    """``<home>/pending``: outcomes spooled by a teardown that could not write."""
    return lirun_home() / "pending"


def nothing_pending() -> bool:
    """One listing of ``pending_root()`` (the `li wait` start-up path: no other import)."""
    try:
        with os.scandir(os.path.join(_home(), "pending")) as entries:
            return next(entries, None) is None
    except OSError:  # no such directory, or a home it cannot be (the command says so later)
        return True


def default_db_path() -> Path:
    return lirun_home() / "state.db"


def default_db_location() -> str:
    """``default_db_path()`` as a string, without importing pathlib."""
    return os.path.join(_home(), "state.db")


DB_URL_HELP = (
    "state database (path, sqlite:///path or postgresql://...); "
    "default $LIRUN_DB_URL, else $LIRUN_HOME/state.db"
)


KNOWN_SCHEMES = ("sqlite", "postgresql", "postgres")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def _scheme(url: str) -> str | None:
    """The ``scheme`` of ``scheme://…`` (a letter, then at least one of ``[A-Za-z0-9+.-]``).

    String tests rather than a regular expression: ``re`` costs `li wait` start-up time.
    """
    name, sep, _ = url.partition("://")
    if not sep or len(name) < 2 or not name[0].isascii() or not name[0].isalpha():
        return None
    return name if all(c in _SCHEME_CHARS for c in name) else None


# libpq's keywords most often written first in a ``key=value`` connection string.
_CONNINFO_KEYWORDS = frozenset(
    [
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "password",
        "passfile",
        "sslmode",
        "sslpassword",
        "service",
        "options",
        "application_name",
        "connect_timeout",
    ]
)


def _is_keyword_conninfo(value: str) -> bool:
    """Whether ``value`` is a libpq ``key=value`` string: a word starts ``host=``,
    ``password =``, ... (a path like ``/data/user=x/state.db`` is not one)."""
    if "://" in value or "=" not in value:
        return False
    while " =" in value or "= " in value:
        value = value.replace(" =", "=").replace("= ", "=")
    return any(w.partition("=")[0] in _CONNINFO_KEYWORDS for w in value.split() if "=" in w)


def resolve_db_url(url: str | os.PathLike[str] | None = None) -> str:
    """``url`` > ``$LIRUN_DB_URL`` > the default SQLite file, as a string.

    A ``scheme://`` lirun does not know is refused: taken for a path it once created a
    SQLite file named after the URL.
    """
    if url is not None and str(url) != "":
        resolved = os.fspath(url)
    else:
        resolved = env_db_url() or default_db_location()
    if _is_keyword_conninfo(resolved):
        # Not echoed: it may hold a password, and taken for a path it named a SQLite file.
        raise UsageError(
            "the database is given as a keyword/value connection string (host=... "
            "password=...), which lirun does not read; write it as "
            "postgresql://user:password@host:port/dbname"
        )
    scheme = _scheme(resolved)
    if scheme and scheme.lower() not in KNOWN_SCHEMES:
        raise UsageError(
            f"unsupported database URL scheme {scheme}:// (a path, sqlite:///path or "
            "postgresql://... are accepted)"
        )
    return resolved
