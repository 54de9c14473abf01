"""A few open stores of one database, lent to threads one at a time.

Opening a store costs two connections, a schema check and (under load) a tenth of a
second; a thread that handles one short piece of work after another (a worker's run
threads, ``li ui``'s webhook intake) borrows an open one instead: ``with pool.store() as
store``. A store is lent to one thread at a time (its connection's transactions are
that thread's alone) and comes back when the block ends; at most ``keep`` idle stores are
kept, the rest closed, and ``trim`` closes the ones idle longer than ``idle_seconds``
(an idle worker holds no connections it does not use). A store whose block raised is
closed, not kept: its connection's state is unknown. A connection the server dropped (a
restart) is replaced by the store itself on its next use (``postgres._discard_broken``),
so a kept store survives it. ``limit`` bounds the stores lent at once. ``close`` closes
the idle stores and those lent out as they come back; a closed pool lends nothing
(DatabaseUnavailableError).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from lirun.errors import DatabaseUnavailableError
from lirun.store import Store, open_store

__all__ = ["StorePool"]


class StorePool:
    """Open stores of ``url`` (``open_store``'s arguments), lent by ``store()``."""

    def __init__(
        self,
        url: str | os.PathLike[str] | None,
        *,
        keep: int,
        idle_seconds: float = 30.0,
        limit: int | None = None,
        create: bool = True,
    ) -> None:
        self.url = url
        self.keep = max(1, keep)
        self.idle_seconds = idle_seconds
        self.create = create
        # (when it came back, the store); the most recently used is lent first, so the
        # ones a quieter time no longer needs age and are trimmed.
        self._idle: list[tuple[float, Store]] = []
        self._lent = 0
        self._lock = threading.Lock()
        # At most ``limit`` lent at once (a caller past it waits): a server's connections
        # are few, and one burst of requests must not take them all.
        self._slots = threading.BoundedSemaphore(limit) if limit else None
        self._closed = False

    @property
    def lent(self) -> int:
        """How many stores are lent out now."""
        with self._lock:
            return self._lent

    @contextmanager
    def store(self) -> Iterator[Store]:
        """An open store for this block: an idle one, else a new one (open_store's
        errors: the database cannot be reached)."""
        if self._slots is None:
            with self._lent_store() as store:
                yield store
            return
        with self._slots, self._lent_store() as store:
            yield store

    @contextmanager
    def _lent_store(self) -> Iterator[Store]:
        with self._lock:
            if self._closed:
                raise DatabaseUnavailableError("the store pool was closed")
            store = self._idle.pop()[1] if self._idle else None
            self._lent += 1
        try:
            if store is None:
                store = open_store(self.url, create=self.create)
        except BaseException:
            with self._lock:
                self._lent -= 1
            raise
        kept = False
        try:
            yield store
            with self._lock:
                if not self._closed and len(self._idle) < self.keep:
                    self._idle.append((time.monotonic(), store))
                    kept = True
        finally:
            with self._lock:
                self._lent -= 1
            if not kept:
                with suppress(Exception):
                    store.close()

    def trim(self) -> int:
        """Close the stores idle longer than ``idle_seconds``; how many it closed."""
        since = time.monotonic() - self.idle_seconds
        with self._lock:
            old = [store for back, store in self._idle if back < since]
            self._idle = [(back, store) for back, store in self._idle if back >= since]
        for store in old:
            with suppress(Exception):
                store.close()
        return len(old)

    def close(self) -> None:
        """Close the idle stores; the ones lent out are closed when they come back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for _, store in idle:
            with suppress(Exception):
                store.close()
