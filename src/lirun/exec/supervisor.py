"""Run one child process under supervision: capture, timeouts, watchdog, grace, signals.

The child gets its own session (and so its own process group): ``li`` stops the whole
group, never a stray pid. On Linux it starts inside a cgroup of its own when one can be
made, and dies with its owner (``containment``); when it exits, whatever it left running
gets its first signal at once and is ended after a grace (``ending``: the cgroup, else
``descendants``), and the owner's guard is told it is done. With ``defer_ending`` the
caller records the outcome before that grace (``ProcessResult.ending``).
One ``select`` loop in the calling thread copies output chunks to sinks and wakes for
the first of: output, the child's exit (a pidfd), a signal to ``li`` (the trap's wake-up
pipe), or the nearest deadline. Nothing here touches the database; the caller judges the
:class:`ProcessResult`.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from lirun.errors import LirunError
from lirun.exec import cgroup as cgroups
from lirun.exec import containment, guard
from lirun.exec.capture import ChunkSink
from lirun.exec.cgroup import RunCgroup
from lirun.exec.containment import child_setup
from lirun.exec.descendants import own_children, release_leader, spawning
from lirun.exec.ending import Ending
from lirun.exec.ending import begin as begin_ending
from lirun.exec.leg_states import KillCause, LegState, Limits, Seen, Stop, Watch, advance, next_wake
from lirun.settings import Settings
from lirun.signals import SignalTrap

__all__ = [
    "KillCause",
    "Limits",
    "ProcessResult",
    "SpawnError",
    "StreamProgress",
    "supervise",
]

READ_SIZE = 64 * 1024
# A bigger pipe means fewer wake-ups for a chatty child; the kernel may refuse, harmless.
PIPE_SIZE = 1024 * 1024
_POLL_WITHOUT_PIDFD = 0.05
_MAX_SLEEP = 1.0
_DEFAULT_LIMITS = Limits()


class SpawnError(LirunError, OSError):
    """The command could not be started (missing, not executable, bad cwd).

    Check the command name and its permissions; ``li run`` looks it up on PATH.
    """

    exit_code = 2


class StreamProgress(Protocol):
    """What an agent leg's stream says to the loop: when it last made progress (the stall
    timer), and whether it must be stopped now (the provider refused the credentials)."""

    def progress_at(self) -> float: ...

    def must_stop(self) -> bool: ...


@dataclass(slots=True)
class ProcessResult:
    """What happened to the child. ``exit_code`` is negative when a signal ended it;
    ``signal_name``: the signal ``li`` received while the child still ran (none when the
    child had ended by itself before it came)."""

    pid: int
    exit_code: int | None
    killed_by: KillCause | None = None
    signal_name: str | None = None
    stop_cause: str | None = None  # why that signal came, when its sender said (deliver)
    duration: float = 0.0
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    escalated_to_sigkill: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    # Evidence entries for processes the run left behind that li had to end.
    killed_descendants: list[dict[str, Any]] = field(default_factory=list)
    # ``supervise(defer_ending=True)``: the leftovers still being ended; the caller records
    # the outcome, then calls ``ending.finish()`` (the evidence of what needed SIGKILL).
    ending: Ending | None = None

    @property
    def timed_out(self) -> bool:
        return self.killed_by in ("timeout", "idle")


def _spawn(
    argv: Sequence[str],
    *,
    cwd: str | None,
    env: Mapping[str, str] | None,
    stdin: int | IO[Any] | None,
    cgroup: RunCgroup | None = None,
) -> subprocess.Popen[bytes]:
    child_env = dict(env) if env is not None else None
    if cwd is not None and child_env is not None and "PWD" in child_env:
        # PWD names the directory the child starts in, as a shell's cd would set it: a CLI
        # that takes PWD over getcwd() (some agent CLIs do) works in the run's directory, not in
        # the one li was started from.
        child_env["PWD"] = os.path.abspath(cwd)
    try:
        return subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=child_env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
            preexec_fn=child_setup(cgroup),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise SpawnError(f"cannot start {argv[0]!r}: {reason}") from exc


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _has_exited(pid: int) -> bool:
    """True once ``pid`` is a zombie; it is not reaped, so its group id stays reserved."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _grow_pipe(fd: int) -> None:
    setter = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setter is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, setter, PIPE_SIZE)


