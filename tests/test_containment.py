"""Issue 19 items 2 and 3: everything a run starts ends with it, and with its owner.

A run is contained by a cgroup of its own when ``li`` can make one (here: root, the v2
hierarchy at ``/sys/fs/cgroup/unified`` or ``/sys/fs/cgroup``), else by its group, its
session and the child subreaper (``LIRUN_CGROUP=off`` forces that fallback). Both paths
are tested: the issue's double-forking ``setsid`` daemon is gone when ``li run`` ends and
the record says what was killed; a SIGKILLed owner takes its run's processes with it and
``li reap`` records that.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from lirun.exec import cgroup as cgroups
from lirun.exec.containment import child_setup, kill_run_tree
from lirun.settings import Settings
from support.execkit import get_row, li_argv, poll, run_li, start_li
from support.faultkit import TAG_VAR, describe, kill_tagged, tagged_named, tagged_processes
from support.platforms import linux_only

DAEMON = (
    "import os,time; os.fork() and os._exit(0); os.setsid(); "
    "os.fork() and os._exit(0); time.sleep(300)"
)
MODES = [pytest.param("cgroup", id="cgroup"), pytest.param("off", id="nocgroup")]


def _cgroups_here() -> bool:
    made = cgroups.create("lirun-test", settings=Settings())
    if made is None:
        return False
    made.remove()
    return True


def _env(li_env: dict[str, str], mode: str, tag: str) -> dict[str, str]:
    if mode == "cgroup" and not _cgroups_here():
        pytest.skip("no cgroup v2 this process may create cgroups in")
    return {**li_env, cgroups.CGROUP_ENV: mode if mode == "off" else "", TAG_VAR: tag}


@pytest.fixture
def tag(request: pytest.FixtureRequest) -> object:
    name = f"contain-{os.getpid()}-{request.node.name}"
    yield name
    kill_tagged(name)


def test_the_v2_hierarchy_is_found_on_hybrid_and_unified_hosts() -> None:
    hybrid = (
        "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n"
        "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"
        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n"
    )
    assert cgroups.v2_mount(hybrid) == "/sys/fs/cgroup/unified"
    assert cgroups.v2_mount("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n") == "/sys/fs/cgroup"
    assert cgroups.v2_mount("cgroup /sys/fs/cgroup/cpu cgroup rw 0 0\n") is None
    assert cgroups.own_path("4:memory:/x\n0::/user.slice/a.scope\n") == "/user.slice/a.scope"
    assert cgroups.own_path("4:memory:/x\n") is None
    assert cgroups.own_path("0::/gone (deleted)\n") is None


def test_lirun_cgroup_off_makes_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cgroups.CGROUP_ENV, "off")
    assert cgroups.create(settings=Settings.from_env()) is None


@pytest.mark.parametrize("mode", MODES)
def test_a_double_forking_daemon_ends_with_the_run(
    li_env: dict[str, str], db_url: str, repo: Path, mode: str, tag: str
) -> None:
    env = _env(li_env, mode, tag)
    done = run_li("run", "--run-id", "d1", "--", sys.executable, "-c", DAEMON, env=env, cwd=repo)
    assert done.returncode in (0, 1), done.stderr
    left = tagged_processes(tag)
    assert not left, f"the daemon outlived its run: {describe(left)}"
    row = get_row(db_url, "d1")
    # The first entry is what got the first signal; a second, what needed SIGKILL after
    # the grace (one forked while the first signal was sent, on a loaded machine).
    first, *later = [e for e in row["status_evidence_refs"] if e["kind"] == "killed_descendants"]
    killed = [p for e in (first, *later) for p in e["processes"]]
    assert any("time.sleep(300)" in p["command"] for p in killed), (first, later)
    assert [e.get("signal") for e in later] in ([], ["SIGKILL"]), later
    assert ("cgroup" in first) == (mode == "cgroup")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_a_sigkilled_owner_takes_its_runs_processes_along(
    li_env: dict[str, str], db_url: str, repo: Path, tmp_path: Path, mode: str, tag: str
) -> None:
    env = _env(li_env, mode, tag)
    marker = tmp_path / "started"
    work = tmp_path / "work"
    script = (
        f"sleep 30 & setsid sh -c 'sleep 3; echo late >> {work}' & "
        f"{sys.executable} -c '{DAEMON}' & touch {marker}; sleep 3; echo late >> {work}; wait"
    )
    li = start_li("run", "--run-id", "k1", "--", "sh", "-c", script, env=env, cwd=repo)
    poll(marker.exists, what="the run to start")
    poll(lambda: len(tagged_processes(tag)) >= 5, what="the run's processes")
    poll(lambda: _detached_daemon(tag), what="the daemon to finish forking")
    li.kill()
    li.communicate(timeout=30)
    killed_at = time.monotonic()
    poll(lambda: not tagged_processes(tag), timeout=2.0, what="the run's processes to die")
    assert time.monotonic() - killed_at < 2.0
    time.sleep(3.5)
    assert not work.exists(), "a process of the run finished its work after its owner died"
    reaped = run_li("reap", env=env, cwd=repo)
    assert reaped.returncode == 0, reaped.stderr
    row = get_row(db_url, "k1")
    assert row["status"] == "failed"
    [entry] = [e for e in row["status_evidence_refs"] if e["kind"] == "killed_with_owner"]
    assert any("time.sleep(300)" in p["command"] for p in entry["processes"]), entry
    assert ("cgroup" in entry) == (mode == "cgroup")


def _detached_daemon(tag: str) -> bool:
    """The DAEMON's last process is running: it left the run's session (its session is
    neither the run's nor its own), so a kill now must find it by containment alone."""
    procs = tagged_processes(tag)
    try:
        run_sid = next(os.getsid(p.pid) for p in procs if p.cmdline()[:2] == ["sleep", "30"])
        return any(
            "time.sleep(300)" in " ".join(p.cmdline())
            and p.status() != psutil.STATUS_ZOMBIE
            and os.getsid(p.pid) not in (p.pid, run_sid)
            for p in procs
        )
    except (StopIteration, OSError, psutil.Error):
        return False


@linux_only("parent-death signal")
def test_without_its_guard_the_child_still_dies_with_its_owner(
    li_env: dict[str, str], repo: Path, tag: str
) -> None:
    """The parent-death signal alone (no guard, no cgroup): the supervised child dies."""
    env = {**li_env, "LIRUN_GUARD": "off", cgroups.CGROUP_ENV: "off", TAG_VAR: tag}
    li = start_li("run", "--", "sleep", "60", env=env, cwd=repo)
    sleeper = poll(lambda: tagged_named(tag, "sleep"), what="the child")[0]
    li.kill()
    li.communicate(timeout=30)
    poll(lambda: not sleeper.is_running() or sleeper.status() == "zombie", timeout=2.0)


def _spawn_tree(tmp_path: Path, group: cgroups.RunCgroup | None) -> tuple[int, list[int]]:
    pids = tmp_path / "pids"
    script = f"sleep 30 & echo $! >> {pids}; setsid sleep 31 & echo $! >> {pids}; wait"
    proc = subprocess.Popen(
        ["sh", "-c", script], start_new_session=True, preexec_fn=child_setup(group)
    )
    poll(lambda: pids.exists() and len(pids.read_text().split()) == 2)
    return proc.pid, [int(p) for p in pids.read_text().split()]


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] in "ZX"


