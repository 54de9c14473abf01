"""The SQLite database file on disk: its URL forms, its creation, what it must not be.

Once this process holds a connection to the file, nothing here may open it: closing any
descriptor of a file drops every POSIX lock the process holds on it, SQLite's included,
and a waiter that did so once wrote a reap into a WAL another process had already
checkpointed and deleted. So the file is created whole under a temporary name (mode
0600 from its first byte, already in WAL mode) and linked into place, and an existing
file is only ever looked at with ``stat``.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from contextlib import suppress

from lirun.errors import DatabaseUnavailableError, UsageError
from lirun.logs import get_logger

# Paths are strings here (os.path), not pathlib: opening the database is on the start-up
# path of every `li` command, and pathlib brings re and urllib.parse with it.
SIDE_FILES = ("-wal", "-shm")
log = get_logger(__name__)
_URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def sqlite_path_from_url(url: str) -> str:
    """``sqlite:///abs``, ``sqlite:////abs``, ``sqlite:rel/path`` or a bare path → a path."""
    if url.startswith("sqlite://"):
        url = url[len("sqlite://") :]
        if url.startswith("//"):
            url = "/" + url.lstrip("/")  # four slashes: the URL form of an absolute path
    elif url.startswith("sqlite:"):
        url = url[len("sqlite:") :]
    if not url:
        raise UsageError("the sqlite: database URL names no file; write sqlite:///path/state.db")
    if "\x00" in url:
        raise UsageError("the database path contains a NUL character")
    return os.path.expanduser(url)


def _quote(text: str) -> str:
    """``urllib.parse.quote(text, safe="/")`` without importing urllib (and re)."""
    raw = text.encode("utf-8")
    return "".join(chr(b) if b in _URI_SAFE else f"%{b:02X}" for b in raw)


def readonly_uri(path: str, *, immutable: bool = False) -> str:
    """A ``file:`` URI that opens ``path`` read-only (``?`` and ``#`` in names quoted)."""
    target = _quote(os.path.abspath(path))
    return f"file:{target}?mode=ro" + ("&immutable=1" if immutable else "")


def file_kind(path: str) -> str | None:
    """None when nothing is there, "file" for a regular file; refuses anything else."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISREG(mode):
        return "file"
    what = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
    raise DatabaseUnavailableError(
        f"{path} is {what}, not a lirun database file; move it away or pass --db / set "
        "LIRUN_DB_URL to the database file you mean"
    )


def ensure_database_file(path: str) -> None:
    """Make sure ``path`` is a database file, creating it if absent (OSError on failure).

    A 0-byte file is what a crash or a full disk leaves of a database: it is moved aside,
    with a warning naming where, instead of being silently reused as a new database.
    """
    if file_kind(path) is not None:
        if os.stat(path).st_size > 0:
            return
        _set_aside_empty(path)
    _create(path)


def _sibling(path: str, name: str) -> str:
    return os.path.join(os.path.dirname(path), name)


def _create(path: str) -> None:
    import secrets

    base = os.path.basename(path)
    tmp = _sibling(path, f".{base}.{os.getpid()}.{secrets.token_hex(4)}.new")
    os.close(os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            # Writes page 1 with the WAL flag: the file linked below is never 0 bytes.
            conn.execute("PRAGMA journal_mode=WAL").fetchall()
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # a concurrent opener created it first: use theirs
        except OSError:
            if not os.path.exists(path):  # a filesystem without hard links
                os.rename(tmp, path)
    finally:
        for leftover in (tmp, *(f"{tmp}{suffix}" for suffix in SIDE_FILES)):
            with suppress(FileNotFoundError):
                os.unlink(leftover)


def _set_aside_empty(path: str) -> None:
    import secrets

    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = _sibling(path, f"{os.path.basename(path)}.empty-{stamp}-{secrets.token_hex(2)}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return  # another opener set it aside already
    for suffix in SIDE_FILES:
        with suppress(FileNotFoundError):
            os.rename(f"{path}{suffix}", f"{aside}{suffix}")
    log.warning(
        "%s was empty (0 bytes, not a database); kept it as %s and created a new database",
        path, aside, extra={"event": "db.empty_set_aside", "db": path},
    )  # fmt: skip
