"""The owner's guard: one helper process per owner, which stops the owner's work when the
owner dies or its lease lapses, without the owner's threads or the database.

``li run``, ``li flow run``, ``li show run`` and ``li worker`` (and a library caller)
each start one guard (lazily, at their first supervised child or lease) in a session of
its own, with no environment but ``PATH`` (and ``LIRUN_PLATFORM``). The owner holds the
write end of a pipe to the guard's stdin and sends it one JSON line per message:

- ``watch`` *before* it starts a run's child: the run's mark (``containment.TREE_ENV``,
  in the environment of everything the run starts), its cgroup and where to leave a note;
  ``leader`` once the child's pid is known; ``unwatch`` when the run ended. So there is no
  moment at which a run's processes exist and its guard does not know them.
- ``renew`` after each renewal of a lease the owner holds: the ``CLOCK_MONOTONIC`` time
  (system-wide on Linux, the owner's ``time.monotonic()``) by which the next must come,
  and when the renewal's write began; ``release`` when the owner gave the lease up itself.

The guard acts on two events:

- **The owner died** (end of file: the kernel closes the pipe however the owner died):
  it kills every watched run's tree (``containment.kill_run_tree``: the cgroup, else the
  group, the session and every process carrying the run's mark), writes the note
  ``owner_died.json`` into the run's directory, which ``li reap`` adds to the record as
  ``killed_with_owner``, and removes the run's database credential file
  (``record.credential``); an owner that held a lease has the rest of its process tree
  killed too (``owner_tree``).
- **A lease's deadline passed with no renewal**: it kills the watched runs' trees and the
  owner's process tree, and again on every tick until a renewal arrives (nothing runs
  under a lapsed lease). Before it sends anything it looks whether each run's child
  still runs and leaves the note ``lease_note.NOTE_NAME`` saying so, so the run's record
  says whether the guard stopped the work or the work had ended by itself. While a lease
  is held it looks at the owner's tree every ``SNAPSHOT_SECONDS``, so descendants
  re-parented away are still found.

The deadline is the first thing it looks at on every wake-up. ``CLOCK_MONOTONIC`` runs on
while a process is stopped or frozen, so a guard frozen together with its owner (a whole
container paused, a frozen pod, a stalled VM: the guard cannot act while it is frozen
too) finds the deadline past the moment it is thawed, and kills before anything else:
the runs' cgroups and groups at once, then what its last look saw, then the rest once it
has looked again. Only what the owner already wrote is read first (never waited for),
and a renewal there spares the work only if its write began before the deadline: one
that began after it (the owner thawed with its guard and renewed at once) means the
lease lapsed in between, and another owner may have the work by now.

A guard that cannot start leaves the parent-death signal of the child as the only
safeguard (and the reaper's SIGTERM of the group) and the owner's own ``Fence.lost()``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from lirun import platform
from lirun.exec import lease_note, owner_tree
from lirun.exec.cgroup import RunCgroup
from lirun.exec.containment import kill_run_tree, strike_run
from lirun.exec.descendants import add_helper
from lirun.liveness import OWNER_DEATH_NOTE
from lirun.platform import PLATFORM_ENV
from lirun.record import credential
from lirun.settings import Settings

__all__ = [
    "NOTE_NAME",
    "Guard",
    "current",
    "guard_pid",
    "main",
    "release",
    "renew",
    "started",
    "unwatch",
    "watch",
]

# The note the guard leaves in a run's state directory (record.reap reads it).
NOTE_NAME = OWNER_DEATH_NOTE
# ``LIRUN_GUARD=off``: no guard process (tests of the fallback; not for production).
_F_SETPIPE_SZ = 1031  # Linux's fcntl to size a pipe (not in every Python's fcntl module)


class Guard:
    """The owner's side: a pipe to the guard process."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.lock = threading.Lock()
        self.owner = os.getpid()
        self.broken = False
        assert proc.stdin is not None
        self.fd = proc.stdin.fileno()
        os.set_blocking(self.fd, False)
        with contextlib.suppress(OSError):  # room for a burst while the guard is busy killing
            fcntl.fcntl(self.fd, _F_SETPIPE_SZ, 1 << 20)

    def send(self, message: dict[str, Any]) -> None:
        """One line, written whole or not at all (under PIPE_BUF: atomic). The owner never
        blocks on its guard: a guard that stopped reading is killed and replaced (the new
        one is told what the old one knew)."""
        line = (json.dumps(message) + "\n").encode()
        with self.lock:
            if self.broken:
                return
            try:
                os.write(self.fd, line)
            except BlockingIOError:
                self.broken = True
                with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                    self.proc.kill()
                    self.proc.wait(timeout=5)
            except OSError:
                self.broken = True


