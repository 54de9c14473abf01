"""The stored schedules: add, enable, disable, delete, and apply a set of definitions.

Each operation is one guarded write through the store (``store.schedules.create`` /
``store.schedules.change``), so every change of a definition has its own history row and
reason code. ``next_due_at`` is computed here, from the trigger and the time of the
change: a schedule enabled again is due from that moment on, so the time it spent
disabled is never counted as missed fires.
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from lirun.errors import NotFoundError, UsageError
from lirun.schedules.chains import link_problem
from lirun.schedules.definition import Definition, check_stored_size, diff, stored_definition
from lirun.schedules.triggers import AT_EXAMPLE, next_due
from lirun.store.rows import ScheduleRow

if TYPE_CHECKING:
    from lirun.store import Store

MISSING = ("disable", "delete", "keep")
# Disabled by a worker, not by its owner: apply does not undo these by itself.
WORKER_DISABLED = frozenset(
    {
        "schedule_definition.disabled.spent",
        "schedule_definition.disabled.max_runs",
        "schedule_definition.disabled.budget_exhausted",
    }
)


def current_actor() -> str | None:
    """Who changes the definition, for the history row (the login name, if known)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login variable and no password entry for the uid
        return None


def definition_fields(definition: Definition, now: int) -> dict[str, Any]:
    """The ``schedules`` columns of ``definition`` (its next due time counted from ``now``
    when enabled, none when disabled)."""
    trigger = definition.trigger
    return {
        "spec": trigger.describe(),
        "tz": trigger.tz,
        "action_kind": definition.action.kind,
        "action_json": definition.action.to_dict(),
        "trigger_json": trigger.to_dict(),
        "policies_json": definition.policies.to_dict(),
        "next_due_at": next_due(trigger, now) if definition.enabled else None,
    }


def find(store: Store, name: str) -> ScheduleRow:
    """The schedule named ``name`` (not deleted); NotFoundError saying how to list them."""
    row = store.schedules.get(name)
    if row is None:
        raise NotFoundError(f"no schedule named {name!r}; `li schedule list` shows them")
    return row


def add(store: Store, definition: Definition, *, now: int, actor: str | None = None) -> ScheduleRow:
    """Store a new schedule; ConflictError when the name is taken, UsageError for an
    ``at`` time in the past or a definition past its stored size."""
    refuse_past_at(definition, now)
    check_stored_size(definition)
    links = chain_links(store.schedules.list_all(), [definition])
    problem = link_problem(links, [definition.name])
    if problem is not None:
        raise UsageError(problem[1])
    return store.schedules.create(
        name=definition.name,
        fields=definition_fields(definition, now),
        enabled=definition.enabled,
        actor=actor,
        metadata={"definition": definition.to_dict()},
    )


def set_enabled(
    store: Store, name: str, enabled: bool, *, now: int, actor: str | None = None
) -> tuple[ScheduleRow, bool]:
    """Enable or disable ``name``: (the row now, whether it changed). Enabling counts the
    next due time from ``now``; disabling clears it."""
    row = find(store, name)
    status = "enabled" if enabled else "disabled"
    if row.status == status:
        return row, False
    definition = stored_definition(row)
    if enabled and definition is None:
        raise UsageError(
            f"schedule {name!r} holds no definition this version can run (imported from an "
            "older store); define it again with li schedule apply, or delete it and add it"
        )
    due = next_due(definition.trigger, now) if enabled and definition is not None else None
    changed = store.schedules.change(
        row.id,
        new_status=status,
        reason_code=f"schedule_definition.{status}.user",
        fields={"next_due_at": due},
        expected_statuses={row.status},
        actor=actor,
    )
    return find(store, name), changed


def delete(store: Store, name: str, *, actor: str | None = None) -> ScheduleRow:
    """Soft-delete ``name``: status ``deleted``, history kept, the name free again."""
    row = find(store, name)
    store.schedules.change(
        row.id,
        new_status="deleted",
        reason_code="schedule_definition.deleted.user",
        expected_statuses={"enabled", "disabled", None},  # whatever live state it has now
        actor=actor,
    )
    deleted = store.schedules.get_by_id(row.id)
    assert deleted is not None
    return deleted


def refuse_past_at(definition: Definition, now: int) -> None:
    """A new ``at`` schedule whose time has passed would never fire: refuse it."""
    trigger = definition.trigger
    if trigger.kind == "at" and (trigger.at or 0) <= now:
        raise UsageError(
            f"schedule {definition.name!r}: --at {trigger.describe()[3:]} is in the past; "
            f"give a future time, e.g. {AT_EXAMPLE}"
        )


# --- apply -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Change:
    """One step of an apply: ``create``, ``update``, ``enable``, ``disable``, ``delete``
    or ``unchanged``; ``changes`` is the field diff (``{"policies.retries": [0, 2]}``)."""

    op: str
    name: str
    definition: Definition | None = None
    row: ScheduleRow | None = None
    changes: dict[str, list[Any]] = field(default_factory=dict)
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "name": self.name, "changes": self.changes, "why": self.why}


