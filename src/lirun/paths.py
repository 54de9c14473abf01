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
    "state database (a path, sqlite:///path, postgresql://... or host=... dbname=...); "
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


# libpq's keywords most often written in a ``key=value`` connection string.
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
        "target_session_attrs",
    ]
)
_KEYWORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz_")
# What a path that does not exist yet must end with to be taken for a SQLite file: the
# extension, its version digit taken off (.db3 is .db).
DB_FILE_EXTENSIONS = ("db", "sqlite")
DB_FORMS = (
    "postgresql://user@host1:5432,host2:5432/dbname, a keyword string "
    "(host=host1,host2 port=5432,5432 dbname=dbname), sqlite:///path, or a file path "
    "(one with a '/', or a name ending .db or .sqlite)"
)


def is_keyword_conninfo(value: str) -> bool:
    """Whether ``value`` is a libpq ``key=value`` connection string: it starts with a
    lower-case word and ``=``, or one of its words is ``host=``, ``password =``, ...
    (a path like ``/data/user=x/state.db`` is neither)."""
    head = value.lstrip().partition("=")
    word = head[0].rstrip()
    if head[1] and word and set(word) <= _KEYWORD_CHARS:
        return True
    if "://" in value or "=" not in value:
        return False
    while " =" in value or "= " in value:
        value = value.replace(" =", "=").replace("= ", "=")
    return any(w.partition("=")[0] in _CONNINFO_KEYWORDS for w in value.split() if "=" in w)


def looks_like_db_file(value: str) -> bool:
    """A bare value lirun opens as a SQLite file: ``sqlite:…``, ``:memory:``, one with a
    ``/`` (or ``~``), one ending in a database suffix, or a file that exists. Anything
    else (``localhost``, ``h1:5432,h2:5433``) is a mistyped URL, not a file to create."""
    return (
        value.startswith(("sqlite:", "~"))
        or value == ":memory:"
        or os.sep in value
        or _extension(value) in DB_FILE_EXTENSIONS
        or os.path.isfile(value)
    )


def _extension(value: str) -> str:
    name = os.path.basename(value)
    return name.rpartition(".")[2].lower().rstrip("0123456789") if "." in name else ""


def resolve_db_url(url: str | os.PathLike[str] | None = None) -> str:
    """``url`` > ``$LIRUN_DB_URL`` > the default SQLite file, as a string.

    A PostgreSQL URL or keyword string, a ``sqlite:`` URL or a path that looks like a
    database file; anything else is refused (taken for a path, it once became a new
    SQLite file named after it, where nobody looked for the record).
    """
    if url is not None and str(url) != "":
        resolved = os.fspath(url)
    else:
        resolved = env_db_url() or default_db_location()
    if is_keyword_conninfo(resolved):
        return resolved
    scheme = _scheme(resolved)
    if scheme and scheme.lower() not in KNOWN_SCHEMES:
        raise UsageError(f"unsupported database URL scheme {scheme}:// (accepted: {DB_FORMS})")
    if scheme is None and not looks_like_db_file(resolved):
        # Echoed only when it cannot hold a password (no user-info, no parameter).
        shown = f" {resolved!r}" if "@" not in resolved else ""
        raise UsageError(
            f"the database{shown} is neither a URL, a keyword string nor a database "
            f"file; give {DB_FORMS}"
        )
    return resolved
