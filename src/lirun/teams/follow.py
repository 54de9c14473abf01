"""Stream a member's inbox as messages arrive (``li team inbox --follow``).

Woken by the machinery of ``li wait`` (``wait/wake.py``): LISTEN on PostgreSQL (a
message commits with a notification naming its team), the change token with a directory
watch on SQLite. As there, the waker is made before the first read and every wake-up is
followed by a full re-read, so a missed or spurious wake-up costs latency, never a
message; ``POLL_SECONDS`` bounds how long a missed one can delay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from lirun.errors import DatabaseConnectionLostError
from lirun.logs import get_logger
from lirun.store.core import Store
from lirun.store.retry import backoff
from lirun.store.rows import InboxMessageRow, TeamMessageRow
from lirun.store.team_records import READ_LIMIT
from lirun.wait.wake import make_waker

_log = get_logger(__name__)
# The longest sleep between two reads when no wake-up came.
POLL_SECONDS = 2.0
# SQLite: the shortest gap between looks at the change token while a writer is busy.
CHECK_SECONDS = 0.01


@dataclass(frozen=True, slots=True)
class InboxQuery:
    """Which messages a reader wants: ``member``'s (marked read) or, with ``member``
    empty, the whole conversation (marked nothing)."""

    team_id: str
    member: str = ""
    since_seq: int = 0
    unread_only: bool = False


def read_once(
    store: Store, query: InboxQuery, since_seq: int
) -> list[TeamMessageRow] | list[InboxMessageRow]:
    if not query.member:
        return store.teams.conversation(query.team_id, since_seq=since_seq)
    return store.teams.read_inbox(
        query.team_id, query.member, since_seq=since_seq, unread_only=query.unread_only
    )


def follow(
    store: Store,
    query: InboxQuery,
    stop: Callable[[], bool],
    *,
    poll_seconds: float = POLL_SECONDS,
) -> Iterator[list[TeamMessageRow] | list[InboxMessageRow]]:
    """Each batch of new messages, oldest first, until ``stop()`` or the team is archived
    (what it took before being archived is still read and given)."""
    waker = make_waker(
        store.connector, lambda: (query.team_id,), terminal_only=False, check_seconds=CHECK_SECONDS
    )
    since = query.since_seq
    delay: float | None = None  # set while the database does not answer
    try:
        while True:
            try:
                team = store.teams.get(query.team_id)
                rows = read_once(store, query, since)
            except DatabaseConnectionLostError as exc:  # a restart, a failover: keep following
                if delay is None:
                    _log.warning(
                        "%s; retrying until the database answers", exc, extra={"event": "db.lost"}
                    )
                delay = backoff(delay)
                if stop():
                    return
                waker.wait(delay, stop)
                continue
            if delay is not None:
                _log.info("the database answers again", extra={"event": "db.back"})
                delay = None
            if rows:
                since = rows[-1].seq
                yield rows
            waker.after_read(bool(rows))
            if len(rows) >= READ_LIMIT:
                continue
            if stop() or team is None or team.status != "active":
                return
            waker.wait(poll_seconds, stop)
    finally:
        waker.close()