def _keep_anchor(stored: Definition, wanted: Definition) -> Definition:
    """An ``every`` (or ``poll``) schedule stays anchored on its creation when its
    period changes."""
    if stored.trigger.kind == wanted.trigger.kind and wanted.trigger.kind in ("every", "poll"):
        trigger = replace(wanted.trigger, anchor=stored.trigger.anchor)
        return Definition(
            name=wanted.name,
            trigger=trigger,
            action=wanted.action,
            policies=wanted.policies,
            enabled=wanted.enabled,
        )
    return wanted


def chain_links(rows: list[ScheduleRow], wanted: list[Definition]) -> dict[str, str | None]:
    """Each schedule's ``--after`` parent: the stored ones' (``rows``), as ``wanted``
    redefines them."""
    links = {r.name: (r.trigger_json or {}).get("after") for r in rows}
    return links | {d.name: d.trigger.after for d in wanted}


def plan(
    rows: list[ScheduleRow],
    wanted: list[Definition],
    *,
    now: int,
    missing: str = "disable",
    places: Mapping[str, str] | None = None,
) -> list[Change]:
    """What makes the stored schedules (``rows``, not deleted) match ``wanted``: create
    the new, update the changed (a change of ``enabled`` alone is an enable or disable),
    and for stored schedules not wanted: ``missing`` = disable, delete or keep.
    UsageError (prefixed by ``places[name]``, its file:line) for a wrong ``after``."""
    problem = link_problem(chain_links(rows, wanted), [d.name for d in wanted])
    if problem is not None:
        where = (places or {}).get(problem[0], f"schedule {problem[0]!r}")
        raise UsageError(f"{where}: {problem[1]}")
    stored = {row.name: row for row in rows}
    changes: list[Change] = []
    for definition in wanted:
        row = stored.pop(definition.name, None)
        if row is None:
            refuse_past_at(definition, now)
            changes.append(Change("create", definition.name, definition))
            continue
        old = stored_definition(row)
        if old is None:
            delta = {"definition": [None, definition.trigger.describe()]}
            changes.append(Change("update", definition.name, definition, row, delta))
            continue
        new = _keep_anchor(old, definition)
        delta = diff(old, new)
        if not delta:
            op = "unchanged"
        elif set(delta) == {"enabled"} and row.status_reason_code in WORKER_DISABLED:
            why = f"{row.status_reason_code}; `li schedule enable {definition.name}` resumes it"
            changes.append(Change("unchanged", definition.name, new, row, why=why))
            continue
        elif set(delta) == {"enabled"}:
            op = "enable" if new.enabled else "disable"
        else:
            op = "update"
        changes.append(Change(op, definition.name, new, row, delta))
    for name, row in sorted(stored.items()):
        if missing == "keep" or (missing == "disable" and row.status == "disabled"):
            changes.append(Change("unchanged", name, None, row, why="not in the file"))
        else:
            changes.append(Change(missing, name, None, row, why="not in the file"))
    return changes


def apply(
    store: Store, changes: list[Change], *, now: int, source: str, actor: str | None = None
) -> list[Change]:
    """Carry out ``changes`` (from ``plan``) one guarded write each; returns those that
    were NOT applied because the schedule changed after ``plan`` read it (run apply
    again). ``source`` (the file) goes into each history row's metadata."""
    return [
        change
        for change in changes
        if change.op != "unchanged"
        and not _apply_one(store, change, now=now, source=source, actor=actor)
    ]


def _apply_one(store: Store, change: Change, *, now: int, source: str, actor: str | None) -> bool:
    meta: dict[str, Any] = {"file": source}
    if change.op == "create":
        assert change.definition is not None
        meta["definition"] = change.definition.to_dict()
        store.schedules.create(
            name=change.name,
            fields=definition_fields(change.definition, now),
            enabled=change.definition.enabled,
            actor=actor,
            metadata=meta,
        )
        return True
    assert change.row is not None
    row = change.row
    if change.op in ("update", "enable", "disable") and change.definition is not None:
        status = "enabled" if change.definition.enabled else "disabled"
        kind = "updated" if change.op == "update" else "applied"
        fields = definition_fields(change.definition, now)
        if change.op == "update" and status == row.status == "enabled":
            fields["next_due_at"] = _kept_due(row, change, now)
        meta["diff"] = change.changes
        reason = f"schedule_definition.{status}.{kind}"
    else:
        status = "deleted" if change.op == "delete" else "disabled"
        fields = {"next_due_at": None}
        meta["why"] = change.why
        reason = f"schedule_definition.{status}.applied"
    return store.schedules.change(
        row.id,
        new_status=status,
        reason_code=reason,
        fields=fields,
        expected_statuses={row.status},
        expected_updated_at=row.updated_at,
        actor=actor,
        metadata=meta,
    )


def _kept_due(row: ScheduleRow, change: Change, now: int) -> int | None:
    """An update that leaves the trigger alone keeps the pending due time (a worker may
    be about to fire it); a new trigger is due from ``now``."""
    assert change.definition is not None
    if "trigger" not in change.changes and row.next_due_at is not None:
        return int(row.next_due_at)
    return next_due(change.definition.trigger, now)
