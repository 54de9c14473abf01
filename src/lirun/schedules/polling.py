"""A worker's poll of a ``--poll`` schedule (docs/schedules.md, "Poll triggers").

``poll_due`` claims the due time by moving ``next_due_at`` on (compare-and-set: of any
number of workers exactly one polls each due time), runs the command in the schedule's
cwd under its timeout (its own process group, killed whole at the timeout), parses what
it printed (``events.parse_poll_output``) and stores each item through the unique key of
``schedule_events`` with the run it fires, ``STORE_BATCH`` items per transaction
(``store.events.batch``), their runs offered once it committed: a worker dying anywhere
in between loses nothing (the items of a batch not committed are new to the next poll)
and doubles nothing. The first good poll of a schedule stores what it finds as seen (the baseline)
and fires nothing, unless ``--backfill``. A failed poll is recorded on the schedule
(``last_poll_*``) with its reason code and fires nothing.

Per event the run is checked against ``--max-runs`` and the budget as a due time's is;
``--overlap`` is per event key, and each key fires once, so one event's run never makes
another's overlap.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable

from lirun.logs import get_logger
from lirun.record.credential import child_url
from lirun.schedules.definition import Definition
from lirun.schedules.events import (
    FAILED_EXIT,
    OK,
    TIMED_OUT,
    Event,
    PollFailure,
    parse_poll_output,
)
from lirun.schedules.firing import RUN, FireFacts, refusal
from lirun.schedules.triggers import next_due
from lirun.settings import DB_URL_ENV
from lirun.store import Store
from lirun.store.rows import ScheduleRow

log = get_logger(__name__)

MAX_OUTPUT_BYTES = 16 * 1024 * 1024
# New items stored (with their runs) per transaction: a poll that finds many pays one
# commit per batch, not per item; a worker dying mid-batch leaves none of the batch.
STORE_BATCH = 50


def poll_env(db_url: str | None) -> dict[str, str]:
    """The poll command's environment: the worker's, with the database URL stripped of
    its password as a run's child gets it (``exec/environment.py``)."""
    env = {k: v for k, v in os.environ.items() if k != DB_URL_ENV}
    safe = child_url(db_url, None) if db_url else None
    if safe:
        env[DB_URL_ENV] = safe
    return env


