"""The Linux implementation of ``lirun.platform``: ``/proc`` and libc's ``prctl``.

Never raising for a process that is gone; standard library only.
"""

from __future__ import annotations

import functools
import os
import time

# `li status` judges owners through this module: typing and ctypes load only when used.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_GONE = ("Z", "X")
_CMDLINE_TRIES = 5
_BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


def _fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ")".
    return text[text.rfind(")") + 2 :].split()


def stat(pid: int) -> tuple[str, int, int, int] | None:
    fields = _fields(pid)
    if fields is None or len(fields) < 4:
        return None
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3])


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def process_table() -> dict[int, tuple[str, int, int, int]]:
    table: dict[int, tuple[str, int, int, int]] = {}
    for pid in _pids():
        if (info := stat(pid)) is not None:
            table[pid] = info
    return table


def owner_table() -> dict[int, tuple[int, int, str]]:
    table: dict[int, tuple[int, int, str]] = {}
    for pid in _pids():
        fields = _fields(pid)
        if fields is None or len(fields) < 20 or fields[0] in _GONE:
            continue
        table[pid] = (int(fields[1]), int(fields[2]), fields[19])
    return table


def _btime() -> float | None:
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def start_time(pid: int) -> float | None:
    """Field 22 of ``/proc/<pid>/stat`` (ticks since boot) plus btime."""
    fields = _fields(pid)
    btime = _btime()
    # A zombie (Z) or dead (X) task has finished running: its owner is gone.
    if fields is None or len(fields) < 20 or btime is None or fields[0] in _GONE:
        return None
    try:
        ticks = int(fields[19])
    except ValueError:
        return None
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def command_line(pid: int) -> str:
    """Words joined by spaces. A process in the middle of ``execve`` shows an empty
    command line for a moment: it is read again a few times; then (a zombie has none) its
    name in brackets, ``[sleep]``."""
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
        info = stat(pid)
        if info is None or info[0] in _GONE:
            break
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as handle:
            return f"[{handle.read().strip()}]"
    except OSError:
        return ""


def environ(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return handle.read().split(b"\0")
    except OSError:
        return None


def listed_children() -> set[int] | None:
    """From ``/proc/self/task/*/children``: None where the kernel does not list them (no
    CONFIG_PROC_CHILDREN) or a thread ended during the read (its children move to another
    thread, which may have been read already)."""
    try:
        tasks = os.listdir("/proc/self/task")
        kids: set[int] = set()
        for tid in tasks:
            with open(f"/proc/self/task/{tid}/children", encoding="ascii") as handle:
                kids.update(int(pid) for pid in handle.read().split())
        if sorted(os.listdir("/proc/self/task")) != sorted(tasks):
            return None
    except (OSError, ValueError):
        return None
    return kids


def boot_id() -> str:
    try:
        with open(_BOOT_ID_PATH, encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


@functools.cache
def prctl() -> Any:
    """libc's ``prctl`` (load it in the parent, never between fork and exec)."""
    import ctypes  # here: the `li status` fast path never calls it

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
