"""A worker's chain sweep (docs/schedules.md, "Chains"): the I/O around ``chains.py``.

Every worker's firing loop calls ``sweep_chains`` about every ``SWEEP_EVERY`` seconds.
For each enabled ``--after`` schedule it reads the parent schedule's runs that ended in
the wanted way since the schedule was made and hold no event of it yet
(``store.events.chain_parents``), and stores each as an event keyed by the parent run's
id with the run it fires, in one transaction (``store.events.record``, source
``chain``). The unique key of ``schedule_events`` makes workers sweeping at once fire
each parent once; a parent that ended while no worker ran is found by the next sweep,
since nothing but the event row marks it done. A parent at ``MAX_DEPTH`` stores its
event with a skipped run (``schedule.skipped.chain_depth``) and fires nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lirun.logs import get_logger
from lirun.schedules.chains import (
    DEFAULT_OUTCOME,
    DEPTH_EXCEEDED,
    STATUSES,
    child_depth,
    fires_children,
    parent_event,
)
from lirun.schedules.definition import Definition, stored_definition
from lirun.schedules.events import Event
from lirun.schedules.firing import RUN, FireFacts, refusal
from lirun.store import Store
from lirun.store.rows import ScheduleRow

log = get_logger(__name__)

SWEEP_EVERY = 1.0  # seconds between a worker's sweeps while a chain schedule exists


def chain_schedules(store: Store) -> list[tuple[ScheduleRow, Definition]]:
    """The enabled schedules with an ``--after`` trigger, with their definitions."""
    found = []
    for row in store.schedules.list_all():
        if row.status != "enabled":
            continue
        definition = stored_definition(row)
        if definition is not None and definition.trigger.kind == "chain":
            found.append((row, definition))
    return found


def sweep_chains(store: Store, enqueue: Callable[[str], None]) -> int:
    """Fire every chain schedule for the parent runs it has not seen; the runs queued."""
    fired = 0
    for row, definition in chain_schedules(store):
        fired += _sweep_one(store, row, definition, enqueue)
    return fired


def _sweep_one(
    store: Store, row: ScheduleRow, definition: Definition, enqueue: Callable[[str], None]
) -> int:
    trigger = definition.trigger
    parent_row = store.schedules.get(trigger.after or "")
    if parent_row is None:
        return 0  # its parent was deleted: nothing can end any more
    outcome = trigger.outcome or DEFAULT_OUTCOME
    parents = store.events.chain_parents(
        schedule_id=row.id,
        parent_id=parent_row.id,
        statuses=STATUSES[outcome],
        created=row.created_at,
    )
    if not parents:
        return 0
    policies = definition.policies
    since = policies.budget_since(int(time.time()))
    started = store.schedules.count_started_runs(row.id)
    usd, tokens = store.schedules.usage(row.id, since=since)
    fired = 0
    disable: str | None = None
    for parent in parents:
        event = Event(str(parent["id"]), parent_event(parent, parent_row.name))
        code = RUN if fires_children(parent["chain_depth"]) else DEPTH_EXCEEDED
        refused = refusal(policies, FireFacts(0, 0, 0, started + fired, usd, tokens))
        if code == RUN and refused is not None:
            code, disable = refused[0], disable or refused[1]
        stored, run_id, _status = store.events.record(
            schedule_id=row.id,
            event_key=event.key,
            event_json=event.to_json(),
            source="chain",
            action_kind=row.action_kind,
            status="queued" if code == RUN else "skipped",
            reason_code=code,
            chain_parent_id=event.key,
            chain_depth=child_depth(parent["chain_depth"]),
        )
        if not stored or run_id is None:
            continue  # another worker fired this parent
        what = "queued" if code == RUN else f"skipped reason={code}"
        log.info(
            f"fire {row.name} after run {event.key} ({parent['status']}): run {run_id} {what}",
            extra={"event": "schedule.fired", "run_id": run_id, "schedule": row.name},
        )
        if code == RUN:
            fired += 1
            enqueue(run_id)
    if disable is not None:  # --max-runs or the budget spent: as a due time's refusal
        store.schedules.change(
            row.id,
            new_status="disabled",
            reason_code=disable,
            expected_statuses={"enabled"},
            source="system",
        )
    return fired