def run_poll_command(
    command: str,
    cwd: str,
    timeout: float,
    env: dict[str, str] | None = None,
    children: PollChildren | None = None,
) -> str:
    """What ``command`` (a shell command) printed; PollFailure when it cannot start,
    exits non-zero, outlives ``timeout`` (its process group is killed) or prints more
    than MAX_OUTPUT_BYTES. ``children``: where the worker keeps its running poll
    commands, to kill them when it stops (PollStopped then)."""
    if not os.path.isdir(cwd):
        raise PollFailure(FAILED_EXIT, f"the schedule's cwd {cwd!r} is not a directory")
    try:
        child = subprocess.Popen(
            command,
            shell=True,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise PollFailure(FAILED_EXIT, f"cannot start the poll command: {exc}") from None
    if children is not None:
        children.add(child)
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(child)
        child.communicate()
        raise PollFailure(TIMED_OUT, f"the poll command ran past {timeout:g}s") from None
    finally:
        killed = children.discard(child) if children is not None else False
    if killed:
        raise PollStopped("the worker stopped while the poll command ran")
    if child.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        said = ": " + " | ".join(tail) if tail else ""
        raise PollFailure(FAILED_EXIT, f"the poll command exited {child.returncode}{said}")
    if len(out) > MAX_OUTPUT_BYTES:
        raise PollFailure(
            FAILED_EXIT, f"the poll command printed more than {MAX_OUTPUT_BYTES:,} bytes"
        )
    return out.decode(errors="replace")


def kill_group(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``child``'s process group (the poll command and what it started)."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        child.kill()


class PollStopped(Exception):
    """The worker stopped while the poll command ran: the poll records nothing (the next
    due time, on any worker, polls again)."""


class PollChildren:
    """The poll commands running in one worker, killed (process group) when it stops;
    one started after ``kill_all`` is killed at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[bytes]] = set()
        self._killed: set[subprocess.Popen[bytes]] = set()
        self.stopping = False

    def add(self, child: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._running.add(child)
            if self.stopping:
                self._killed.add(child)
        if self.stopping:
            kill_group(child)

    def discard(self, child: subprocess.Popen[bytes]) -> bool:
        """Forget ``child`` (it ended); True if ``kill_all`` killed it."""
        with self._lock:
            self._running.discard(child)
            killed = child in self._killed
            self._killed.discard(child)
        return killed

    def kill_all(self) -> int:
        """Kill every running poll command's group, and any started after; returns how
        many were running."""
        with self._lock:
            self.stopping = True
            running = list(self._running)
            self._killed.update(running)
        for child in running:
            kill_group(child)
        return len(running)


def claim_poll(store: Store, row: ScheduleRow, definition: Definition, now: int) -> bool:
    """Move ``row``'s due time on by compare-and-set; True when this worker won it (of
    any number of workers exactly one polls each due time)."""
    if row.next_due_at is None:
        return False
    upcoming = next_due(definition.trigger, now)
    return store.schedules.advance_next_due(row.id, expected=int(row.next_due_at), new=upcoming)


def poll_due(
    store: Store, row: ScheduleRow, definition: Definition, now: int, enqueue: Callable[[str], None]
) -> int:
    """Poll ``row`` for its due time if this worker claims it; returns the runs queued."""
    if not claim_poll(store, row, definition, now):
        return 0  # another worker polls this due time
    return run_poll(store, row.id, definition, enqueue)


def run_poll(
    store: Store,
    schedule_id: str,
    definition: Definition,
    enqueue: Callable[[str], None],
    children: PollChildren | None = None,
) -> int:
    """Run a claimed poll of the schedule ``schedule_id``: the command, then its events
    stored and fired; returns the runs queued. PollStopped when the worker stops first."""
    trigger = definition.trigger
    try:
        text = run_poll_command(
            trigger.command or "",
            definition.action.cwd,
            float(trigger.timeout or 60),
            poll_env(store.url),
            children,
        )
        events = parse_poll_output(text, trigger.key or "id")
    except PollFailure as failure:
        log.warning(f"poll {definition.name}: {failure.reason}: {failure.detail}")
        store.events.record_poll(schedule_id, reason=failure.reason, detail=failure.detail)
        return 0
    # Read after the command: a poll claimed while another one ran sees that one's end.
    row = store.schedules.get_by_id(schedule_id)
    if row is None:
        return 0  # removed while it polled
    baseline = row.last_poll_ok_at is None and not trigger.backfill
    stopping = (lambda: children.stopping) if children is not None else (lambda: False)
    fired, new, disable = _store_events(store, row, definition, events, baseline, enqueue, stopping)
    if stopping():
        # Each batch of events went with its runs in one transaction: the ones not
        # stored yet are new to the next poll (a baseline too: this poll records no
        # success).
        log.info(f"poll {row.name}: {new} new events stored before the worker stopped")
        raise PollStopped("the worker stopped while the poll stored its events")
    if disable is not None:
        store.schedules.change(
            row.id,
            new_status="disabled",
            reason_code=disable,
            fields={"next_due_at": None},
            expected_statuses={"enabled"},
            source="system",
        )
    what = "baseline" if baseline else f"{fired} queued"
    detail = f"{len(events)} items, {new} new ({what})"
    store.events.record_poll(row.id, reason=OK, detail=detail)
    log.info(f"poll {row.name}: {detail}", extra={"event": "schedule.polled", "schedule": row.name})
    return fired


def _store_events(
    store: Store,
    row: ScheduleRow,
    definition: Definition,
    events: list[Event],
    baseline: bool,
    enqueue: Callable[[str], None],
    stopping: Callable[[], bool],
) -> tuple[int, int, str | None]:
    policies = definition.policies
    since = policies.budget_since(int(time.time()))
    started = store.schedules.count_started_runs(row.id)
    usd, tokens = store.schedules.usage(row.id, since=since) if not baseline else (None, 0)
    fired = new = 0
    disable = None
    for first in range(0, len(events), STORE_BATCH):
        if stopping():
            break
        queued: list[tuple[str, str]] = []  # (event key, run id), offered once committed
        with store.events.batch() as batch:
            for event in events[first : first + STORE_BATCH]:
                kind = None if baseline else row.action_kind
                facts = FireFacts(0, 0, 0, started + fired, usd, tokens)
                refused = None if baseline else refusal(policies, facts)
                stored, run_id, _status = batch.record(
                    schedule_id=row.id,
                    event_key=event.key,
                    event_json=event.to_json(),
                    action_kind=kind,
                    status="queued" if refused is None else "skipped",
                    reason_code=RUN if refused is None else refused[0],
                )
                if not stored:
                    continue
                new += 1
                if refused is not None:
                    disable = disable or refused[1]
                if run_id is not None and refused is None:
                    fired += 1
                    queued.append((event.key, run_id))
        for key, run_id in queued:
            log.info(
                f"fire {row.name} event={key} run {run_id} queued",
                extra={"event": "schedule.fired", "run_id": run_id, "schedule": row.name},
            )
            enqueue(run_id)
    return fired, new, disable
