"""The one platform layer (lirun.platform): chosen by LIRUN_PLATFORM, and its Linux and
portable implementations give the same answers about the same real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lirun import platform
from lirun.errors import UsageError
from lirun.exec import cgroup as cgroups
from lirun.platform import linux, portable
from lirun.settings import Settings
from lirun.wait.fswatch import DirectoryWatch
from support.execkit import li_argv

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="compares to /proc")


def test_the_setting_chooses_the_implementation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(platform.PLATFORM_ENV, raising=False)
    assert platform.name() == platform.LINUX
    monkeypatch.setenv(platform.PLATFORM_ENV, " Portable ")
    assert platform.name() == platform.PORTABLE
    assert not platform.has_cgroups()
    assert not platform.has_inotify()
    assert platform.prctl() is None
    monkeypatch.setenv(platform.PLATFORM_ENV, "linux")
    assert platform.name() == platform.LINUX
    monkeypatch.setenv(platform.PLATFORM_ENV, "windows")
    with pytest.raises(UsageError, match="LIRUN_PLATFORM='windows' is not a platform"):
        platform.name()


def test_portable_makes_no_cgroup_and_no_inotify_watch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(platform.PLATFORM_ENV, "portable")
    monkeypatch.delenv(cgroups.CGROUP_ENV, raising=False)
    assert cgroups.create("lirun-test", settings=Settings.from_env()) is None
    assert DirectoryWatch.open(tmp_path) is None  # the waiter polls the change token


def test_an_unknown_platform_is_one_clear_line_and_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "LIRUN_PLATFORM": "plan9", "LIRUN_HOME": str(tmp_path)}
    env["LIRUN_DB_URL"] = str(tmp_path / "state.db")
    done = subprocess.run(
        li_argv("run", "--", "true"), env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "li run: error: LIRUN_PLATFORM='plan9' is not a platform: use linux or portable "
        "(or unset it)"
    ]
    assert not (tmp_path / "state.db").exists()  # nothing ran, nothing was written


def test_both_implementations_see_the_same_processes() -> None:
    mark = f"LIRUN_TEST_MARK={os.getpid()}"
    child = subprocess.Popen(
        ["sleep", "30"], start_new_session=True, env={**os.environ, "LIRUN_TEST_MARK": mark}
    )
    try:
        pid = child.pid
        time.sleep(0.1)  # past exec: the command line is sleep's
        linux_stat, portable_stat = linux.stat(pid), portable.stat(pid)
        assert linux_stat is not None
        assert portable_stat is not None
        assert linux_stat[1:] == portable_stat[1:] == (os.getpid(), pid, pid)
        assert linux.command_line(pid) == portable.command_line(pid) == "sleep 30"
        started = linux.start_time(pid)
        assert started is not None
        assert portable.start_time(pid) == pytest.approx(started, abs=1)
        assert f"LIRUN_TEST_MARK={mark}".encode() in (linux.environ(pid) or [])
        assert f"LIRUN_TEST_MARK={mark}".encode() in (portable.environ(pid) or [])
        assert pid in linux.process_table()
        assert pid in portable.process_table()
        assert linux.owner_table()[pid][:2] == portable.owner_table()[pid][:2]
        assert portable.boot_id().startswith("btime:")
        assert linux.boot_id()
        child.kill()
        time.sleep(0.1)  # a zombie now: gone for both, its start time too
        linux_stat, portable_stat = linux.stat(pid), portable.stat(pid)
        assert linux_stat is not None
        assert portable_stat is not None
        assert linux_stat[0] == portable_stat[0] == "Z"
        assert linux.start_time(pid) is None
        assert portable.start_time(pid) is None
    finally:
        child.kill()
        child.wait()
    assert linux.stat(pid) is None
    assert portable.stat(pid) is None
    assert linux.command_line(pid) == portable.command_line(pid) == ""
