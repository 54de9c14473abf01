"""``Store``: the synchronous core of StateDB. The only place that knows which query to run.

The columns callers may set live in ``records`` (``SESSION_FIELDS``, ``UPDATABLE_FIELDS``,
re-exported here); the rules of a status write in ``transitions``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from lirun.errors import (
    AmbiguousIdError,
    NotFoundError,
    ValidationError,
)
from lirun.hints import Any
from lirun.lifecycle import canonical_entity_type, policy_for
from lirun.store.bulk_import import BulkImport
from lirun.store.flow_records import FlowRecords
from lirun.store.list_reads import ListReads
from lirun.store.metric_reads import MetricReads
from lirun.store.records import (
    SESSION_FIELDS,
    UPDATABLE_FIELDS,
    closed_fields,
    column_values,
    decode_row,
    entity_id_or_new,
    new_id,
    require_text,
    to_json,
)
from lirun.store.retention_records import RetentionRecords
from lirun.store.rows import (
    AdminEventRow,
    BranchRow,
    InvocationRow,
    MessageRow,
    PlayRow,
    ScheduleRunRow,
    SessionRow,
    ShowRow,
    TeamRow,
    TransitionRow,
)
from lirun.store.schedule_records import ScheduleRecords
from lirun.store.show_records import ShowRecords
from lirun.store.status_write import StatusWrites
from lirun.store.team_records import TeamRecords
from lirun.store.transitions import next_version
from lirun.store.ui_reads import UIReads
from lirun.store.wait_reads import WaitReads
from lirun.store.worker_records import WorkerRecords


def liveness_defaults(given: Mapping[str, Any]) -> dict[str, Any]:
    """Owner identity (and a lease with a heartbeat) for a running row that lacks them."""
    from lirun.liveness import DEFAULT_LEASE_SECONDS, current_owner

    defaults: dict[str, Any] = {}
    if "owner_pid" not in given:
        defaults.update(current_owner())
    if given.get("heartbeat_at") is not None and given.get("lease_seconds") is None:
        defaults["lease_seconds"] = DEFAULT_LEASE_SECONDS
    return defaults


class Store(
    MetricReads,
    WorkerRecords,
    ScheduleRecords,
    StatusWrites,
    WaitReads,
    FlowRecords,
    ShowRecords,
    TeamRecords,
    UIReads,
    ListReads,
    BulkImport,
    RetentionRecords,
):
    """Synchronous operations over one connector. StateDB wraps it for asyncio.

    Every method may raise DatabaseError (DatabaseUnavailableError when the database
    cannot be reached, DatabaseBusyError when a lock outlasts the retry bound, …); each
    docstring names the errors it raises besides those.
    """

    # -- creation -------------------------------------------------------------

    def create_session(
        self,
        *,
        id: str | None = None,
        status: str = "running",
        run_id: str | None = None,
        branch_id: str | None = None,
        invocation_id: str | None = None,
        artifacts_path: str | os.PathLike[str] | None = None,
        artifact_contract: Mapping[str, Any] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        **more: Any,
    ) -> SessionRow:
        """Create an execution row; extra columns (run_dir, owner_pid, …) come as keywords.

        A running row records this process as its owner unless ``owner_pid`` is given
        (``owner_pid=None`` records none): if the creator dies, a reaper can tell.
        """
        fields = closed_fields(
            {
                "run_id": run_id,
                "branch_id": branch_id,
                "invocation_id": invocation_id,
                "artifacts_path": artifacts_path,
                "artifact_contract_json": artifact_contract,
                "cwd": cwd,
                **more,
            },
            SESSION_FIELDS,
            "create_session",
        )
        fields.setdefault("started_at", time.time())
        fields["id"] = entity_id_or_new(id or run_id)
        if status == "running":
            fields.update(liveness_defaults(more))
        return SessionRow.from_row(self._insert("session", fields, status=status))

    def create_invocation(
        self, *, skill: str, prompt: str | None = None, id: str | None = None
    ) -> InvocationRow:
        """Create an invocation row (``running``); ValidationError for an empty skill or bad id."""
        require_text(skill=skill)
        fields = column_values({"skill": skill, "prompt": prompt})
        return InvocationRow.from_row(
            self._insert("invocation", {"id": entity_id_or_new(id), **fields})
        )

    def create_show(self, *, topic: str, id: str | None = None) -> ShowRow:
        """Create a show row; ValidationError for an empty topic or bad id."""
        require_text(topic=topic)
        fields = {"id": entity_id_or_new(id), **column_values({"topic": topic})}
        return ShowRow.from_row(self._insert("show", fields))

    def create_play(
        self, *, show_id: str, name: str, session_id: str | None = None, id: str | None = None
    ) -> PlayRow:
        """Create a play row (``pending``); ValidationError for an empty show_id/name or bad id."""
        require_text(show_id=show_id, name=name)
        fields = column_values({"show_id": show_id, "name": name, "session_id": session_id})
        return PlayRow.from_row(self._insert("play", {"id": entity_id_or_new(id), **fields}))

    def create_schedule_run(
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
        made = self._insert("schedule_run", {"id": entity_id_or_new(id), **fields}, status=status)
        return ScheduleRunRow.from_row(made)

    def create_team(self, *, name: str, id: str | None = None) -> TeamRow:
        """Create a team row; ValidationError for an empty name or bad id."""
        require_text(name=name)
        fields = {"id": entity_id_or_new(id), **column_values({"name": name})}
        return TeamRow.from_row(self._insert("team", fields))

    # -- reads ----------------------------------------------------------------

    def resolve_id(self, entity_type: str, text: str) -> str:
        """The full id ``text`` names: the exact id, else the one id that starts with it or
        ends with it (a run id's random suffix such as ``2b5dd3``).

        NotFoundError when none matches; AmbiguousIdError (exit 2) listing the candidates
        when two or more do.
        """
        et = canonical_entity_type(entity_type)
        if not text.strip():
            raise ValidationError(f"the {et} id must not be empty")
        if self.get_entity(et, text) is not None:
            return text
        ids, total = self.match_ids(et, text)
        if total == 1:
            return ids[0]
        if total > 1:
            raise AmbiguousIdError(text, tuple(ids), total)
        raise NotFoundError(
            f"no {et} with id {text!r} (nor one starting or ending with it); "
            "`li status` lists recent runs"
        )

    def list_transitions(self, entity_type: str, entity_id: str) -> list[TransitionRow]:
        """The status history of one entity, oldest first (``[]`` if none)."""
        rows = self.connector.read(
            self.sql("list_transitions"),
            {"entity_type": canonical_entity_type(entity_type), "entity_id": entity_id},
        )
        return [TransitionRow.from_row(decode_row(r) or {}) for r in rows]

    def list_admin_events(self, target_id: str | None = None) -> list[AdminEventRow]:
        """Admin events (overrides, rejected transitions), all or for one target."""
        if target_id is None:
            rows = self.connector.read(self.sql("list_admin_events"))
        else:
            rows = self.connector.read(
                self.sql("list_admin_events_for_target"), {"target_id": target_id}
            )
        return [AdminEventRow.from_row(decode_row(r) or {}) for r in rows]

    def list_messages(self, session_id: str) -> list[MessageRow]:
        """The session's messages in order (``seq``)."""
        rows = self.connector.read(self.sql("list_messages"), {"session_id": session_id})
        return [MessageRow.from_row(r) for r in rows]

    def has_assistant_text(self, session_id: str) -> bool:
        """Whether the session has at least one non-empty assistant message."""
        return bool(self.connector.read(self.sql("has_assistant_text"), {"session_id": session_id}))

    def get_session(self, session_id: str) -> SessionRow | None:
        """The execution with this id, or None."""
        rows = self.connector.read(self.sql("get_row", table="sessions"), {"id": session_id})
        return SessionRow.from_row(decode_row(rows[0]) or {}) if rows else None

    def get_invocation(self, invocation_id: str) -> InvocationRow | None:
        """The invocation (manual or flow) with this id, or None."""
        rows = self.connector.read(self.sql("get_row", table="invocations"), {"id": invocation_id})
        return InvocationRow.from_row(decode_row(rows[0]) or {}) if rows else None

    def list_sessions(
        self, *, status: str | None = None, since: float | None = None, limit: int = 50
    ) -> list[SessionRow]:
        """Recent sessions, newest first, optionally by status and start time."""
        rows = self.connector.read(
            self.sql("list_sessions"), {"status": status, "since": since, "limit": int(limit)}
        )
        return [SessionRow.from_row(decode_row(r) or {}) for r in rows]

    def list_running_sessions(self) -> list[SessionRow]:
        """Every session still ``running`` (what a reaper judges)."""
        rows = self.connector.read(self.sql("list_running_sessions"))
        return [SessionRow.from_row(decode_row(r) or {}) for r in rows]

    def find_session_by_engine_uid(self, uid: str, *, exclude_id: str = "") -> SessionRow | None:
        """The newest other session with this engine session uid, or None."""
        rows = self.connector.read(
            self.sql("find_session_by_engine_uid"), {"uid": uid, "exclude_id": exclude_id}
        )
        return SessionRow.from_row(decode_row(rows[0]) or {}) if rows else None

    def get_branch(self, branch_id: str) -> BranchRow | None:
        """The branch row (its latest session and engine uid), or None."""
        rows = self.connector.read(self.sql("get_branch"), {"id": branch_id})
        return BranchRow.from_row(rows[0]) if rows else None

    # -- writes other than status -------------------------------------------------

    def upsert_branch(
        self,
        branch_id: str,
        *,
        session_id: str,
        provider: str | None = None,
        engine_session_uid: str | None = None,
    ) -> BranchRow:
        """Create the branch or move it to ``session_id``; returns the branch row."""
        params = {
            "id": branch_id,
            "session_id": session_id,
            "provider": provider,
            "engine_session_uid": engine_session_uid,
            "now": time.time(),
        }
        with self.connector.write() as tx:
            tx.execute(self.sql("upsert_branch"), params)
        branch = self.get_branch(branch_id)
        assert branch is not None
        return branch

    def update_fields(
        self, entity_type: str, entity_id: str, fields: Mapping[str, Any], *, touch: bool = True
    ) -> None:
        """Set non-status columns (closed per entity type). ``touch`` bumps ``updated_at``.

        ValidationError for a column not updatable on that type; NotFoundError for no row.
        """
        et = canonical_entity_type(entity_type)
        values = closed_fields(fields, UPDATABLE_FIELDS[et], f"update_fields({et})")
        if not values:
            return
        with self.connector.write() as tx:
            current = self._lock_row(tx, policy_for(et), entity_id)
            if touch:
                values["updated_at"] = next_version(current["updated_at"])
            assignments = ", ".join(f"{k} = :{k}" for k in values)
            tx.execute(
                self.sql("update_fields", table=policy_for(et).table, assignments=assignments),
                {**values, "id": entity_id},
            )

    def heartbeat(self, session_id: str) -> None:
        """The owner is alive now; a row without a lease gets the default one.

        NotFoundError when the session does not exist.
        """
        from lirun.liveness import DEFAULT_LEASE_SECONDS

        params = {"id": session_id, "now": time.time(), "lease": DEFAULT_LEASE_SECONDS}
        with self.connector.write() as tx:
            if tx.execute(self.sql("heartbeat"), params) != 1:
                raise NotFoundError(f"no session with id {session_id!r}")

    def append_message(self, session_id: str, *, role: str, content: Any) -> MessageRow:
        """Append a message (``content`` JSON-encoded unless a string); returns it with
        its ``seq``. ValidationError for an empty role, NotFoundError for no session.
        """
        if not isinstance(role, str) or not role:
            raise ValidationError("role must be a non-empty string such as 'assistant'")
        text = content if isinstance(content, str) else to_json(content, "content")
        msg: dict[str, Any] = {
            "id": new_id(),
            "session_id": session_id,
            "role": role,
            "content": text or "",
        }
        with self.connector.write() as tx:
            self._lock_row(tx, policy_for("session"), session_id)
            msg["seq"] = tx.query(self.sql("next_message_seq"), {"session_id": session_id})[0][
                "seq"
            ]
            msg["created_at"] = time.time()
            tx.execute(self.sql("insert_message"), msg)
            tx.execute(
                self.sql("set_message_bounds"), {"msg_id": msg["id"], "session_id": session_id}
            )
        return MessageRow.from_row(msg)
