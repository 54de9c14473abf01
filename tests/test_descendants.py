"""The children list that spares a scan of all of /proc agrees with that scan."""

from __future__ import annotations

import os
import subprocess

import pytest

from lirun.exec import descendants
from support.platforms import linux_only


@linux_only("/proc/self/task/*/children")
def test_listed_children_are_the_children_a_proc_scan_finds() -> None:
    procs = [subprocess.Popen(["sleep", "30"]) for _ in range(3)]
    try:
        listed = descendants._listed_children()
        assert listed is not None, "this kernel lists children (CONFIG_PROC_CHILDREN)"
        me = os.getpid()
        scanned = {pid for pid, info in descendants._table().items() if info[1] == me}
        assert {p.pid for p in procs} <= listed
        assert listed == scanned
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


@linux_only("child subreaper")
def test_nothing_left_only_when_no_child_is_new(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(descendants, "_subreaper", True)
    stray = subprocess.Popen(["sleep", "30"])
    try:
        before = descendants._listed_children() or set()
        assert descendants._nothing_left(leader=-1, exclude=before)
        assert not descendants._nothing_left(leader=-1, exclude=before - {stray.pid})
        monkeypatch.setattr(descendants, "_subreaper", False)
        assert not descendants._nothing_left(leader=-1, exclude=before)  # no subreaper: scan
    finally:
        stray.kill()
        stray.wait()
