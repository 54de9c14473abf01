"""The database credential a run's child is given when it uses lirun's database itself
(an agent of a team sends and reads its team's messages with ``li team``).

The password of the run's database URL goes into a libpq password file, ``db.pgpass``, in
the run's state directory (mode 0700, the run's user only), made mode 0600 before the
child starts; the child's ``LIRUN_DB_URL`` names the file (``?passfile=``) and never holds
the password, nor do its arguments. Not ``PGPASSFILE``: every libpq tool the agent runs
would read it, in place of the user's own ``~/.pgpass``.

The file goes when the run ends: its teardown removes it, the owner's guard removes it
when the owner dies, and the reaper that ends the record of a run whose owner died
removes it too. A crash of the whole machine leaves it only in the run's private
directory, where ``li gc`` removes it with the directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from lirun.logs import get_logger

__all__ = ["CREDENTIAL_NAME", "child_url", "give", "remove"]

log = get_logger(__name__)

CREDENTIAL_NAME = "db.pgpass"
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def give(state_root: Path, url: str) -> Path | None:
    """Write the password of ``url`` into ``state_root/db.pgpass`` (0600, made anew: a
    file or link already there is replaced, never written through); its path, or None
    when ``url`` has no password (nothing is written)."""
    # Here, not at the top: the owner's guard imports this module only for ``remove``,
    # and a guard that starts light competes less with its owner's own start.
    from lirun.store.pg_connect import passfile_entry
    from lirun.store.urls import url_password

    password = url_password(url)
    if password is None:
        return None
    try:
        entry = passfile_entry(password)
    except ValueError as exc:
        log.warning("%s: the run's child gets no database credential", exc)
        return None
    path = state_root / CREDENTIAL_NAME
    remove(state_root)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
    fd = os.open(path, flags, 0o600)  # 0600 whatever the umask: it only removes bits
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(entry.encode("utf-8"))
    except BaseException:
        remove(state_root)
        raise
    return path


def child_url(url: str, passfile: Path | None) -> str | None:
    """The database URL a run's child gets: ``url`` without its password, naming
    ``passfile`` when it has one; None when ``url`` cannot be parsed."""
    from lirun.store.urls import url_without_credentials, with_passfile

    safe = url_without_credentials(url)
    if safe is None or passfile is None:
        return safe
    return with_passfile(safe, str(passfile))


def remove(state_root: str | os.PathLike[str]) -> bool:
    """Remove the run's credential file; True when there was one."""
    try:
        os.unlink(os.path.join(state_root, CREDENTIAL_NAME))
    except FileNotFoundError:
        return False
    except OSError as exc:
        log.warning("cannot remove %s: %s", os.path.join(state_root, CREDENTIAL_NAME), exc)
        return False
    return True
