"""The owner's guard: when the process that supervises runs dies, their trees die with it.

``li run``, ``li flow run``, ``li show run`` and ``li worker`` each start one small guard
process (lazily, at their first supervised child) in a session of its own. The owner
holds the write end of a pipe to the guard's stdin and tells it, one JSON line each,
which runs are in progress (the child's pid, its cgroup, where to leave a note) and which
ended. The kernel closes the pipe when the owner dies, however it dies (SIGKILL, OOM):
on end of file the guard kills every run still listed (``containment.kill_run_tree``:
the cgroup, else the group, the session and the pids it was told of) and writes the note
into the run's directory, which ``li reap`` adds to the record as evidence. The guard
needs neither the owner's threads nor the database.

A guard that cannot start leaves the parent-death signal of the child as the only
safeguard (and the reaper's SIGTERM of the group); nothing else changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from lirun.exec.cgroup import RunCgroup
from lirun.exec.containment import kill_run_tree
from lirun.exec.descendants import add_helper
from lirun.liveness import OWNER_DEATH_NOTE

__all__ = ["NOTE_NAME", "Guard", "guard_pid", "main", "unwatch", "watch"]

# The note the guard leaves in a run's state directory (record.reap reads it).
NOTE_NAME = OWNER_DEATH_NOTE
# ``LIRUN_GUARD=off``: no guard process (tests of the fallback; not for production).
GUARD_ENV = "LIRUN_GUARD"


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

    def send(self, message: dict[str, Any]) -> None:
        """One line, written whole or not at all (under PIPE_BUF: atomic). The owner never
        blocks on its guard: a guard that stopped reading is killed and replaced."""
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


_guard: Guard | None = None
_guard_lock = threading.Lock()


def _src_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def _start() -> Guard | None:
    # -I -S: no site, no environment, no script directory; only lirun's own source tree
    # is put on the path. Its stdio: the pipe, and nothing.
    code = (
        f"import sys; sys.path.insert(0, {_src_root()!r}); "
        "from lirun.exec.guard import main; main()"
    )
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LD_LIBRARY_PATH")}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", code, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            cwd="/",
            env=env,
        )
    except OSError:
        return None

    add_helper(proc.pid)
    return Guard(proc)


def current() -> Guard | None:
    """This process's guard, started on first use (again after a fork); None if off."""
    global _guard
    if os.environ.get(GUARD_ENV, "").strip().lower() in ("off", "0", "no", "false"):
        return None
    with _guard_lock:
        guard = _guard
        if (
            guard is None
            or guard.owner != os.getpid()
            or guard.broken
            or guard.proc.poll() is not None
        ):
            _guard = _start()
        return _guard


def guard_pid() -> int | None:
    """The pid of this process's guard, if one runs."""
    guard = _guard
    return guard.proc.pid if guard is not None and guard.owner == os.getpid() else None


def watch(
    leader: int,
    cgroup: str | None,
    note_dir: str | os.PathLike[str] | None,
    mark: str | None = None,
) -> None:
    """The guard kills run ``leader``'s tree if this process dies before :func:`unwatch`."""
    guard = current()
    if guard is not None:
        note = str(note_dir) if note_dir is not None else None
        message = {"op": "watch", "leader": leader, "cgroup": cgroup, "mark": mark}
        guard.send({**message, "note_dir": note})


def unwatch(leader: int) -> None:
    guard = _guard
    if guard is not None and guard.owner == os.getpid():
        guard.send({"op": "unwatch", "leader": leader})


# --- the guard process ----------------------------------------------------------------------


def _serve(stdin: IO[bytes]) -> dict[int, dict[str, Any]]:
    """Follow the owner's messages until end of file; the runs still in progress then."""
    runs: dict[int, dict[str, Any]] = {}
    for raw in stdin:
        try:
            message = json.loads(raw)
            leader = int(message["leader"])
        except (ValueError, KeyError, TypeError):
            continue
        if message.get("op") == "watch":
            runs[leader] = message
        else:
            runs.pop(leader, None)
    return runs


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


def main() -> None:
    """The guard process: ``python -I -S -c ... OWNER_PID``, the owner's pipe on stdin."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    owner = int(sys.argv[1]) if len(sys.argv) > 1 else 0

    runs = _serve(sys.stdin.buffer)
    for leader, message in runs.items():
        entry = kill_run_tree(leader, message.get("cgroup"), mark=message.get("mark"))
        if message.get("cgroup"):
            RunCgroup(Path(message["cgroup"])).remove()
        if message.get("note_dir"):
            _write_note(str(message["note_dir"]), owner, entry)
