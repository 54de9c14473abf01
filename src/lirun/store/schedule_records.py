"""Schedule definitions and their runs, ``store.schedules`` (SQL in ``sql/*/schedules.sql``,
the run path a worker takes in ``sql/*/workers.sql``).

A definition is an entity (``lifecycle`` "schedule"): it is created here with its first
history row, and every later change (an update by ``apply``, enable, disable, delete) is
the guarded ``update_status`` with the new columns as its extra fields, so a definition
and its history never disagree. Due-time runs are inserted through the unique key
(schedule, due time, attempt): of any number of workers, exactly one gets the row. A
run's status only ever moves through ``update_status`` too (``claim_run`` is its
compare-and-set ``queued → running``); the plain writes here are links, never statuses.
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
    column_values,
    decode_row,
    entity_id_or_new,
    new_id,
    require_text,
    to_json,
)
from lirun.store.repository import Repository
from lirun.store.rows import ScheduleRow, ScheduleRunRow
from lirun.store.transitions import HistoryEntry

_DEFINITION_FIELDS = frozenset(
    {"spec", "tz", "action_kind", "action_json", "trigger_json", "policies_json", "next_due_at"}
)


class Schedules(Repository):
    """``store.schedules``: schedule definitions and their runs."""

    def create_run(
        self,
        *,
        action_kind: str,
        schedule_id: str | None = None,
        invocation_id: str | None = None,
        status: str = "queued",
        id: str | None = None,
    ) -> ScheduleRunRow:
        """Create a schedule run row (``queued`` unless ``status``); ValidationError for
        an empty action_kind, a bad id or a status the lifecycle does not know.
        """
        require_text(action_kind=action_kind)
        fields = column_values(
            {"action_kind": action_kind, "schedule_id": schedule_id, "invocation_id": invocation_id}
        )
        made = self.store.insert(
            "schedule_run", {"id": entity_id_or_new(id), **fields}, status=status
        )
        return ScheduleRunRow.from_row(made)

    def create(
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
        values = closed_fields(fields, _DEFINITION_FIELDS, "schedules.create")
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
                self.store.insert_in(
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
            if id is not None and self.store.get_entity("schedule", id) is not None:
                raise
            raise ConflictError(
                f"a schedule named {name!r} already exists; pick another name, or "
                f"`li schedule delete {name}` first"
            ) from None
        created = self.get(name)
        assert created is not None
        return created

    def change(
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
        (``fields``, as for ``create``) in the same transaction, and a history
        row with ``reason_code`` and ``metadata``. False when ``expected_statuses`` or
        ``expected_updated_at`` (the row's version as read) did not match: someone else
        changed it meanwhile. TransitionRejectedError once deleted."""
        extra = dict(fields or {})
        unknown = sorted(set(extra) - _DEFINITION_FIELDS)
        if unknown:
            raise ValidationError(f"schedules.change does not accept {', '.join(unknown)}")
        if new_status != "deleted":
            extra["enabled"] = 1 if new_status == "enabled" else 0
        else:
            extra.setdefault("next_due_at", None)
            extra["enabled"] = 0
        return self.store.update_status(
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
        return [ScheduleRow.from_row(decode_row(r)) for r in rows]

    def get(self, name: str) -> ScheduleRow | None:
        """The schedule named ``name`` that is not deleted, or None."""
        found = self._schedules(self.sql("get_live_schedule"), {"name": name})
        return found[0] if found else None

    def get_by_id(self, schedule_id: str) -> ScheduleRow | None:
        """The schedule with this id, deleted or not, or None."""
        table = policy_for("schedule").table
        found = self._schedules(self.sql("get_row", table=table), {"id": schedule_id})
        return found[0] if found else None

    def list_all(self, *, include_deleted: bool = False) -> list[ScheduleRow]:
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
        lease_epoch: int = 0,
    ) -> ScheduleRunRow | None:
        """The run of ``schedule_id`` for ``due_at`` (epoch seconds) and ``attempt``, with
        its first history row; None when that run exists already (another worker made it).
        ``status`` may be terminal (``skipped`` for a missed or overlapping due time).
        ``lease_epoch``: where its claims count from (a retry: the retried run's)."""
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
            "lease_epoch": int(lease_epoch),
        }
        with self.connector.write() as tx:
            if tx.execute(self.sql("insert_due_run"), params) != 1:
                return None
            entry = HistoryEntry(
                run_id, None, status, reason_code, reason_summary, source=source, actor=actor
            )
            self.store.append_transition(tx, policy, entry, now)
        return self.get_run(run_id)

    def _runs(self, sql: str, params: Mapping[str, Any]) -> list[ScheduleRunRow]:
        rows = self.connector.read(sql, params)
        return [ScheduleRunRow.from_row(decode_row(r)) for r in rows]

    def get_run(self, run_id: str) -> ScheduleRunRow | None:
        """The schedule run with this id, or None."""
        table = policy_for("schedule_run").table
        found = self._runs(self.sql("get_row", table=table), {"id": run_id})
        return found[0] if found else None

    def list_runs(self, schedule_id: str, *, limit: int = 100) -> list[ScheduleRunRow]:
        """The schedule's runs, newest first, at most ``limit``."""
        params = {"schedule_id": schedule_id, "limit": int(limit)}
        return self._runs(self.sql("list_schedule_runs"), params)

    # -- what a worker reads and moves (docs/schedules.md) -----------------------------------

    def list_due(self, now: int) -> list[ScheduleRow]:
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

    # -- the run path (a worker's, docs/schedules.md) -------------------------------------

    def insert_queued_run(
        self,
        *,
        action_kind: str,
        action: Mapping[str, Any] | None = None,
        schedule_id: str | None = None,
        attempt: int = 1,
        retry_of: str | None = None,
        due_at: int | None = None,
        reason_summary: str = "",
        source: str = "user",
        actor: str | None = None,
        lease_epoch: int = 0,
    ) -> ScheduleRunRow:
        """A queued run with its first history row: ``li submit`` (``action``, no
        schedule), ``li schedule fire`` (a schedule, no due time) or a retry. A retry of
        a due-time run goes through ``insert_due_run`` instead (its unique key).
        ``lease_epoch``: where its claims count from (a retry: the retried run's)."""
        run, _created = self.insert_keyed_run(
            action_kind=action_kind,
            action=action,
            schedule_id=schedule_id,
            attempt=attempt,
            retry_of=retry_of,
            due_at=due_at,
            reason_summary=reason_summary,
            source=source,
            actor=actor,
            lease_epoch=lease_epoch,
        )
        return run

    def insert_keyed_run(
        self,
        *,
        action_kind: str,
        action: Mapping[str, Any] | None = None,
        key: str | None = None,
        schedule_id: str | None = None,
        attempt: int = 1,
        retry_of: str | None = None,
        due_at: int | None = None,
        reason_summary: str = "",
        source: str = "user",
        actor: str | None = None,
        lease_epoch: int = 0,
    ) -> tuple[ScheduleRunRow, bool]:
        """``insert_queued_run`` with an idempotency ``key`` (``li submit --key``): (the
        run, True) when this call queued it; (the run that already holds ``key``, False)
        when another call did, whether it committed earlier or raced this one (the unique
        key decides; nothing is written then). The row is read back inside the same
        transaction, so once it is committed nothing more is asked of the database."""
        require_text(action_kind=action_kind)
        if key is not None:
            require_text(key=key)
        policy = policy_for("schedule_run")
        reason = "schedule.queued.created"
        validate_reason(reason, policy.entity_type, "queued")
        now = time.time()
        run_id = new_id()
        params = {
            "id": run_id,
            "schedule_id": schedule_id,
            "action_kind": action_kind,
            "action_json": to_json(dict(action), "action") if action is not None else None,
            "attempt": int(attempt),
            "due_at": due_at,
            "retry_of": retry_of,
            "reason_code": reason,
            "reason_summary": reason_summary,
            "idempotency_key": key,
            "now": now,
            "lease_epoch": int(lease_epoch),
        }
        table = policy.table
        with self.connector.write() as tx:
            if tx.execute(self.sql("insert_queued_run"), params) == 0:
                held = tx.query(self.sql("run_with_key"), {"idempotency_key": key})
                return ScheduleRunRow.from_row(decode_row(held[0])), False
            entry = HistoryEntry(
                run_id, None, "queued", reason, reason_summary, source=source, actor=actor
            )
            self.store.append_transition(tx, policy, entry, now)
            made = tx.query(self.sql("get_row", table=table), {"id": run_id})
        return ScheduleRunRow.from_row(decode_row(made[0])), True

    def queue_retry(self, run: ScheduleRunRow) -> ScheduleRunRow | None:
        """Attempt n+1 of ``run``, linked by ``retry_of``: a due-time run's through the
        unique key (None: another writer queued it already), an event's with its event,
        an ad-hoc run's with its action (and so its own policies)."""
        attempt = int(run.attempt or 1) + 1
        # Its claims count on from the retried run's: the fence of the retry's work is
        # greater than any the retried run's copies hold.
        epoch = int(run.lease_epoch or 0)
        if run.event_key is not None:  # an event's run: the retry is for that event too
            from lirun.store.event_records import Events  # off the fast paths (test_imports)

            return Events(self.store).queue_retry(run, attempt=attempt)
        if run.due_at is not None and run.schedule_id:
            return self.insert_due_run(
                schedule_id=run.schedule_id,
                due_at=int(run.due_at),
                action_kind=run.action_kind,
                attempt=attempt,
                retry_of=run.id,
                lease_epoch=epoch,
            )
        return self.insert_queued_run(
            action_kind=run.action_kind,
            action=run.action_json,
            schedule_id=run.schedule_id,
            attempt=attempt,
            retry_of=run.id,
            source="system",
            lease_epoch=epoch,
        )

    def claim_run(self, run_id: str, *, worker_id: str, lease_seconds: float) -> bool:
        """``queued → running`` by compare-and-set, taking the lease: True for exactly
        one caller; the others (a job delivered twice, a second worker) get False. The
        claim's ``lease_epoch`` is one more than the run's last (so at least 1); the
        write is guarded by the row's version as read too, so no two claims of a run
        ever get the same epoch."""
        run = self.get_run(run_id)
        if run is None or run.status != "queued":
            return False
        return self.claim(run, worker_id=worker_id, lease_seconds=lease_seconds) is not None

    def claim(self, run: ScheduleRunRow, *, worker_id: str, lease_seconds: float) -> int | None:
        """``claim_run`` of a row the caller has just read (no second read): the claim's
        ``lease_epoch``, or None when the row is no longer as read (another claim won,
        or the row changed: read it again to tell)."""
        if run.status != "queued":
            return None
        epoch = int(run.lease_epoch or 0) + 1
        now = time.time()
        claimed = self.store.update_status(
            "schedule_run",
            run.id,
            new_status="running",
            reason_code="schedule.running.started",
            source="system",
            expected_statuses={"queued"},
            expected_updated_at=run.updated_at,
            extra_fields={
                "started_at": now,
                "worker_id": worker_id,
                "lease_expires_at": now + lease_seconds,
                "heartbeat_at": now,
                "lease_epoch": epoch,
            },
        )
        return epoch if claimed else None

    def link_run(
        self,
        run_id: str,
        *,
        session_id: str | None = None,
        invocation_id: str | None = None,
        show_id: str | None = None,
    ) -> None:
        """Link the run to what it produces (set before the action starts)."""
        params = {
            "id": run_id,
            "session_id": session_id,
            "invocation_id": invocation_id,
            "show_id": show_id,
        }
        with self.connector.write() as tx:
            tx.execute(self.sql("link_run"), params)

    def list_queued_runs(self, *, limit: int = 100) -> list[ScheduleRunRow]:
        """Queued runs, oldest first, at most ``limit``."""
        return self._runs(self.sql("list_queued_runs"), {"limit": int(limit)})

    def list_queued_run_ids(self, *, limit: int = 100) -> list[str]:
        """Queued run ids, oldest first (what ``LocalTransport`` offers to ``handle``)."""
        return [r.id for r in self.list_queued_runs(limit=limit)]

    def list_lapsed_runs(self, now: float) -> list[ScheduleRunRow]:
        """Running runs whose lease expired before ``now``."""
        return self._runs(self.sql("list_lapsed_runs"), {"now": now})

    def retries_of(self, run_id: str) -> list[ScheduleRunRow]:
        """The attempts that retry ``run_id``, oldest first."""
        return self._runs(self.sql("retries_of_run"), {"id": run_id})

    def mark_repeat(self, run_id: str, *, of: str, actor: str, justification: str) -> None:
        """Audit that attempt ``run_id`` repeats work its earlier attempt ``of`` had done
        (that one's record was corrected after the retry started)."""
        policy = policy_for("schedule_run")
        with self.connector.write() as tx:
            self.store.admin_event(
                tx, "schedule_run_repeat", policy, run_id, actor, justification, {"repeat_of": of}
            )

    def running_sessions_of_run(self, run: ScheduleRunRow) -> list[str]:
        """Ids of the run's executions still marked running."""
        params = {"session_id": run.session_id, "invocation_id": run.invocation_id}
        return [
            str(r["id"]) for r in self.connector.read(self.sql("running_sessions_of_run"), params)
        ]

    def count_started_runs(self, schedule_id: str) -> int:
        rows = self.connector.read(self.sql("count_started_runs"), {"schedule_id": schedule_id})
        return int(rows[0]["n"])

    def usage(self, schedule_id: str, *, since: float = 0.0) -> tuple[float | None, int]:
        """(USD spent, or None when no execution recorded a cost; tokens spent) by the
        schedule's executions created at or after ``since``."""
        rows = self.connector.read(
            self.sql("schedule_usage"), {"schedule_id": schedule_id, "since": since}
        )
        row = rows[0]
        usd = float(row["usd"]) if row["usd_runs"] and row["usd"] is not None else None
        return usd, int(row["tokens"] or 0)

    def signature(self) -> tuple[int, float]:
        """Changes whenever a definition changes (count, latest update)."""
        row = self.connector.read(self.sql("schedule_signature"))[0]
        return int(row["n"]), float(row["at"] or 0.0)