# What this process's guard must know, kept here too so a replaced guard is told again.
_guard: Guard | None = None
_lock = threading.RLock()
_state_pid = os.getpid()
_runs: dict[str, dict[str, Any]] = {}  # mark -> the run's watch message
_leases: dict[int, float] = {}  # lease id -> its deadline (monotonic)


def _src_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def _guard_path() -> list[str]:
    """What the guard puts on its path: lirun's source tree, and under the portable
    platform where psutil is installed (the guard runs without site-packages)."""
    paths = [_src_root()]
    if platform.name() == platform.PORTABLE:
        import psutil  # the portable platform's dependency (lirun.platform.portable)

        paths.append(str(Path(psutil.__file__).resolve().parents[1]))
    return paths


def _start() -> Guard | None:
    # -I -S: no site, no environment, no script directory; only lirun's own source tree
    # (and psutil's, under the portable platform) is put on the path. Its stdio: the
    # pipe, and nothing.
    code = (
        f"import sys; sys.path[:0] = {_guard_path()!r}; from lirun.exec.guard import main; main()"
    )
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LD_LIBRARY_PATH", PLATFORM_ENV)}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", code, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C of the owner's terminal leaves it running
            close_fds=True,
            cwd="/",
            env=env,
        )
    except OSError:
        return None

    add_helper(proc.pid)
    guard = Guard(proc)
    for message in _runs.values():
        guard.send(message)
    for lease, deadline in _leases.items():
        guard.send({"op": "renew", "lease": lease, "deadline": deadline})
    return guard


def _owner_off() -> bool:
    """The owner's switch for a lease (``renew``), which no run's settings carry:
    ``$LIRUN_GUARD`` as this process's settings read it."""
    return not Settings.from_env().guard


def current(settings: Settings) -> Guard | None:
    """This process's guard, started on first use (again after a fork); None if the
    run's ``settings`` switch it off (``$LIRUN_GUARD``)."""
    return None if not settings.guard else _running()


def _running() -> Guard | None:
    """The guard, started if it is not running (None if it cannot start); the caller
    decided it is wanted."""
    global _guard, _state_pid
    with _lock:
        if _state_pid != os.getpid():  # a forked child: its parent's runs are not its own
            _state_pid = os.getpid()
            _runs.clear()
            _leases.clear()
            _guard = None
        guard = _guard
        if guard is None or guard.broken or guard.proc.poll() is not None:
            _guard = _start()
        return _guard


def guard_pid() -> int | None:
    """The pid of this process's guard, if one runs."""
    guard = _guard
    return guard.proc.pid if guard is not None and guard.owner == os.getpid() else None


def _tell(message: dict[str, Any]) -> None:
    """Send ``message`` to the guard; its callers act only when the guard is wanted (a
    watched run, a renewed lease)."""
    with _lock:
        guard = _running()
        if guard is not None:
            guard.send(message)


def watch(
    mark: str,
    cgroup: str | None,
    note_dir: str | os.PathLike[str] | None,
    settings: Settings,
) -> None:
    """Before a run's child starts: the guard kills every process carrying ``mark`` (and
    the ``cgroup``'s) if this process dies before :func:`unwatch`. Nothing when
    run's ``settings`` switch the guard off."""
    if not settings.guard:
        return
    note = str(note_dir) if note_dir is not None else None
    message = {"op": "watch", "mark": mark, "cgroup": cgroup, "note_dir": note, "leader": None}
    with _lock:
        _running()
        _runs[mark] = message
        _tell(message)


