"""Turn SIGINT / SIGTERM / SIGHUP to ``li`` into a flag the supervisor loop can wait on.

While a trap is active the signals never raise (no KeyboardInterrupt mid-write): they are
recorded, and a byte on a wake-up pipe makes a blocked ``select`` return at once. The
trap stays active through teardown so the terminal write is committed before ``li`` exits.
"""

from __future__ import annotations

import _signal
import contextlib
import os

from lirun.hints import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable
    from types import FrameType, TracebackType

__all__ = ["TRAPPED_SIGNALS", "SignalTrap", "held_trap", "hold_signals", "release_signals"]

# The C module, not ``signal``: that one builds enums (``enum`` and ``re`` on the start-up
# path of every `li` command); the ``Signals`` enum is made only once a signal came.
TRAPPED_SIGNALS: tuple[int, ...] = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)


class SignalTrap:
    """Context manager recording the first trapped signal (``received``) and a count.

    Outside the main thread (where Python cannot install handlers) the trap is inert:
    ``received`` stays None and ``fileno()`` is a pipe nobody writes to.

    ``after_child``: the first signal came when the child being watched (``watch_child``)
    had already ended by itself, so it stopped nothing: it is asked at the moment the
    signal comes, not when the supervisor gets to it (a frozen ``li`` wakes to both the
    child's exit and a signal that came after it).
    """

    def __init__(self, signals: tuple[int, ...] = TRAPPED_SIGNALS) -> None:
        self.signals = signals
        self._received: int | None = None
        self.count = 0
        self._read_fd = -1
        self._write_fd = -1
        self._previous: dict[int, Any] = {}
        self._previous_wakeup = -1
        self._installed = False
        self._child_ended: Callable[[], bool | None] | None = None
        self.after_child: bool | None = False
        self.cause: str | None = None  # who sent the first signal, when ``deliver`` says

    @property
    def received(self) -> signal.Signals | None:
        """The first trapped signal, if one came."""
        if self._received is None:
            return None
        import signal

        return signal.Signals(self._received)

    @property
    def signal_name(self) -> str | None:
        return self.received.name if self.received is not None else None

    def fileno(self) -> int:
        return self._read_fd

    def __enter__(self) -> SignalTrap:
        self._read_fd, self._write_fd = os.pipe()
        for fd in (self._read_fd, self._write_fd):
            os.set_blocking(fd, False)
            os.set_inheritable(fd, False)
        try:
            self._previous_wakeup = _signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        except ValueError:
            return self  # not the main thread: Python cannot install handlers here
        for sig in self.signals:
            self._previous[sig] = _signal.signal(sig, self._handle)
        self._installed = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._installed:
            for sig, handler in self._previous.items():
                _signal.signal(sig, handler)
            _signal.set_wakeup_fd(self._previous_wakeup)
            self._installed = False
        for fd in (self._read_fd, self._write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def watch_child(self, ended: Callable[[], bool | None] | None) -> None:
        """While a child runs, ``ended()`` says whether it has ended (None from it: not
        known yet; ``ended`` None: no child)."""
        self._child_ended = ended

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self._received is None:
            ended = self._child_ended
            # Before ``received``: a reader in another thread never sees the signal
            # without knowing whether the child had ended before it.
            self.after_child = ended() if ended is not None else False
            self._received = signum

    def deliver(self, signum: int, cause: str | None = None) -> None:
        """Record ``signum`` as if it had come to this trap, and wake whoever waits on it.

        How an orchestrator stops an execution running in one of its threads (where the
        trap cannot install handlers): the supervisor sees the signal and stops the child
        as it would for a real one. ``cause``: why, for the record (a worker that lost its
        lease), instead of "li received SIGTERM".
        """
        if self._received is None:
            self.cause = cause
        self._handle(signum, None)
        with contextlib.suppress(OSError):
            os.write(self._write_fd, b"\0")

    def drain(self) -> None:
        """Empty the wake-up pipe (its bytes only say "a signal came")."""
        with contextlib.suppress(OSError):
            while os.read(self._read_fd, 512):
                pass

    def exit_code(self) -> int | None:
        """The conventional shell code for the received signal (128 + number), if any."""
        return 128 + self._received if self._received is not None else None


# --- a trap for the whole process (``li run`` / ``li agent``) ---------------------------------

_held: SignalTrap | None = None


def hold_signals(early: list[int] | None = None) -> SignalTrap:
    """Trap the signals from now until the process exits (idempotent).

    ``li run`` installs it before anything that can be interrupted: a signal while the
    command starts is recorded (never a KeyboardInterrupt traceback), and one that comes
    after the outcome is written cannot turn the exit code into 128+n. ``early``: signal
    numbers recorded before this trap existed.
    """
    global _held
    if _held is None:
        _held = SignalTrap().__enter__()
        for signum in early or ():  # recorded before this trap could be installed
            _held._handle(signum, None)
    return _held


def held_trap() -> SignalTrap | None:
    """The process-wide trap, if ``hold_signals`` installed one."""
    return _held


def release_signals() -> None:
    """At exit: ignore the trapped signals, so none can change the exit code any more."""
    global _held
    if _held is None:
        return
    if _held._installed:
        for sig in _held.signals:
            _signal.signal(sig, _signal.SIG_IGN)
        _held._installed = False
    _held = None
