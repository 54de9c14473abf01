"""Block until a file in a directory is written (Linux inotify), so idle waiters sleep.

Polling SQLite's ``data_version`` every few milliseconds costs a process wake-up each
time; fifty idle waiters then take a quarter of a core from the writer they wait on.
Watching the database's directory lets a waiter sleep until a commit touches the WAL.

The watch is one-shot: a permanent watch makes the kernel queue an event for every
waiter on every write, which slowed a writer with fifty waiters more than fourfold
(bench/bench_wait.py); a one-shot watch costs the writer one event per waiter per
sleep. Where inotify is missing (not Linux, ``LIRUN_PLATFORM=portable``, or the per-user
instance limit is reached), ``DirectoryWatch.open`` returns None and the caller polls as before.
"""

from __future__ import annotations

import contextlib
import os
import select

from lirun.hints import Any

_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_IN_MODIFY = 0x002
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_ONESHOT = 0x80000000
_MASK = _IN_MODIFY | _IN_CREATE | _IN_MOVED_TO | _IN_ONESHOT


class DirectoryWatch:
    """An inotify watch on one directory's files being written, created or moved in."""

    def __init__(self, libc: Any, fd: int, directory: bytes) -> None:
        self._libc = libc
        self._fd = fd
        self._directory = directory

    @classmethod
    def open(cls, directory: str | os.PathLike[str]) -> DirectoryWatch | None:
        from lirun import platform

        if not platform.has_inotify():
            return None  # the portable platform: the caller polls the change token
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        except (OSError, AttributeError, ImportError):
            # ImportError: loading ctypes' shared library needs a file descriptor, and a
            # process at its open-file limit has none; the caller polls instead.
            return None
        if fd < 0:
            return None
        watch = cls(libc, fd, os.fsencode(directory))
        if not watch.arm():
            watch.close()
            return None
        return watch

    def arm(self) -> bool:
        """(Re)arm the one-shot watch; call it before the last look ahead of ``wait``."""
        return bool(self._libc.inotify_add_watch(self._fd, self._directory, _MASK) >= 0)

    def wait(self, timeout: float) -> bool:
        """True as soon as something in the directory was written; False after ``timeout``."""
        readable, _, _ = select.select([self._fd], [], [], max(timeout, 0.0))
        if not readable:
            return False
        with contextlib.suppress(BlockingIOError):
            while os.read(self._fd, 65536):
                pass
        return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)