def started(mark: str, leader: int, cgroup: str | None) -> None:
    """The run's child is ``leader`` (its group and session), in ``cgroup`` or not."""
    with _lock:
        message = _runs.get(mark)
        if message is None:
            return
        message.update(leader=leader, cgroup=cgroup)
        _tell({"op": "leader", "mark": mark, "leader": leader, "cgroup": cgroup})


def unwatch(mark: str) -> None:
    with _lock:
        if _runs.pop(mark, None) is not None:
            _tell({"op": "unwatch", "mark": mark})


def renew(lease: int, deadline: float, began: float | None = None) -> None:
    """Lease ``lease`` is the owner's until monotonic ``deadline``: past it with no renewal,
    the guard kills the owner's work. ``began``: when the renewal's write began (a renewal
    that began after the last deadline does not undo the lapse)."""
    if _owner_off():
        return
    with _lock:
        _leases[lease] = deadline
        _tell({"op": "renew", "lease": lease, "deadline": deadline, "began": began})


def release(lease: int) -> None:
    """The owner gave lease ``lease`` up itself: no deadline any more."""
    with _lock:
        if _leases.pop(lease, None) is not None:
            _tell({"op": "release", "lease": lease})


# --- the guard process ----------------------------------------------------------------------


def _write_note(note_dir: str, owner: int, entry: dict[str, Any] | None) -> None:
    note = {
        "kind": "owner_died",
        "owner_pid": owner,
        "at": time.time(),
        "killed": entry["processes"] if entry else [],
        "cgroup": entry.get("cgroup") if entry else None,
    }
    path = os.path.join(note_dir, NOTE_NAME)
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(note, handle)


class _Watch:
    """The guard's side: what the owner told it, and what it saw of the owner's tree."""

    def __init__(self, owner: int) -> None:
        self.owner = owner
        self.runs: dict[str, dict[str, Any]] = {}
        self.leases: dict[int, float] = {}
        self.fired = False
        self.missed = False  # a renewal began after its lease's deadline: it lapsed meanwhile
        self.noted: set[str] = set()  # runs told of the current lapse (lease_note)
        self.remembered: owner_tree.Seen = {}
        self.looked = 0.0
        self.groups: set[int] = set()
        try:
            self.own_groups = {os.getpgid(owner) if owner > 0 else -1, os.getpgid(0)}
        except OSError:
            self.own_groups = {os.getpgid(0)}

    def apply(self, raw: bytes) -> None:
        try:
            message = json.loads(raw)
            op = message["op"]
        except (ValueError, KeyError, TypeError):
            return
        if op == "watch":
            self.runs[str(message["mark"])] = message
        elif op == "leader" and str(message.get("mark")) in self.runs:
            self.runs[str(message["mark"])].update(
                leader=message.get("leader"), cgroup=message.get("cgroup")
            )
        elif op == "unwatch":
            self.runs.pop(str(message.get("mark")), None)
        elif op == "renew":
            with contextlib.suppress(KeyError, TypeError, ValueError):
                lease, deadline = int(message["lease"]), float(message["deadline"])
                began, before = message.get("began"), self.leases.get(lease)
                if before is not None and began is not None and float(began) >= before:
                    self.missed = True  # nothing renewed it from its deadline until `began`
                # Renewals only move a deadline later (two threads may send out of order).
                self.leases[lease] = max(deadline, before if before is not None else deadline)
        elif op == "release":
            with contextlib.suppress(KeyError, TypeError, ValueError):
                self.leases.pop(int(message["lease"]), None)

    def deadline(self) -> float | None:
        return min(self.leases.values()) if self.leases else None

    def lapsed(self, now: float) -> bool:
        """A lease's deadline passed (or passed between two renewals): kill."""
        deadline = self.deadline()
        return self.missed or (deadline is not None and now >= deadline)

    def wait(self, now: float) -> float | None:
        """How long the next select may sleep: never past a deadline or a look."""
        deadline = self.deadline()
        if deadline is None:
            return None  # no lease: nothing to do but wait for the owner
        if self.fired:
            return owner_tree.KILL_TICK_SECONDS  # lapsed: kill again, without spinning
        return max(0.0, min(owner_tree.SNAPSHOT_SECONDS, deadline - now))

    def look(self) -> None:
        """Remember the owner's tree now (pids with start times, the groups they lead)."""
        self.looked = time.monotonic()
        table = owner_tree.process_table()
        self.remembered = owner_tree.tree_of(self.owner, table, self.groups)
        # A group id is never reused while the group has a member: one with none is gone.
        alive = {pgrp for _, pgrp, _ in table.values()}
        self.groups = (self.groups | {table[p][1] for p in self.remembered}) & alive
        self.groups -= self.own_groups

    def kill_runs(self, *, note: bool, wait: float) -> None:
        for mark, run in list(self.runs.items()):
            leader = run.get("leader")
            entry = kill_run_tree(
                int(leader) if leader else None, run.get("cgroup"), mark=mark, wait=wait
            )
            if note:
                if run.get("cgroup"):
                    RunCgroup(Path(run["cgroup"])).remove()
                if run.get("note_dir"):
                    _write_note(str(run["note_dir"]), self.owner, entry)
                    # No credential outlives the run's processes (record/credential.py).
                    credential.remove(str(run["note_dir"]))

    def kill_tree(self) -> None:
        owner_tree.kill_tree(self.owner, self.remembered, self.groups)

    def note_lapse(self, lapsed_at: float) -> None:
        """Before anything is sent (the owner reads the note once its child is gone):
        tell each run not yet told of this lapse whether its child had already ended by
        itself. ``lapsed_at``: the deadline that passed (monotonic)."""
        for mark, run in self.runs.items():
            if mark in self.noted or not run.get("note_dir"):
                continue
            self.noted.add(mark)
            leader = run.get("leader")
            now = time.time()
            seen = lease_note.LeaseNote(
                at=now,
                lapsed_at=now - (time.monotonic() - lapsed_at),
                leader_ended=leader is not None and not platform.alive(int(leader)),
            )
            lease_note.write(str(run["note_dir"]), seen)

    def fire(self, lapsed_at: float) -> None:
        """The lease lapsed: kill the owner's work, the quickest kills first (a thawed
        copy runs again the moment it is scheduled), each run told of it first."""
        self.note_lapse(lapsed_at)
        for run in self.runs.values():
            leader = run.get("leader")
            strike_run(int(leader) if leader else None, run.get("cgroup"))
        owner_tree.strike(self.groups)
        self.look()
        self.kill_runs(note=False, wait=0.2)
        self.kill_tree()
        self.fired, self.missed = True, False


