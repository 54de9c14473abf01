"""Linux's process interfaces: one process as ``/proc`` shows it (its state, parent,
group and session, and its command line; never raising for a process that is gone), and
libc's ``prctl``."""

from __future__ import annotations

import ctypes
import functools
import sys
import time
from typing import Any

__all__ = ["alive", "command_line", "libc_prctl", "stat"]

_GONE = ("Z", "X")  # a zombie or a dead process: nothing runs any more
_CMDLINE_TRIES = 5


def stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgrp, session) of ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ")".
    fields = text[text.rfind(")") + 2 :].split()
    if len(fields) < 4:
        return None
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3])


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is neither a zombie nor dead."""
    info = stat(pid)
    return info is not None and info[0] not in _GONE


def command_line(pid: int) -> str:
    """The first 200 characters of ``pid``'s command line, words joined by spaces.

    A process in the middle of ``execve`` shows an empty command line for a moment: it is
    read again a few times; then (a zombie has none) its name in brackets, ``[sleep]``.
    """
    for attempt in range(_CMDLINE_TRIES):
        if attempt:
            time.sleep(0.01)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                raw = handle.read()
        except OSError:
            return ""
        if raw:
            return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:200]
        if not alive(pid):
            break
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as handle:
            return f"[{handle.read().strip()}]"
    except OSError:
        return ""


@functools.cache
def libc_prctl() -> Any:
    """libc's ``prctl`` (load it in the parent, never between fork and exec); None off
    Linux or where libc cannot be loaded."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
