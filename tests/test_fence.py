"""The lease's fence (``lirun.exec.fence`` and its watchdog process): an owner that stops
renewing has its process tree killed at ``lease - margin``; an owner that dies has it
killed at once; an owner that says ``bye`` leaves it alone. The owner is a real process
(a script) so the watchdog never looks at the test runner's own children."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from lirun.exec.fence import SETTLE_SECONDS, Fence, margin_for
from lirun.schedules.outcomes import LEASE_LOST, Outcome, should_retry
from lirun.schedules.runner import Runner, RunnerConfig
from lirun.schedules.worker import _confirmed
from lirun.store.rows import ScheduleRunRow

Owners = list[tuple[subprocess.Popen[str], str]]
OWNER = """\
import os, subprocess, sys, time
from lirun.exec.descendants import enable_subreaper
from lirun.exec.fence import Fence

enable_subreaper()  # as li run does: a daemon that left the session stays a descendant
lease, renew_for, then = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
token = os.environ["FENCE_TOKEN"]
fence = Fence(lease).start()
leader = subprocess.Popen(["sleep", token], start_new_session=True)
# a daemon that left the group and the session: found as the owner's descendant
daemon = subprocess.Popen(
    [sys.executable, "-c",
     "import os, sys, time\\nos.setsid()\\nif os.fork(): os._exit(0)\\ntime.sleep(60)",
     token],
)
daemon.wait()
time.sleep(0.3)
print(leader.pid, flush=True)
until = time.monotonic() + renew_for
while time.monotonic() < until:
    started = time.monotonic()
    fence.renewed(started)
    time.sleep(0.1)
print("stopped renewing", flush=True)
if then == "bye":
    fence.close()
    print("closed", flush=True)
time.sleep(60)
"""


@pytest.fixture
def owner() -> Iterator[Owners]:
    started: Owners = []
    yield started
    for proc, token in started:
        for work in _work(token):
            work.kill()
        proc.kill()
        proc.wait()


def _work(token: str) -> list[psutil.Process]:
    """The live processes of the owner's work (their argv carries ``token``)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and token in (proc.info["cmdline"] or []):
            found.append(proc)
    return found


def _start(
    owner: Owners, lease: float, renew_for: float, then: str
) -> tuple[subprocess.Popen[str], str]:
    token = f"6{random.randrange(10**6)}"
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(lease), str(renew_for), then],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "FENCE_TOKEN": token},
    )  # fmt: skip
    owner.append((proc, token))
    return proc, token


def _read(proc: subprocess.Popen[str], want: str) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert want in line or want == "", line
    return line


def _wait_gone(token: str, timeout: float) -> float:
    started = time.monotonic()
    while _work(token):
        if time.monotonic() - started > timeout:
            raise AssertionError(f"still running: {_work(token)}")
        time.sleep(0.02)
    return time.monotonic() - started


def test_the_tree_dies_at_lease_minus_margin_after_the_last_renewal(
    owner: Owners,
) -> None:
    proc, token = _start(owner, 2.0, 1.0, "sleep")
    _read(proc, "")
    deadline = time.monotonic()
    assert len(_work(token)) == 2  # the group's leader and the daemon that left it
    _read(proc, "stopped renewing")
    time.sleep(0.5)
    assert len(_work(token)) == 2, "killed while the lease was renewed"
    took = _wait_gone(token, 5.0) + 0.5
    since_first = time.monotonic() - deadline
    # last renewal ~1 s after the leader started; deadline = that + 2 - 0.5
    assert 1.0 <= took <= 2.5, took
    assert since_first < 4.0
    assert proc.poll() is None, "the owner itself is not the watchdog's to kill"


def test_a_frozen_owner_does_not_keep_its_work_running(
    owner: Owners,
) -> None:
    proc, token = _start(owner, 2.0, 30.0, "sleep")
    _read(proc, "")
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        took = _wait_gone(token, 5.0)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    assert took <= 2.0, took