def serve(owner: int, source: int) -> None:
    """The guard's loop over the owner's pipe ``source`` (see the module)."""
    state = _Watch(owner)
    buffer = b""
    while True:
        ready, _, _ = select.select([source], [], [], state.wait(time.monotonic()))
        # First, on every wake-up (a thaw too), the deadline; before it only what the
        # owner already wrote is read, which may hold a renewal begun before it.
        if ready or (state.lapsed(time.monotonic()) and _pending(source)):
            chunk = os.read(source, 65536)
            if not chunk:
                # The owner is gone: nothing supervises its work any more.
                state.kill_runs(note=True, wait=2.0)
                if state.leases:
                    state.kill_tree()
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                state.apply(line)
        now = time.monotonic()
        if state.lapsed(now):
            deadline = state.deadline()
            state.fire(deadline if deadline is not None and deadline <= now else now)
            # A lapse between two renewals is killed once; a passed deadline until renewed.
            state.fired = deadline is not None and now >= deadline
            if not state.fired:
                state.noted.clear()
            continue
        state.fired = False
        state.noted.clear()  # renewed: a later lapse is a new one
        if state.leases and now - state.looked >= owner_tree.SNAPSHOT_SECONDS:
            state.look()  # not at every message: a flow's legs come and go in bursts


def _pending(source: int) -> bool:
    """Something the owner wrote waits in the pipe (looked at, never waited for)."""
    ready, _, _ = select.select([source], [], [], 0)
    return bool(ready)


def main() -> None:
    """The guard process: ``python -I -S -c ... OWNER_PID``, the owner's pipe on stdin."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    owner = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    serve(owner, sys.stdin.fileno())
