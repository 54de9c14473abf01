"""How long a wait for the database's answer may last (a caller's deadline, and the
statements that legitimately wait), and the name this process's connections show.

A frozen server (a stopped VM, a SIGSTOPped postmaster) still has its kernel answer TCP:
keepalives and ``tcp_user_timeout`` never fire, and the server's own
``statement_timeout`` cannot, so only a limit on the client side ends such a wait. The
PostgreSQL connections (``pg_bounded``) ask ``answer_limit`` before every wait for an
answer; this module holds what the caller said, in context variables (so a deadline set
around ``asyncio.to_thread`` follows the read into its thread):

- ``answer_by(deadline)``: a caller that must end by a moment (``li wait --timeout``)
  bounds every wait to the time left, plus ``DEADLINE_GRACE_SECONDS``;
- ``unbounded()``: a statement that legitimately runs long (a migration's DDL, ``li gc
  --vacuum``) has neither the server's statement timeout nor the client-side limit.

``name_connections`` names this process's PostgreSQL sessions (``li`` calls it with the
command); ``pg_connect`` reads ``process_name``.

Pure: no driver, no clock of its own (``now`` is given). On ``li wait``'s fast path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# A wait that a caller's deadline cuts short still gets this long: a read that is under way
# at the deadline finishes when the server answers at all, and ``li wait --timeout N`` ends
# by about N + this.
DEADLINE_GRACE_SECONDS = 1.0
# libpq's connect_timeout is whole seconds, at least 2 (a smaller one is raised to 2).
MIN_CONNECT_SECONDS = 2
# The client-side limit exceeds the server's statement timeout by this much, so a server
# that is alive cancels a slow statement first (the connection stays usable) and only a
# server that does not answer at all has its connection cut by the client.
ANSWER_MARGIN_SECONDS = 10.0

_deadline: ContextVar[float | None] = ContextVar("lirun_db_deadline", default=None)
_unbounded: ContextVar[bool] = ContextVar("lirun_db_unbounded", default=False)


@contextmanager
def answer_by(deadline: float | None) -> Iterator[None]:
    """Every wait for the database inside ends by ``deadline`` (``time.monotonic``) plus
    the grace; None: no deadline beyond the connection's own limit."""
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)


@contextmanager
def unbounded() -> Iterator[None]:
    """The statements inside may run as long as they take (no statement timeout on the
    server, no client-side limit): DDL of a migration, ``VACUUM``."""
    token = _unbounded.set(True)
    try:
        yield
    finally:
        _unbounded.reset(token)


def caller_deadline() -> float | None:
    """The deadline ``answer_by`` set (``time.monotonic``), if any: a retry loop stops
    there too."""
    return _deadline.get()


def answer_limit(statement_seconds: float, now: float) -> float | None:
    """Seconds the next wait for an answer may last; None: no limit.

    ``statement_seconds`` is the server's statement timeout (0: off, and so is the
    client-side limit, unless a caller's deadline applies)."""
    if _unbounded.get():
        return None
    own = statement_seconds + ANSWER_MARGIN_SECONDS if statement_seconds > 0 else None
    deadline = _deadline.get()
    if deadline is None:
        return own
    left = max(0.0, deadline - now) + DEADLINE_GRACE_SECONDS
    return left if own is None else min(own, left)


def connect_seconds(configured: float, now: float) -> int:
    """libpq's ``connect_timeout`` for a connection opened now (0: no limit)."""
    limit = answer_limit(0.0, now) if not _unbounded.get() else None
    if limit is not None:
        configured = min(configured, limit) if configured > 0 else limit
    if configured <= 0:
        return 0
    return max(MIN_CONNECT_SECONDS, int(configured + 0.999))


# ``pg_stat_activity.application_name`` of this process's connections (unless the URL
# names one): ``lirun-<command>``, and after a colon the connection's use
# (``lirun-wait:listen``, ``lirun-worker:queue``): an operator sees who holds a
# connection.
_process_name = ["lirun"]


def name_connections(command: str) -> None:
    """This process's connections are ``lirun-<command>`` (``li`` calls it once)."""
    _process_name[0] = f"lirun-{command}"[:40]


def process_name() -> str:
    return _process_name[0]