def test_a_dead_owner_has_its_tree_killed_at_once(owner: Owners) -> None:
    proc, token = _start(owner, 30.0, 30.0, "sleep")
    _read(proc, "")
    time.sleep(0.7)  # a snapshot (every 0.5 s) saw the daemon before it was re-parented
    proc.kill()
    proc.wait()
    assert _wait_gone(token, 3.0) < 1.5


def test_bye_leaves_the_tree_alone(owner: Owners) -> None:
    proc, token = _start(owner, 1.0, 0.2, "bye")
    _read(proc, "")
    _read(proc, "stopped renewing")
    _read(proc, "closed")
    time.sleep(1.5)
    assert len(_work(token)) == 2
    for work in _work(token):
        work.kill()


def test_the_fence_tells_its_owner_when_it_cannot_prove_the_lease() -> None:
    fence = Fence(4.0)  # not started: no watchdog, only the owner's side
    assert margin_for(4.0) == 1.0
    assert fence.margin == 1.0
    assert not fence.lost()
    assert 2.9 < fence.remaining() <= 3.0
    began = time.monotonic() - 1.0
    fence.deadline = time.monotonic() - 0.01
    assert fence.lost()
    assert fence.lapsed_since(began)
    fence.renewed(time.monotonic())
    # just back from a lapse: nothing starts until the watchdog has read the renewal
    assert fence.lost()
    assert 0 < fence.quiet_until - time.monotonic() <= SETTLE_SECONDS
    fence.quiet_until = 0.0
    assert not fence.lost()
    fence.renewed(time.monotonic())  # an ordinary renewal: no settling
    assert not fence.lost()
    assert fence.lapsed_since(began), "the lapse is remembered for runs that spanned it"
    assert not fence.lapsed_since(time.monotonic() + 0.001)


def test_a_run_that_did_not_complete_across_a_lost_lease_ends_lease_lost() -> None:
    fence = Fence(4.0)
    runner = Runner(RunnerConfig(db_url="unused", worker_id="w"), fence=fence)
    began = time.monotonic()
    killed = Outcome("failed", "run.failed.signal", "killed by SIGKILL", -9)
    assert runner._fenced(killed, began) == killed
    fence.deadline = time.monotonic() - 0.01
    done = Outcome("completed", "schedule.completed.ok", "")
    assert runner._fenced(done, began) == done, "work that finished is recorded as it ended"
    stopped = runner._fenced(killed, began)
    assert (stopped.status, stopped.reason_code) == ("cancelled", LEASE_LOST)
    assert should_retry(stopped.status, stopped.reason_code, 1, 1)
    assert not should_retry("cancelled", "schedule.cancelled.user", 1, 1)


def test_work_that_ended_before_the_lapse_keeps_its_own_outcome() -> None:
    """The database took the end only after the lease lapsed (an outage): a failure the
    work came to by itself stays that failure; one that ended after the lapse was the
    guard's doing."""
    fence = Fence(4.0)
    runner = Runner(RunnerConfig(db_url="unused", worker_id="w"), fence=fence)
    began = time.monotonic() - 2.0
    failed = Outcome("failed", "run.failed.exit_nonzero", "exit 1", 1)
    fence.deadline = began + 0.5  # the lease lapsed half a second in, and stays lost
    assert fence.lost()
    before = failed._replace(work_ended=began + 0.2)
    assert runner._fenced(before, began) == before
    after = runner._fenced(failed._replace(work_ended=began + 0.6), began)
    assert (after.status, after.reason_code) == ("cancelled", LEASE_LOST)
    # A lapse that came and went (renewed late) counts the same way.
    fence.renewed(began + 1.0)
    assert fence.lapses == [began + 0.5]
    assert runner._fenced(before, began) == before
    assert runner._fenced(failed._replace(work_ended=began + 0.5), began).status == "cancelled"


def test_the_fence_tells_when_a_lapse_fell_in_a_window() -> None:
    fence = Fence(4.0)
    t0 = time.monotonic()
    fence.deadline = t0 + 1.0
    fence.renewed(t0 + 0.5)  # on time: no lapse
    assert not fence.lapsed_since(t0 - 10, until=t0 + 100)
    fence.deadline = t0 - 2.0  # lost two seconds ago
    assert fence.lapsed_since(t0 - 3.0)
    assert fence.lapsed_since(t0 - 3.0, until=t0 - 2.0)
    assert not fence.lapsed_since(t0 - 3.0, until=t0 - 2.5)