def test_kill_run_tree_kills_what_its_cgroup_holds(tmp_path: Path) -> None:
    group = cgroups.create("lirun-test", settings=Settings())
    if group is None:
        pytest.skip("no cgroup v2 this process may create cgroups in")
    try:
        leader, pids = _spawn_tree(tmp_path, group)
        group.close_join()
        entry = kill_run_tree(leader, group.path)
        assert entry is not None
        assert entry["cgroup"] == str(group.path)
        assert {p["pid"] for p in entry["processes"]} >= {leader, *pids}
        assert all(_gone(pid) for pid in (leader, *pids))
    finally:
        os.waitpid(-1, os.WNOHANG)
        group.remove()


def test_kill_run_tree_without_a_cgroup_kills_group_session_and_known(tmp_path: Path) -> None:
    leader, (in_group, in_own_session) = _spawn_tree(tmp_path, None)
    entry = kill_run_tree(leader, None, known=[in_own_session])
    assert entry is not None
    assert "cgroup" not in entry
    assert all(_gone(pid) for pid in (leader, in_group, in_own_session))
    os.waitpid(leader, 0)


def test_no_run_leaves_a_cgroup_behind(li_env: dict[str, str], repo: Path) -> None:
    if not _cgroups_here():
        pytest.skip("no cgroup v2 this process may create cgroups in")
    parent = cgroups.parent_dir()
    assert parent is not None

    def runs_cgroups() -> set[str]:
        return {p.name for p in parent.iterdir() if p.name.startswith("lirun.") and p.is_dir()}

    li = subprocess.Popen(
        li_argv("run", "--", "sh", "-c", "sleep 0.2 & echo x"),
        env=li_env,
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = li.communicate(timeout=60)
    assert li.returncode == 0, err
    # Another li on this machine may be running meanwhile: only this one's count.
    assert not {name for name in runs_cgroups() if name.startswith(f"lirun.{li.pid}.")}


OWNER = """
import os, subprocess, sys
from lirun.exec import guard
from lirun.settings import Settings
quiet = subprocess.DEVNULL
guard.watch("m1", None, sys.argv[1], Settings.from_env())
sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True, stdout=quiet, stderr=quiet)
guard.started("m1", sleeper.pid, None)
if sys.argv[2] == "unwatch":
    guard.unwatch("m1")
print(sleeper.pid, guard.guard_pid(), flush=True)
os._exit(0)
"""


@pytest.mark.parametrize("unwatched", [False, True])
def test_the_guard_kills_what_its_dead_owner_still_watched(tmp_path: Path, unwatched: bool) -> None:
    owner = subprocess.run(
        [sys.executable, "-c", OWNER, str(tmp_path), "unwatch" if unwatched else "keep"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, cgroups.CGROUP_ENV: "off"},
    )
    assert owner.returncode == 0, owner.stderr
    sleeper, guard_pid = (int(x) for x in owner.stdout.split())
    try:
        poll(lambda: _gone(guard_pid), timeout=10, what="the guard to end with its owner")
        note = tmp_path / "owner_died.json"
        if unwatched:
            assert not _gone(sleeper)
            assert not note.exists()
        else:
            assert _gone(sleeper)
            import json

            killed = json.loads(note.read_text())["killed"]
            assert [p["pid"] for p in killed] == [sleeper]
    finally:
        if not _gone(sleeper):
            os.kill(sleeper, 9)


@pytest.mark.slow
def test_a_legs_daemon_is_its_own_not_a_sibling_legs(
    li_env: dict[str, str], tmp_path: Path, tag: str
) -> None:
    """Without a cgroup, legs side by side in one `li flow run`: a short leg's end does
    not kill the long leg's daemon (it carries the long leg's mark); the long leg's end
    does, and nothing is left after the flow."""
    env = {**li_env, cgroups.CGROUP_ENV: "off", TAG_VAR: tag}
    pidfile, alive = tmp_path / "daemon.pid", tmp_path / "alive"
    daemon = (
        "import os,sys,time; os.fork() and os._exit(0); os.setsid(); os.fork() and os._exit(0); "
        f"open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
    )
    (tmp_path / "daemon.py").write_text(daemon, encoding="utf-8")
    (tmp_path / "long.sh").write_text(
        f"{sys.executable} {tmp_path / 'daemon.py'}; sleep 2.5; "
        f"kill -0 $(cat {pidfile}) && touch {alive}; true\n",
        encoding="utf-8",
    )
    flow = tmp_path / "flow.yaml"
    flow.write_text(
        "legs:\n"
        f"  - {{id: long, run: [sh, {tmp_path / 'long.sh'}]}}\n"
        "  - {id: short, run: [sh, -c, 'sleep 1']}\n",
        encoding="utf-8",
    )
    done = run_li("flow", "run", str(flow), "--parallel", "2", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert alive.exists(), "the short leg's end killed the long leg's daemon"
    left = tagged_processes(tag)
    assert not left, f"the daemon outlived its leg: {describe(left)}"


def test_a_dead_owners_empty_cgroup_is_swept_a_live_owners_is_not() -> None:
    parent = cgroups.parent_dir()
    if parent is None or not _cgroups_here():
        pytest.skip("no cgroup v2 this process may create cgroups in")
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = parent / f"lirun-test.{dead.pid}.1"
    live = parent / f"lirun-test.{os.getpid()}.99"
    stale.mkdir()
    live.mkdir()
    try:
        cgroups.sweep_stale(parent, "lirun-test")
        assert not stale.exists()
        assert live.exists()
    finally:
        for path in (stale, live):
            if path.exists():
                path.rmdir()


def test_a_guard_that_stopped_reading_never_blocks_its_owner() -> None:
    from lirun.exec import guard

    stuck = guard.current(Settings())
    assert stuck is not None
    os.kill(stuck.proc.pid, signal.SIGSTOP)
    started = time.monotonic()
    for n in range(20_000):  # runs start and end: far more than the pipe holds
        guard.watch(f"m{n}", None, None, Settings())
        guard.unwatch(f"m{n}")
    assert time.monotonic() - started < 5
    assert stuck.broken
    assert stuck.proc.poll() is not None
    fresh = guard.current(Settings())
    assert fresh is not None
    assert fresh is not stuck
    assert fresh.proc.poll() is None


PRIME = """
import threading
from lirun.exec import cgroup as cgroups
from lirun.settings import Settings
before = open("/proc/self/cgroup").read()
cgroups.prime(Settings.from_env())
primes = [t for t in threading.enumerate() if t.name == "lirun-cgroup-prime"]
for t in primes:
    assert t.daemon
    t.join(10)
print(len(primes), open("/proc/self/cgroup").read() == before)
"""


@linux_only("cgroups")
@pytest.mark.parametrize("mode", MODES)
def test_priming_a_cgroup_move_leaves_li_where_it_was(mode: str) -> None:
    """``cgroup.prime``, at the start of every execution, moves ``li`` into the cgroup it is
    already in, in a daemon thread (the kernel's first move after a quiet spell waits for a
    grace period; the child's join then does not): ``li`` stays where it was, and with
    cgroups off nothing is started."""
    if mode == "cgroup" and not _cgroups_here():
        pytest.skip("no cgroup v2 this process may create cgroups in")
    env = {**os.environ, cgroups.CGROUP_ENV: "off" if mode == "off" else ""}
    done = subprocess.run(
        [sys.executable, "-c", PRIME], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == (["1", "True"] if mode == "cgroup" else ["0", "True"])
