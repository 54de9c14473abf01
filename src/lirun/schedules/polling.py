"""A worker's poll of a ``--poll`` schedule (docs/schedules.md, "Poll triggers").

``poll_due`` claims the due time by moving ``next_due_at`` on (compare-and-set: of any
number of workers exactly one polls each due time), runs the command in the schedule's
cwd under its timeout (its own process group, killed whole at the timeout), parses what
it printed (``events.parse_poll_output``) and stores each item through the unique key of
``schedule_events`` with the run it fires, in one transaction per item
(``store.events.record``): a worker dying anywhere in between loses nothing and doubles
nothing. The first good poll of a schedule stores what it finds as seen (the baseline)
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


def poll_env(db_url: str | None) -> dict[str, str]:
    """The poll command's environment: the worker's, with the database URL stripped of
    its password as a run's child gets it (``exec/environment.py``)."""
    env = {k: v for k, v in os.environ.items() if k != DB_URL_ENV}
    safe = child_url(db_url, None) if db_url else None
    if safe:
        env[DB_URL_ENV] = safe
    return env


def run_poll_command(
    command: str, cwd: str, timeout: float, env: dict[str, str] | None = None
) -> str:
    """What ``command`` (a shell command) printed; PollFailure when it cannot start,
    exits non-zero, outlives ``timeout`` (its process group is killed) or prints more
    than MAX_OUTPUT_BYTES."""
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
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        child.communicate()
        raise PollFailure(TIMED_OUT, f"the poll command ran past {timeout:g}s") from None
    if child.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        said = ": " + " | ".join(tail) if tail else ""
        raise PollFailure(FAILED_EXIT, f"the poll command exited {child.returncode}{said}")
    if len(out) > MAX_OUTPUT_BYTES:
        raise PollFailure(
            FAILED_EXIT, f"the poll command printed more than {MAX_OUTPUT_BYTES:,} bytes"
        )
    return out.decode(errors="replace")


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        child.kill()


def poll_due(
    store: Store, row: ScheduleRow, definition: Definition, now: int, enqueue: Callable[[str], None]
) -> int:
    """Poll ``row`` for its due time if this worker claims it; returns the runs queued."""
    trigger = definition.trigger
    if row.next_due_at is None:
        return 0
    upcoming = next_due(trigger, now)
    if not store.schedules.advance_next_due(row.id, expected=int(row.next_due_at), new=upcoming):
        return 0  # another worker polls this due time
    try:
        text = run_poll_command(
            trigger.command or "",
            definition.action.cwd,
            float(trigger.timeout or 60),
            poll_env(store.url),
        )
        events = parse_poll_output(text, trigger.key or "id")
    except PollFailure as failure:
        log.warning(f"poll {row.name}: {failure.reason}: {failure.detail}")
        store.events.record_poll(row.id, reason=failure.reason, detail=failure.detail)
        return 0
    baseline = row.last_poll_ok_at is None and not trigger.backfill
    fired, new, disable = _store_events(store, row, definition, events, baseline, enqueue)
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
) -> tuple[int, int, str | None]:
    policies = definition.policies
    since = policies.budget_since(int(time.time()))
    started = store.schedules.count_started_runs(row.id)
    usd, tokens = store.schedules.usage(row.id, since=since) if not baseline else (None, 0)
    fired = new = 0
    disable = None
    for event in events:
        kind = None if baseline else row.action_kind
        facts = FireFacts(0, 0, 0, started + fired, usd, tokens)
        refused = None if baseline else refusal(policies, facts)
        stored, run_id, _status = store.events.record(
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
            log.info(
                f"fire {row.name} event={event.key} run {run_id} queued",
                extra={"event": "schedule.fired", "run_id": run_id, "schedule": row.name},
            )
            enqueue(run_id)
    return fired, new, disable
