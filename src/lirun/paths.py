"""Where lirun keeps its files. Read from the environment at call time, never at import."""

from __future__ import annotations

import os
from pathlib import Path


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
    except (FileNotFoundError, NotADirectoryError):
        return True


def default_db_path() -> Path:
    return lirun_home() / "state.db"


DB_URL_HELP = (
    "state database (path, sqlite:///path or postgresql://...); "
    "default $LIRUN_DB_URL, else $LIRUN_HOME/state.db"
)


def resolve_db_url(url: str | os.PathLike[str] | None = None) -> str:
    """``url`` > ``$LIRUN_DB_URL`` > the default SQLite file, as a string."""
    if url is not None and str(url) != "":
        return os.fspath(url)
    env = os.environ.get("LIRUN_DB_URL")
    if env:
        return env
    return str(default_db_path())
