"""An input file read whole, within a bound: only a regular file, at most so many bytes.

A file named by the user (a flow, show, schedule or profile file, a ``json_schema:``
file) is read whole before anything is checked. Named ``/dev/zero`` it would be read
until memory ran out, named a FIFO the read would wait forever for a writer. So the file
is opened without blocking (a FIFO's open returns at once), the opened descriptor must be
a regular file (``fstat``, so a symlink or a rename between a check and the open cannot
change the answer), and at most ``limit + 1`` bytes are read: one more than the bound
says the file is over it, however large it is.
"""

from __future__ import annotations

import os
import stat

__all__ = ["InputFileError", "read_bounded"]


class InputFileError(ValueError):
    """A file that cannot be read, is not a regular file, or is over its size bound; the
    message says which (the caller adds the file's name)."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file ``path``; InputFileError when it cannot be opened,
    is not a regular file (a directory, FIFO, device, socket: what it is is said) or holds
    more than ``limit`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputFileError(exc.strerror or str(exc)) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputFileError(f"{_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise InputFileError(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
    if size > limit:
        raise InputFileError(f"larger than the {limit:,}-byte bound")
    return b"".join(chunks)
