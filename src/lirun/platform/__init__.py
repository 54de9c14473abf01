"""The one platform layer: every question lirun asks the operating system about processes.

Two implementations answer it. ``linux`` reads ``/proc`` and calls libc's ``prctl`` (the
child subreaper, the parent-death signal); cgroups (``exec.cgroup``) and inotify wake-ups
(``wait.fswatch``) are used only with it. ``portable`` asks psutil and ``os`` (process
groups and sessions through ``os.getpgid``/``os.getsid``) and has no subreaper, no
parent-death signal, no cgroup and no inotify: waiters poll the change token instead.

Chosen at run time (:func:`name`): ``linux`` on Linux, ``portable`` elsewhere, unless
``LIRUN_PLATFORM`` says ``portable`` (or ``linux``). An unknown value is a
:class:`~lirun.errors.UsageError`. Each implementation is imported on first use, so the
``li wait`` / ``li status`` fast path never imports psutil on Linux.
"""

from __future__ import annotations

import sys

# No typing or lirun.errors at import time: the ``li wait`` / ``li status`` fast path
# imports this module (tests/test_imports.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

__all__ = [
    "LINUX",
    "PLATFORM_ENV",
    "PORTABLE",
    "ProcessInfo",
    "alive",
    "boot_id",
    "check",
    "command_line",
    "environ",
    "has_cgroups",
    "has_inotify",
    "listed_children",
    "name",
    "owner_table",
    "prctl",
    "process_table",
    "start_time",
    "stat",
]

PLATFORM_ENV = "LIRUN_PLATFORM"  # read by ``settings.env_platform``
LINUX = "linux"
PORTABLE = "portable"
GONE = ("Z", "X")  # a zombie or a dead process: nothing runs any more

ProcessInfo = tuple[str, int, int, int]  # (state, ppid, pgrp, session)


def name() -> str:
    """``linux`` or ``portable``: what ``LIRUN_PLATFORM`` asks for, else this system's."""
    from lirun.settings import env_platform

    wanted = env_platform()
    on_linux = sys.platform.startswith("linux")
    if not wanted:
        return LINUX if on_linux else PORTABLE
    if wanted == PORTABLE or (wanted == LINUX and on_linux):
        return wanted
    from lirun.errors import UsageError

    if wanted == LINUX:
        raise UsageError(f"{PLATFORM_ENV}=linux needs Linux; this is {sys.platform}")
    raise UsageError(
        f"{PLATFORM_ENV}={wanted!r} is not a platform: use {LINUX} or {PORTABLE} (or unset it)"
    )


def check() -> None:
    """Raise the one clear error for a bad ``LIRUN_PLATFORM`` (the CLI calls it first)."""
    name()


def _impl() -> ModuleType:
    if name() == PORTABLE:
        try:
            from lirun.platform import portable
        except ImportError as exc:  # psutil is a dependency only off Linux
            from lirun.errors import UsageError

            raise UsageError(
                f"{PLATFORM_ENV}=portable needs psutil: pip install 'lirun[portable]' ({exc})"
            ) from exc
        return portable
    from lirun.platform import linux

    return linux


def stat(pid: int) -> ProcessInfo | None:
    """(state, ppid, pgrp, session) of ``pid`` (state ``Z``/``X`` when it finished), or
    None when it is gone."""
    result: ProcessInfo | None = _impl().stat(pid)
    return result


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is neither a zombie nor dead."""
    info = stat(pid)
    return info is not None and info[0] not in GONE


def process_table() -> dict[int, ProcessInfo]:
    """pid -> (state, ppid, pgrp, session) of every visible process, zombies included."""
    result: dict[int, ProcessInfo] = _impl().process_table()
    return result


def owner_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, pgrp, start-time token) of every live process (``exec.owner_tree``)."""
    result: dict[int, tuple[int, int, str]] = _impl().owner_table()
    return result


def command_line(pid: int) -> str:
    """The first 200 characters of ``pid``'s command line ("" when it is gone)."""
    return str(_impl().command_line(pid))


def start_time(pid: int) -> float | None:
    """Epoch start time of ``pid``, or None when it is gone or finished."""
    result: float | None = _impl().start_time(pid)
    return result


def environ(pid: int) -> list[bytes] | None:
    """``pid``'s environment as ``NAME=value`` entries, or None when it cannot be read."""
    result: list[bytes] | None = _impl().environ(pid)
    return result


def listed_children() -> set[int] | None:
    """This process's children when the system lists them cheaply, else None."""
    result: set[int] | None = _impl().listed_children()
    return result


def boot_id() -> str:
    """This machine's boot id ("" where there is none). Portable ids start ``btime:``."""
    return str(_impl().boot_id())


def prctl() -> Any:
    """libc's ``prctl`` (the subreaper, the parent-death signal); None when portable."""
    return _impl().prctl()


def has_cgroups() -> bool:
    """Run cgroups may be tried (``exec.cgroup``): only on the Linux implementation."""
    return name() == LINUX


def has_inotify() -> bool:
    """Waiters may sleep on inotify (``wait.fswatch``); portable waiters poll."""
    return name() == LINUX
