"""Queue one run now: ``li submit -- ACTION`` (no schedule) and ``li schedule fire NAME``.

Both insert a queued schedule run with no due time (unique by its id) and hand it to
the store's transport, so an idle worker starts it at once.
"""

from __future__ import annotations

from lirun.schedules import registry
from lirun.schedules.actions import Action
from lirun.schedules.definition import Policies
from lirun.schedules.transport import transport_for
from lirun.store import Store
from lirun.store.rows import ScheduleRunRow


def _offer(store: Store, run_id: str) -> None:
    transport = transport_for(store)
    try:
        transport.enqueue(run_id)
    finally:
        transport.close()


def submit(
    store: Store,
    action: Action,
    *,
    actor: str | None = None,
    policies: Policies | None = None,
) -> ScheduleRunRow:
    """Queue ``action`` as an ad-hoc run (a schedule run with no schedule). ``policies``
    (``--start-deadline``, ``--retries``, ``--notify``) are kept with the run's action,
    so its retries carry them too."""
    stored = action.to_dict()
    if policies is not None and policies != Policies():
        stored["policies"] = policies.to_dict()
    row = store.schedules.insert_queued_run(
        action_kind=action.kind, action=stored, source="user", actor=actor
    )
    _offer(store, row.id)
    return row


def fire_now(store: Store, name: str, *, actor: str | None = None) -> ScheduleRunRow:
    """Queue one run of the schedule ``name`` now (no due time: it never collides with
    a due-time run). NotFoundError (exit 2) for an unknown name."""

    schedule = registry.find(store, name)
    row = store.schedules.insert_queued_run(
        action_kind=schedule.action_kind,
        schedule_id=schedule.id,
        reason_summary="li schedule fire",
        source="user",
        actor=actor,
    )
    _offer(store, row.id)
    return row
