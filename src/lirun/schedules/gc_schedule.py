"""``li gc --schedule EVERY``: the retention policy stored as the schedule ``gc`` (action
``gc ...``), so the workers apply it (docs/retention.md). Storing it again replaces the
policy: the old definition is deleted (kept in its history) and the new one added."""

from __future__ import annotations

import time

from lirun.record.retention_rules import RetentionPolicy
from lirun.schedules import registry
from lirun.schedules.actions import Action
from lirun.schedules.definition import Definition, make_policies
from lirun.schedules.triggers import parse_trigger
from lirun.store import open_store
from lirun.store.rows import ScheduleRow

GC_SCHEDULE = "gc"


def gc_definition(policy: RetentionPolicy, *, every: str, now: int) -> Definition:
    """The schedule ``gc``: every ``every``, the ``gc`` action with ``policy``. Its
    working directory is ``/``: gc reads no files of its own, and any worker has ``/``."""
    trigger = parse_trigger(every=every, now=now)
    return Definition(
        name=GC_SCHEDULE,
        trigger=trigger,
        action=Action(kind="gc", cwd="/", retention=policy.to_dict()),
        policies=make_policies({}, trigger),
    )


def store_gc_schedule(
    url: str | None, policy: RetentionPolicy, *, every: str, now: int | None = None
) -> ScheduleRow:
    """Add (or replace) the schedule ``gc``; returns its row."""
    at = int(time.time()) if now is None else now
    definition = gc_definition(policy, every=every, now=at)
    actor = registry.current_actor()
    store = open_store(url)
    try:
        if store.schedules.get(GC_SCHEDULE) is not None:
            registry.delete(store, GC_SCHEDULE, actor=actor)
        return registry.add(store, definition, now=at, actor=actor)
    finally:
        store.close()
