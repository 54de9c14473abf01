"""psycopg connections whose every wait for the server's answer is bounded on the client.

``BoundedConnection`` (sync: the store, listeners, the queue's enqueue pool) and
``AsyncBoundedConnection`` (the queue worker's pool, procrastinate's listener) give each
wait psycopg makes for an answer (a query, a commit, LISTEN) the limit
``deadline.answer_limit`` says; past it the connection is closed (its state is unknown:
the statement may still run on the server) and ``psycopg.OperationalError`` says the
server did not answer, which the callers already treat as a lost connection (reconnect,
retry, or report). Waiting for notifications is not waiting for an answer: an idle
listener may wait as long as it likes (``notifies``), and its owner's reads find a
server that stopped answering.

Imported only with psycopg, by the PostgreSQL modules of the store.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Generator
from typing import Any

import psycopg
from psycopg import errors

from lirun.store.bounds import answer_limit
from lirun.store.pg_connect import statement_seconds
from lirun.store.pg_errors import NO_ANSWER

__all__ = ["AsyncBoundedConnection", "BoundedConnection"]

# psycopg's wait functions raise this (an OperationalError) when their timeout expires.
_WAIT_TIMEOUT: type[Exception] = getattr(errors, "_WaitTimeout", errors.OperationalError)


class _Bounds:
    """What both connection classes share: when a wait is limited, and the error."""

    listening = 0  # > 0 while ``notifies`` waits: no limit then
    # The statement timeout the session was opened with (read on its first wait: the
    # settings do not change under an open session).
    statement: float | None = None

    def _limit(self, timeout: float | None) -> float | None:
        if timeout is not None or self.listening:
            return None  # the caller's own timeout (psycopg's notifies, cancel) stands
        if self.statement is None:
            self.statement = statement_seconds()
        return answer_limit(self.statement, time.monotonic())

    @staticmethod
    def _no_answer(limit: float) -> psycopg.OperationalError:
        return psycopg.OperationalError(f"{NO_ANSWER} {limit:.1f}s")


class BoundedConnection(_Bounds, psycopg.Connection[Any]):
    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        limit = self._limit(timeout)
        if limit is None:
            return super().wait(gen, interval, timeout)
        try:
            return super().wait(gen, interval, limit)
        except _WAIT_TIMEOUT:
            self.pgconn.finish()  # mid-statement: no way back to a known state
            raise self._no_answer(limit) from None

    def notifies(self, **kwargs: Any) -> Generator[psycopg.Notify]:
        self.listening += 1
        try:
            yield from super().notifies(**kwargs)
        finally:
            self.listening -= 1


class AsyncBoundedConnection(_Bounds, psycopg.AsyncConnection[Any]):
    async def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        limit = self._limit(timeout)
        if limit is None:
            return await super().wait(gen, interval, timeout)
        try:
            return await super().wait(gen, interval, limit)
        except _WAIT_TIMEOUT:
            self.pgconn.finish()
            raise self._no_answer(limit) from None

    async def notifies(self, **kwargs: Any) -> AsyncGenerator[psycopg.Notify]:
        self.listening += 1
        try:
            async for note in super().notifies(**kwargs):
                yield note
        finally:
            self.listening -= 1