def test_a_lapse_counts_once_seen_unchanged_for_half_the_lease() -> None:
    seen: dict[tuple[str, float], float] = {}
    given = {"id": "r1", "lease_expires_at": 104.0, "heartbeat_at": 100.0}
    run = ScheduleRunRow.from_row({**dict.fromkeys(ScheduleRunRow._fields), **given})
    assert _confirmed([run], seen) == []
    key = ("r1", 104.0)
    seen[key] -= 1.9
    assert _confirmed([run], seen) == []
    seen[key] -= 0.2
    assert _confirmed([run], seen) == [run]
    renewed = run._replace(lease_expires_at=108.0, heartbeat_at=104.0)
    assert _confirmed([renewed], seen) == []
    assert key not in seen


FLOW_OWNER = """\
import sys
from pathlib import Path

import lirun.liveness as liveness

liveness.DEFAULT_LEASE_SECONDS, liveness.HEARTBEAT_INTERVAL = 4.0, 1.0  # a short lease
from lirun.flows.engine import run_flow
from lirun.flows.load import load_flow

spec = load_flow(Path(sys.argv[1]), cwd=sys.argv[2])
report = run_flow(spec, db_url=sys.argv[3], invocation_id="frozen-flow")
print(report.status, report.reason_code, report.reason_summary, flush=True)
"""


