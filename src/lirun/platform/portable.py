"""The portable implementation of ``lirun.platform``: psutil and ``os`` (macOS, the BSDs,
and Linux with ``LIRUN_PLATFORM=portable``).

What it loses against ``linux``: no child subreaper (an orphan that left the run's group
and session is found only by the run's mark in its environment), no parent-death signal
(a supervised child outlives a killed owner until its guard or ``li reap`` stops it), no
cgroup, and no inotify (waiters poll the change token).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import psutil

_ZOMBIE = {psutil.STATUS_ZOMBIE: "Z", psutil.STATUS_DEAD: "X"}
_BOOT_PREFIX = "btime:"


def _state(proc: psutil.Process) -> str:
    return _ZOMBIE.get(proc.status(), "R")


def _group_and_session(pid: int) -> tuple[int, int] | None:
    try:
        return os.getpgid(pid), os.getsid(pid)
    except OSError:
        return None


def stat(pid: int) -> tuple[str, int, int, int] | None:
    if pid <= 0:
        return None
    try:
        proc = psutil.Process(pid)
        state, ppid = _state(proc), proc.ppid()
    except (psutil.Error, OSError):
        return None
    ids = _group_and_session(pid)
    if ids is None:
        # A zombie keeps its pid but may not answer getpgid everywhere.
        return (state, ppid, pid, pid) if state in ("Z", "X") else None
    return state, ppid, ids[0], ids[1]


def process_table() -> dict[int, tuple[str, int, int, int]]:
    table: dict[int, tuple[str, int, int, int]] = {}
    for pid in psutil.pids():
        if (info := stat(pid)) is not None:
            table[pid] = info
    return table


def owner_table() -> dict[int, tuple[int, int, str]]:
    table: dict[int, tuple[int, int, str]] = {}
    for proc in psutil.process_iter(["ppid", "status", "create_time"]):
        info = proc.info
        if info["status"] in _ZOMBIE or info["ppid"] is None or info["create_time"] is None:
            continue
        ids = _group_and_session(proc.pid)
        if ids is not None:
            table[proc.pid] = (int(info["ppid"]), ids[0], repr(info["create_time"]))
    return table


def start_time(pid: int) -> float | None:
    if pid <= 0:
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() in _ZOMBIE:
            return None
        return float(proc.create_time())
    except (psutil.Error, OSError):
        return None


def command_line(pid: int) -> str:
    try:
        proc = psutil.Process(pid)
        with contextlib.suppress(psutil.Error, OSError):
            words = proc.cmdline()
            if words:
                return " ".join(words).strip()[:200]
        return f"[{proc.name()}]"
    except (psutil.Error, OSError):
        return ""


def environ(pid: int) -> list[bytes] | None:
    try:
        found = psutil.Process(pid).environ()
    except (psutil.Error, OSError):
        return None
    return [f"{key}={value}".encode() for key, value in found.items()]


def listed_children() -> set[int] | None:
    return None  # callers scan the process table for this process's children


def boot_id() -> str:
    """The boot time, which changes with every boot (not comparable to Linux's boot id)."""
    try:
        return f"{_BOOT_PREFIX}{int(psutil.boot_time())}"
    except (psutil.Error, OSError):
        return ""


def prctl() -> Any:
    return None
