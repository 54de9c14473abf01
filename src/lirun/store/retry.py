"""Retrying a status write through a lost connection or a held lock, within a bound.

A status write is a guarded compare-and-set that carries a transition id made before its
first try, so trying it again after an error is always safe: if an earlier COMMIT did
land, the retry finds its transition and reports success without writing twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lirun.errors import DatabaseBusyError, DatabaseConnectionLostError
from lirun.hints import TypeVar
from lirun.logs import get_logger
from lirun.store.bounds import DEADLINE_GRACE_SECONDS, caller_deadline

T = TypeVar("T")
log = get_logger(__name__)

FIRST_DELAY_SECONDS = 0.1
MAX_DELAY_SECONDS = 2.0
RETRYABLE = (DatabaseConnectionLostError, DatabaseBusyError)


def write_retry_seconds() -> float:
    """``$LIRUN_WRITE_RETRY_SECONDS`` (``settings.env_write_retry_seconds``, read at call
    time: a store is opened by many callers, none of which hands it settings), else 30;
    never negative. A bad value, which ``li`` refuses before it starts, keeps the default
    here: a teardown does not fail on a setting."""
    from lirun.settings import env_write_retry_seconds

    return env_write_retry_seconds()


def _bound_and_deadline(clock: Callable[[], float]) -> tuple[float, float]:
    """The write-retry bound and when it ends, sooner for a caller that must end by then
    (``li wait --timeout``)."""
    bound = write_retry_seconds()
    deadline = clock() + bound
    caller = caller_deadline()
    if caller is not None and caller + DEADLINE_GRACE_SECONDS < deadline:
        deadline = caller + DEADLINE_GRACE_SECONDS
    return bound, deadline


def backoff(previous: float | None) -> float:
    """0.1 s, doubling, capped at 2 s."""
    return FIRST_DELAY_SECONDS if previous is None else min(previous * 2, MAX_DELAY_SECONDS)


def retry_write(
    attempt: Callable[[float, int], T],
    *,
    where: str,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``attempt(wait_seconds, tries_so_far)`` until it succeeds or the bound is spent.

    A lost connection is logged once (INFO, ``event`` ``db.lost``), and its return once
    (``db.back``); the last error is raised (DatabaseConnectionLostError or
    DatabaseBusyError) when the bound is spent, after a WARNING (``db.gave_up``).
    """
    bound, deadline = _bound_and_deadline(clock)
    tries = 0
    delay: float | None = None
    lost = False
    while True:
        try:
            result = attempt(max(0.0, deadline - clock()), tries)
        except RETRYABLE as exc:
            left = deadline - clock()
            if left <= 0:
                if lost:
                    log.warning(
                        "gave up on the database at %s after %gs: %s", where, bound, exc,
                        extra={"event": "db.gave_up", "db": where},
                    )  # fmt: skip
                raise
            if isinstance(exc, DatabaseConnectionLostError) and not lost:
                lost = True
                log.info(
                    "lost the database (%s); retrying for up to %gs", exc, bound,
                    extra={"event": "db.lost", "db": where},
                )  # fmt: skip
            delay = backoff(delay)
            sleep(min(delay, left))
            tries += 1
            continue
        if lost:
            log.info("the database at %s is back", where, extra={"event": "db.back", "db": where})
        return result


def until_primary(
    connect: Callable[[], T],
    *,
    no_primary: Callable[[BaseException], bool],
    where: str,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``connect()``, again while the servers say none of them accepts writes (a standby
    answered and no primary did: a failover under way), for up to the write-retry bound
    (shortened by a caller's deadline); any other error, or the bound spent, is raised.

    So a command started between a primary's loss and a standby's promotion waits for
    the promotion, while a URL whose servers all refuse connections (mistyped, or down)
    fails at once.
    """
    bound, deadline = _bound_and_deadline(clock)
    delay: float | None = None
    waited = False
    while True:
        try:
            conn = connect()
        except Exception as exc:
            left = deadline - clock()
            if not no_primary(exc) or left <= 0:
                raise
            if not waited:
                waited = True
                log.info(
                    "no server at %s accepts writes now (a standby answered: a failover "
                    "under way?); waiting up to %gs for a primary", where, bound,
                    extra={"event": "db.no_primary", "db": where},
                )  # fmt: skip
            delay = backoff(delay)
            sleep(min(delay, left))
            continue
        if waited:
            log.info("a primary at %s answers", where, extra={"event": "db.back", "db": where})
        return conn
