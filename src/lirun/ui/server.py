"""Running the dashboard under uvicorn: ``li ui`` and the tests use the same server.

Event streams never end on their own, so before uvicorn waits for open connections to
finish at shutdown, the watcher ends every stream (each browser reconnects to whatever
serves next); shutting down then takes milliseconds, not the graceful timeout.

The server holds its ground under a flood of connections:

- At most ``max_connections`` connections and requests at once (uvicorn's
  ``limit_concurrency``: a request past it is answered 503), and never more than the
  process's open-file limit leaves room for (the database, the watcher and the files a
  page reads need descriptors too).
- When accepting fails anyway for want of descriptors (EMFILE, ENFILE), the listening
  socket stops being watched for a second (``ACCEPT_BACKOFF_SECONDS``) instead of being
  retried at once: asyncio would otherwise try it again for every connection waiting and
  log a traceback each time, at 100 % CPU. Those refusals, and uvicorn's own "Exceeded
  concurrency limit" warnings, are written as one line per ``REFUSED_LOG_SECONDS`` with
  how many there were, never one line (or traceback) per connection.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket
import sys
import time
from typing import Any

import uvicorn

from lirun.ui.streams import MAX_CONNECTIONS

GRACEFUL_SECONDS = 2
FD_RESERVE = 64  # descriptors kept for the database, the watcher, files a page reads
MIN_CONNECTIONS = 8
ACCEPT_BACKOFF_SECONDS = 1.0  # asyncio's own retry delay once accept() ran out
REFUSED_LOG_SECONDS = 10.0
_OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_OVER_LIMIT = "Exceeded concurrency limit."


def connection_limit(wanted: int | None = None, soft_limit: int | None = None) -> int:
    """How many connections the server takes at once: ``wanted`` (default
    ``MAX_CONNECTIONS``), but no more than the open-file limit leaves room for."""
    if soft_limit is None:
        soft_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    limit = wanted or MAX_CONNECTIONS
    if soft_limit != resource.RLIM_INFINITY:
        limit = min(limit, soft_limit - FD_RESERVE)
    return max(MIN_CONNECTIONS, limit)


class RefusedLog:
    """Refusals condensed: the first one is said at once, then one line per ``every``
    seconds with how many came since (pure but for ``write``)."""

    def __init__(self, write: Any = None, every: float = REFUSED_LOG_SECONDS) -> None:
        self._write = write or (lambda line: sys.stderr.write(line))
        self._every = every
        self._counts: dict[str, int] = {}
        self._said_at: float | None = None

    def note(self, what: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self._counts[what] = self._counts.get(what, 0) + 1
        if self._said_at is None or now - self._said_at >= self._every:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        if not self._counts:
            return
        self._said_at = time.monotonic() if now is None else now
        said = "; ".join(f"{n} {what}" for what, n in sorted(self._counts.items()))
        self._counts.clear()
        self._write(f"li ui: refused: {said} (at most one such line every "
                    f"{self._every:g} s)\n")  # fmt: skip


class GuardedListener(socket.socket):
    """The listening socket, whose ``accept`` backs off once descriptors run out.

    asyncio's accept loop logs the failure and stops watching the socket for a second,
    but (Python 3.11) then goes on calling accept for every connection waiting, logging
    each and scheduling a retry each. Here the first failure of a second reaches asyncio
    (which stops watching); the others look like an empty queue, so it stops trying.
    """

    refused: RefusedLog

    def accept(self) -> tuple[socket.socket, Any]:
        try:
            return super().accept()
        except OSError as exc:
            if exc.errno not in _OUT_OF_FILES:
                raise
            self.refused.note(f"connections waited: out of file descriptors ({exc.strerror})")
            now = time.monotonic()
            if now < getattr(self, "_quiet_until", 0.0):
                raise BlockingIOError(errno.EAGAIN, "backing off") from None
            self._quiet_until = now + ACCEPT_BACKOFF_SECONDS
            raise


def guarded(sock: socket.socket, refused: RefusedLog) -> GuardedListener:
    """``sock`` (now detached) as a GuardedListener."""
    listener = GuardedListener(sock.family, sock.type, sock.proto, fileno=sock.detach())
    listener.refused = refused
    return listener


class _OverLimit(logging.Filter):
    """uvicorn's warning for each request past ``limit_concurrency``, counted instead."""

    def __init__(self, refused: RefusedLog) -> None:
        super().__init__()
        self._refused = refused

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage() == _OVER_LIMIT:
            self._refused.note("requests answered 503: too many connections at once")
            return False
        return True


class DashboardServer(uvicorn.Server):
    def __init__(self, app: Any, *, max_connections: int | None = None) -> None:
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=GRACEFUL_SECONDS,
            limit_concurrency=connection_limit(max_connections),
        )
        super().__init__(config)
        self._dashboard = getattr(app, "dashboard", None)
        self.refused = RefusedLog()

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(self._loop_exception)
        over_limit = _OverLimit(self.refused)
        logger = logging.getLogger("uvicorn.error")
        logger.addFilter(over_limit)
        try:
            listeners = [guarded(s, self.refused) for s in sockets] if sockets else sockets
            await super().serve(sockets=listeners)  # type: ignore[arg-type]
        finally:
            logger.removeFilter(over_limit)
            self.refused.flush()

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The accept failures the listener counted are not logged again, with a
        traceback; nor is asyncio's retry to accept that fires after shutdown closed the
        listener (Python 3.11 leaves that timer running)."""
        exc = context.get("exception")
        if (
            isinstance(exc, OSError)
            and exc.errno in _OUT_OF_FILES
            and "accept" in str(context.get("message", ""))
        ):
            return
        callback = getattr(context.get("handle"), "_callback", None)
        if getattr(callback, "__name__", "") == "_start_serving" and self.should_exit:
            return
        loop.default_exception_handler(context)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._dashboard is not None:
            self._dashboard.hub.end_streams()
        await super().shutdown(sockets=sockets)