def test_a_frozen_flow_owner_has_its_legs_killed_before_its_lease_lapses(
    tmp_path: Path,
) -> None:
    """`li flow run`'s owner (lease 4 s here) SIGSTOPped: its leg dies by lease - margin
    after its last heartbeat, before anyone could judge the flow stale and resume it; the
    owner, let go, ends the flow cancelled for its lost lease."""
    from lirun.store import open_store
    from support.ledgerkit import copies, write_program

    program = write_program(tmp_path)
    ledger = tmp_path / "ledger.txt"
    flow = tmp_path / "long.yaml"
    flow.write_text(
        f"legs:\n  - id: long\n    run: [{sys.executable}, {program}, {ledger}, '30']\n"
    )
    url = str(tmp_path / "state.db")
    env = {**os.environ, "LIRUN_HOME": str(tmp_path / "home"), "LIRUN_DB_URL": url}
    owner = subprocess.Popen(
        [sys.executable, "-c", FLOW_OWNER, str(flow), str(tmp_path), url],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not copies(ledger) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert copies(ledger), (
            "the leg never started" if owner.poll() is None else owner.communicate()
        )
        time.sleep(0.5)
        os.kill(owner.pid, signal.SIGSTOP)
        stopped_at = time.time()
        time.sleep(5.0)
        (copy,) = copies(ledger)
        # killed at most lease - margin (3 s) after the last beat, which was < 1 s before
        assert copy.last - stopped_at < 3.2, copy.last - stopped_at
        assert not copy.ended
        row = open_store(url).get_entity("invocation", "frozen-flow")
        assert row is not None
        assert row["status"] == "running"
        os.kill(owner.pid, signal.SIGCONT)
        out, err = owner.communicate(timeout=60)
    finally:
        if owner.poll() is None:
            os.kill(owner.pid, signal.SIGCONT)
            owner.kill()
            owner.communicate()
    assert out.startswith("cancelled run.cancelled.system"), (out, err[-2000:])
    assert "lease" in out


def test_one_helper_keeps_the_lease_and_guards_the_runs(tmp_path: Path) -> None:
    """An owner with a lease and a run in progress has one helper process (its guard), and
    when the owner is SIGKILLed that helper both kills the owner's leftover work and kills
    the run's tree, leaving the note that says so (it does not kill itself first)."""
    owner = subprocess.Popen(
        [sys.executable, "-c", ONE_HELPER, str(tmp_path)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "LIRUN_CGROUP": "off"},
    )  # fmt: skip
    try:
        assert owner.stdout is not None
        run_pid, loose_pid, guard_pid = (int(x) for x in owner.stdout.readline().split())
        helpers = [
            p for p in psutil.Process(owner.pid).children()
            if p.pid not in (run_pid, loose_pid) and p.status() != psutil.STATUS_ZOMBIE
        ]  # fmt: skip
        assert [p.pid for p in helpers] == [guard_pid]
        time.sleep(0.7)  # the guard looked at the owner's tree (every 0.5 s) and saw `loose`
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (
            psutil.pid_exists(guard_pid) or not (tmp_path / "owner_died.json").exists()
        ):
            time.sleep(0.02)
        for pid in (run_pid, loose_pid):
            assert not _alive(pid), f"{pid} outlived its owner"
        import json

        note = json.loads((tmp_path / "owner_died.json").read_text())
        assert [p["pid"] for p in note["killed"]] == [run_pid]
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


ONE_HELPER = """\
import subprocess, sys, time
from lirun.exec import guard
from lirun.exec.fence import Fence
from lirun.settings import Settings

fence = Fence(30.0).start()
guard.watch("mark-1", None, sys.argv[1], Settings.from_env())
run = subprocess.Popen(["sleep", "60"], start_new_session=True)
guard.started("mark-1", run.pid, None)
loose = subprocess.Popen(["sleep", "61"])  # the owner's, but no run's: the lease's to kill
print(run.pid, loose.pid, guard.guard_pid(), flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# --- a whole owner frozen with its guard -----------------------------------------------------

# An owner whose work is a watched run (its own session) writing a line every 5 ms, and
# which renews every 0.1 s: thawed, it renews at once, as a worker's heartbeat does.
WHOLE = """\
import subprocess, sys, time
from lirun.exec import guard
from lirun.exec.fence import Fence

from lirun.settings import Settings

lease, ledger, code = float(sys.argv[1]), sys.argv[2], sys.argv[3]
fence = Fence(lease).start()
guard.watch("whole-freeze", None, None, Settings.from_env())
work = subprocess.Popen([sys.executable, "-c", code, ledger], start_new_session=True)
guard.started("whole-freeze", work.pid, None)
print("ready", flush=True)
while True:
    fence.renewed(time.monotonic())
    time.sleep(0.1)
"""
WRITER = """\
import sys, time
while True:
    with open(sys.argv[1], "a") as ledger:
        ledger.write(f"{time.time():.4f}\\n")
    time.sleep(0.005)
"""


def test_a_guard_frozen_with_its_owner_kills_the_work_the_moment_it_is_thawed(
    tmp_path: Path,
) -> None:
    """Owner, guard and work frozen together (a cgroup's freezer) past the deadline: the
    guard cannot act while frozen, but thawed it kills first (CLOCK_MONOTONIC ran on),
    even though the owner, thawed too, renews at once: a renewal begun after the
    deadline does not undo the lapse. The work writes for milliseconds after the thaw."""
    from support.freezer import freezer, unavailable

    why = unavailable()
    if why is not None:
        pytest.skip(f"cgroup v2 freezer: {why}")
    after: list[float] = []
    for index in range(3):
        ledger = tmp_path / f"ledger-{index}"
        with freezer("guard") as group:
            argv = group.argv([sys.executable, "-c", WHOLE, "2", str(ledger), WRITER])
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
            try:
                _read(proc, "ready")
                time.sleep(0.3 + 0.1 * index)
                group.freeze()
                time.sleep(2.5)  # past the deadline (1.5 s after the last renewal)
                thawed = group.thaw()
                time.sleep(1.0)
                last = float(ledger.read_text().split()[-1])
                assert not _writing(group.pids()), f"round {index}: the work runs on after the thaw"
                after.append(last - thawed)
            finally:
                proc.kill()
                proc.wait()
    assert max(after) < 0.25, [f"{a * 1000:.1f} ms" for a in after]


def _writing(pids: list[int]) -> list[int]:
    """Those of ``pids`` that are the ledger writer of ``WHOLE``."""
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).cmdline()[1:3] == ["-c", WRITER]:
                found.append(pid)
    return found
