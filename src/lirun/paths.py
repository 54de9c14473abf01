"""Where lirun keeps its files. Read from the environment at call time, never at import."""

from __future__ import annotations

import os
import re
from pathlib import Path

from lirun.errors import UsageError


def lirun_home() -> Path:
    """``$LIRUN_HOME`` or ``~/.lirun``."""
    raw = os.environ.get("LIRUN_HOME")
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
        with os.scandir(pending_root()) as entries:
            return next(entries, None) is None
    except OSError:  # no such directory, or a home it cannot be (the command says so later)
        return True


def default_db_path() -> Path:
    return lirun_home() / "state.db"


DB_URL_HELP = (
    "state database (path, sqlite:///path or postgresql://...); "
    "default $LIRUN_DB_URL, else $LIRUN_HOME/state.db"
)


KNOWN_SCHEMES = ("sqlite", "postgresql", "postgres")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")


def resolve_db_url(url: str | os.PathLike[str] | None = None) -> str:
    """``url`` > ``$LIRUN_DB_URL`` > the default SQLite file, as a string.

    A ``scheme://`` lirun does not know is refused: taken for a path it once created a
    SQLite file named after the URL.
    """
    if url is not None and str(url) != "":
        resolved = os.fspath(url)
    else:
        resolved = os.environ.get("LIRUN_DB_URL") or str(default_db_path())
    scheme = _SCHEME.match(resolved)
    if scheme and scheme.group(1).lower() not in KNOWN_SCHEMES:
        raise UsageError(
            f"unsupported database URL scheme {scheme.group(1)}:// (a path, sqlite:///path or "
            "postgresql://... are accepted)"
        )
    return resolved
