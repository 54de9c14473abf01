"""Schedule definitions and their runs as ``Store`` methods (SQL in ``sql/*/schedules.sql``).

A definition is an entity (``lifecycle`` "schedule"): it is created here with its first
history row, and every later change (an update by ``apply``, enable, disable, delete) is
the guarded ``update_status`` with the new columns as its extra fields, so a definition
and its history never disagree. Due-time runs are inserted through the unique key
(schedule, due time, attempt): of any number of workers, exactly one gets the row.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from lirun.errors import ConflictError, ValidationError
from lirun.hints import Any
from lirun.lifecycle import policy_for, validate_status
from lirun.reasons import validate_reason
from lirun.store.records import (
    check_metadata,
    closed_fields,
    decode_row,
    entity_id_or_new,
    new_id,
    require_text,
    to_json,
)
from lirun.store.rows import ScheduleRow, ScheduleRunRow
from lirun.store.status_write import StatusWrites
from lirun.store.transitions import HistoryEntry

_DEFINITION_FIELDS = frozenset(
    {"spec", "tz", "action_kind", "action_json", "trigger_json", "policies_json", "next_due_at"}
)


class ScheduleRecords(StatusWrites):
    """Mixed into ``Store``."""

    def create_schedule(
        self,
        *,
        name: str,
        fields: Mapping[str, Any],
        enabled: bool = True,
        reason_code: str | None = None,
        source: str = "system",
        actor: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        id: str | None = None,
    ) -> ScheduleRow:
        """Create a schedule (``enabled`` or ``disabled``) with its first history row.

        ``fields`` are the definition's columns (``spec``, ``tz``, ``action_kind``,
        ``action_json``, ``trigger_json``, ``policies_json``, ``next_due_at``).
        ConflictError when a schedule that is not deleted has this name; ValidationError
        for an empty name, a column not listed or a reason that does not fit."""
        require_text(name=name, action_kind=fields.get("action_kind"))
        values = closed_fields(fields, _DEFINITION_FIELDS, "create_schedule")
        status = "enabled" if enabled else "disabled"
        reason = reason_code or f"schedule_definition.{status}.created"
        validate_reason(reason, "schedule", status)
        fields = {
            "id": entity_id_or_new(id),
            "name": name,
            **values,
            "enabled": 1 if enabled else 0,
        }
        meta = to_json(check_metadata(metadata), "metadata")
        try:
            with self.connector.write() as tx:
                self._insert_in(
                    tx,
                    "schedule",
                    fields,
                    time.time(),
                    status=status,
                    reason=reason,
                    source=source,
                    actor=actor,
                    metadata_json=meta,
                )
        except ConflictError:
            if id is not None and self.get_entity("schedule", id) is not None:
                raise
            raise ConflictError(
                f"a schedule named {name!r} already exists; pick another name, or "
                f"`li schedule delete {name}` first"
            ) from None
        created = self.get_schedule(name)
        assert created is not None
        return created

    def change_schedule(
        self,
        schedule_id: str,
        *,
        new_status: str,
        reason_code: str,
        fields: Mapping[str, Any] | None = None,
        expected_statuses: Iterable[str | None] | None = None,
        expected_updated_at: float | None = None,
        reason_summary: str = "",
        source: str = "admin",
        actor: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        """One change of a definition: the guarded status write with the new columns
        (``fields``, as for ``create_schedule``) in the same transaction, and a history
        row with ``reason_code`` and ``metadata``. False when ``expected_statuses`` or
        ``expected_updated_at`` (the row's version as read) did not match: someone else
        changed it meanwhile. TransitionRejectedError once deleted."""
        extra = dict(fields or {})
        unknown = sorted(set(extra) - _DEFINITION_FIELDS)
        if unknown:
            raise ValidationError(f"change_schedule does not accept {', '.join(unknown)}")
        if new_status != "deleted":
            extra["enabled"] = 1 if new_status == "enabled" else 0
        else:
            extra.setdefault("next_due_at", None)
            extra["enabled"] = 0
        return self.update_status(
            "schedule",
            schedule_id,
            new_status=new_status,
            reason_code=reason_code,
            reason_summary=reason_summary,
            source=source,
            actor=actor,
            metadata=dict(metadata) if metadata is not None else None,
            expected_statuses=expected_statuses,
            expected_updated_at=expected_updated_at,
            extra_fields=extra,
        )

    def _schedules(self, sql: str, params: Mapping[str, Any] | None = None) -> list[ScheduleRow]:
        rows = self.connector.read(sql, params)
        return [ScheduleRow.from_row(decode_row(r) or {}) for r in rows]

    def get_schedule(self, name: str) -> ScheduleRow | None:
        """The schedule named ``name`` that is not deleted, or None."""
        found = self._schedules(self.sql("get_live_schedule"), {"name": name})
        return found[0] if found else None

    def get_schedule_by_id(self, schedule_id: str) -> ScheduleRow | None:
        """The schedule with this id, deleted or not, or None."""
        table = policy_for("schedule").table
        found = self._schedules(self.sql("get_row", table=table), {"id": schedule_id})
        return found[0] if found else None

    def list_schedules(self, *, include_deleted: bool = False) -> list[ScheduleRow]:
        """Schedules by name (deleted ones too when asked, oldest first per name)."""
        return self._schedules(
            self.sql("list_all_schedules" if include_deleted else "list_live_schedules")
        )

    def insert_due_run(
        self,
        *,
        schedule_id: str,
        due_at: int,
        action_kind: str,
        attempt: int = 1,
        retry_of: str | None = None,
        status: str = "queued",
        reason_code: str = "schedule.queued.created",
        reason_summary: str = "",
        source: str = "system",
        actor: str | None = None,
    ) -> ScheduleRunRow | None:
        """The run of ``schedule_id`` for ``due_at`` (epoch seconds) and ``attempt``, with
        its first history row; None when that run exists already (another worker made it).
        ``status`` may be terminal (``skipped`` for a missed or overlapping due time)."""
        require_text(schedule_id=schedule_id, action_kind=action_kind)
        if isinstance(due_at, bool) or not isinstance(due_at, int):
            raise ValidationError(f"due_at must be integer epoch seconds, not {due_at!r}")
        policy = policy_for("schedule_run")
        validate_reason(reason_code, policy.entity_type, status)
        validate_status(policy.entity_type, status)
        now = time.time()
        run_id = new_id()
        params = {
            "id": run_id,
            "schedule_id": schedule_id,
            "action_kind": action_kind,
            "attempt": int(attempt),
            "due_at": due_at,
            "retry_of": retry_of,
            "status": status,
            "reason_code": reason_code,
            "reason_summary": reason_summary,
            "ended_at": now if status in policy.terminal else None,
            "now": now,
        }
        with self.connector.write() as tx:
            if tx.execute(self.sql("insert_due_run"), params) != 1:
                return None
            entry = HistoryEntry(
                run_id, None, status, reason_code, reason_summary, source=source, actor=actor
            )
            self._append_transition(tx, policy, entry, now)
        return self.get_schedule_run(run_id)

    def _runs(self, sql: str, params: Mapping[str, Any]) -> list[ScheduleRunRow]:
        rows = self.connector.read(sql, params)
        return [ScheduleRunRow.from_row(decode_row(r) or {}) for r in rows]

    def get_schedule_run(self, run_id: str) -> ScheduleRunRow | None:
        """The schedule run with this id, or None."""
        table = policy_for("schedule_run").table
        found = self._runs(self.sql("get_row", table=table), {"id": run_id})
        return found[0] if found else None

    def list_schedule_runs(self, schedule_id: str, *, limit: int = 100) -> list[ScheduleRunRow]:
        """The schedule's runs, newest first, at most ``limit``."""
        params = {"schedule_id": schedule_id, "limit": int(limit)}
        return self._runs(self.sql("list_schedule_runs"), params)

    # -- what a worker reads and moves (docs/schedules.md) -----------------------------------

    def list_due_schedules(self, now: int) -> list[ScheduleRow]:
        """Enabled schedules whose ``next_due_at`` is at or before ``now``, earliest first."""
        return self._schedules(self.sql("list_due_schedules"), {"now": int(now)})

    def earliest_due(self) -> int | None:
        """The smallest ``next_due_at`` of the enabled schedules, or None."""
        rows = self.connector.read(self.sql("earliest_due"))
        due = rows[0]["due"] if rows else None
        return None if due is None else int(due)

    def advance_next_due(self, schedule_id: str, *, expected: int, new: int | None) -> bool:
        """Move an enabled schedule's ``next_due_at`` from ``expected`` to ``new``
        (compare-and-set): False when another writer moved it first, or it is no longer
        enabled."""
        params = {"id": schedule_id, "expected": int(expected), "new": new}
        with self.connector.write() as tx:
            return tx.execute(self.sql("advance_next_due"), params) == 1

    def count_active_runs(self, schedule_id: str) -> int:
        """Runs of the schedule not yet ended (queued, waiting, running, retry_wait)."""
        terminal = self.connector.bind_list(sorted(policy_for("schedule_run").terminal))
        params = {"schedule_id": schedule_id, "terminal": terminal}
        rows = self.connector.read(self.sql("count_active_runs"), params)
        return int(rows[0]["n"])