class _Loop:
    """The select loop over one child; ``run`` returns when the child is gone and drained."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        sinks: dict[int, ChunkSink],
        limits: Limits,
        trap: SignalTrap | None,
        terminal_seen: Callable[[], bool],
        clock: Callable[[], float],
        exclude: frozenset[int] = frozenset(),
        progress: StreamProgress | None = None,
        cgroup: RunCgroup | None = None,
        mark: str | None = None,
    ) -> None:
        self.proc = proc
        self.progress = progress
        self.cgroup = cgroup
        self.mark = mark
        self.exclude = exclude
        self.sinks = sinks
        self.trap = trap
        self.terminal_seen = terminal_seen
        self.clock = clock
        self.limits = limits
        now = clock()
        self.watch = Watch.start(now)
        self.last_output = now
        self.terminal = False
        self.stop_now = False
        self.exited = False
        self.ending: Ending | None = None
        self.result = ProcessResult(pid=proc.pid, exit_code=None)
        self.selector = selectors.DefaultSelector()
        self.pidfd = _open_pidfd(proc.pid)
        self.counts = {fd: 0 for fd in sinks}

    def run(self) -> ProcessResult:
        for fd in self.sinks:
            self.selector.register(fd, selectors.EVENT_READ, "out")
        if self.pidfd is not None:
            self.selector.register(self.pidfd, selectors.EVENT_READ, "exit")
        if self.trap is not None:
            self.selector.register(self.trap.fileno(), selectors.EVENT_READ, "signal")
        try:
            while self.watch.state is not LegState.DONE:
                self._step()
        finally:
            self._close()
        return self._finish()

    def _open_fds(self) -> list[int]:
        return [k.fd for k in self.selector.get_map().values() if k.data == "out"]

    def _step(self) -> None:
        fallback = _MAX_SLEEP if self.pidfd is not None else _POLL_WITHOUT_PIDFD
        timeout = next_wake(self.watch, self.limits, self._seen(), fallback)
        for key, _ in self.selector.select(timeout):
            if key.data == "out":
                self._read(key.fd)
            elif key.data == "signal" and self.trap is not None:
                self.trap.drain()
            elif key.data == "exit":
                self.selector.unregister(key.fd)
                self._on_exit()
        if not self.exited and self.pidfd is None and _has_exited(self.proc.pid):
            self._on_exit()
        self._advance()

    def _read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        if not chunk:
            self.selector.unregister(fd)
            return
        self.counts[fd] += len(chunk)
        self.last_output = self.clock()
        self.sinks[fd].feed(chunk)
        if not self.terminal and self.terminal_seen():
            self.terminal = True
        if self.progress is not None and not self.stop_now:
            self.stop_now = self.progress.must_stop()

    def _signalled(self) -> bool:
        """li received a signal while the child still ran (one that came after the child
        had ended by itself stops nothing, so it does not turn the child's ending into
        li's, however late li gets to either)."""
        trap = self.trap
        return trap is not None and trap.received is not None and not trap.after_child

    def _on_exit(self) -> None:
        self.exited = True
        if self._signalled():
            assert self.trap is not None
            self.result.signal_name = self.trap.signal_name
            self.result.stop_cause = self.trap.cause
        self._end_leftovers()

    def _end_leftovers(self) -> None:
        """The child is gone: what it left running gets its first signal now, no wait (the
        unreaped leader keeps its group id reserved); ``Ending.finish`` ends it after the
        grace. After li stopped the child, stragglers get SIGKILL at once."""
        self.ending = begin_ending(
            self.proc.pid,
            cgroup=self.cgroup,
            exclude=self.exclude,
            mark=self.mark,
            stopped=self.result.killed_by is not None,
            grace=min(self.limits.kill_grace, 2.0),
        )
        self.result.killed_descendants.extend(self.ending.entries)

    def _seen(self) -> Seen:
        trap = self.trap
        received = self._signalled()
        return Seen(
            now=self.clock(),
            last_output=self.last_output,
            terminal=self.terminal,
            exited=self.exited,
            pipes_open=bool(self._open_fds()),
            signal=received,
            signals=trap.count if trap is not None and received else 0,
            last_progress=self.progress.progress_at() if self.progress is not None else None,
            stop_now=self.stop_now,
            leftovers=self.ending is not None and self.ending.pending,
        )

    def _advance(self) -> None:
        """One transition (``leg_states.advance``), then the signals it asks for."""
        self.watch, actions = advance(self.watch, self.limits, self._seen())
        for action in actions:
            if isinstance(action, Stop):
                self._stop(action.cause)
            else:
                self._escalate()

    def _stop(self, cause: KillCause) -> None:
        trap = self.trap
        if cause == "signal" and trap is not None and trap.received is not None:
            sig = trap.received
            self.result.signal_name = trap.signal_name
            self.result.stop_cause = trap.cause
        else:
            sig = signal.SIGTERM
        self.result.killed_by = cause
        self.result.timings[f"kill_{cause}"] = self.clock() - self.watch.started
        _signal_group(self.proc.pid, sig)

    def _escalate(self) -> None:
        self.result.escalated_to_sigkill = True
        _signal_group(self.proc.pid, signal.SIGKILL)

    def _close(self) -> None:
        self.selector.close()
        if self.pidfd is not None:
            os.close(self.pidfd)

    def _finish(self) -> ProcessResult:
        for sink in self.sinks.values():
            sink.finish()
        out_fd, err_fd = self._fds()
        self.result.stdout_bytes = self.counts.get(out_fd, 0)
        self.result.stderr_bytes = self.counts.get(err_fd, 0)
        self.result.exit_code = _exit_status(self.proc)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        self.result.duration = self.clock() - self.watch.started
        return self.result

    def _fds(self) -> tuple[int, int]:
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        return self.proc.stdout.fileno(), self.proc.stderr.fileno()


def supervise(
    argv: Sequence[str],
    *,
    stdout: ChunkSink,
    stderr: ChunkSink,
    limits: Limits = _DEFAULT_LIMITS,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    trap: SignalTrap | None = None,
    terminal_seen: Callable[[], bool] = lambda: False,
    on_spawn: Callable[[int], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    progress: StreamProgress | None = None,
    note_dir: str | os.PathLike[str] | None = None,
    settings: Settings | None = None,
    defer_ending: bool = False,
) -> ProcessResult:
    """Run ``argv`` until it exits (or is stopped), copying its output to the sinks.

    A signal already recorded by ``trap`` stops the child as soon as it starts.
    ``progress``: an agent stream's progress (arms ``limits.stall_timeout``, and stops the
    child at once when the stream says the run cannot succeed). ``note_dir``: where the
    owner's guard leaves its note if this process dies while the child runs. ``settings``:
    the run's (its cgroup and guard switches); default: the environment's, read once here.
    ``defer_ending``: return once the child's exit is known and its output read, while
    what it left runs out its grace (``result.ending``): the caller records the outcome,
    then calls ``result.ending.finish()``, which also lets go of the run (its cgroup, the
    guard's watch); else that happens here, before returning.
    Raises :class:`SpawnError` when the command cannot be started.

    The calling thread starts the child and supervises it to its end: the child's
    parent-death signal fires when the thread that started it ends, so a child must never
    be started by a thread that ends before it.
    """

    settings = settings or Settings.from_env()
    guard.current(settings)  # before the scan of our children: it is ours, not the run's
    exclude = frozenset(own_children())
    group = cgroups.create(settings=settings)
    mark = containment.new_mark()
    env = {**(os.environ if env is None else env), containment.TREE_ENV: mark}
    # The guard knows the run before its child exists: should this process die at any
    # moment from here on, the guard finds the run's processes by its cgroup and mark.
    guard.watch(mark, str(group.path) if group else None, note_dir, settings)
    # From the spawn on, a signal asks whether the child had already ended (None: its
    # handler ran while the child was being started; asked once it is known).
    spawned: list[int] = []
    if trap is not None:
        trap.watch_child(lambda: _has_exited(spawned[0]) if spawned else None)
    try:
        with spawning() as register:
            proc = _spawn(argv, cwd=cwd, env=env, stdin=stdin, cgroup=group)
            spawned.append(proc.pid)
            register(proc.pid)
        if trap is not None and trap.received is not None and trap.after_child is None:
            trap.after_child = _has_exited(proc.pid)
    except BaseException:
        if trap is not None:
            trap.watch_child(None)
        guard.unwatch(mark)
        if group is not None:
            group.remove()
        raise
    group = _joined(group, proc.pid)
    containment.track(proc.pid, group, mark)
    guard.started(mark, proc.pid, str(group.path) if group else None)
    release = functools.partial(_release, proc, group, mark)
    loop: _Loop | None = None
    try:
        assert proc.stdout is not None
        assert proc.stderr is not None
        _grow_pipe(proc.stdout.fileno())
        if on_spawn is not None:
            on_spawn(proc.pid)
        sinks = {proc.stdout.fileno(): stdout, proc.stderr.fileno(): stderr}
        loop = _Loop(
            proc, sinks, limits, trap, terminal_seen, clock, exclude, progress, group, mark
        )
        result = loop.run()
    except BaseException:
        if trap is not None:
            trap.watch_child(None)
        ending = loop.ending if loop is not None else None
        if ending is not None:
            ending.finish()
        release()
        raise
    if trap is not None:
        trap.watch_child(None)  # the child's ending is judged: later signals are teardown's
    ending = loop.ending or Ending(deadline=clock())
    ending.release = release
    if defer_ending:
        result.ending = ending
    else:
        result.killed_descendants.extend(ending.finish())
    return result


def _release(proc: subprocess.Popen[bytes], group: RunCgroup | None, mark: str) -> None:
    """Let go of a run whose leftovers were ended: the guard stops watching it, its cgroup
    goes (killed first if an error cut the loop short: nothing outlives the run), and the
    leader is reaped, which frees its group id."""
    release_leader(proc.pid)
    if group is not None:
        if group.populated():
            containment.kill_run_tree(proc.pid, group.path)
        group.remove()
    containment.untrack(proc.pid)
    guard.unwatch(mark)
    proc.poll()


def _exit_status(proc: subprocess.Popen[bytes]) -> int:
    """The exited child's code (negative: the signal that ended it), read without reaping
    it: the unreaped leader keeps its group id reserved while its leftovers are ended."""
    waitid = getattr(os, "waitid", None)
    try:
        info = waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT) if waitid else None
    except ChildProcessError:
        info = None
    if info is None:
        return proc.wait()
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def _joined(group: RunCgroup | None, pid: int) -> RunCgroup | None:
    """The cgroup, if the child is in it (or exited already); else None (the fallback)."""
    if group is None:
        return None
    group.close_join()
    if group.contains(pid) or _has_exited(pid):
        return group
    group.remove()
    return None
