"""The threads an orchestration (a flow, a show) runs its executions in, and how it stops them.

Each piece of work runs inside ``trapped(key)``: its own ``SignalTrap`` (inert in a
thread), registered under ``key`` for as long as the work runs. ``stop(signum)`` delivers
the signal to every registered trap, so each supervised execution stops its child as it
would for a real signal, and a trap registered after it gets the first signal ``stop``
was given as soon as it exists: nothing a stopping orchestration starts runs unstopped.
What the work reports goes on ``results``, read by the one thread that owns the records.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from lirun.signals import SignalTrap

__all__ = ["Pool"]

R = TypeVar("R")


class Pool(Generic[R]):
    """Named threads (``<prefix>-<key>``) and the traps of the work they run."""

    def __init__(self, prefix: str) -> None:
        self.results: queue.Queue[R] = queue.Queue()
        self.prefix = prefix
        self.stopping: int | None = None  # the first signal ``stop`` was given
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._traps: dict[str, SignalTrap] = {}
        self._threads: dict[str, threading.Thread] = {}

    # -- threads --

    def start(self, key: str, target: Callable[[], None]) -> None:
        """Run ``target`` in a new daemon thread known by ``key`` until ``join``."""
        thread = threading.Thread(target=target, name=f"{self.prefix}-{key}", daemon=True)
        self._threads[key] = thread
        thread.start()

    @property
    def busy(self) -> int:
        """Threads started and not yet joined."""
        return len(self._threads)

    def running(self, key: str) -> bool:
        return key in self._threads

    def started(self) -> list[str]:
        """The keys of the threads started and not yet joined."""
        return list(self._threads)

    def join(self, key: str) -> None:
        """Wait for the thread ``key`` (if any) and forget it."""
        thread = self._threads.pop(key, None)
        if thread is not None:
            thread.join()

    def join_all(self) -> None:
        for thread in list(self._threads.values()):
            thread.join()
        self._threads.clear()

    # -- stopping --

    @contextmanager
    def trapped(self, key: str) -> Iterator[SignalTrap]:
        """A trap of its own for the work known by ``key``, reached by ``stop`` while the
        block runs (and given the signal at once when ``stop`` came first)."""
        with SignalTrap() as trap:
            with self._lock:
                self._traps[key] = trap
                late = self.stopping
            if late is not None:
                trap.deliver(late)
            try:
                yield trap
            finally:
                with self._lock:
                    self._traps.pop(key, None)

    def stop(self, signum: int) -> None:
        """Deliver ``signum`` to every trap registered now; later ones get the first
        signal given."""
        with self._lock:
            if self.stopping is None:
                self.stopping = signum
            self._stopped.set()
            traps = list(self._traps.values())
        for trap in traps:
            trap.deliver(signum)

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def wait_stopped(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds, cut short by ``stop``; whether it came."""
        return self._stopped.wait(timeout)
